//! dpctl's local API server and the real kube-apiserver, request by request
//! (issue #46 item 4). One corpus of requests ([`CORPUS`], as data) is sent in
//! order to both servers: `dpctl mock-kubelet --api-server` with its
//! kubeconfig, and the control plane of `support::control_plane()` with its
//! admin kubeconfig. Per request the answers are normalised ([`shape`]: the
//! status code; for a Status its kind, reason and `details.causes`; for an
//! object its fields with uid, resourceVersion, timestamps, managedFields and
//! generated names' suffix taken out; for a list its item names; for a watch
//! its first events) and compared. A difference fails the test unless
//! [`ALLOWED`] lists the request with the reason and upstream's source (and
//! docs/fidelity.md lists it too); an allowed entry that no longer differs
//! fails it as well, so the list stays true.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One request of the corpus. In `path`, `query` and `body`, `{ns}` is the
/// run's namespace and `{p}` the run's prefix of cluster-scoped names.
struct Req {
    /// What it is, unique (the allow-list names it).
    name: &'static str,
    method: &'static str,
    path: &'static str,
    query: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go asks for with its protobuf content type.
const PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
const MERGE: &str = "application/merge-patch+json";
const JSONPATCH: &str = "application/json-patch+json";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
const CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims";
const TEMPLATES: &str = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates";
const CONFIGMAPS: &str = "/api/v1/namespaces/{ns}/configmaps";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const POD_1: &str = "/api/v1/namespaces/{ns}/pods/p1";
const TEMPLATE_1: &str = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates/t1";

macro_rules! req {
    ($name:literal, $m:literal, $path:expr, $q:literal, $ct:expr, $body:literal) => {
        Req { name: $name, method: $m, path: $path, query: $q, content_type: $ct, body: $body }
    };
    ($name:literal, $m:literal, $path:expr, $q:literal) => {
        Req { name: $name, method: $m, path: $path, query: $q, content_type: "", body: "" }
    };
}

const SLICE_1: &str = "/apis/resource.k8s.io/v1/resourceslices/{p}-s1";
const CLASS_1: &str = "/apis/resource.k8s.io/v1/deviceclasses/{p}-dc";
const CLAIM_1: &str = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/c1";
const CLAIM_1_STATUS: &str = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/c1/status";

/// The corpus, in the order it is sent (later requests see earlier ones' objects).
const CORPUS: &[Req] = &[
    // ResourceSlices.
    // resource.k8s.io from 1.34: v1 only (instance.go betaAPIGroupVersionsDisabledByDefault).
    req!("resource.k8s.io group", "GET", "/apis/resource.k8s.io", ""),
    req!("resource.k8s.io/v1beta1 discovery", "GET", "/apis/resource.k8s.io/v1beta1", ""),
    req!("resource.k8s.io/v1beta2 discovery", "GET", "/apis/resource.k8s.io/v1beta2", ""),
    req!("slice list in v1beta1", "GET", "/apis/resource.k8s.io/v1beta1/resourceslices", ""),
    req!("claim list in v1beta2", "GET", "/apis/resource.k8s.io/v1beta2/namespaces/{ns}/resourceclaims", ""),
    req!("slice create", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-s1","labels":{"corpus":"{p}"}},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"model":{"string":"a"}},"capacity":{"mem":{"value":"1Gi"}}}]}}"#),
    req!("slice create with empty lists", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-s-empty"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}-e","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","taints":[],"consumesCounters":[],"bindingConditions":[]}]}}"#),
    req!("slice create with generateName", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"generateName":"{p}-g-","labels":{"corpus":"{p}"}},
            "spec":{"driver":"other.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}-g","generation":1,"resourceSliceCount":1},"devices":[{"name":"dev-0"}]}}"#),
    req!("slice create that exists", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-s1"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice get", "GET", SLICE_1, ""),
    req!("slice get missing", "GET", "/apis/resource.k8s.io/v1/resourceslices/{p}-missing", ""),
    req!("slice create with an invalid driver name", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-bad-driver"},
            "spec":{"driver":"gpu_vendor.example.com","nodeName":"dpctl-node","pool":{"name":"{p}-bd","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice create with versions not semver 2.0.0", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-bad-version"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}-bv","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"a":{"version":"1.0"},"b":{"version":"v1.2.3"},"ok":{"version":"1.2.3-rc.1+b.5"}}}]}}"#),
    req!("slice create with an upper-case driver name", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-upper-driver"},
            "spec":{"driver":"GPU.Example.com","nodeName":"dpctl-node","pool":{"name":"{p}-ud","generation":1,"resourceSliceCount":1}}}"#),
    // Answers in protobuf, as client-go asks for them (decoded, then compared as the JSON ones are).
    req!("slice get (protobuf answer)", "GET", SLICE_1, ""),
    req!("slice get missing (protobuf answer)", "GET", "/apis/resource.k8s.io/v1/resourceslices/{p}-missing", ""),
    req!("slice list by label (protobuf answer)", "GET", SLICES, "labelSelector=corpus%3D{p}"),
    req!("slice create in protobuf (protobuf answer)", "POST", SLICES, "", PROTOBUF,
        r#"PROTOBUF{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-pb","labels":{"corpus":"{p}"}},
            "spec":{"driver":"pb.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}-pb","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"model":{"string":"a"},"cores":{"int":8}},"capacity":{"mem":{"value":"1Gi"}}}]}}"#),
    req!("slice create in protobuf, invalid (protobuf answer)", "POST", SLICES, "", PROTOBUF,
        r#"PROTOBUF{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-pb-bad"},
            "spec":{"driver":"Not A Driver","nodeName":"dpctl-node","pool":{"name":"{p}-pb","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice list by label", "GET", SLICES, "labelSelector=corpus%3D{p}"),
    req!("slice list by spec.nodeName", "GET", SLICES, "labelSelector=corpus%3D{p}&fieldSelector=spec.nodeName%3Ddpctl-node"),
    req!("slice list by spec.driver", "GET", SLICES, "labelSelector=corpus%3D{p}&fieldSelector=spec.driver%3Dd.corpus.example.com"),
    req!("slice list by spec.pool.name", "GET", SLICES, "labelSelector=corpus%3D{p}&fieldSelector=spec.pool.name%3D{p}-g"),
    req!("slice list with resourceVersionMatch and no resourceVersion", "GET", SLICES, "resourceVersionMatch=NotOlderThan"),
    req!("slice list with sendInitialEvents", "GET", SLICES, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"),
    req!("slice list with resourceVersionMatch Exact at 0", "GET", SLICES, "resourceVersionMatch=Exact&resourceVersion=0"),
    req!("slice list by an unsupported field", "GET", SLICES, "fieldSelector=spec.allNodes%3Dtrue"),
    req!("slice list by a bad label selector", "GET", SLICES, "labelSelector=a%3D%3D%3Db"),
    req!("slice update without resourceVersion", "PUT", SLICE_1, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-s1","labels":{"corpus":"{p}"}},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice update with a stale resourceVersion", "PUT", SLICE_1, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-s1","resourceVersion":"1","labels":{"corpus":"{p}"}},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice update of another name", "PUT", SLICE_1, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-other"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice merge patch", "PATCH", SLICE_1, "", MERGE, r#"{"metadata":{"labels":{"patched":"merge"}}}"#),
    req!("slice strategic merge patch", "PATCH", SLICE_1, "", STRATEGIC, r#"{"metadata":{"labels":{"patched":"strategic"}}}"#),
    req!("slice merge patch with an unknown field", "PATCH", SLICE_1, "", MERGE, r#"{"spec":{"bogus":1},"metadata":{"labels":{"patched":"unknown"}}}"#),
    req!("slice merge patch with an unknown field, Strict", "PATCH", SLICE_1, "fieldValidation=Strict", MERGE, r#"{"spec":{"bogus":1}}"#),
    req!("slice JSON patch", "PATCH", SLICE_1, "", JSONPATCH, r#"[{"op":"replace","path":"/metadata/labels/patched","value":"json"}]"#),
    req!("slice JSON patch of a missing path", "PATCH", SLICE_1, "", JSONPATCH, r#"[{"op":"replace","path":"/spec/nothing/here","value":1}]"#),
    req!("slice merge patch making it invalid", "PATCH", SLICE_1, "", MERGE, r#"{"spec":{"driver":"Not A Driver"}}"#),
    req!("slice patch of a missing object", "PATCH", "/apis/resource.k8s.io/v1/resourceslices/{p}-missing", "", MERGE, r#"{"metadata":{"labels":{"a":"b"}}}"#),
    req!("slice missing required fields", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-bad"},"spec":{}}"#),
    req!("slice with a bad name", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"Bad_Name"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice with two node selections", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-two"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","allNodes":true,"pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice with a duplicate device", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-dup"},
            "spec":{"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1},"devices":[{"name":"a"},{"name":"a"}]}}"#),
    req!("slice with too many devices", "POST", SLICES, "", JSON, "TOO_MANY_DEVICES"),
    req!("slice with an unknown field, Strict", "POST", SLICES, "fieldValidation=Strict", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-strict"},
            "spec":{"bogus":1,"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice with an unknown field", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-warn"},
            "spec":{"bogus":1,"driver":"d.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice with a duplicate field", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-dupwarn"},
            "spec":{"driver":"d.corpus.example.com","driver":"e.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("pod with unknown fields, Warn", "POST", PODS, "fieldValidation=Warn", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"warned","bogus":1},"spec":{"nodeName":"other-node","automountServiceAccountToken":false,
            "containers":[{"name":"c","image":"x:1","nope":true}]}}"#),
    req!("slice with a duplicate field, Strict", "POST", SLICES, "fieldValidation=Strict", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-dupfield"},
            "spec":{"driver":"d.corpus.example.com","driver":"e.corpus.example.com","nodeName":"dpctl-node","pool":{"name":"{p}","generation":1,"resourceSliceCount":1}}}"#),
    req!("slice with a wrong content type", "POST", SLICES, "", "text/plain", r#"{"metadata":{"name":"{p}-ct"}}"#),
    req!("slice body not JSON", "POST", SLICES, "", JSON, "{not json"),
    // DeviceClasses.
    req!("class create", "POST", CLASSES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"{p}-dc","labels":{"corpus":"{p}"}},
            "spec":{"selectors":[{"cel":{"expression":"device.driver == 'd.corpus.example.com'"}}]}}"#),
    req!("class get", "GET", CLASS_1, ""),
    req!("class get missing", "GET", "/apis/resource.k8s.io/v1/deviceclasses/{p}-missing", ""),
    req!("class list by label", "GET", CLASSES, "labelSelector=corpus%3D{p}"),
    req!("class with a bad CEL expression", "POST", CLASSES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"{p}-badcel"},"spec":{"selectors":[{"cel":{"expression":"device.driver =="}}]}}"#),
    req!("class with an undefined device field", "POST", CLASSES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"{p}-typo"},"spec":{"selectors":[{"cel":{"expression":"device.drvier == 'x' && device.attributes['a'].b"}}]}}"#),
    req!("class selector without cel", "POST", CLASSES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"{p}-nocel"},"spec":{"selectors":[{}]}}"#),
    req!("class merge patch", "PATCH", CLASS_1, "", MERGE, r#"{"metadata":{"annotations":{"a":"b"}}}"#),
    req!("class delete with a mismatched uid", "DELETE", CLASS_1, "", JSON,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#),
    // ResourceClaims.
    req!("claim create", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1","labels":{"corpus":"{p}"}},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc"}}]}}}"#),
    req!("claim create with empty lists", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c-empty","finalizers":[]},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc","selectors":[],"tolerations":[]}}],
            "constraints":[],"config":[]}}}"#),
    req!("claim create with generateName", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"generateName":"c-","labels":{"corpus":"{p}"}},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc","allocationMode":"All"}}]}}}"#),
    req!("claim get", "GET", CLAIM_1, ""),
    req!("claim get missing", "GET", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/missing", ""),
    req!("claim list by label", "GET", CLAIMS, "labelSelector=corpus%3D{p}"),
    req!("claim update with a stale resourceVersion", "PUT", CLAIM_1, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1","namespace":"{ns}","resourceVersion":"1"},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc"}}]}}}"#),
    req!("claim status update with a stale resourceVersion", "PUT", CLAIM_1_STATUS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c1","namespace":"{ns}","resourceVersion":"1"},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc"}}]}},"status":{}}"#),
    req!("claim status merge patch of a label", "PATCH", CLAIM_1_STATUS, "", MERGE, r#"{"metadata":{"labels":{"status":"patched"}}}"#),
    req!("claim merge patch of the spec", "PATCH", CLAIM_1, "", MERGE,
        r#"{"spec":{"devices":{"requests":[{"name":"r2","exactly":{"deviceClassName":"{p}-dc"}}]}}}"#),
    req!("claim JSON patch", "PATCH", CLAIM_1, "", JSONPATCH, r#"[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]"#),
    req!("claim status merge patch with an allocation", "PATCH", CLAIM_1_STATUS, "", MERGE,
        r#"{"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d.corpus.example.com","pool":"{p}","device":"dev-0"}]}},
            "reservedFor":[{"apiGroup":"example.com","resource":"things","name":"t","uid":"11111111-1111-1111-1111-111111111111"}]}}"#),
    req!("claim status merge patch with device status", "PATCH", CLAIM_1_STATUS, "", MERGE,
        r#"{"status":{"devices":[{"driver":"d.corpus.example.com","pool":"{p}","device":"dev-0","data":{"a":1}}]}}"#),
    req!("claim status with the status of a device not allocated", "PATCH", CLAIM_1_STATUS, "", MERGE,
        r#"{"status":{"devices":[{"driver":"d.corpus.example.com","pool":"{p}","device":"dev-9"}]}}"#),
    req!("claim status changing the allocation", "PATCH", CLAIM_1_STATUS, "", MERGE,
        r#"{"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d.corpus.example.com","pool":"{p}","device":"dev-1"}]}}}}"#),
    req!("claim status with a reservation without a uid", "PATCH", CLAIM_1_STATUS, "", MERGE,
        r#"{"status":{"reservedFor":[{"resource":"things","name":"t"}]}}"#),
    req!("claim create with a finalizer", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"fin","finalizers":["example.com/keep"]},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc"}}]}}}"#),
    req!("claim delete with a finalizer", "DELETE", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/fin", ""),
    req!("claim get while finalized", "GET", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/fin", ""),
    req!("claim finalizer removed", "PATCH", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/fin", "", MERGE,
        r#"{"metadata":{"finalizers":null}}"#),
    req!("claim get after its finalizer went", "GET", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/fin", ""),
    req!("claim request without a class", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"noclass"},"spec":{"devices":{"requests":[{"name":"r","exactly":{}}]}}}"#),
    req!("claim request with a bad name", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"badreq"},"spec":{"devices":{"requests":[{"name":"R_1","exactly":{"deviceClassName":"x"}}]}}}"#),
    req!("claim with an unknown field, Strict", "POST", CLAIMS, "fieldValidation=Strict", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"strict"},"spec":{"bogus":true,"devices":{}}}"#),
    req!("claim in another namespace than the path's", "POST", CLAIMS, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"elsewhere","namespace":"not-{ns}"},"spec":{}}"#),
    req!("claim with a wrong content type", "POST", CLAIMS, "", "application/xml", "<claim/>"),
    req!("claim delete with a mismatched uid", "DELETE", CLAIM_1, "", JSON,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#),
    // ResourceClaimTemplates.
    req!("template create", "POST", TEMPLATES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t1"},
            "spec":{"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"{p}-dc"}}]}}}}"#),
    req!("template get", "GET", TEMPLATE_1, ""),
    req!("template list", "GET", TEMPLATES, ""),
    req!("template request without a class", "POST", TEMPLATES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t2"},"spec":{"spec":{"devices":{"requests":[{"name":"r","exactly":{}}]}}}}"#),
    req!("template merge patch of the spec", "PATCH", TEMPLATE_1, "", MERGE,
        r#"{"spec":{"spec":{"devices":{"requests":[{"name":"r2","exactly":{"deviceClassName":"{p}-dc"}}]}}}}"#),
    req!("template merge patch of a label", "PATCH", TEMPLATE_1, "", MERGE, r#"{"metadata":{"labels":{"a":"b"}}}"#),
    req!("template get missing", "GET", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates/missing", ""),
    // A built-in: ConfigMaps.
    req!("configmap create", "POST", CONFIGMAPS, "", JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","labels":{"corpus":"{p}"}},"data":{"k":"v"}}"#),
    req!("configmap with a bad key", "POST", CONFIGMAPS, "", JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm2"},"data":{"bad key":"v"}}"#),
    req!("configmap strategic merge patch", "PATCH", "/api/v1/namespaces/{ns}/configmaps/cm1", "", STRATEGIC, r#"{"data":{"k3":"v3"}}"#),
    req!("configmap JSON patch", "PATCH", "/api/v1/namespaces/{ns}/configmaps/cm1", "", JSONPATCH, r#"[{"op":"add","path":"/data/k2","value":"v2"}]"#),
    req!("configmap JSON patch whose test fails", "PATCH", "/api/v1/namespaces/{ns}/configmaps/cm1", "", JSONPATCH,
        r#"[{"op":"test","path":"/data/k","value":"nope"},{"op":"remove","path":"/data/k"}]"#),
    req!("configmap with an unknown field, Strict", "POST", CONFIGMAPS, "fieldValidation=Strict", JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm3"},"bogus":1,"data":{"k":"v"}}"#),
    req!("configmap get missing", "GET", "/api/v1/namespaces/{ns}/configmaps/missing", ""),
    req!("configmap list by label", "GET", CONFIGMAPS, "labelSelector=corpus%3D{p}"),
    // Workloads in protobuf, as client-go sends them (NVIDIA's gpu-kubelet-plugin creates its MPS daemon's Deployment so).
    req!("deployment create in protobuf", "POST", "/apis/apps/v1/namespaces/{ns}/deployments", "", PROTOBUF,
        r#"PROTOBUF{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"mps","labels":{"corpus":"{p}"}},
            "spec":{"replicas":0,"selector":{"matchLabels":{"app":"mps"}},"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},
            "template":{"metadata":{"labels":{"app":"mps"}},"spec":{"hostPID":true,"containers":[{"name":"ctl","image":"nvcr.io/mps:1",
                "command":["mps-control"],"env":[{"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}],
                "volumeMounts":[{"name":"shm","mountPath":"/dev/shm"}],"securityContext":{"readOnlyRootFilesystem":true}}],
                "volumes":[{"name":"shm","hostPath":{"path":"/run/mps"}}]}}}}"#),
    req!("daemonset create in protobuf", "POST", "/apis/apps/v1/namespaces/{ns}/daemonsets", "", PROTOBUF,
        r#"PROTOBUF{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"plugin"},
            "spec":{"selector":{"matchLabels":{"app":"plugin"}},"template":{"metadata":{"labels":{"app":"plugin"}},
                "spec":{"containers":[{"name":"c","image":"plugin:1"}],"tolerations":[{"operator":"Exists"}]}}}}"#),
    req!("daemonset merge patch of its template", "PATCH", "/apis/apps/v1/namespaces/{ns}/daemonsets/plugin", "", MERGE,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"plugin:2"}]}}}}"#),
    req!("daemonset merge patch of a label", "PATCH", "/apis/apps/v1/namespaces/{ns}/daemonsets/plugin", "", MERGE,
        r#"{"metadata":{"labels":{"a":"b"}}}"#),
    req!("lease create in protobuf", "POST", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", "", PROTOBUF,
        r#"PROTOBUF{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"node-1"},
            "spec":{"holderIdentity":"node-1","leaseDurationSeconds":40,"renewTime":"2025-01-02T03:04:05.123456Z"}}"#),
    // Pods (storage: bound by spec.nodeName to a node no kubelet runs on either side: the mock
    // kubelet serving the API runs the pods bound to its own node, dpctl-node).
    req!("pod create", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"corpus":"{p}"}},"spec":{"nodeName":"corpus-node","automountServiceAccountToken":false,
            "containers":[{"name":"c","image":"registry.k8s.io/pause:3.10","resources":{"limits":{"example.com/gpu":"1"},"claims":[{"name":"gpu"}]}}],
            "resourceClaims":[{"name":"gpu","resourceClaimName":"c1"}]}}"#),
    req!("pod create with generateName", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-","labels":{"corpus":"{p}"}},"spec":{"nodeName":"corpus-node",
            "containers":[{"name":"c","image":"pause","resources":{"requests":{"cpu":"100m"}}}],"resourceClaims":[{"name":"t","resourceClaimTemplateName":"t1"}]}}"#),
    req!("pod create on another node", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p2","labels":{"corpus":"{p}"}},"spec":{"nodeName":"other-node","automountServiceAccountToken":false,
            "restartPolicy":"Never","containers":[{"name":"c","image":"pause","imagePullPolicy":"Always"}]}}"#),
    req!("pod create that exists", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[{"name":"c","image":"pause"}]}}"#),
    req!("pod get", "GET", POD_1, ""),
    req!("pod list by spec.nodeName", "GET", PODS, "fieldSelector=spec.nodeName%3Dcorpus-node"),
    req!("pod list by status.phase", "GET", PODS, "labelSelector=corpus%3D{p}&fieldSelector=status.phase%3DPending"),
    req!("pod list by an unsupported field", "GET", PODS, "fieldSelector=spec.bogus%3Dx"),
    req!("pod without containers", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad1"},"spec":{"containers":[]}}"#),
    req!("pod container without an image", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad2"},"spec":{"containers":[{"name":"c"},{"name":"c","image":"x"}]}}"#),
    req!("pod extended resource request over its limit", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad3"},"spec":{"containers":[{"name":"c","image":"x",
            "resources":{"requests":{"example.com/gpu":"2"},"limits":{"example.com/gpu":"1"}}}]}}"#),
    req!("pod extended resource request without a limit", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad4"},"spec":{"containers":[{"name":"c","image":"x","resources":{"requests":{"example.com/gpu":"1"}}}]}}"#),
    req!("pod fractional extended resource", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad5"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"example.com/gpu":"500m"}}}]}}"#),
    req!("pod container claim not in resourceClaims", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad6"},"spec":{"containers":[{"name":"c","image":"x","resources":{"claims":[{"name":"nope"}]}}]}}"#),
    req!("pod resourceClaim without a source", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad7"},"spec":{"containers":[{"name":"c","image":"x"}],"resourceClaims":[{"name":"gpu"}]}}"#),
    // The Priority admission plugin: the class's priority (the system classes exist
    // everywhere), a class that does not exist, a priority or policy of one's own.
    req!("pod with a system priority class", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"crit","labels":{"corpus":"{p}"}},"spec":{"nodeName":"other-node","automountServiceAccountToken":false,
            "priorityClassName":"system-node-critical","containers":[{"name":"c","image":"pause"}]}}"#),
    req!("pod with an unknown priority class", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"prio1"},"spec":{"priorityClassName":"no-such-class","containers":[{"name":"c","image":"x"}]}}"#),
    req!("pod with a priority of its own", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"prio2"},"spec":{"priority":5,"containers":[{"name":"c","image":"x"}]}}"#),
    req!("pod with a preemption policy of its own", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"prio3-"},"spec":{"preemptionPolicy":"Never","containers":[{"name":"c","image":"x"}]}}"#),
    req!("pod with the computed priority", "POST", PODS, "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"prio4","labels":{"corpus":"{p}"}},"spec":{"nodeName":"other-node","automountServiceAccountToken":false,
            "priority":0,"preemptionPolicy":"PreemptLowerPriority","containers":[{"name":"c","image":"x"}]}}"#),
    req!("pod status merge patch", "PATCH", "/api/v1/namespaces/{ns}/pods/p1/status", "", MERGE,
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#),
    req!("pod merge patch of a label", "PATCH", POD_1, "", MERGE, r#"{"metadata":{"labels":{"patched":"yes"}}}"#),
    req!("pod with an unknown field, Strict", "POST", PODS, "fieldValidation=Strict", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"strict"},"spec":{"bogus":1,"containers":[{"name":"c","image":"x"}]}}"#),
    // A Node registered as a kubelet registers it (one POST, with its status), and deleted.
    req!("node create with its status", "POST", "/api/v1/nodes", "", JSON,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"{p}-n1","labels":{"corpus":"{p}","kubernetes.io/hostname":"{p}-n1"}},
            "status":{"capacity":{"cpu":"2","pods":"110","example.com/gpu":"2"},"allocatable":{"cpu":"2","pods":"110","example.com/gpu":"2"},
                "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}"#),
    req!("node create that exists", "POST", "/api/v1/nodes", "", JSON,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"{p}-n1"}}"#),
    req!("node get", "GET", "/api/v1/nodes/{p}-n1", ""),
    req!("node list by label", "GET", "/api/v1/nodes", "labelSelector=corpus%3D{p}"),
    req!("node delete", "DELETE", "/api/v1/nodes/{p}-n1", ""),
    req!("node get deleted", "GET", "/api/v1/nodes/{p}-n1", ""),
    // The kubelet's slice wipe: a delete of the collection by node and driver.
    req!("slice create on another node", "POST", SLICES, "", JSON,
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"{p}-wiped","labels":{"corpus":"{p}"}},
            "spec":{"driver":"w.corpus.example.com","nodeName":"{p}-n1","pool":{"name":"{p}-w","generation":1,"resourceSliceCount":1},"devices":[{"name":"d0"}]}}"#),
    req!("slice delete collection by node and driver", "DELETE", SLICES, "fieldSelector=spec.nodeName%3D{p}-n1%2Cspec.driver%3Dw.corpus.example.com"),
    req!("slice get wiped", "GET", "/apis/resource.k8s.io/v1/resourceslices/{p}-wiped", ""),
    // Watches (answers compared on their first events; each ends by timeoutSeconds).
    req!("slice watch from 0", "GET", SLICES, "watch=true&resourceVersion=0&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("slice watch with initial events and bookmarks", "GET", SLICES,
        "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("slice watch with initial events, no resourceVersionMatch", "GET", SLICES,
        "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("claim watch from 0", "GET", CLAIMS, "watch=true&resourceVersion=0&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("claim watch with initial events and bookmarks", "GET", CLAIMS,
        "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("pod watch by spec.nodeName with initial events and bookmarks", "GET", PODS,
        "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&fieldSelector=spec.nodeName%3Dcorpus-node&timeoutSeconds=1"),
    req!("pod watch by spec.nodeName from 0", "GET", PODS, "watch=true&resourceVersion=0&fieldSelector=spec.nodeName%3Dcorpus-node&timeoutSeconds=1"),
    // From a version an earlier answer gave ({rv:NAME}: each server's own), and from one long gone.
    req!("slice watch from the first create's resourceVersion", "GET", SLICES,
        "watch=true&resourceVersion={rv:slice create}&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("slice watch from the first create's resourceVersion with bookmarks", "GET", SLICES,
        "watch=true&resourceVersion={rv:slice create}&allowWatchBookmarks=true&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("claim watch from the first create's resourceVersion", "GET", CLAIMS,
        "watch=true&resourceVersion={rv:claim create}&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    req!("slice list at the first create's resourceVersion, Exact", "GET", SLICES,
        "resourceVersion={rv:slice create}&resourceVersionMatch=Exact&labelSelector=corpus%3D{p}"),
    req!("slice list at a future resourceVersion, NotOlderThan", "GET", SLICES,
        "resourceVersion=999999999&resourceVersionMatch=NotOlderThan&labelSelector=corpus%3D{p}&timeoutSeconds=1"),
    // Deletes last.
    req!("pod delete with a mismatched uid", "DELETE", POD_1, "", JSON,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#),
    req!("pod status update with a stale resourceVersion", "PUT", "/api/v1/namespaces/{ns}/pods/p1/status", "", JSON,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","resourceVersion":"1"},"spec":{"containers":[{"name":"c","image":"x"}]},"status":{"phase":"Failed"}}"#),
    req!("pod delete, graceful", "DELETE", POD_1, ""),
    req!("pod get while terminating", "GET", POD_1, ""),
    req!("pod delete with gracePeriodSeconds=0", "DELETE", POD_1, "gracePeriodSeconds=0"),
    req!("pod get deleted", "GET", POD_1, ""),
    req!("pod delete missing", "DELETE", POD_1, ""),
    req!("template delete", "DELETE", TEMPLATE_1, ""),
    req!("slice delete with a mismatched uid", "DELETE", SLICE_1, "", JSON,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#),
    req!("slice delete", "DELETE", SLICE_1, ""),
    req!("slice delete again", "DELETE", SLICE_1, ""),
    req!("claim delete", "DELETE", CLAIM_1, ""),
    req!("class delete", "DELETE", CLASS_1, ""),
];

/// Deliberate differences: (request, reason, upstream's source). Each is in
/// docs/fidelity.md too.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "claim watch from the first create's resourceVersion",
        "both controllers reserve the allocated claim c1 for pod p1, bound by spec.nodeName (one more MODIFIED); \
         dpctl's within the pod's create, kube-controller-manager's in its own time, which may be after this 1 s \
         watch ended on a loaded machine",
        "pkg/controller/resourceclaim/controller.go syncPod (pod.Spec.NodeName != \"\": reserve allocated claims)",
    ),
    (
        "slice list at the first create's resourceVersion, Exact",
        "dpctl's store keeps a change history for watches, not snapshots: an Exact list at an older version is \
         410 Expired (a client lists again, as after a compaction); kube-apiserver reads etcd at that revision",
        "staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go GetList (Exact: WithRev)",
    ),
];

/// Allow-listed requests whose difference comes from kube-controller-manager
/// acting in its own time (it may not have acted when the request is sent,
/// on a loaded machine): alike is no failure for them.
const MAY_BE_ALIKE: &[&str] = &["claim watch from the first create's resourceVersion"];

/// A server the corpus is sent to.
struct Server {
    kubeconfig: PathBuf,
    authority: String,
    token: String,
}

impl Server {
    fn of(kubeconfig: &Path) -> Server {
        let api = dpctl::client::kube::load_kubeconfig(kubeconfig).unwrap();
        Server { kubeconfig: kubeconfig.to_path_buf(), authority: api.authority, token: kubeconfig_token(kubeconfig) }
    }

    /// One request: status code and body (dechunked). A watch's body is what
    /// came until the server ended it (timeoutSeconds), within 20 s.
    async fn send(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let (code, _, body) = self.send_full(method, path, content_type, body, JSON).await;
        (code, body)
    }

    /// [`Server::send`], with the answer's `Warning` header values too.
    async fn send_full(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
        accept: &str,
    ) -> (u16, Vec<String>, Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = api_connect(&self.kubeconfig).await;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: {accept}\r\nContent-Length: {}\r\n",
            self.authority,
            body.len()
        );
        if !self.token.is_empty() {
            req.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        if !content_type.is_empty() {
            req.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let _ = s.write_all(body).await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "{method} {path}: no end of the answer within 20 s: {}", String::from_utf8_lossy(&buf));
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let head = String::from_utf8_lossy(&buf[..split]).to_ascii_lowercase();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let raw = &buf[split + 4..];
        let mut warnings: Vec<String> = String::from_utf8_lossy(&buf[..split])
            .lines()
            .filter_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("warning")).map(|(_, v)| v.trim().to_string())
            })
            .collect();
        warnings.sort();
        (code, warnings, if head.contains("transfer-encoding: chunked") { dechunk(raw) } else { raw.to_vec() })
    }
}

/// HTTP/1.1 chunked transfer coding, undone.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return out };
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).split(';').next().unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
}

/// The run's body of a corpus template: its text, or (a template starting
/// `PROTOBUF`) the JSON object after it encoded as client-go sends it.
fn fill_body(t: &str, ns: &str, p: &str) -> Vec<u8> {
    match t.strip_prefix("PROTOBUF") {
        Some(json) => {
            let obj: Value = serde_json::from_str(&fill(json, ns, p)).expect("a JSON object after PROTOBUF");
            dpctl::controlplane::protobuf::encode_object(&obj).expect("a kind with a protobuf form")
        }
        None => fill(t, ns, p).into_bytes(),
    }
}

/// The run's text of a corpus template.
fn fill(t: &str, ns: &str, p: &str) -> String {
    if t == "TOO_MANY_DEVICES" {
        let d: Vec<Value> = (0..129).map(|i| json!({"name": format!("d{i}")})).collect();
        return json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{p}-big")},
            "spec": {"driver": "d.corpus.example.com", "nodeName": "dpctl-node",
                "pool": {"name": p, "generation": 1, "resourceSliceCount": 1}, "devices": d}})
        .to_string();
    }
    t.replace("{ns}", ns).replace("{p}", p)
}

/// What is compared of an answer. `ns`/`p` are replaced by placeholders, so
/// both servers' answers read alike.
fn shape(watch: bool, code: u16, body: &[u8], ns: &str, p: &str) -> Value {
    let text = masked_volume_names(&String::from_utf8_lossy(body).replace(ns, "{ns}").replace(p, "{p}"));
    if watch && code == 200 {
        let events: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .map(|e| {
                let o = &e["object"];
                let mut ev = json!({"type": e["type"], "kind": o["kind"], "name": generated(&o["metadata"]["name"]),
                    "annotations": if e["type"] == "BOOKMARK" { o["metadata"]["annotations"].clone() } else { Value::Null }});
                if e["type"] == "ERROR" {
                    ev["code"] = o["code"].clone();
                    ev["reason"] = o["reason"].clone();
                }
                ev
            })
            .collect();
        return json!({"code": code, "events": events});
    }
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return json!({"code": code, "body": "not JSON"});
    };
    if v["kind"] == "Status" {
        let mut causes: Vec<Value> = v["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|c| json!({"field": c["field"], "reason": c["reason"], "message": embedded_object_masked(&c["message"])}))
            .collect();
        causes.sort_by_key(|c| c.to_string());
        // The message is not compared: the causes carry the field errors it joins.
        return json!({"code": code, "kind": "Status", "status": v["status"], "reason": v["reason"], "causes": causes});
    }
    if let Some(items) = v["items"].as_array() {
        // Each item's name, and its apiVersion and kind when it carries them (a typed list's
        // items do not: kube-apiserver writes them without TypeMeta).
        let mut names: Vec<Value> = items
            .iter()
            .map(|i| match (i.get("apiVersion"), i.get("kind")) {
                (None, None) => generated(&i["metadata"]["name"]),
                (a, k) => json!({"name": generated(&i["metadata"]["name"]), "apiVersion": a, "kind": k}),
            })
            .collect();
        names.sort_by_key(|n| n.to_string());
        return json!({"code": code, "kind": v["kind"], "apiVersion": v["apiVersion"], "items": names});
    }
    let mut o = v;
    if let Some(m) = o["metadata"].as_object_mut() {
        for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "deletionTimestamp"] {
            m.remove(k);
        }
        if m.contains_key("generateName") {
            let n = generated(&m["name"]);
            m.insert("name".into(), n);
        }
    }
    json!({"code": code, "object": o})
}

/// A cause whose value is a whole object (a strict patch's `patch: Invalid
/// value: "{…}": strict decoding error: …`) with the object as `"{…}"`: it
/// carries the run's uid, resourceVersion, timestamps and managedFields.
fn embedded_object_masked(m: &Value) -> Value {
    let Some(s) = m.as_str() else { return m.clone() };
    match (s.strip_prefix("Invalid value: \"{"), s.rfind("}\": ")) {
        (Some(_), Some(end)) => json!(format!("Invalid value: \"{{…}}\": {}", &s[end + 4..])),
        _ => m.clone(),
    }
}

/// The ServiceAccount admission plugin's projected volume, `kube-api-access-`
/// and 5 random characters, with the suffix as `*****`.
fn masked_volume_names(text: &str) -> String {
    const VOLUME: &str = "kube-api-access-";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(VOLUME) {
        let after = i + VOLUME.len();
        out.push_str(&rest[..after]);
        let tail = &rest[after..];
        let n = tail.char_indices().take_while(|(_, c)| c.is_ascii_alphanumeric()).count();
        if n == 5 {
            out.push_str("*****");
            rest = &tail[5..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// A generated name with its random suffix (5 characters) as `*****`.
fn generated(n: &Value) -> Value {
    match n.as_str() {
        Some(s) if s.len() > 5 && (s.starts_with("{p}-g-") || s.starts_with("c-") || s.starts_with("p-")) => {
            json!(format!("{}*****", &s[..s.len() - 5]))
        }
        _ => n.clone(),
    }
}

/// The fields of two JSON values that differ, one line each (`path: a | b`).
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff(&format!("{path}.{k}"), x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("  {path}:\n      dpctl:          {a}\n      kube-apiserver: {b}")),
        _ => {}
    }
}

/// The mock kubelet with its API server on a temp root; its kubeconfig.
async fn mock_kubelet(root: &Path) -> (tokio::process::Child, Tail, PathBuf) {
    let mut c = mock_kubelet_on(root, &["--api-server", "127.0.0.1:0"]);
    c.stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    let ev = api_server_event(&mut log).await;
    let kc = PathBuf::from(ev["kubeconfig"].as_str().unwrap());
    (child, log, kc)
}

/// Every request of the corpus to both servers: (request, dpctl's shape, kube-apiserver's shape).
async fn run_corpus(dpctl: &Server, kube: &Server, ns: &str, p: &str) -> Vec<(&'static Req, Value, Value)> {
    let mut out = Vec::new();
    // Per request name, the resourceVersion of each server's answer (dpctl's, kube-apiserver's).
    let mut rvs: std::collections::BTreeMap<&str, (String, String)> = Default::default();
    for r in CORPUS {
        let path = fill(r.path, ns, p);
        let query = fill(r.query, ns, p);
        let (qa, qb) = with_versions(&query, &rvs);
        let at = |q: &str| if q.is_empty() { path.clone() } else { format!("{path}?{q}") };
        let body = fill_body(r.body, ns, p);
        let watch = r.query.contains("watch=true");
        let (path_a, path_b) = (at(&qa), at(&qb));
        let accept = if r.name.ends_with("(protobuf answer)") { PROTOBUF_ACCEPT } else { JSON };
        let (mut a, mut b) = tokio::join!(
            dpctl.send_full(r.method, &path_a, r.content_type, &body, accept),
            kube.send_full(r.method, &path_b, r.content_type, &body, accept)
        );
        if accept == PROTOBUF_ACCEPT {
            for (who, answer) in [("dpctl", &mut a), ("kube-apiserver", &mut b)] {
                assert!(
                    answer.2.starts_with(b"k8s\0"),
                    "{}: {who} did not answer in protobuf: {:?}",
                    r.name,
                    String::from_utf8_lossy(&answer.2)
                );
                let v = dpctl::controlplane::protobuf::decode_object(&answer.2)
                    .unwrap_or_else(|e| panic!("{}: {who}'s protobuf answer: {e}", r.name));
                answer.2 = v.to_string().into_bytes();
            }
        }
        let version = |b: &[u8]| {
            serde_json::from_slice::<Value>(b)
                .ok()
                .and_then(|v| v["metadata"]["resourceVersion"].as_str().map(str::to_string))
        };
        if let (Some(x), Some(y)) = (version(&a.2), version(&b.2)) {
            rvs.insert(r.name, (x, y));
        }
        let (mut x, mut y) = (shape(watch, a.0, &a.2, ns, p), shape(watch, b.0, &b.2, ns, p));
        // The Warning headers (unknown and duplicate fields under fieldValidation=Warn) are compared too.
        for (s, w) in [(&mut x, &a.1), (&mut y, &b.1)] {
            if !w.is_empty() {
                s["warnings"] = json!(w);
            }
        }
        out.push((r, x, y));
    }
    out
}

/// `query` with each `{rv:NAME}` replaced by the resourceVersion of the
/// answer to request NAME: for dpctl, for kube-apiserver.
fn with_versions(query: &str, rvs: &std::collections::BTreeMap<&str, (String, String)>) -> (String, String) {
    let (mut a, mut b) = (query.to_string(), query.to_string());
    while let Some(start) = a.find("{rv:") {
        let end = start + a[start..].find('}').expect("{rv:NAME} closed");
        let name = a[start + 4..end].to_string();
        let (x, y) =
            rvs.get(name.as_str()).unwrap_or_else(|| panic!("{{rv:{name}}}: no earlier answer with a resourceVersion"));
        let key = format!("{{rv:{name}}}");
        a = a.replacen(&key, x, 1);
        b = b.replacen(&key, y, 1);
    }
    (a, b)
}

#[test]
fn corpus_names_are_unique_and_the_allow_list_names_corpus_requests() {
    let mut names: Vec<&str> = CORPUS.iter().map(|r| r.name).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "two corpus requests share a name");
    for name in MAY_BE_ALIKE {
        assert!(ALLOWED.iter().any(|(n, ..)| n == name), "{name:?} may be alike but is not allow-listed");
    }
    for (name, why, source) in ALLOWED {
        assert!(CORPUS.iter().any(|r| r.name == *name), "allow-listed {name:?} is no corpus request");
        assert!(!why.is_empty() && source.contains(".go"), "{name:?}: a reason and upstream's source line");
    }
}

#[test]
fn corpus_shapes_normalise_what_differs_by_run() {
    let a = br#"{"kind":"ResourceSlice","metadata":{"name":"pp-g-abcde","generateName":"pp-g-","uid":"u","resourceVersion":"7","creationTimestamp":"t","managedFields":[]},"spec":{"driver":"d"}}"#;
    assert_eq!(
        shape(false, 201, a, "ns1", "pp"),
        json!({"code": 201, "object": {"kind": "ResourceSlice", "metadata": {"name": "{p}-g-*****", "generateName": "{p}-g-"}, "spec": {"driver": "d"}}})
    );
    let st = br#"{"kind":"Status","status":"Failure","reason":"Invalid","message":"m ns1","details":{"causes":[{"field":"b","reason":"FieldValueRequired","message":"x"},{"field":"a","reason":"FieldValueInvalid","message":"y"}]}}"#;
    let s = shape(false, 422, st, "ns1", "pp");
    assert_eq!(s["message"], Value::Null, "not compared");
    assert_eq!(shape(false, 404, br#"{"kind":"Status","reason":"NotFound"}"#, "ns1", "pp")["causes"], json!([]));
    assert_eq!(s["causes"][0]["field"], "a", "causes sorted");
    let w = br#"{"type":"ADDED","object":{"kind":"ResourceSlice","metadata":{"name":"pp-s1"}}}
{"type":"BOOKMARK","object":{"kind":"ResourceSlice","metadata":{"annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
    let s = shape(true, 200, w, "ns1", "pp");
    assert_eq!(s["events"][0]["name"], "{p}-s1");
    assert_eq!(s["events"][1]["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(masked_volume_names(r#"{"name":"kube-api-access-x7k2q"}"#), r#"{"name":"kube-api-access-*****"}"#);
    let rvs = [("slice create", ("7".to_string(), "4211".to_string()))].into_iter().collect();
    assert_eq!(
        with_versions("watch=true&resourceVersion={rv:slice create}", &rvs),
        ("watch=true&resourceVersion=7".to_string(), "watch=true&resourceVersion=4211".to_string())
    );
    assert_eq!(
        embedded_object_masked(&json!(
            r#"Invalid value: "{\"a\":{\"uid\":\"u\"}}": strict decoding error: unknown field "spec.bogus""#
        )),
        json!(r#"Invalid value: "{…}": strict decoding error: unknown field "spec.bogus""#)
    );
    let mut d = Vec::new();
    diff("", &json!({"a": [1, 2]}), &json!({"a": [1, 3]}), &mut d);
    assert_eq!(d.len(), 1);
    assert!(d[0].contains(".a[1]"), "{d:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_local_api_server_answers_as_kube_apiserver_does() {
    let Some(cp) = control_plane() else {
        eprintln!("note: corpus: the control plane is not built (tests/upstream/build.sh); not compared");
        return;
    };
    let d = tmp();
    let (child, log, kc) = mock_kubelet(d.path()).await;
    let dpctl = Server::of(&kc);
    let kube = Server::of(&cp.kubeconfig);
    let p = format!("corpus{}", std::process::id());
    let ns = format!("{p}-ns");
    let (code, body) = kube
        .send(
            "POST",
            "/api/v1/namespaces",
            JSON,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).to_string().as_bytes(),
        )
        .await;
    assert_eq!(code, 201, "namespace: {}", String::from_utf8_lossy(&body));
    let results = run_corpus(&dpctl, &kube, &ns, &p).await;
    stop_tailed(child, log).await.expect_code(0);
    // The Warning headers are compared (kube-apiserver sends them for unknown and duplicate fields).
    for name in [
        "slice with an unknown field",
        "slice with a duplicate field",
        "pod with unknown fields, Warn",
        "slice merge patch with an unknown field",
    ] {
        let warned = results.iter().find(|(r, ..)| r.name == name).map(|(_, _, b)| b["warnings"].clone());
        assert!(
            warned.as_ref().and_then(Value::as_array).is_some_and(|w| !w.is_empty()),
            "{name}: no Warning from kube-apiserver: {warned:?}"
        );
    }
    let mut failures = Vec::new();
    let mut same = 0;
    for (r, a, b) in &results {
        let allowed = ALLOWED.iter().find(|(n, ..)| *n == r.name);
        let mut lines = Vec::new();
        diff("", a, b, &mut lines);
        match (lines.is_empty(), allowed) {
            (true, None) => same += 1,
            // A difference an asynchronous controller makes may not have happened yet.
            (true, Some(_)) if MAY_BE_ALIKE.contains(&r.name) => same += 1,
            (true, Some(_)) => failures.push(format!("{:?}: allow-listed but answered alike now: drop it", r.name)),
            (false, Some((_, why, _))) => {
                eprintln!("allowed: {} {} {:?} ({why}):\n{}", r.method, r.path, r.name, lines.join("\n"))
            }
            (false, None) => failures.push(format!("{} {} {:?}:\n{}", r.method, r.path, r.name, lines.join("\n"))),
        }
    }
    eprintln!(
        "corpus: {} requests, {same} answered alike, {} allowed, {} differ",
        results.len(),
        ALLOWED.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} of {} requests differ:\n{}", failures.len(), results.len(), failures.join("\n\n"));
}
