#!/usr/bin/env bash
# Build the upstream peers and oracles (tests/upstream/cmd/*, and
# tests/upstream/k8s-1.36: the DRA-manager and control-plane oracles against
# 1.36; among them
# controlplane: etcd, kube-apiserver, kube-scheduler and the DRA controllers in
# one binary; and from k8s.io/kubernetes its sample device plugin and e2e DRA
# test driver) from
# the Go module in tests/upstream into target/upstream/bin/. Go comes from the
# machine (/usr/local/go, else PATH); modules from the Go module proxy, cached
# under target/upstream/ (gomod, gocache), so a second run builds nothing.
# Without Go: outside CI, one note and exit 0 (the upstream tests then say
# they did not run); with CI set, a failure. --vet also runs go vet.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/upstream
go=""
for g in "${GO:-}" /usr/local/go/bin/go "$(command -v go 2>/dev/null || true)"; do
  if [ -n "$g" ] && [ -x "$g" ]; then go=$g; break; fi
done
if [ -z "$go" ]; then
  if [ -n "${CI:-}" ]; then
    echo "upstream: no Go toolchain (looked for \$GO, /usr/local/go/bin/go and go on PATH); install Go 1.26 or later" >&2
    exit 1
  fi
  echo "upstream: note: no Go toolchain found; the upstream peers and oracles are NOT built and their tests will not run (install Go 1.26 at /usr/local/go)"
  exit 0
fi
mkdir -p "$out/bin"
export GOMODCACHE="$out/gomod" GOCACHE="$out/gocache" GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
cd tests/upstream
"$go" build -trimpath -o "$out/bin/" ./cmd/...
# Upstream's own peers, from k8s.io/kubernetes by package path (the go.mod tool lines).
"$go" build -trimpath -o "$out/bin/sample-device-plugin" k8s.io/kubernetes/test/images/sample-device-plugin
"$go" build -trimpath -o "$out/bin/dra-test-driver" k8s.io/kubernetes/test/e2e/dra/test-driver
# The DRA-manager and control-plane oracles built against 1.36 as well (its
# own module: one Go module holds one k8s.io/kubernetes), for what changed by
# version.
(cd k8s-1.36 && "$go" build -trimpath -o "$out/bin/dramanager-1.36" ./cmd/dramanager \
  && "$go" build -trimpath -o "$out/bin/controlplane-1.36" ./cmd/controlplane)
if [ "${1:-}" = "--vet" ]; then
  # -trimpath as the builds above: vet then reuses their compiled packages
  # from the cache instead of compiling every dependency again (cmd/controlplane
  # has about 2,200: without it vet cost as much CPU as the whole build).
  "$go" vet -trimpath ./...
  (cd k8s-1.36 && "$go" vet -trimpath ./...)
  # gofmt, from the same toolchain: a file it would change fails CI.
  unformatted=$("$(dirname "$go")/gofmt" -l .)
  if [ -n "$unformatted" ]; then
    echo "upstream: not gofmt-clean (run gofmt -w on them): $unformatted" >&2
    exit 1
  fi
fi
k8s=$(sed -n 's/^\tk8s.io\/client-go v0\.\([0-9]*\)\.\([0-9]*\)$/1.\1.\2/p' go.mod)
echo "upstream: peers and oracles of Kubernetes $k8s ready in $out/bin ($("$go" version | cut -d' ' -f3)): $(ls "$out/bin" | tr '\n' ' ')"
