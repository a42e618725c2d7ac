//! Built-in kinds a driver or its helpers write, stored as they are —
//! storage, not controllers: one generic store keyed by
//! group/resource/namespace/name with a strategy per kind, as
//! kube-apiserver's generic registry runs each kind's `strategy.go`
//! (defaulting, validation, what create and update may set, the status
//! subresource). Served: core/v1 Nodes (every verb, the object and its
//! `status`; created with the status they are sent with, as the node
//! strategy allows, so a kubelet registers its Node with one POST; this
//! node is stored at its first request),
//! ConfigMaps (keys validated), Secrets, ServiceAccounts, Events and Pods
//! (with `status`; defaulted and validated as [`super::rules`] says,
//! deleted gracefully as kube-apiserver's pod strategy does: a pod bound
//! to a node and not finished gets a `deletionTimestamp` and its grace
//! period, and is removed by a delete with `gracePeriodSeconds=0`; a
//! mock kubelet that joined as their node runs them, and
//! [`crate::controlplane::controller`] makes and allocates their claims);
//! apps/v1 Deployments and
//! DaemonSets (with `status`); coordination.k8s.io/v1 Leases;
//! scheduling.k8s.io/v1beta1 PodGroups (with `status`; KEP-5729's
//! `spec.resourceClaims` read by [`crate::controlplane::controller`]);
//! resource.k8s.io/v1 DeviceClasses (selectors validated; the mock kubelet
//! writes its class manifests here in process, [`put`]) and
//! ResourceClaimTemplates (spec immutable). Each kind: list (label and
//! field selectors, one namespace or all), watch (its changes are in the
//! store's history), get, create (`generateName` honoured), update (a
//! stale `resourceVersion` or another `uid` is 409), patch (JSON, merge,
//! strategic merge, apply), delete (DeleteOptions preconditions;
//! resource.k8s.io kinds and Pods answer the deleted object, the others a
//! `Status` of Success, as their registries do).

use super::meta;
use super::patch;
use super::selectors::{self, Selection};
use super::validate::{self, Cause};
use super::{method_not_allowed, status, Store, StoreInner};
use serde_json::{json, Value};

/// One built-in kind and its strategy's switches.
#[derive(Debug)]
pub(super) struct Kind {
    /// API group ("" for core).
    pub group: &'static str,
    pub version: &'static str,
    /// The resource (plural) of its paths.
    pub resource: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// It has a `status` subresource: an update of the object keeps the
    /// stored status, an update of `status` keeps everything else.
    pub status: bool,
    /// Its strategy counts spec changes in `metadata.generation`.
    pub generation: bool,
    /// Its strategy clears `status` on create (Nodes keep it: "Nodes allow
    /// *all* fields, including status, to be set on create").
    pub clear_status_on_create: bool,
    /// Verbs served (discovery names them).
    pub verbs: &'static [&'static str],
}

const ALL: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
/// [`ALL`] and DeleteCollection.
const ALL_AND_COLLECTION: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The kinds served.
pub(super) const KINDS: &[Kind] = &[
    Kind {
        group: "",
        version: "v1",
        resource: "nodes",
        kind: "Node",
        namespaced: false,
        status: true,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "",
        version: "v1",
        resource: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "",
        version: "v1",
        resource: "secrets",
        kind: "Secret",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "",
        version: "v1",
        resource: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "",
        version: "v1",
        resource: "events",
        kind: "Event",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "",
        version: "v1",
        resource: "pods",
        kind: "Pod",
        namespaced: true,
        status: true,
        generation: true,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "resource.k8s.io",
        version: "v1",
        resource: "resourceclaimtemplates",
        kind: "ResourceClaimTemplate",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
    Kind {
        group: "apps",
        version: "v1",
        resource: "deployments",
        kind: "Deployment",
        namespaced: true,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL,
    },
    Kind {
        group: "apps",
        version: "v1",
        resource: "daemonsets",
        kind: "DaemonSet",
        namespaced: true,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL,
    },
    Kind {
        group: "resource.k8s.io",
        version: "v1",
        resource: "deviceclasses",
        kind: "DeviceClass",
        namespaced: false,
        status: false,
        generation: true,
        clear_status_on_create: false,
        verbs: ALL,
    },
    // KEP-5055: DeviceTaintRules (GA in 1.37: v1; 1.36's beta: v1beta2;
    // served by gate and version, Store::taint_rule_version).
    Kind {
        group: "resource.k8s.io",
        version: "v1",
        resource: "devicetaintrules",
        kind: "DeviceTaintRule",
        namespaced: false,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL_AND_COLLECTION,
    },
    Kind {
        group: "resource.k8s.io",
        version: "v1beta2",
        resource: "devicetaintrules",
        kind: "DeviceTaintRule",
        namespaced: false,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL_AND_COLLECTION,
    },
    // KEP-4671/5729: PodGroups as 1.37 serves them (scheduling.k8s.io/v1beta1, with `status`).
    Kind {
        group: "scheduling.k8s.io",
        version: "v1beta1",
        resource: "podgroups",
        kind: "PodGroup",
        namespaced: true,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL,
    },
    // And as 1.36 serves them (scheduling.k8s.io/v1alpha2; one store: the
    // store serves one of the two, Store::pod_group_version).
    Kind {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        resource: "podgroups",
        kind: "PodGroup",
        namespaced: true,
        status: true,
        generation: true,
        clear_status_on_create: true,
        verbs: ALL,
    },
    Kind {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        kind: "Lease",
        namespaced: true,
        status: false,
        generation: false,
        clear_status_on_create: false,
        verbs: ALL,
    },
];

impl Kind {
    pub(super) fn api_version(&self) -> String {
        match self.group {
            "" => self.version.to_string(),
            g => format!("{g}/{}", self.version),
        }
    }

    /// `resource.group` as kube-apiserver names it in messages (`nodes`, `deployments.apps`).
    fn qualified(&self) -> String {
        match self.group {
            "" => self.resource.to_string(),
            g => format!("{}.{g}", self.resource),
        }
    }
}

/// A request path of a built-in kind.
#[derive(Debug)]
pub(super) struct Route<'a> {
    pub kind: &'static Kind,
    /// None: every namespace (a list), or a cluster-scoped kind.
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub sub: Option<&'a str>,
}

/// Read a path of a built-in kind.
pub(super) fn route(path: &str) -> Option<Route<'_>> {
    let (group, version, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
        ("", "v1", rest)
    } else {
        let rest = path.strip_prefix("/apis/")?;
        let (g, rest) = rest.split_once('/')?;
        let (v, rest) = rest.split_once('/')?;
        (g, v, rest)
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let (namespace, rest) = match parts.as_slice() {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        rest => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s] => (*r, Some(*n), Some(*s)),
        _ => return None,
    };
    let kind = KINDS.iter().find(|k| k.group == group && k.version == version && k.resource == resource)?;
    // A namespaced kind's object lives in a namespace; a cluster-scoped kind has none.
    if (kind.namespaced && name.is_some() && namespace.is_none()) || (!kind.namespaced && namespace.is_some()) {
        return None;
    }
    Some(Route { kind, namespace, name, sub })
}

pub(super) fn key(k: &Kind, ns: &str, name: &str) -> String {
    format!("{}/{}/{ns}/{name}", k.group, k.resource)
}

fn not_found(k: &Kind, name: &str) -> (u16, Value) {
    let (c, mut v) = status(404, "NotFound", format!("{} {name:?} not found", k.qualified()));
    v["details"] = json!({"name": name, "group": k.group, "kind": k.resource});
    (c, v)
}

fn conflict(k: &Kind, name: &str, why: &str) -> (u16, Value) {
    let (c, mut v) =
        status(409, "Conflict", format!("Operation cannot be fulfilled on {} {name:?}: {why}", k.qualified()));
    v["details"] = json!({"name": name, "group": k.group, "kind": k.resource});
    (c, v)
}

fn bad_request(message: String) -> (u16, Value) {
    status(400, "BadRequest", message)
}

/// The defaults kube-apiserver applies to `obj` of `k`
/// (pkg/apis/apps/v1/defaults.go; a Secret's `type` and `stringData`).
pub(super) fn default(k: &Kind, obj: &mut Value) {
    match k.kind {
        "Deployment" | "DaemonSet" if !obj["spec"]["template"].is_null() => {
            // The pod template gets a pod's v1 defaults (SetDefaults_PodSpec, _Container).
            super::rules::default_template(&mut obj["spec"]["template"]);
            let mut bare = obj["spec"].clone();
            if let Some(m) = bare.as_object_mut() {
                m.remove("template");
            }
            let template = obj["spec"]["template"].take();
            let mut rest = json!({"spec": bare});
            default(k, &mut rest);
            obj["spec"] = rest["spec"].take();
            obj["spec"]["template"] = template;
        }
        "Deployment" => {
            let s = &mut obj["spec"];
            if s.get("replicas").is_none_or(Value::is_null) {
                s["replicas"] = json!(1);
            }
            if s["strategy"]["type"].as_str().is_none_or(str::is_empty) {
                s["strategy"]["type"] = json!("RollingUpdate");
            }
            if s["strategy"]["type"] == "RollingUpdate" {
                let r = &mut s["strategy"]["rollingUpdate"];
                for f in ["maxUnavailable", "maxSurge"] {
                    if r.get(f).is_none_or(Value::is_null) {
                        r[f] = json!("25%");
                    }
                }
            }
            for (f, v) in [("revisionHistoryLimit", 10), ("progressDeadlineSeconds", 600)] {
                if s.get(f).is_none_or(Value::is_null) {
                    s[f] = json!(v);
                }
            }
        }
        "DaemonSet" => {
            let s = &mut obj["spec"];
            if s["updateStrategy"]["type"].as_str().is_none_or(str::is_empty) {
                s["updateStrategy"]["type"] = json!("RollingUpdate");
            }
            if s["updateStrategy"]["type"] == "RollingUpdate" {
                let r = &mut s["updateStrategy"]["rollingUpdate"];
                if r.get("maxUnavailable").is_none_or(Value::is_null) {
                    r["maxUnavailable"] = json!(1);
                }
                if r.get("maxSurge").is_none_or(Value::is_null) {
                    r["maxSurge"] = json!(0);
                }
            }
            if s.get("revisionHistoryLimit").is_none_or(Value::is_null) {
                s["revisionHistoryLimit"] = json!(10);
            }
        }
        "Pod" => super::rules::default_pod(obj),
        // SetDefaults_DeviceTaint: a taint without `timeAdded` gets now (whole seconds).
        "DeviceTaintRule" if obj["spec"]["taint"].is_object() && obj["spec"]["taint"]["timeAdded"].is_null() => {
            obj["spec"]["taint"]["timeAdded"] = json!(crate::core::time::rfc3339_seconds(std::time::SystemTime::now()));
        }
        // SetObjectDefaults_PodGroup: v1beta1's disruptionMode single, v1alpha2's "Pod".
        "PodGroup" if obj["spec"]["disruptionMode"].is_null() => {
            obj["spec"]["disruptionMode"] = if k.version == "v1alpha2" { json!("Pod") } else { json!({"single": {}}) };
        }
        "Event" => {
            // The times and reporter Go writes whether set or not (a zero
            // Time/MicroTime is `null`; reportingComponent/Instance have no omitempty).
            for f in ["firstTimestamp", "lastTimestamp", "eventTime"] {
                if obj.get(f).is_none() {
                    obj[f] = Value::Null;
                }
            }
            for f in ["reportingComponent", "reportingInstance"] {
                if obj.get(f).is_none_or(Value::is_null) {
                    obj[f] = json!("");
                }
            }
        }
        "Node" => {
            // NodeStatus's struct fields that are never omitted, as Go writes them empty.
            let st = &mut obj["status"];
            if st["daemonEndpoints"]["kubeletEndpoint"]["Port"].is_null() {
                st["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!(0);
            }
            for f in [
                "machineID",
                "systemUUID",
                "bootID",
                "kernelVersion",
                "osImage",
                "containerRuntimeVersion",
                "kubeletVersion",
                "kubeProxyVersion",
                "operatingSystem",
                "architecture",
            ] {
                if !st["nodeInfo"][f].is_string() {
                    st["nodeInfo"][f] = json!("");
                }
            }
        }
        "ResourceClaimTemplate" => {
            if obj["spec"]["metadata"].is_null() {
                obj["spec"]["metadata"] = json!({});
            }
            obj["spec"]["spec"] = super::claims::v1_spec(&obj["spec"]["spec"]);
        }
        "Secret" => {
            // stringData is write-only: merged into data (base64) on the way in.
            if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
                use base64::Engine as _;
                for (key, v) in sd {
                    let text = v.as_str().unwrap_or_default();
                    obj["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
            if obj["type"].as_str().is_none_or(str::is_empty) {
                obj["type"] = json!("Opaque");
            }
        }
        _ => {}
    }
}

/// The label selector of a workload matches its pod template's labels
/// (matchLabels; apps validation: "`selector` does not match template `labels`").
fn selector_causes(obj: &Value) -> Vec<Cause> {
    let sel = &obj["spec"]["selector"];
    if sel.is_null() || sel.as_object().is_some_and(|m| m.is_empty()) {
        return vec![Cause {
            reason: "FieldValueRequired",
            field: "spec.selector".into(),
            message: "Required value".into(),
        }];
    }
    let labels = &obj["spec"]["template"]["metadata"]["labels"];
    let matches = sel["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| &labels[k] == v);
    if matches {
        return vec![];
    }
    vec![Cause {
        reason: "FieldValueInvalid",
        field: "spec.template.metadata.labels".into(),
        message: "Invalid value: \"object\": `selector` does not match template `labels`".into(),
    }]
}

/// Validation of `obj` (named `name`) of `k`: its metadata, and its kind's rules.
fn validate(k: &Kind, obj: &Value, name: &str) -> Vec<Cause> {
    let mut causes = validate::object_meta(&obj["metadata"], name);
    match k.kind {
        "Deployment" | "DaemonSet" => causes.extend(selector_causes(obj)),
        "ConfigMap" => causes.extend(super::rules::config_map(obj)),
        "DeviceClass" => causes.extend(super::rules::device_class(obj)),
        "Pod" => causes.extend(super::rules::pod(obj)),
        "ResourceClaimTemplate" => causes.extend(super::rules::claim_spec("spec.spec", &obj["spec"]["spec"])),
        "PodGroup" => causes.extend(super::rules::pod_group(obj, k.version)),
        "DeviceTaintRule" => causes.extend(validate::device_taint_rule(obj, None)),
        _ => {}
    }
    causes
}

/// A PodGroup's `+k8s:immutable` spec fields, in field order (k8s.io/api
/// v0.37.2 scheduling/v1beta1 PodGroupSpec; `schedulingPolicy` and
/// `schedulingConstraints` are not checked here).
const POD_GROUP_IMMUTABLE: [&str; 7] = [
    "parentCompositePodGroupName",
    "workloadRef",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
];

/// The same of 1.36's v1alpha2 PodGroupSpec (k8s.io/api v0.36.3).
const POD_GROUP_IMMUTABLE_V1ALPHA2: [&str; 5] =
    ["podGroupTemplateRef", "resourceClaims", "disruptionMode", "priorityClassName", "priority"];

/// What an update may not change (`ValidateResourceClaimTemplateUpdate`:
/// the spec; `ValidatePodUpdate`: the spec but for its images; a PodGroup's
/// immutable fields as its declarative validation words it,
/// `validate.Immutable`: `field.Invalid(path, nil, …)`, printed `null`, as
/// `scheduler_diff` compares with kube-apiserver).
fn validate_update(k: &Kind, next: &Value, cur: &Value) -> Vec<Cause> {
    match k.kind {
        "PodGroup" => {
            (if k.version == "v1alpha2" { &POD_GROUP_IMMUTABLE_V1ALPHA2[..] } else { &POD_GROUP_IMMUTABLE[..] })
                .iter()
                .filter(|f| {
                    let (a, b) = (&next["spec"][**f], &cur["spec"][**f]);
                    // An empty string or list is Go's zero value, as absent.
                    let empty = |v: &Value| v.is_null() || v == "" || v.as_array().is_some_and(Vec::is_empty);
                    a != b && !(empty(a) && empty(b))
                })
                .map(|f| super::rules::invalid_raw(&format!("spec.{f}"), "null", "field is immutable"))
                .collect()
        }
        "ResourceClaimTemplate" if next["spec"] != cur["spec"] => vec![super::rules::invalid_raw(
            "spec",
            &super::rules::go_template_spec(&next["spec"]),
            "field is immutable",
        )],
        "Pod" => {
            let strip = |v: &Value| {
                let mut s = v["spec"].clone();
                for list in ["containers", "initContainers"] {
                    for c in s[list].as_array_mut().into_iter().flatten() {
                        c["image"] = Value::Null;
                    }
                }
                s["activeDeadlineSeconds"] = Value::Null;
                s
            };
            if strip(next) == strip(cur) {
                return vec![];
            }
            vec![Cause {
                reason: "FieldValueForbidden",
                field: "spec".into(),
                message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
            }]
        }
        _ => vec![],
    }
}

/// The object as served: its kind and apiVersion named.
pub(super) fn served(k: &Kind, obj: &Value) -> Value {
    let mut o = obj.clone();
    o["kind"] = json!(k.kind);
    o["apiVersion"] = json!(k.api_version());
    o
}

/// The Nodes stored.
pub(super) fn nodes(st: &StoreInner) -> Vec<&Value> {
    let Some(k) = kind_of("", "nodes") else { return vec![] };
    let prefix = format!("{}/{}/", k.group, k.resource);
    st.builtin.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v).collect()
}

/// This node, as the store first holds it.
fn node_object(node: &str, version: u64, gates: &super::gated::ApiGates) -> Value {
    let mut n = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": node,
        "uid": crate::controlplane::objects::derived_uid(&format!("node\0{node}")),
        "creationTimestamp": meta::now(), "resourceVersion": version.to_string()}});
    // The kubelet declares the node features its gates enable (NodeDeclaredFeatures,
    // component-helpers nodedeclaredfeatures: dranodeallocatableresources Discover).
    if gates.node_allocatable_resources {
        n["status"] = json!({"declaredFeatures": ["DRANodeAllocatableResources"]});
    }
    n
}

/// This node's Node object, made when first asked for.
pub(super) fn ensure_node(store: &Store, st: &mut StoreInner, node: &str) {
    let k = KINDS.iter().find(|k| k.kind == "Node").expect("Node is a built-in kind");
    if !st.builtin.contains_key(&key(k, "", node)) {
        st.version += 1;
        let n = node_object(node, st.version, &store.gates);
        st.builtin.insert(key(k, "", node), n);
    }
}

/// What one request of a built-in kind asks for.
pub(super) struct Request<'a> {
    pub method: &'a str,
    pub query: &'a [(String, String)],
    /// The body's Content-Type (a patch is read by it).
    pub content_type: &'a str,
    /// JSON, or the patch as sent.
    pub body: &'a [u8],
    /// This node's name.
    pub node: &'a str,
}

/// Answer one request of a built-in kind (not a watch).
pub(super) fn answer(store: &Store, st: &mut StoreInner, r: &Route, q: &Request) -> (u16, Value) {
    let k = r.kind;
    if k.kind == "Node" {
        ensure_node(store, st, q.node);
    }
    let verb = match (q.method, r.name, r.sub) {
        ("GET", None, None) => "list",
        ("GET", Some(_), None | Some("status")) => "get",
        ("POST", None, None) => "create",
        ("PUT", Some(_), None | Some("status")) => "update",
        ("PATCH", Some(_), None | Some("status")) => "patch",
        ("DELETE", Some(_), None) => "delete",
        ("DELETE", None, None) => "deletecollection",
        (_, Some(_), Some(s)) if s != "status" || !k.status => {
            return status(404, "NotFound", format!("{}/{s}: not served by the dpctl mock API server", k.resource))
        }
        _ => return method_not_allowed(),
    };
    if !k.verbs.contains(&verb) {
        return method_not_allowed();
    }
    let ns = r.namespace.unwrap_or_default();
    let Some(name) = r.name else {
        return match verb {
            "list" => list(st, r, q),
            "deletecollection" => delete_collection(store, st, r, q),
            _ => create(store, st, r, q),
        };
    };
    let Some(cur) = st.builtin.get(&key(k, ns, name)).cloned() else { return not_found(k, name) };
    match verb {
        "get" => (200, served(k, &cur)),
        "delete" => delete(store, st, r, name, &cur, q),
        "update" => match serde_json::from_slice::<Value>(q.body) {
            Ok(body) => update(store, st, r, name, &cur, body),
            Err(e) => bad_request(format!("body is not JSON: {e}")),
        },
        _ => match patch::patched(&served(k, &cur), q.content_type, q.body, q.query, patch::BUILTIN_TYPES)
            .and_then(|o| super::fields::patched_strictly(k.group, k.kind, name, o, &query_text(q.query)))
        {
            Ok(p) => update(store, st, r, name, &cur, p),
            Err(e) => e,
        },
    }
}

fn list(st: &StoreInner, r: &Route, q: &Request) -> (u16, Value) {
    let k = r.kind;
    let sel: Selection = match selectors::of_query(k.kind, q.query) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let prefix = format!("{}/{}/", k.group, k.resource);
    let items: Vec<Value> = st
        .builtin
        .range(prefix.clone()..)
        .take_while(|(key, _)| key.starts_with(&prefix))
        .map(|(_, o)| o)
        .filter(|o| r.namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
        .filter(|o| selectors::selected(&sel, o))
        .map(|o| served(k, o))
        .collect();
    let items = super::list_items(items);
    (
        200,
        json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version(),
            "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
    )
}

/// DeleteCollection: every object the list would give deleted as a DELETE
/// with the same options deletes it; the answer the list of them, as the
/// generic store's DeleteCollection returns it.
fn delete_collection(store: &Store, st: &mut StoreInner, r: &Route, q: &Request) -> (u16, Value) {
    let (code, listed) = list(st, r, q);
    if code != 200 {
        return (code, listed);
    }
    let k = r.kind;
    let mut items = Vec::new();
    for o in listed["items"].as_array().into_iter().flatten() {
        let (ns, name) = (o["metadata"]["namespace"].as_str(), o["metadata"]["name"].as_str().unwrap_or_default());
        let Some(cur) = st.builtin.get(&key(k, ns.unwrap_or_default(), name)).cloned() else { continue };
        let one = Route { kind: k, namespace: ns, name: Some(name), sub: None };
        if delete(store, st, &one, name, &cur, q).0 == 200 {
            items.push(served(k, &cur));
        }
    }
    let items = super::list_items(items);
    (
        200,
        json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version(),
            "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
    )
}

fn create(store: &Store, st: &mut StoreInner, r: &Route, q: &Request) -> (u16, Value) {
    let k = r.kind;
    let mut obj = match serde_json::from_slice::<Value>(q.body) {
        Ok(o) if o.is_object() => o,
        Ok(_) => return bad_request("the body is not an object".into()),
        Err(e) => return bad_request(format!("body is not JSON: {e}")),
    };
    let ns = r.namespace.unwrap_or_default().to_string();
    if k.namespaced {
        match obj["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()) {
            Some(given) if given != ns => {
                return bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                )
            }
            _ => obj["metadata"]["namespace"] = json!(ns),
        }
    }
    let StoreInner { generated, builtin, .. } = st;
    let name = match meta::name_for_create(&obj, generated, |n| builtin.contains_key(&key(k, &ns, n)), &k.qualified()) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if k.kind == "Pod" {
        let clock =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        super::rules::default_pod_create(&mut obj, clock ^ st.version);
    }
    if k.kind == "Node" {
        // The NodeTaint admission plugin (default on): a new Node is not
        // ready until the node lifecycle controller says so (none runs here).
        let taint = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"});
        let taints = obj["spec"]["taints"].as_array().cloned().unwrap_or_default();
        if !taints.iter().any(|t| t["key"] == taint["key"] && t["effect"] == taint["effect"]) {
            let mut taints = taints;
            taints.push(taint);
            obj["spec"]["taints"] = json!(taints);
        }
    }
    if k.group == "resource.k8s.io" {
        super::rules::omit_empty_lists(&mut obj);
    }
    if k.kind == "ResourceClaimTemplate" {
        // The template strategy's dropDisabledFields (resourceclaimspec.DropDisabledFields).
        super::gated::claim_spec(&store.gates, &mut obj["spec"]["spec"], None);
    }
    if k.kind == "DeviceClass" {
        super::gated::device_class(&store.gates, &mut obj, None);
    }
    default(k, &mut obj);
    // 1.36's Priority admission leaves PodGroups alone with WorkloadAwarePreemption off (its default).
    if k.kind == "Pod" || (k.kind == "PodGroup" && k.version != "v1alpha2") {
        // The Priority admission plugin (mutating, before validation).
        if let Err(e) = super::rules::admit_priority(k.kind, &mut obj["spec"], store.pod_group_preemption_policy) {
            let given = obj["metadata"]["name"].as_str().unwrap_or_default();
            let (c, mut v) =
                status(403, "Forbidden", super::rules::forbidden_message(&k.qualified(), given, &e.to_string()));
            v["details"] = json!({"name": given, "group": k.group, "kind": k.resource});
            return (c, v);
        }
    }
    if k.kind == "PodGroup" {
        super::rules::drop_unknown_pod_group_fields(&mut obj, k.version, None);
        super::rules::drop_disabled_pod_group_fields(
            &mut obj,
            None,
            store.workload_resource_claims,
            store.pod_group_preemption_policy,
        );
    }
    if k.kind == "Pod" {
        super::rules::drop_disabled_pod_status_fields(&mut obj, None, store.gates.node_allocatable_resources);
    }
    let causes = validate(k, &obj, &name);
    if !causes.is_empty() {
        return validate::invalid_status(k.group, k.kind, &name, &causes);
    }
    if st.builtin.contains_key(&key(k, &ns, &name)) {
        let (c, mut v) = status(409, "AlreadyExists", format!("{} {name:?} already exists", k.qualified()));
        v["details"] = json!({"name": name, "group": k.group, "kind": k.resource});
        return (c, v);
    }
    if k.clear_status_on_create {
        // An empty status, as its Go struct (every field omitempty) writes it.
        obj["status"] = json!({});
    }
    if k.kind == "DaemonSet" {
        // The daemonset strategy's PrepareForCreate: template generation 1, and the
        // status as its Go struct writes an empty one (four non-omitempty counts).
        obj["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = json!("1");
        obj["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0});
    }
    st.version += 1;
    let seed = format!("{}\0{}\0{}", key(k, &ns, &name), st.version, meta::now());
    meta::created(&mut obj, &name, st.version, &seed, false);
    if !k.generation {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("generation");
        }
    }
    let obj = served(k, &obj);
    store.emit(st, "ADDED", obj.clone());
    st.builtin.insert(key(k, &ns, &name), obj.clone());
    (201, obj)
}

/// An update (PUT, or the result of a patch) of the stored `cur`.
fn update(store: &Store, st: &mut StoreInner, r: &Route, name: &str, cur: &Value, body: Value) -> (u16, Value) {
    let k = r.kind;
    if !body.is_object() {
        return bad_request("the body is not an object".into());
    }
    if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
        return bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            body["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }
    let meta_in = &body["metadata"];
    if let Some(uid) = meta_in["uid"].as_str().filter(|u| !u.is_empty()) {
        let have = cur["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != have {
            return conflict(
                k,
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
            );
        }
    }
    if let Some(rv) = meta_in["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        if rv != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
            return conflict(
                k,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            );
        }
    }
    let mut next = if r.sub == Some("status") {
        // The status strategy: only status changes.
        let mut n = cur.clone();
        n["status"] = body["status"].clone();
        n
    } else if !k.status {
        // No status subresource: the stored status (if any) is what the body says.
        body
    } else {
        let mut n = body;
        if k.status {
            // The object's strategy: the stored status stays.
            match cur.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        n
    };
    if k.kind == "DeviceTaintRule" && r.sub != Some("status") {
        // PrepareForUpdate: a new effect with the old timeAdded gets now.
        let (t, o) = (&next["spec"]["taint"], &cur["spec"]["taint"]);
        if t["effect"] != o["effect"] && t["timeAdded"] == o["timeAdded"] {
            next["spec"]["taint"]["timeAdded"] =
                json!(crate::core::time::rfc3339_seconds(std::time::SystemTime::now()));
        }
    }
    default(k, &mut next);
    if k.kind == "PodGroup" {
        super::rules::drop_unknown_pod_group_fields(&mut next, k.version, Some(cur));
        super::rules::drop_disabled_pod_group_fields(
            &mut next,
            Some(cur),
            store.workload_resource_claims,
            store.pod_group_preemption_policy,
        );
        if r.sub == Some("status") {
            super::rules::drop_disabled_pod_group_status_fields(&mut next, cur, store.workload_resource_claims);
        }
    }
    if k.namespaced {
        next["metadata"]["namespace"] = cur["metadata"]["namespace"].clone();
    }
    for f in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        match cur["metadata"].get(f) {
            Some(v) => next["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = next["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if k.kind == "DaemonSet" && r.sub != Some("status") {
        // The daemonset strategy's PrepareForUpdate: a new template is the next template generation.
        const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
        let had = cur["metadata"]["annotations"][TEMPLATE_GENERATION].as_str().and_then(|g| g.parse::<i64>().ok());
        let now = had.unwrap_or(1) + i64::from(next["spec"]["template"] != cur["spec"]["template"]);
        next["metadata"]["annotations"][TEMPLATE_GENERATION] = json!(now.to_string());
    }
    if k.group == "resource.k8s.io" {
        super::rules::omit_empty_lists(&mut next);
    }
    if k.kind == "ResourceClaimTemplate" {
        super::gated::claim_spec(&store.gates, &mut next["spec"]["spec"], Some(&cur["spec"]["spec"]));
    }
    if k.kind == "DeviceClass" {
        super::gated::device_class(&store.gates, &mut next, Some(cur));
    }
    if k.kind == "Pod" {
        if r.sub == Some("status") {
            super::rules::keep_dra_pod_status(&mut next, cur);
        }
        super::rules::drop_disabled_pod_status_fields(&mut next, Some(cur), store.gates.node_allocatable_resources);
    }
    let mut causes = if k.kind == "Pod" && r.sub == Some("status") {
        super::rules::pod_node_allocatable_status(&next, store.api_minor)
    } else {
        validate(k, &next, name)
    };
    causes.extend(validate_update(k, &next, cur));
    if !causes.is_empty() {
        return validate::invalid_status(k.group, k.kind, name, &causes);
    }
    let mut next = served(k, &next);
    // An update that changes nothing is no write (the resource version stays).
    let mut same = next.clone();
    same["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    for f in ["uid", "creationTimestamp", "generation"] {
        match cur["metadata"].get(f) {
            Some(v) => same["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = same["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if same == *cur {
        return (200, cur.clone());
    }
    st.version += 1;
    meta::updated(&mut next, cur, st.version);
    if !k.generation {
        if let Some(m) = next["metadata"].as_object_mut() {
            m.remove("generation");
        }
    }
    let ns = r.namespace.unwrap_or_default();
    if meta::finalized(&next) {
        // Being deleted and its last finalizer gone: the generic store deletes it (ShouldDeleteDuringUpdate).
        st.builtin.remove(&key(k, ns, name));
        store.emit(st, "DELETED", next.clone());
        return (200, next);
    }
    store.emit(st, "MODIFIED", next.clone());
    st.builtin.insert(key(k, ns, name), next.clone());
    (200, next)
}

fn delete(store: &Store, st: &mut StoreInner, r: &Route, name: &str, cur: &Value, q: &Request) -> (u16, Value) {
    let k = r.kind;
    // The body, when any, is DeleteOptions; its preconditions count.
    let opts: Value = serde_json::from_slice(q.body).unwrap_or(Value::Null);
    for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let want = opts["preconditions"][field].as_str().unwrap_or_default();
        let have = cur["metadata"][field].as_str().unwrap_or_default();
        if !want.is_empty() && want != have {
            return conflict(
                k,
                name,
                &format!("Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}"),
            );
        }
    }
    let at = key(k, r.namespace.unwrap_or_default(), name);
    // resource.k8s.io's registries set ReturnDeletedObject (deviceclass/storage/storage.go:46), as pods' does; the others answer a Status.
    let answer = |obj: &Value| {
        if k.group == "resource.k8s.io" || k.kind == "Pod" {
            return (200, obj.clone());
        }
        (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": k.group, "kind": k.resource, "uid": cur["metadata"]["uid"]}}),
        )
    };
    let grace = grace_period(k, cur, q.query, &opts);
    let finalizers = cur["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if grace > 0 || finalizers {
        // Graceful (or finalized) deletion: the object stays, marked.
        let terminating = cur["metadata"]["deletionTimestamp"].is_string();
        let had = cur["metadata"]["deletionGracePeriodSeconds"].as_i64();
        if terminating && had.is_some_and(|h| h <= grace) {
            return answer(cur);
        }
        let mut next = cur.clone();
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        next["metadata"]["deletionTimestamp"] = json!(crate::core::time::unix_rfc3339(secs + grace));
        next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if !terminating && k.generation {
            next["metadata"]["generation"] = json!(cur["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
        }
        st.version += 1;
        next["metadata"]["resourceVersion"] = json!(st.version.to_string());
        store.emit(st, "MODIFIED", next.clone());
        st.builtin.insert(at, next.clone());
        return answer(&next);
    }
    let mut gone = cur.clone();
    if k.kind == "Pod" {
        // BeforeDelete: a pod deleted now carries a deletionTimestamp and a grace period of 0.
        if !gone["metadata"]["deletionTimestamp"].is_string() {
            gone["metadata"]["deletionTimestamp"] = json!(meta::now());
            gone["metadata"]["generation"] = json!(cur["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
        }
        gone["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    }
    st.builtin.remove(&at);
    st.version += 1;
    store.emit(st, "DELETED", gone.clone());
    answer(&gone)
}

/// Delete pod `namespace/name` (UID `uid`, as a precondition) in process, as
/// a DELETE without options does ([`delete`]): gracefully when it is bound
/// and not finished; whether it was stored with that UID.
pub(super) fn delete_pod_gracefully(
    store: &Store,
    st: &mut StoreInner,
    namespace: &str,
    name: &str,
    uid: &str,
) -> bool {
    let Some(k) = kind_of("", "pods") else { return false };
    let at = key(k, namespace, name);
    let Some(cur) = st.builtin.get(&at).cloned() else { return false };
    if cur["metadata"]["uid"] != uid {
        return false;
    }
    let grace = grace_period(k, &cur, &[], &Value::Null);
    let finalizers = cur["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if grace > 0 || finalizers {
        if cur["metadata"]["deletionTimestamp"].is_string() {
            return true;
        }
        let mut next = cur.clone();
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        next["metadata"]["deletionTimestamp"] = json!(crate::core::time::unix_rfc3339(secs + grace));
        next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if k.generation {
            next["metadata"]["generation"] = json!(cur["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
        }
        st.version += 1;
        next["metadata"]["resourceVersion"] = json!(st.version.to_string());
        store.emit(st, "MODIFIED", next.clone());
        st.builtin.insert(at, next);
        return true;
    }
    let mut gone = cur.clone();
    if !gone["metadata"]["deletionTimestamp"].is_string() {
        gone["metadata"]["deletionTimestamp"] = json!(meta::now());
        gone["metadata"]["generation"] = json!(cur["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
    }
    gone["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    st.builtin.remove(&at);
    st.version += 1;
    store.emit(st, "DELETED", gone);
    true
}

/// The grace period of a delete (`gracePeriodSeconds` of the query or the
/// DeleteOptions; else the pod's `terminationGracePeriodSeconds`), as the
/// pod strategy's CheckGracefulDelete decides it: 0 for a pod bound to no
/// node or finished, and for every other kind.
fn grace_period(k: &Kind, cur: &Value, query: &[(String, String)], opts: &Value) -> i64 {
    if k.kind != "Pod" {
        return 0;
    }
    let asked = query
        .iter()
        .find(|(key, _)| key == "gracePeriodSeconds")
        .and_then(|(_, v)| v.parse::<i64>().ok())
        .or_else(|| opts["gracePeriodSeconds"].as_i64());
    let spec = &cur["spec"];
    let unbound = spec["nodeName"].as_str().unwrap_or_default().is_empty();
    let finished = matches!(cur["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if unbound || finished {
        return 0;
    }
    asked.unwrap_or_else(|| spec["terminationGracePeriodSeconds"].as_i64().unwrap_or(30)).max(0)
}

/// Decoded query parameters as a query string again (for the checks that read one).
fn query_text(query: &[(String, String)]) -> String {
    query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// The kind stored as `resource` of `group`.
pub(super) fn kind_of(group: &str, resource: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.group == group && k.resource == resource)
}

/// Whether `a` and `b` differ only in what the store stamps.
fn same_but_stamps(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            for f in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
                m.remove(f);
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// Write `obj` of `group`'s `resource` in process, as the mock kubelet
/// admits a manifest: created (keeping the uid it gives) or updated; a
/// write that changes nothing is no write. Whether the store changed.
pub(super) fn put(store: &Store, st: &mut StoreInner, group: &str, resource: &str, mut obj: Value) -> bool {
    let Some(k) = kind_of(group, resource) else { return false };
    let Some(name) = obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()).map(str::to_string) else {
        return false;
    };
    let ns = if k.namespaced {
        obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string()
    } else {
        String::new()
    };
    default(k, &mut obj);
    let mut obj = served(k, &obj);
    let at = key(k, &ns, &name);
    let cur = st.builtin.get(&at).cloned();
    if cur.as_ref().is_some_and(|c| same_but_stamps(c, &obj)) {
        return false;
    }
    st.version += 1;
    match &cur {
        Some(c) => meta::updated(&mut obj, c, st.version),
        None => meta::created(&mut obj, &name, st.version, &format!("{at}\0{}", st.version), true),
    }
    if !k.generation {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("generation");
        }
    }
    store.emit(st, if cur.is_some() { "MODIFIED" } else { "ADDED" }, obj.clone());
    st.builtin.insert(at, obj);
    true
}

/// Delete `namespace/name` of `group`'s `resource` in process; whether it was stored.
pub(super) fn delete_in_process(
    store: &Store,
    st: &mut StoreInner,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let Some(k) = kind_of(group, resource) else { return false };
    let Some(old) = st.builtin.remove(&key(k, namespace, name)) else {
        return false;
    };
    st.version += 1;
    store.emit(st, "DELETED", old);
    true
}

/// The stored objects of `k` (in namespace `ns`, when given), as served.
pub(super) fn objects_of(st: &StoreInner, k: &Kind, ns: Option<&str>) -> Vec<Value> {
    let prefix = format!("{}/{}/", k.group, k.resource);
    st.builtin
        .range(prefix.clone()..)
        .take_while(|(key, _)| key.starts_with(&prefix))
        .map(|(_, o)| o)
        .filter(|o| ns.is_none_or(|ns| o["metadata"]["namespace"] == ns))
        .map(|o| served(k, o))
        .collect()
}

/// Whether `obj` (a change in the history) is an object of `k` in `ns` (None: any).
pub(super) fn is_of(k: &Kind, ns: Option<&str>, obj: &Value) -> bool {
    obj["kind"] == k.kind
        && obj["apiVersion"] == k.api_version().as_str()
        && ns.is_none_or(|n| obj["metadata"]["namespace"] == n)
}

/// The discovery entries of `group/version`'s built-in kinds (none: not a group served here).
pub(super) fn discovery(group: &str, version: &str) -> Vec<Value> {
    // DeviceTaintRules are listed by their gate (discovery::resources).
    discovery_where(group, version, |k| k.resource != "devicetaintrules")
}

/// [`discovery`]'s entries of one resource.
pub(super) fn discovery_of(group: &str, version: &str, resource: &str) -> Vec<Value> {
    discovery_where(group, version, |k| k.resource == resource)
}

fn discovery_where(group: &str, version: &str, keep: impl Fn(&Kind) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    for k in KINDS.iter().filter(|k| k.group == group && k.version == version && keep(k)) {
        out.push(json!({"name": k.resource, "singularName": k.kind.to_lowercase(), "namespaced": k.namespaced,
            "kind": k.kind, "verbs": k.verbs}));
        if k.status {
            out.push(json!({"name": format!("{}/status", k.resource), "singularName": "", "namespaced": k.namespaced,
                "kind": k.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_kind_and_scope() {
        let r = route("/apis/apps/v1/namespaces/ml/deployments/d").unwrap();
        assert_eq!((r.kind.kind, r.namespace, r.name, r.sub), ("Deployment", Some("ml"), Some("d"), None));
        let r = route("/api/v1/nodes/n/status").unwrap();
        assert_eq!((r.kind.kind, r.namespace, r.name, r.sub), ("Node", None, Some("n"), Some("status")));
        assert_eq!(route("/api/v1/configmaps").unwrap().namespace, None, "a list of every namespace");
        assert!(route("/api/v1/configmaps/x").is_none(), "a namespaced object needs its namespace");
        assert!(route("/api/v1/namespaces/ml/nodes/n").is_none(), "a node has no namespace");
        assert!(route("/apis/apps/v1beta1/namespaces/ml/deployments").is_none());
        assert_eq!(route("/api/v1/namespaces/ml/pods").unwrap().kind.kind, "Pod");
        assert!(route("/api/v1/namespaces/ml/services").is_none());
    }

    #[test]
    fn defaults_are_apps_v1s_and_a_secrets_string_data_becomes_data() {
        let k = KINDS.iter().find(|k| k.kind == "Deployment").unwrap();
        let mut d = json!({"spec": {}});
        default(k, &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(
            (d["spec"]["revisionHistoryLimit"].as_i64(), d["spec"]["progressDeadlineSeconds"].as_i64()),
            (Some(10), Some(600))
        );
        let k = KINDS.iter().find(|k| k.kind == "Secret").unwrap();
        let mut s = json!({"stringData": {"token": "abc"}});
        default(k, &mut s);
        assert_eq!((s["data"]["token"].as_str(), s["type"].as_str()), (Some("YWJj"), Some("Opaque")));
        assert!(s.get("stringData").is_none());
    }
}
