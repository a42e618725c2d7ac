#!/usr/bin/env bash
# Move tests/upstream to another Kubernetes release in one step:
#   bash tests/upstream/bump.sh 1.37.3
# Every k8s.io staging module line of go.mod (requires and replaces, v0.X.Y)
# goes to v0.<minor>.<patch>, k8s.io/kubernetes (when required) to v1.X.Y,
# then `go mod tidy` settles the rest (klog, utils, kube-openapi and other
# dependencies at the versions that release asks for) and build.sh builds.
set -euo pipefail
usage="usage: tests/upstream/bump.sh 1.X.Y (a Kubernetes release)"
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
v=$1
[[ $v =~ ^1\.([0-9]+)\.([0-9]+)$ ]] || { echo "bump.sh: '$v' is not a release 1.X.Y; $usage" >&2; exit 2; }
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
cd "$(dirname "$0")"
here=$PWD
old=$(sed -n 's/^\tk8s\.io\/api \(v0\.[0-9]*\.[0-9]*\)$/\1/p' go.mod)
[ -n "$old" ] || { echo "bump.sh: no 'k8s.io/api v0.X.Y' require line in $here/go.mod" >&2; exit 1; }
go=""
for g in "${GO:-}" /usr/local/go/bin/go "$(command -v go 2>/dev/null || true)"; do
  if [ -n "$g" ] && [ -x "$g" ]; then go=$g; break; fi
done
[ -n "$go" ] || { echo "bump.sh: no Go toolchain (\$GO, /usr/local/go/bin/go, go on PATH)" >&2; exit 1; }
esc=${old//./\\.}
sed -E -i \
  -e "s#(k8s\.io/[A-Za-z0-9._-]+) ${esc}( |\$)#\1 ${staging}\2#g" \
  -e "s#(k8s\.io/kubernetes) v1\.[0-9]+\.[0-9]+( |\$)#\1 v${v}\2#g" \
  go.mod
out=$here/../../target/upstream
export GOMODCACHE="$out/gomod" GOCACHE="$out/gocache" GOTOOLCHAIN=local GOFLAGS=-mod=mod
"$go" mod tidy
left=""
[ "$old" = "$staging" ] || left=$(grep -E "k8s\.io/[A-Za-z0-9._-]+ ${esc}( |\$)" go.mod || true)
[ -z "$left" ] || { echo "bump.sh: lines still at $old:"$'\n'"$left" >&2; exit 1; }
echo "upstream: go.mod moved from Kubernetes 1.${old#v0.} to $v; now run bash tests/upstream/build.sh"
