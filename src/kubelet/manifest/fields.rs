//! Unknown fields in pod and DRA object manifests, reported as kubectl's
//! strict field validation words them (`unknown field
//! "spec.containers[0].resource"`), with the field most likely meant.
//!
//! The kubelet decodes static pod files leniently (an unknown field is
//! dropped, kubernetes pkg/kubelet/config/common.go tryDecodeSinglePod), so
//! a static pod with a typo runs on a real node — without what the typo
//! meant. The mock kubelet admits it too, as the kubelet does, and warns
//! as `kubectl --validate=warn` does. Only fields of the Kubernetes API are
//! known here; below a field whose shape is not modelled (volumes, probes,
//! securityContext, …) anything goes.

use serde_json::Value;

/// The shape of a manifest value: which fields an object may have.
#[derive(Clone, Copy)]
enum Shape {
    /// Anything (not checked below here).
    Any,
    /// An object with these fields.
    Fields(&'static [(&'static str, Shape)]),
    /// A list of values of this shape.
    Items(&'static Shape),
}

use Shape::{Any, Fields, Items};

const META: Shape = Fields(&[
    ("name", Any),
    ("generateName", Any),
    ("namespace", Any),
    ("selfLink", Any),
    ("uid", Any),
    ("resourceVersion", Any),
    ("generation", Any),
    ("creationTimestamp", Any),
    ("deletionTimestamp", Any),
    ("deletionGracePeriodSeconds", Any),
    ("labels", Any),
    ("annotations", Any),
    ("ownerReferences", Any),
    ("finalizers", Any),
    ("managedFields", Any),
]);

const CLAIM_REF: Shape = Fields(&[("name", Any), ("request", Any)]);
const RESOURCES: Shape = Fields(&[("limits", Any), ("requests", Any), ("claims", Items(&CLAIM_REF))]);

const CONTAINER: Shape = Fields(&[
    ("name", Any),
    ("image", Any),
    ("command", Any),
    ("args", Any),
    ("workingDir", Any),
    ("ports", Any),
    ("envFrom", Any),
    ("env", Any),
    ("resources", RESOURCES),
    ("resizePolicy", Any),
    ("restartPolicy", Any),
    ("restartPolicyRules", Any),
    ("volumeMounts", Any),
    ("volumeDevices", Any),
    ("livenessProbe", Any),
    ("readinessProbe", Any),
    ("startupProbe", Any),
    ("lifecycle", Any),
    ("terminationMessagePath", Any),
    ("terminationMessagePolicy", Any),
    ("imagePullPolicy", Any),
    ("securityContext", Any),
    ("stdin", Any),
    ("stdinOnce", Any),
    ("tty", Any),
]);

const POD_CLAIM: Shape = Fields(&[("name", Any), ("resourceClaimName", Any), ("resourceClaimTemplateName", Any)]);

const POD_SPEC: Shape = Fields(&[
    ("volumes", Any),
    ("initContainers", Items(&CONTAINER)),
    ("containers", Items(&CONTAINER)),
    ("ephemeralContainers", Any),
    ("restartPolicy", Any),
    ("terminationGracePeriodSeconds", Any),
    ("activeDeadlineSeconds", Any),
    ("dnsPolicy", Any),
    ("nodeSelector", Any),
    ("serviceAccountName", Any),
    ("serviceAccount", Any),
    ("automountServiceAccountToken", Any),
    ("nodeName", Any),
    ("hostNetwork", Any),
    ("hostPID", Any),
    ("hostIPC", Any),
    ("shareProcessNamespace", Any),
    ("securityContext", Any),
    ("imagePullSecrets", Any),
    ("hostname", Any),
    ("hostnameOverride", Any),
    ("subdomain", Any),
    ("affinity", Any),
    ("schedulerName", Any),
    ("tolerations", Any),
    ("hostAliases", Any),
    ("priorityClassName", Any),
    ("priority", Any),
    ("dnsConfig", Any),
    ("readinessGates", Any),
    ("runtimeClassName", Any),
    ("enableServiceLinks", Any),
    ("preemptionPolicy", Any),
    ("overhead", Any),
    ("topologySpreadConstraints", Any),
    ("setHostnameAsFQDN", Any),
    ("os", Any),
    ("hostUsers", Any),
    ("schedulingGates", Any),
    ("schedulingGroup", Fields(&[("podGroupName", Any)])),
    ("resourceClaims", Items(&POD_CLAIM)),
    ("resources", Any),
]);

const POD: Shape =
    Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", POD_SPEC), ("status", Any)]);

const CEL: Shape = Fields(&[("expression", Any)]);
const SELECTOR: Shape = Fields(&[("cel", CEL)]);
const OPAQUE: Shape = Fields(&[("driver", Any), ("parameters", Any)]);
const CONFIG: Shape = Fields(&[("requests", Any), ("opaque", OPAQUE)]);
const CLASS_CONFIG: Shape = Fields(&[("opaque", OPAQUE)]);
const CONSTRAINT: Shape = Fields(&[("requests", Any), ("matchAttribute", Any), ("distinctAttribute", Any)]);
const TOLERATION: Shape =
    Fields(&[("key", Any), ("operator", Any), ("value", Any), ("effect", Any), ("tolerationSeconds", Any)]);
const RESULT: Shape = Fields(&[
    ("request", Any),
    ("driver", Any),
    ("pool", Any),
    ("device", Any),
    ("adminAccess", Any),
    ("tolerations", Any),
    ("bindingConditions", Any),
    ("bindingFailureConditions", Any),
    ("shareID", Any),
    ("consumedCapacity", Any),
]);
const ALLOC_CONFIG: Shape = Fields(&[("source", Any), ("requests", Any), ("opaque", OPAQUE)]);
const ALLOCATION: Shape = Fields(&[
    ("devices", Fields(&[("results", Items(&RESULT)), ("config", Items(&ALLOC_CONFIG))])),
    ("nodeSelector", Any),
    ("allocationTimestamp", Any),
]);
const CONSUMER: Shape = Fields(&[("apiGroup", Any), ("resource", Any), ("name", Any), ("uid", Any)]);
const DEVICE_STATUS: Shape = Fields(&[
    ("driver", Any),
    ("pool", Any),
    ("device", Any),
    ("shareID", Any),
    ("conditions", Any),
    ("data", Any),
    ("networkData", Any),
]);
const CLAIM_STATUS: Shape =
    Fields(&[("allocation", ALLOCATION), ("reservedFor", Items(&CONSUMER)), ("devices", Items(&DEVICE_STATUS))]);

/// resource.k8s.io ExactDeviceRequest (v1) and the request fields of v1beta1.
const EXACT: Shape = Fields(&[
    ("deviceClassName", Any),
    ("selectors", Items(&SELECTOR)),
    ("allocationMode", Any),
    ("count", Any),
    ("adminAccess", Any),
    ("tolerations", Any),
    ("capacity", Any),
]);
const SUB_REQUEST: Shape = Fields(&[
    ("name", Any),
    ("deviceClassName", Any),
    ("selectors", Items(&SELECTOR)),
    ("allocationMode", Any),
    ("count", Any),
    ("tolerations", Items(&TOLERATION)),
    ("capacity", Any),
]);
const REQUEST: Shape = Fields(&[
    ("name", Any),
    ("exactly", EXACT),
    ("firstAvailable", Items(&SUB_REQUEST)),
    ("deviceClassName", Any),
    ("selectors", Items(&SELECTOR)),
    ("allocationMode", Any),
    ("count", Any),
    ("adminAccess", Any),
    ("tolerations", Items(&TOLERATION)),
    ("capacity", Any),
]);
const DEVICE_CLAIM: Shape =
    Fields(&[("requests", Items(&REQUEST)), ("constraints", Items(&CONSTRAINT)), ("config", Items(&CONFIG))]);
const CLAIM_SPEC: Shape = Fields(&[("devices", DEVICE_CLAIM)]);
const CLAIM: Shape =
    Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", CLAIM_SPEC), ("status", CLAIM_STATUS)]);
const CLASS_SPEC: Shape =
    Fields(&[("selectors", Items(&SELECTOR)), ("config", Items(&CLASS_CONFIG)), ("extendedResourceName", Any)]);
const CLASS: Shape = Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", CLASS_SPEC)]);
const SLICE_SPEC: Shape = Fields(&[
    ("driver", Any),
    ("pool", Fields(&[("name", Any), ("generation", Any), ("resourceSliceCount", Any)])),
    ("nodeName", Any),
    ("nodeSelector", Any),
    ("allNodes", Any),
    ("perDeviceNodeSelection", Any),
    ("devices", Any),
    ("sharedCounters", Any),
    ("skipNodeOperations", Any),
]);
const SLICE: Shape = Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", SLICE_SPEC)]);
const TEMPLATE_SPEC: Shape = Fields(&[("metadata", Any), ("spec", CLAIM_SPEC)]);
const TEMPLATE: Shape = Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", TEMPLATE_SPEC)]);
const OTHER: Shape = Fields(&[("apiVersion", Any), ("kind", Any), ("metadata", META), ("spec", Any), ("status", Any)]);

/// The unknown fields of a manifest (a Pod, a ResourceClaim with its
/// status, a ResourceClaimTemplate, a DeviceClass; a ResourceSlice down to
/// its spec's fields),
/// each as `unknown field "PATH"`, with `; did you mean "FIELD"?` when a
/// known field of the same object is close (pure).
pub fn unknown_fields(v: &Value) -> Vec<String> {
    let shape = match v.get("kind").and_then(Value::as_str) {
        None | Some("Pod") => POD,
        Some("ResourceClaim") => CLAIM,
        Some("ResourceClaimTemplate") => TEMPLATE,
        Some("DeviceClass") => CLASS,
        Some("ResourceSlice") => SLICE,
        Some(_) => OTHER,
    };
    let mut out = Vec::new();
    walk(v, shape, "", &mut out);
    out
}

fn walk(v: &Value, shape: Shape, at: &str, out: &mut Vec<String>) {
    match (shape, v) {
        (Fields(known), Value::Object(m)) => {
            for (k, x) in m {
                let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                match known.iter().find(|(n, _)| n == k) {
                    Some((_, s)) => walk(x, *s, &path, out),
                    None => out.push(match likely(k, known) {
                        Some(n) => format!("unknown field \"{path}\"; did you mean \"{n}\"?"),
                        None => format!("unknown field \"{path}\""),
                    }),
                }
            }
        }
        (Items(s), Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, *s, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The known field `k` most likely means: the closest by edit distance
/// (case-insensitive), within a third of its length (at least 2).
fn likely(k: &str, known: &[(&'static str, Shape)]) -> Option<&'static str> {
    let k = k.to_ascii_lowercase();
    known
        .iter()
        .map(|(n, _)| (edits(&k, &n.to_ascii_lowercase()), *n))
        .filter(|(d, n)| *d <= (n.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_norway::from_str(s).unwrap()
    }

    #[test]
    fn a_misspelt_field_is_named_by_its_path_with_the_field_meant() {
        let pod = yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {a: b}}\nspec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers:\n  - name: c\n    image: x\n    resource:\n      limits: {vendor.example/gpu: 1}\n  - name: d\n    resources: {limit: {v.e/a: 1}, claims: [{name: g, requets: r}]}\n  resourceClaim: []\n");
        assert_eq!(
            unknown_fields(&pod),
            [
                "unknown field \"spec.containers[0].resource\"; did you mean \"resources\"?",
                "unknown field \"spec.containers[1].resources.limit\"; did you mean \"limits\"?",
                "unknown field \"spec.containers[1].resources.claims[0].requets\"; did you mean \"request\"?",
                "unknown field \"spec.resourceClaim\"; did you mean \"resourceClaims\"?",
            ]
        );
        let claim = yaml("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly: {deviceClasName: gpu.example.com}\n");
        assert_eq!(
            unknown_fields(&claim),
            ["unknown field \"spec.devices.requests[0].exactly.deviceClasName\"; did you mean \"deviceClassName\"?"]
        );
        // #33 item 4: typos deeper in resource.k8s.io objects.
        let claim = yaml("kind: ResourceClaim\nmetadata: {name: c}\nspec:\n  devices:\n    requests: [{name: r, exactly: {deviceClassName: c, selector: [{cel: {expresion: x}}]}}]\n    config: [{request: [r], opaque: {driver: d}}]\nstatus: {allocation: {devices: {result: []}}}\n");
        assert_eq!(
            unknown_fields(&claim),
            [
                "unknown field \"spec.devices.requests[0].exactly.selector\"; did you mean \"selectors\"?",
                "unknown field \"spec.devices.config[0].request\"; did you mean \"requests\"?",
                "unknown field \"status.allocation.devices.result\"; did you mean \"results\"?",
            ]
        );
        let class =
            yaml("kind: DeviceClass\nmetadata: {name: c}\nspec: {selectors: [{cell: {expression: x}}], configs: []}\n");
        assert_eq!(
            unknown_fields(&class),
            [
                "unknown field \"spec.selectors[0].cell\"; did you mean \"cel\"?",
                "unknown field \"spec.configs\"; did you mean \"config\"?",
            ]
        );
        let slice = yaml("kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, nodename: n}\n");
        assert_eq!(unknown_fields(&slice), ["unknown field \"spec.nodename\"; did you mean \"nodeName\"?"]);
        let far = yaml("metadata: {name: p}\nspec: {containers: [{name: c}], frobnicate: 1}\n");
        assert_eq!(unknown_fields(&far), ["unknown field \"spec.frobnicate\""]);
    }

    #[test]
    fn valid_manifests_have_no_unknown_fields() {
        let pod = yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml, uid: u}\nspec:\n  nodeName: n\n  resourceClaims: [{name: g, resourceClaimName: gpu}]\n  initContainers: [{name: i, restartPolicy: Always, securityContext: {anything: {goes: 1}}}]\n  containers:\n  - name: c\n    env: [{name: A, value: b}]\n    resources: {limits: {v.e/a: 1}, requests: {v.e/a: 1}, claims: [{name: g, request: one}]}\n");
        assert!(unknown_fields(&pod).is_empty(), "{:?}", unknown_fields(&pod));
        let t = yaml("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: a\n        firstAvailable: [{name: x, deviceClassName: c}]\n      constraints: [{matchAttribute: m}]\n");
        assert!(unknown_fields(&t).is_empty(), "{:?}", unknown_fields(&t));
        let slice = yaml(
            "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, pool: {name: p}, devices: [{anything: 1}]}\n",
        );
        assert!(unknown_fields(&slice).is_empty());
        let claim = yaml("kind: ResourceClaim\nmetadata: {name: c}\nspec:\n  devices:\n    requests: [{name: r, exactly: {deviceClassName: c, selectors: [{cel: {expression: x}}], tolerations: [{key: k, operator: Exists}]}}]\n    config: [{requests: [r], opaque: {driver: d, parameters: {any: 1}}}]\nstatus:\n  allocation: {devices: {results: [{request: r, driver: d, pool: p, device: g}], config: [{source: FromClaim, opaque: {driver: d, parameters: {}}}]}, nodeSelector: {}}\n  reservedFor: [{resource: pods, name: p, uid: u}]\n");
        assert!(unknown_fields(&claim).is_empty(), "{:?}", unknown_fields(&claim));
    }
}
