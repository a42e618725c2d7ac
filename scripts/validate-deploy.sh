#!/usr/bin/env bash
# Validate the deployment examples in deploy/ offline, without a cluster:
#   - every manifest against Kubernetes' own schemas (kubernetes-validate from PyPI,
#     strict: unknown fields fail), for the oldest and the newest version we support;
#   - a broken copy must fail (proves the validator runs and is strict);
#   - the NPD plugin config is valid JSON, runs `dpctl doctor --npd`, and the copy
#     embedded in the ConfigMap is identical to deploy/npd/dpctl-doctor.json;
#   - every image tag of dpctl is this crate's version (bump them with the version).
# That each dpctl command line in deploy/ parses is a Rust test (tests/e2e/release.rs).
# Installs kubernetes-validate into target/deploy-venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/target/deploy-venv
versions=(1.33.0 1.37.0)

if ! "$venv/bin/python" -c 'import kubernetes_validate' 2>/dev/null; then
  echo "validate-deploy: installing kubernetes-validate into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'kubernetes-validate==1.37.*'
fi

mapfile -t manifests < <(find deploy -name '*.yaml' | sort)
if [ ${#manifests[@]} -lt 4 ]; then
  echo "validate-deploy: expected at least 4 manifests in deploy/, found ${#manifests[@]}" >&2
  exit 1
fi
for v in "${versions[@]}"; do
  echo "== kubernetes-validate --strict -k $v (${#manifests[@]} files)"
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "${manifests[@]}" 2>&1 | tee "$venv/validate.out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
done
# A kind the validator has no schema for is only a warning: on the newest version every
# kind must be known (a typo in apiVersion or kind fails here).
if grep -q "Couldn't find schema" "$venv/validate.out"; then
  echo "validate-deploy: a manifest names a kind Kubernetes ${versions[-1]} does not serve (see above)" >&2
  exit 1
fi
# DRA's resource.k8s.io/v1 is served from 1.34 on: those files are validated on 1.34 too
# (on 1.33 they are skipped with the warning above).
mapfile -t dra < <(grep -l '^apiVersion: resource.k8s.io/v1$' "${manifests[@]}" || true)
if [ ${#dra[@]} -gt 0 ]; then
  echo "== kubernetes-validate --strict -k 1.34.0 (${#dra[@]} resource.k8s.io/v1 files)"
  "$venv/bin/kubernetes-validate" --strict --quiet -k 1.34.0 "${dra[@]}"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sed 's/^\( *\)readOnlyRootFilesystem: true/\1readOnlyRootFilesystem: true\n\1readOnlyRootFilesystm: true/' \
  deploy/serve-daemonset.yaml >"$scratch/broken.yaml"
if cmp -s deploy/serve-daemonset.yaml "$scratch/broken.yaml"; then
  echo "validate-deploy: could not build the broken copy (serve-daemonset.yaml changed?)" >&2
  exit 1
fi
if "$venv/bin/kubernetes-validate" --strict --quiet -k "${versions[-1]}" "$scratch/broken.yaml" >"$scratch/out" 2>&1; then
  echo "validate-deploy: a manifest with an unknown field passed validation: the check is not strict" >&2
  exit 1
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
"$venv/bin/python" - "$version" "${manifests[@]}" <<'PY'
import json, sys, yaml
version, files = sys.argv[1], sys.argv[2:]
errors = []
standalone = open("deploy/npd/dpctl-doctor.json").read()
cfg = json.loads(standalone)
rules = [r for r in cfg.get("rules", []) if r.get("args", [])[:1] == ["doctor"]]
if cfg.get("plugin") != "custom" or not rules or any("--npd" not in r["args"] for r in rules):
    errors.append("deploy/npd/dpctl-doctor.json: needs a custom-plugin rule running `dpctl doctor --npd`")
conds = {c["type"] for c in cfg.get("conditions", [])}
for r in cfg.get("rules", []):
    if r.get("type") == "permanent" and r.get("condition") not in conds:
        errors.append(f"deploy/npd/dpctl-doctor.json: rule condition {r.get('condition')!r} is not declared in conditions")
embedded = 0
for f in files:
    for doc in yaml.safe_load_all(open(f)):
        if not doc:
            continue
        if doc.get("kind") == "ConfigMap" and "dpctl-doctor.json" in doc.get("data", {}):
            embedded += 1
            if json.loads(doc["data"]["dpctl-doctor.json"]) != cfg:
                errors.append(f"{f}: the ConfigMap's dpctl-doctor.json differs from deploy/npd/dpctl-doctor.json")
    for line in open(f):
        for word in line.split():
            if "/dpctl:" in word and word.rsplit(":", 1)[1] != version:
                errors.append(f"{f}: image {word} is not version {version} (Cargo.toml): update the tag")
if embedded != 1:
    errors.append(f"deploy/: expected one ConfigMap embedding dpctl-doctor.json, found {embedded}")
for e in errors:
    print("validate-deploy:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
echo "validate-deploy: ${#manifests[@]} manifests valid for Kubernetes ${versions[*]}; NPD config consistent; image tags $version"
