//! Field validation of request bodies (`fieldValidation`), as
//! kube-apiserver's decoders do it: under `Strict` a body with a field the
//! kind does not have, or a field twice, is `400 BadRequest` (`strict
//! decoding error: unknown field "spec.bogus"`); under `Warn` (the
//! default) and `Ignore` unknown fields are dropped — the object is stored
//! without them, as a Go struct cannot hold them.
//!
//! The kinds' fields are known down to the levels listed in [`SCHEMAS`]
//! (from k8s.io/api v0.37.2's JSON tags); below them (a device's values, volumes,
//! statuses …) every field is taken as sent. Pure.

use serde_json::Value;

/// The shape of a field's value.
#[derive(Debug)]
enum Node {
    /// Anything (not checked further).
    Open,
    /// An object with these fields.
    Obj(&'static [(&'static str, Node)]),
    /// A list of these.
    List(&'static Node),
}

use Node::{List, Obj, Open};

const META: Node = Obj(&[
    ("name", Open),
    ("generateName", Open),
    ("namespace", Open),
    ("selfLink", Open),
    ("uid", Open),
    ("resourceVersion", Open),
    ("generation", Open),
    ("creationTimestamp", Open),
    ("deletionTimestamp", Open),
    ("deletionGracePeriodSeconds", Open),
    ("labels", Open),
    ("annotations", Open),
    ("ownerReferences", Open),
    ("finalizers", Open),
    ("clusterName", Open),
    ("managedFields", Open),
]);

const EXACT: Node = Obj(&[
    ("deviceClassName", Open),
    ("selectors", Open),
    ("allocationMode", Open),
    ("count", Open),
    ("adminAccess", Open),
    ("tolerations", Open),
    ("capacity", Open),
    ("derivedAttributes", Open),
]);

const SUBREQUEST: Node = Obj(&[
    ("name", Open),
    ("deviceClassName", Open),
    ("selectors", Open),
    ("allocationMode", Open),
    ("count", Open),
    ("tolerations", Open),
    ("capacity", Open),
    ("derivedAttributes", Open),
]);

const CLAIM_SPEC: Node = Obj(&[
    (
        "devices",
        Obj(&[
            ("requests", List(&Obj(&[("name", Open), ("exactly", EXACT), ("firstAvailable", List(&SUBREQUEST))]))),
            ("constraints", Open),
            ("config", Open),
        ]),
    ),
    ("controller", Open),
]);

const CONTAINER: Node = Obj(&[
    ("name", Open),
    ("image", Open),
    ("command", Open),
    ("args", Open),
    ("workingDir", Open),
    ("ports", Open),
    ("envFrom", Open),
    ("env", Open),
    ("resources", Obj(&[("limits", Open), ("requests", Open), ("claims", Open)])),
    ("resizePolicy", Open),
    ("restartPolicy", Open),
    ("restartPolicyRules", Open),
    ("volumeMounts", Open),
    ("volumeDevices", Open),
    ("livenessProbe", Open),
    ("readinessProbe", Open),
    ("startupProbe", Open),
    ("lifecycle", Open),
    ("terminationMessagePath", Open),
    ("terminationMessagePolicy", Open),
    ("imagePullPolicy", Open),
    ("securityContext", Open),
    ("stdin", Open),
    ("stdinOnce", Open),
    ("tty", Open),
]);

const POD_SPEC: Node = Obj(&[
    ("volumes", Open),
    ("initContainers", List(&CONTAINER)),
    ("containers", List(&CONTAINER)),
    ("ephemeralContainers", Open),
    ("restartPolicy", Open),
    ("terminationGracePeriodSeconds", Open),
    ("activeDeadlineSeconds", Open),
    ("dnsPolicy", Open),
    ("nodeSelector", Open),
    ("serviceAccountName", Open),
    ("serviceAccount", Open),
    ("automountServiceAccountToken", Open),
    ("nodeName", Open),
    ("hostNetwork", Open),
    ("hostPID", Open),
    ("hostIPC", Open),
    ("shareProcessNamespace", Open),
    ("securityContext", Open),
    ("imagePullSecrets", Open),
    ("hostname", Open),
    ("subdomain", Open),
    ("affinity", Open),
    ("schedulerName", Open),
    ("tolerations", Open),
    ("hostAliases", Open),
    ("priorityClassName", Open),
    ("priority", Open),
    ("dnsConfig", Open),
    ("readinessGates", Open),
    ("runtimeClassName", Open),
    ("enableServiceLinks", Open),
    ("preemptionPolicy", Open),
    ("overhead", Open),
    ("topologySpreadConstraints", Open),
    ("setHostnameAsFQDN", Open),
    ("os", Open),
    ("hostUsers", Open),
    ("schedulingGates", Open),
    ("resourceClaims", Open),
    ("resources", Open),
    ("hostnameOverride", Open),
    ("workloadRef", Open),
    ("schedulingGroup", Open),
    ("evictionResponders", Open),
]);

/// A ResourceSlice's device (`resource/v1` `Device`) as 1.37 has it: 1.36's
/// `nodeAllocatableResourceMappings` (field 13) is tombstoned, replaced by
/// `nodeAllocatableResources` (field 14).
const DEVICE_37: Node = Obj(&[
    ("name", Open),
    ("attributes", Open),
    ("capacity", Open),
    ("consumesCounters", Open),
    ("nodeName", Open),
    ("nodeSelector", Open),
    ("allNodes", Open),
    ("taints", Open),
    ("bindsToNode", Open),
    ("bindingConditions", Open),
    ("bindingFailureConditions", Open),
    ("allowMultipleAllocations", Open),
    ("nodeAllocatableResources", Open),
]);

/// A device as 1.36 has it (k8s.io/api v0.36.6): `nodeAllocatableResourceMappings`.
const DEVICE_36: Node = Obj(&[
    ("name", Open),
    ("attributes", Open),
    ("capacity", Open),
    ("consumesCounters", Open),
    ("nodeName", Open),
    ("nodeSelector", Open),
    ("allNodes", Open),
    ("taints", Open),
    ("bindsToNode", Open),
    ("bindingConditions", Open),
    ("bindingFailureConditions", Open),
    ("allowMultipleAllocations", Open),
    ("nodeAllocatableResourceMappings", Open),
]);

/// A ResourceSlice with devices of `$device`.
macro_rules! slice_schema {
    ($device:expr) => {
        Obj(&[
            ("apiVersion", Open),
            ("kind", Open),
            ("metadata", META),
            (
                "spec",
                Obj(&[
                    ("driver", Open),
                    ("pool", Obj(&[("name", Open), ("generation", Open), ("resourceSliceCount", Open)])),
                    ("nodeName", Open),
                    ("nodeSelector", Open),
                    ("allNodes", Open),
                    ("devices", List(&$device)),
                    ("perDeviceNodeSelection", Open),
                    ("sharedCounters", Open),
                    ("partitionTypeAttribute", Open),
                    ("skipNodeOperations", Open),
                ]),
            ),
        ])
    };
}

/// The schema's name for `kind` as the API server of Kubernetes 1.`minor`
/// decodes it: a ResourceSlice's devices differ in 1.36 (and before, where
/// neither node-allocatable field exists, 1.36's list is kept: its field is
/// then dropped by its gate, off or absent there).
pub(super) fn versioned(kind: &str, minor: u32) -> &str {
    match (kind, minor) {
        ("ResourceSlice", m) if m <= 36 => "ResourceSlice@1.36",
        (k, _) => k,
    }
}

/// The kinds whose fields are known, and their top level.
const SCHEMAS: &[(&str, Node)] = &[
    ("ResourceSlice@1.36", slice_schema!(DEVICE_36)),
    ("ResourceSlice", slice_schema!(DEVICE_37)),
    (
        "ResourceClaim",
        Obj(&[
            ("apiVersion", Open),
            ("kind", Open),
            ("metadata", META),
            ("spec", CLAIM_SPEC),
            (
                "status",
                Obj(&[("allocation", Open), ("reservedFor", Open), ("deallocationRequested", Open), ("devices", Open)]),
            ),
        ]),
    ),
    (
        "ResourceClaimTemplate",
        Obj(&[
            ("apiVersion", Open),
            ("kind", Open),
            ("metadata", META),
            ("spec", Obj(&[("metadata", META), ("spec", CLAIM_SPEC)])),
        ]),
    ),
    (
        "DeviceClass",
        Obj(&[
            ("apiVersion", Open),
            ("kind", Open),
            ("metadata", META),
            (
                "spec",
                Obj(&[("selectors", Open), ("config", Open), ("suitableNodes", Open), ("extendedResourceName", Open)]),
            ),
        ]),
    ),
    (
        "ConfigMap",
        Obj(&[
            ("apiVersion", Open),
            ("kind", Open),
            ("metadata", META),
            ("immutable", Open),
            ("data", Open),
            ("binaryData", Open),
        ]),
    ),
    ("Pod", Obj(&[("apiVersion", Open), ("kind", Open), ("metadata", META), ("spec", POD_SPEC), ("status", Open)])),
];

fn schema(kind: &str) -> Option<&'static Node> {
    SCHEMAS.iter().find(|(k, _)| *k == kind).map(|(_, n)| n)
}

/// Walk `v` against `node`: the unknown fields' paths (as the strict
/// decoder names them: `spec.bogus`, `spec.containers[0].bogus`), removed
/// from `v` when `drop`.
fn walk(node: &Node, v: &mut Value, path: &str, drop: bool, out: &mut Vec<String>) {
    match (node, v) {
        (Obj(fields), Value::Object(m)) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            // A strategic merge patch's directives (`$patch`, `$setElementOrder/…`) are no fields.
            for k in keys.into_iter().filter(|k| !k.starts_with('$')) {
                let here = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match fields.iter().find(|(f, _)| *f == k) {
                    Some((_, child)) => {
                        if let Some(c) = m.get_mut(&k) {
                            walk(child, c, &here, drop, out);
                        }
                    }
                    None => {
                        out.push(here);
                        if drop {
                            m.remove(&k);
                        }
                    }
                }
            }
        }
        (List(item), Value::Array(a)) => {
            for (i, x) in a.iter_mut().enumerate() {
                walk(item, x, &format!("{path}[{i}]"), drop, out);
            }
        }
        _ => {}
    }
}

/// The unknown fields of a body of `kind` (none for a kind not in [`SCHEMAS`]).
pub(super) fn unknown(kind: &str, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = schema(kind) {
        walk(n, &mut obj.clone(), "", false, &mut out);
    }
    out
}

/// `obj` without the fields `kind` does not have (what a Go struct keeps).
pub(super) fn drop_unknown(kind: &str, obj: &mut Value) {
    if let Some(n) = schema(kind) {
        walk(n, obj, "", true, &mut Vec::new());
    }
}

/// The first field a JSON body has twice (its path), if any.
pub(super) fn duplicate(body: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Seek<'a> {
        path: String,
        found: &'a mut Option<String>,
    }
    impl<'de> DeserializeSeed<'de> for Seek<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Seek<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(k) = m.next_key::<String>()? {
                let here = if self.path.is_empty() { k.clone() } else { format!("{}.{k}", self.path) };
                if !seen.insert(k) && self.found.is_none() {
                    *self.found = Some(here.clone());
                }
                m.next_value_seed(Seek { path: here, found: self.found })?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            let mut i = 0;
            while s.next_element_seed(Seek { path: format!("{}[{i}]", self.path), found: self.found })?.is_some() {
                i += 1;
            }
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(body);
    Seek { path: String::new(), found: &mut found }.deserialize(&mut de).ok()?;
    found
}

/// The strict decoder's refusal of a body of `kind`: 400 naming its
/// duplicate and unknown fields; None when it has neither.
pub(super) fn strict_refusal(kind: &str, body: &[u8], obj: &Value) -> Option<(u16, Value)> {
    let mut problems: Vec<String> =
        duplicate(body).map(|d| format!("json: duplicate field {d:?}")).into_iter().collect();
    problems.extend(unknown(kind, obj).into_iter().map(|u| format!("unknown field {u:?}")));
    if problems.is_empty() {
        return None;
    }
    Some(super::status(400, "BadRequest", format!("strict decoding error: {}", problems.join(", "))))
}

/// A patch's result as the strict decoder takes it: under
/// `fieldValidation=Strict` unknown fields are 422 Invalid with a cause on
/// `patch` whose value is the patched object (as kube-apiserver's patcher
/// words it); otherwise they are dropped.
pub(super) fn patched_strictly(
    group: &str,
    kind: &str,
    name: &str,
    mut obj: Value,
    query: &str,
) -> Result<Value, (u16, Value)> {
    let unknown = unknown(kind, &obj);
    if unknown.is_empty() {
        return Ok(obj);
    }
    if super::param(query, "fieldValidation").as_deref() == Some("Strict") {
        let problems: Vec<String> = unknown.iter().map(|u| format!("unknown field {u:?}")).collect();
        let cause = super::validate::Cause {
            reason: "FieldValueInvalid",
            field: "patch".into(),
            message: format!(
                "Invalid value: {}: strict decoding error: {}",
                super::validate::go_quote(&obj.to_string()),
                problems.join(", ")
            ),
        };
        let shown = kind.split_once('@').map_or(kind, |(k, _)| k);
        return Err(super::validate::invalid_status(group, shown, name, &[cause]));
    }
    drop_unknown(kind, &mut obj);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_named_as_the_strict_decoder_does_and_dropped_otherwise() {
        let mut pod = json!({"metadata": {"name": "p", "bogus": 1}, "spec": {"containers": [{"name": "c", "image": "x", "nope": true}],
            "volumes": [{"anything": "goes"}]}, "extra": 2});
        assert_eq!(unknown("Pod", &pod), ["metadata.bogus", "spec.containers[0].nope", "extra"]);
        drop_unknown("Pod", &mut pod);
        assert_eq!(
            pod,
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [{"anything": "goes"}]}})
        );
        assert!(unknown("Lease", &json!({"whatever": 1})).is_empty(), "a kind without a schema is taken as sent");
        let body = br#"{"spec":{"driver":"a","pool":{"name":"p"},"driver":"b"},"list":[{"x":1,"x":2}]}"#;
        assert_eq!(duplicate(body).as_deref(), Some("spec.driver"));
        assert_eq!(duplicate(br#"{"a":[{"x":1},{"x":2}]}"#), None);
        assert_eq!(duplicate(br#"{"a":[{"x":1,"x":2}]}"#).as_deref(), Some("a[0].x"));
        let (code, st) =
            strict_refusal("ResourceSlice", br#"{"spec":{"bogus":1}}"#, &json!({"spec": {"bogus": 1}})).unwrap();
        assert_eq!((code, st["message"].as_str()), (400, Some("strict decoding error: unknown field \"spec.bogus\"")));
    }
}
