#!/usr/bin/env bash
# Build a dpctl release: static (musl) binaries for linux/amd64 and linux/arm64,
# stripped and checked; dpctl-VERSION-linux-ARCH.tar.gz archives (binary,
# completions/, man/, docs/, LICENSE, README.md) and SHA256SUMS; a multi-arch OCI image
# (the binary and an empty /tmp, nothing else) built without a container daemon
# (umoci + skopeo); then smoke tests of exactly those artefacts. See CONTRIBUTING.md,
# "Cutting a release".
#
#   scripts/release.sh                  everything, into dist/
#   scripts/release.sh --arch amd64     x86_64 only (no qemu needed)
#   scripts/release.sh --no-image       archives only
#   scripts/release.sh --smoke-only     re-run the smoke tests on dist/
#
# Installs what it needs: the two rustup targets, and Debian's umoci and skopeo
# (image), qemu-user-static (arm64 smoke tests), file and binutils (checks).
# Builds in its own target dir (target/musl, or $DPCTL_RELEASE_TARGET_DIR) with
# the `dist` profile (release + strip), both targets in one cargo invocation.
# Exit 0: all artefacts built and every check passed; 1: a step or check failed;
# 2: usage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
  echo "release.sh: $*" >&2
  exit 1
}

arches=(amd64 arm64)
do_build=1 do_image=1 do_smoke=1
out=$root/dist
while [ $# -gt 0 ]; do
  case $1 in
    --arch)
      case ${2:-} in
        amd64 | arm64) arches=("$2") ;;
        all) arches=(amd64 arm64) ;;
        *) echo "release.sh: --arch takes amd64, arm64 or all (got '${2:-}')" >&2; exit 2 ;;
      esac
      shift ;;
    --no-image) do_image=0 ;;
    --no-smoke) do_smoke=0 ;;
    --smoke-only) do_build=0 ;;
    --out)
      [ -n "${2:-}" ] || { echo "release.sh: --out takes a directory" >&2; exit 2; }
      mkdir -p "$2" && out=$(cd "$2" && pwd)
      shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "release.sh: unknown argument '$1' (see scripts/release.sh --help)" >&2; exit 2 ;;
  esac
  shift
done

# Everything temporary is ours and goes at exit: temp dirs, and servers the smoke tests started.
scratch=() pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for p in "${scratch[@]}"; do rm -rf "$p"; done
}
trap cleanup EXIT

triple() { case $1 in amd64) echo x86_64-unknown-linux-musl ;; arm64) echo aarch64-unknown-linux-musl ;; esac; }
# What `file` and `readelf -h` say for each architecture.
file_arch() { case $1 in amd64) echo "x86-64" ;; arm64) echo "ARM aarch64" ;; esac; }
elf_machine() { case $1 in amd64) echo "Advanced Micro Devices X86-64" ;; arm64) echo "AArch64" ;; esac; }

# Install Debian packages that are missing (one apt-get update, waits for the dpkg lock).
need_apt() {
  local missing=() p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install them by hand"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "release.sh: installing ${missing[*]}"
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || die "no version in Cargo.toml"
# The commit --version reports: HEAD, -dirty if tracked files changed; unknown outside a checkout.
commit=unknown
if top=$(git rev-parse --show-toplevel 2>/dev/null) && [ "$top" -ef "$root" ]; then
  commit=$(git rev-parse --short=12 HEAD)
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    commit=$commit-dirty
    [ $do_build -eq 0 ] || echo "release.sh: warning: uncommitted changes; the binaries say commit $commit" >&2
  fi
  : "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct)}"
fi
: "${SOURCE_DATE_EPOCH:=$(date +%s)}"
export DPCTL_GIT_COMMIT=$commit SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
target_dir=${DPCTL_RELEASE_TARGET_DIR:-$root/target/musl}
layout=$out/dpctl-oci
archive() { echo "$out/dpctl-$version-linux-$1.tar.gz"; }
echo "release.sh: dpctl $version (commit $commit) for ${arches[*]} into $out"

# ---- build, strip (profile dist), check ----------------------------------------------

check_binary() { # ARCH PATH
  local a=$1 bin=$2 info header segments dynamic
  info=$(file -b "$bin")
  header=$(readelf -hW "$bin")
  segments=$(readelf -lW "$bin")
  dynamic=$(readelf -dW "$bin")
  case $info in *"statically linked"* | *"static-pie linked"*) ;; *) die "$bin is not statically linked: $info" ;; esac
  case $info in *"$(file_arch "$a")"*) ;; *) die "$bin is not a $a binary: $info" ;; esac
  case $info in *"not stripped"*) die "$bin is not stripped: $info" ;; *", stripped"*) ;; *) die "$bin: cannot tell if stripped: $info" ;; esac
  grep -q "Machine: *$(elf_machine "$a")\$" <<<"$header" || die "$bin: ELF machine is not $(elf_machine "$a")"
  ! grep -q 'INTERP' <<<"$segments" || die "$bin asks for a dynamic loader (PT_INTERP)"
  ! grep -q '(NEEDED)' <<<"$dynamic" || die "$bin needs shared libraries: $(grep NEEDED <<<"$dynamic")"
  echo "release.sh: $a: $(du -h "$bin" | cut -f1) static, stripped, $(file_arch "$a")"
}

if [ $do_build -eq 1 ]; then
  need_apt file binutils
  { command -v cargo >/dev/null && command -v rustup >/dev/null; } ||
    die "cargo or rustup not found: install a Rust toolchain with rustup (the musl targets come from rustup)"
  installed=$(rustup target list --installed)
  for a in "${arches[@]}"; do
    grep -qx "$(triple "$a")" <<<"$installed" || rustup target add "$(triple "$a")"
  done
  targets=()
  for a in "${arches[@]}"; do targets+=(--target "$(triple "$a")"); done
  echo "== cargo build --profile dist ${targets[*]} (target dir $target_dir)"
  CARGO_TARGET_DIR=$target_dir cargo build --locked --profile dist "${targets[@]}"

  mkdir -p "$out"
  stage=$(mktemp -d "$out/.stage.XXXXXX")
  scratch+=("$stage")
  for a in "${arches[@]}"; do
    bin=$target_dir/$(triple "$a")/dist/dpctl
    check_binary "$a" "$bin"
    name=dpctl-$version-linux-$a
    mkdir -p "$stage/$name"
    install -m 0755 "$bin" "$stage/$name/dpctl"
    cp -R completions man docs "$stage/$name/"
    cp LICENSE README.md "$stage/$name/"
    find "$stage/$name" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u+rwX,go+rX,go-w' \
      --mtime="@$SOURCE_DATE_EPOCH" -C "$stage" -cf - "$name" | gzip -n -9 >"$(archive "$a").tmp"
    mv "$(archive "$a").tmp" "$(archive "$a")"
    echo "release.sh: $(basename "$(archive "$a")")"
  done

  # ---- OCI image: one manifest per architecture, one index for both ------------------
  if [ $do_image -eq 1 ]; then
    need_apt umoci skopeo python3
    rootless=()
    [ "$(id -u)" -eq 0 ] || rootless=(--rootless)
    rm -rf "$layout"
    umoci init --layout "$layout"
    for a in "${arches[@]}"; do
      img=$layout:$version-$a
      umoci new --image "$img"
      umoci unpack "${rootless[@]}" --image "$img" "$stage/bundle"
      rootfs=$stage/bundle/rootfs
      install -D -m 0755 "$stage/dpctl-$version-linux-$a/dpctl" "$rootfs/usr/local/bin/dpctl"
      install -d -m 1777 "$rootfs/tmp"
      find "$rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
      umoci repack --image "$img" --history.created "$created" \
        --history.created_by "scripts/release.sh (dpctl $version, commit $commit)" "$stage/bundle"
      rm -rf "$stage/bundle"
      umoci config --image "$img" --no-history --os linux --architecture "$a" --created "$created" \
        --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.entrypoint dpctl --config.workingdir / \
        --config.label org.opencontainers.image.title=dpctl \
        --config.label "org.opencontainers.image.version=$version" \
        --config.label "org.opencontainers.image.revision=$commit" \
        --config.label org.opencontainers.image.licenses=Apache-2.0
    done
    python3 - "$layout" "$version" "${arches[@]}" <<'PY'
# Add the multi-arch image index: a blob listing each architecture's manifest
# with its platform, tagged VERSION in index.json (per-arch tags stay).
import hashlib, json, os, sys
layout, version, arches = sys.argv[1], sys.argv[2], sys.argv[3:]
REF = "org.opencontainers.image.ref.name"
path = os.path.join(layout, "index.json")
top = json.load(open(path))
by_ref = {m.get("annotations", {}).get(REF): m for m in top["manifests"]}
entries = []
for a in arches:
    m = by_ref[f"{version}-{a}"]
    entries.append({"mediaType": m["mediaType"], "digest": m["digest"], "size": m["size"],
                    "platform": {"architecture": a, "os": "linux"}})
blob = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                   "manifests": entries}, separators=(",", ":")).encode()
digest = hashlib.sha256(blob).hexdigest()
with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
    f.write(blob)
top["manifests"] = [m for m in top["manifests"] if m.get("annotations", {}).get(REF) != version]
top["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json",
                         "digest": "sha256:" + digest, "size": len(blob),
                         "annotations": {REF: version}})
with open(path + ".tmp", "w") as f:
    json.dump(top, f)
os.replace(path + ".tmp", path)
PY
    # The same layout as one file (skopeo's oci-archive:), for SHA256SUMS and air-gapped copies.
    find "$layout" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
      -C "$layout" -cf "$out/dpctl-$version-oci.tar.tmp" .
    mv "$out/dpctl-$version-oci.tar.tmp" "$out/dpctl-$version-oci.tar"
    echo "release.sh: OCI image $layout:$version (${arches[*]}), also $(basename "$out/dpctl-$version-oci.tar")"
  fi

  files=()
  for a in "${arches[@]}"; do files+=("$(basename "$(archive "$a")")"); done
  [ $do_image -eq 1 ] && files+=("dpctl-$version-oci.tar")
  (cd "$out" && sha256sum "${files[@]}" >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
  echo "release.sh: SHA256SUMS"
  sed 's/^/  /' "$out/SHA256SUMS"
fi

[ $do_smoke -eq 1 ] || exit 0

# ---- smoke tests of the artefacts as shipped -------------------------------------------

need_apt file binutils
for a in "${arches[@]}"; do [ "$a" = arm64 ] && need_apt qemu-user-static; done
work=$(mktemp -d "${TMPDIR:-/tmp}/dpctl-release-smoke.XXXXXX")
scratch+=("$work")
passed=0
ok() {
  passed=$((passed + 1))
  echo "ok   $*"
}

# runner ARCH: sets r to the command that runs the ARCH binary unpacked from its
# archive (arm64 under qemu); run ARCH ARGS... runs it in the foreground.
runner() {
  case $1 in
    amd64) r=("$work/amd64/dpctl") ;;
    arm64) r=(qemu-aarch64-static "$work/arm64/dpctl") ;;
  esac
}
run() {
  local r
  runner "$1"
  shift
  "${r[@]}" "$@"
}

# version_ok ARCH OUTPUT: OUTPUT is the --version line of this build for ARCH. With
# --smoke-only the artefacts may predate uncommitted edits: -dirty or not, same HEAD.
version_ok() {
  local t
  t=$(triple "$1")
  [ "$2" = "dpctl $version (commit $commit, target $t)" ] && return 0
  [ $do_build -eq 0 ] || return 1
  local clean=${commit%-dirty}
  [ "$2" = "dpctl $version (commit $clean, target $t)" ] || [ "$2" = "dpctl $version (commit $clean-dirty, target $t)" ]
}

# wait_for_socket PATH PID: until PATH is a socket (or the server PID died, or 60 s passed).
wait_for_socket() {
  local i
  for ((i = 0; i < 600; i++)); do
    [ -S "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || die "the server for $1 exited before serving"
    sleep 0.1
  done
  die "$1 did not appear within 60s"
}

[ -f "$out/SHA256SUMS" ] || die "$out/SHA256SUMS is missing: build first (scripts/release.sh without --smoke-only)"
for a in "${arches[@]}"; do grep -q " $(basename "$(archive "$a")")\$" "$out/SHA256SUMS" || die "SHA256SUMS lists no $(basename "$(archive "$a")")"; done
[ $do_image -eq 0 ] || grep -q " dpctl-$version-oci.tar\$" "$out/SHA256SUMS" || die "SHA256SUMS lists no dpctl-$version-oci.tar"
(cd "$out" && sha256sum --quiet --ignore-missing -c SHA256SUMS) || die "SHA256SUMS does not match the files in $out"
ok "SHA256SUMS matches the files"

for a in "${arches[@]}"; do
  f=$(archive "$a")
  [ -f "$f" ] || die "$f is missing: build it first (scripts/release.sh without --smoke-only)"
  name=dpctl-$version-linux-$a
  mkdir -p "$work/unpack-$a"
  tar -C "$work/unpack-$a" -xzf "$f"
  for want in dpctl LICENSE README.md docs/test.md completions/dpctl.bash completions/_dpctl completions/dpctl.fish man/dpctl.1 man/dpctl-serve.1; do
    [ -e "$work/unpack-$a/$name/$want" ] || die "$(basename "$f") lacks $name/$want"
  done
  [ "$(ls "$work/unpack-$a")" = "$name" ] || die "$(basename "$f") must hold only the directory $name/"
  ln -s "unpack-$a/$name" "$work/$a"
  check_binary "$a" "$work/$a/dpctl"
  ok "$a: archive layout; binary static, stripped, $(file_arch "$a")"

  got=$(run "$a" --version)
  version_ok "$a" "$got" || die "$a: --version says '$got', expected 'dpctl $version (commit $commit, target $(triple "$a"))' (artefacts of another commit? rebuild: scripts/release.sh)"
  ok "$a: --version: $got"

  demo=$(run "$a" demo --once 2>&1) || die "$a: demo --once failed:
$demo"
  grep -q 'GPU_VISIBLE_DEVICES=gpu-' <<<"$demo" || die "$a: demo --once printed no Allocate answer (GPU_VISIBLE_DEVICES=gpu-…):
$demo"
  ok "$a: demo --once"
done

# serve on one architecture, probe and allocate from the other (or the same).
cross() { # SERVER_ARCH CLIENT_ARCH
  local s=$1 c=$2 dir=$work/plugins-$1-$2 pid out r
  mkdir -p "$dir"
  runner "$s"
  "${r[@]}" serve --plugin-dir "$dir" --resource example.com/smoke --count 4 --no-register \
    --socket-name smoke.sock >"$dir.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for_socket "$dir/smoke.sock" "$pid"
  out=$(run "$c" probe --plugin-dir "$dir" smoke.sock --allocate 2>&1) || die "$c probe against $s serve failed:
$out"
  grep -q 'first snapshot: 4 device(s), 4 healthy' <<<"$out" || die "$c probe against $s serve: unexpected report:
$out"
  out=$(run "$c" -o json allocate "$dir/smoke.sock" smoke-1 smoke-3 2>&1) || die "$c allocate against $s serve failed:
$out"
  { grep -q 'SMOKE_VISIBLE_DEVICES' <<<"$out" && grep -q 'smoke-1,smoke-3' <<<"$out"; } ||
    die "$c allocate against $s serve: no SMOKE_VISIBLE_DEVICES=smoke-1,smoke-3 in:
$out"
  kill -TERM "$pid"
  wait "$pid" || die "$s serve did not exit 0 on SIGTERM: $(cat "$dir.log")"
  [ ! -e "$dir/smoke.sock" ] || die "$s serve left its socket behind on SIGTERM"
  ok "$c probe + allocate against $s serve over a Unix socket; serve stopped cleanly"
}
for s in "${arches[@]}"; do
  for c in "${arches[@]}"; do cross "$s" "$c"; done
done

if [ $do_image -eq 1 ]; then
  need_apt umoci skopeo
  rootless=()
  [ "$(id -u)" -eq 0 ] || rootless=(--rootless)
  raw=$(skopeo inspect --raw "oci:$layout:$version")
  for a in "${arches[@]}"; do
    grep -q "\"architecture\":\"$a\"" <<<"$raw" || die "image index $version lists no $a manifest: $raw"
    # Resolve the multi-arch tag the way a node would, by platform, then unpack it.
    skopeo copy -q --override-os linux --override-arch "$a" "oci-archive:$out/dpctl-$version-oci.tar:$version" \
      "oci:$work/img:$a"
    umoci unpack "${rootless[@]}" --image "$work/img:$a" "$work/bundle-$a" >/dev/null
    rootfs=$work/bundle-$a/rootfs
    contents=$(cd "$rootfs" && find . -mindepth 1 | sort | tr '\n' ' ')
    [ "$contents" = "./tmp ./usr ./usr/local ./usr/local/bin ./usr/local/bin/dpctl " ] ||
      die "$a image holds more than the binary: $contents"
    cmp -s "$rootfs/usr/local/bin/dpctl" "$work/$a/dpctl" || die "$a image's binary differs from the archive's"
    case $a in
      amd64)
        if [ "$(id -u)" -eq 0 ] && command -v chroot >/dev/null; then
          got=$(chroot "$rootfs" /usr/local/bin/dpctl --version) # nothing but the rootfs: no loader, no libc
        else
          got=$("$rootfs/usr/local/bin/dpctl" --version)
        fi ;;
      arm64) got=$(qemu-aarch64-static "$rootfs/usr/local/bin/dpctl" --version) ;;
    esac
    version_ok "$a" "$got" || die "$a image: --version says '$got', expected 'dpctl $version (commit $commit, target $(triple "$a"))'"
    ok "$a image: resolved from the index, unpacked, only the binary, runs: $got"
  done
fi
echo "$passed passed, 0 failed"
