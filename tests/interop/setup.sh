#!/usr/bin/env bash
# Build the interop peers into target/interop/: a Python venv with grpcio and
# the modules generated from proto/, and a Go binary built in GOPATH mode
# against Debian's grpc-go (a second, independent gRPC stack). Kubernetes'
# own components as peers (client-go, the kubeletplugin helper, the sample
# device plugin, the e2e DRA test driver) are built by tests/upstream/build.sh. Installs what is missing (apt, pip). Idempotent
# and quiet; any failure exits non-zero (the interop tests then fail — they
# are never skipped in CI).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/interop
mkdir -p "$out"
protos=(proto/deviceplugin/v1beta1/api.proto proto/podresources/v1/api.proto proto/pluginregistration/v1/api.proto)
# DRA kubelet plugins: the Python peer speaks both sides (dra_peer.py).
dra_protos=(proto/dra/v1/api.proto proto/dra/v1beta1/api.proto proto/dra-health/v1alpha1/api.proto proto/dra-health/v1/api.proto)

apt_pkgs=(golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "interop: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python peer: venv + grpcio, modules generated from proto/.
if [ ! -x "$out/venv/bin/python" ] || ! "$out/venv/bin/python" -c "import grpc, grpc_tools" 2>/dev/null; then
  echo "interop: creating the Python venv (grpcio, grpcio-tools)"
  python3 -m venv "$out/venv"
  "$out/venv/bin/pip" install -q --disable-pip-version-check 'grpcio==1.85.*' 'grpcio-tools==1.85.*'
fi
rm -rf "$out/python" && mkdir -p "$out/python"
"$out/venv/bin/python" -m grpc_tools.protoc -I proto --python_out="$out/python" --grpc_python_out="$out/python" "${protos[@]}" "${dra_protos[@]}"
cp tests/interop/python/peer.py "$out/python/peer.py"
cp tests/interop/python/dra_peer.py "$out/python/dra_peer.py"

# Go peer: GOPATH mode, code generated from proto/ under k8s.io/kubelet/... as upstream.
gopath=$out/gopath
rm -rf "$gopath/src/k8s.io" "$gopath/src/dpctl-interop-peer" "$gopath/src/dpctl-interop-drapeer" "$out/go-dra-peer"
mkdir -p "$gopath/src/dpctl-interop-peer"
protoc -I proto --go_out="$gopath/src" --go-grpc_out="$gopath/src" "${protos[@]}"
cp tests/interop/go/peer/main.go "$gopath/src/dpctl-interop-peer/"
export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOCACHE="$out/gocache" GOFLAGS=
(cd "$gopath/src/dpctl-interop-peer" && go build -o "$out/go-peer" .)
echo "interop: peers ready in $out ($(go version | cut -d' ' -f3), grpc-go $(dpkg-query -W -f='${Version}' golang-google-grpc-dev), grpcio $("$out/venv/bin/python" -c 'import grpc; print(grpc.__version__)'))"
