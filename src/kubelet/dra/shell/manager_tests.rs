//! Ports of upstream's manager-level DRA tests (pkg/kubelet/cm/dra/manager_test.go
//! TestPrepareResources, TestUnprepareResources,
//! TestPrepareResourcesWithPreparedAndNewClaim; plugin/dra_plugin_manager_test.go
//! TestDelete) against the whole [`DraManager`]: a real tonic DRAPlugin server
//! on a Unix socket in a tempdir, registered as the plugin watcher does.
//!
//! The driver answers what each case gives it (upstream's
//! fakeDRADriverGRPCServer does the same): `dpctl dra serve` cannot answer an
//! entry without devices or an empty map on purpose, and those shapes are
//! what the cases are about. Upstream's metrics expectations are not ported
//! (dpctl reports events, not those histograms).

use super::*;
use crate::api::dra_v1::dra_plugin_server::{DraPlugin, DraPluginServer};
use crate::api::dra_v1::{
    Claim, Device, NodePrepareResourceResponse, NodePrepareResourcesRequest, NodePrepareResourcesResponse,
    NodeUnprepareResourceResponse, NodeUnprepareResourcesRequest, NodeUnprepareResourcesResponse,
};
use crate::controlplane::allocator;
use crate::core::log::{LogFormat, Logger};
use crate::core::task::Tasks;
use crate::kubelet::event::Stamped;
use allocator::Allocated;
use claiminfo::DriverPrep;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use tokio::sync::mpsc::UnboundedReceiver;

const NS: &str = "test-namespace";
const DRIVER: &str = "test-driver";
const DEVICE: &str = "test-device";
const POOL: &str = "test-pool";
const REQUEST: &str = "test-request";
const CDI_ID: &str = "test-driver/test=cdi-test-device";
const CLAIM: &str = "test-claim";
const CLAIM_UID: &str = "test-claim-uid";
const POD: &str = "test-pod";
const POD_UID: &str = "test-pod-uid";
/// manager_test.go's shareID.
const SHARE_ID: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";

/// The driver's side: canned answers (or one device per claim asked), an
/// optional delay before answering, and how often it was called.
#[derive(Default)]
struct Fake {
    prepare: Option<NodePrepareResourcesResponse>,
    unprepare: Option<NodeUnprepareResourcesResponse>,
    delay: Option<Duration>,
    prepares: AtomicU32,
    unprepares: AtomicU32,
}

struct Served(Arc<Fake>);

fn device() -> Device {
    Device {
        pool_name: POOL.into(),
        device_name: DEVICE.into(),
        request_names: vec![REQUEST.into()],
        cdi_device_ids: vec![CDI_ID.into()],
        share_id: None,
    }
}

/// genPrepareResourcesResponse, for every claim asked.
fn prepared_answer(claims: &[Claim]) -> NodePrepareResourcesResponse {
    let one = NodePrepareResourceResponse { devices: vec![device()], error: String::new() };
    NodePrepareResourcesResponse { claims: claims.iter().map(|c| (c.uid.clone(), one.clone())).collect() }
}

#[tonic::async_trait]
impl DraPlugin for Served {
    async fn node_prepare_resources(
        &self,
        r: tonic::Request<NodePrepareResourcesRequest>,
    ) -> Result<tonic::Response<NodePrepareResourcesResponse>, tonic::Status> {
        self.0.prepares.fetch_add(1, SeqCst);
        if let Some(d) = self.0.delay {
            tokio::time::sleep(d).await;
        }
        Ok(tonic::Response::new(self.0.prepare.clone().unwrap_or_else(|| prepared_answer(&r.get_ref().claims))))
    }

    async fn node_unprepare_resources(
        &self,
        r: tonic::Request<NodeUnprepareResourcesRequest>,
    ) -> Result<tonic::Response<NodeUnprepareResourcesResponse>, tonic::Status> {
        self.0.unprepares.fetch_add(1, SeqCst);
        if let Some(d) = self.0.delay {
            tokio::time::sleep(d).await;
        }
        let all = || NodeUnprepareResourcesResponse {
            claims: r
                .get_ref()
                .claims
                .iter()
                .map(|c| (c.uid.clone(), NodeUnprepareResourceResponse::default()))
                .collect(),
        };
        Ok(tonic::Response::new(self.0.unprepare.clone().unwrap_or_else(all)))
    }
}

/// A DRA manager under a tempdir with `fake` served and registered as
/// test-driver (calls time out after `call_timeout`).
struct Node {
    _dir: tempfile::TempDir,
    root: PathBuf,
    dra: Arc<DraManager>,
    fake: Arc<Fake>,
    rx: UnboundedReceiver<Arc<Stamped>>,
    gen: Generation,
    server: Tasks,
    socket: PathBuf,
}

impl Node {
    async fn new(fake: Fake, call_timeout: Duration) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let endpoint = root.join(format!("plugins/{DRIVER}/dra.sock"));
        std::fs::create_dir_all(endpoint.parent().unwrap()).unwrap();
        let fake = Arc::new(fake);
        let server = Tasks::new();
        let l = tokio::net::UnixListener::bind(&endpoint).unwrap();
        let svc = DraPluginServer::new(Served(fake.clone()));
        server.spawn(async move {
            let _ = crate::core::transport::serve(l, svc, std::future::pending()).await;
        });
        let mut spec = DraSpec::new(&root, vec![]);
        spec.call_timeout = call_timeout;
        let bus = EventBus::new(Logger::to_file(LogFormat::Json, &root.join("k.log")).unwrap());
        let rx = bus.subscribe();
        let gen = Generation::new(0);
        let dra = DraManager::new(spec, bus, gen.clone());
        let info = PluginInfo {
            r#type: rules::PLUGIN_TYPE.into(),
            name: DRIVER.into(),
            endpoint: endpoint.display().to_string(),
            supported_versions: vec![rules::DRA_V1.into()],
        };
        let socket = root.join(format!("plugins_registry/{DRIVER}-reg.sock"));
        dra.register(&socket, &info, &endpoint).await.unwrap();
        Node { _dir: dir, root, dra, fake, rx, gen, server, socket }
    }

    fn put(&self, claim: serde_json::Value) {
        self.dra.put_object(objects::parse(&claim).unwrap(), &self.root.join("claim.yaml"));
    }

    fn cache(&self, c: ClaimInfo) {
        self.dra.lock().claims.cache.insert_for_test(c);
    }

    fn cached(&self, name: &str) -> Option<ClaimInfo> {
        self.dra.lock().claims.cache.get(&format!("{NS}/{name}")).cloned()
    }

    fn calls(&self) -> (u32, u32) {
        (self.fake.prepares.load(SeqCst), self.fake.unprepares.load(SeqCst))
    }

    async fn end(self) {
        self.gen.tasks.cancel();
        self.server.stop().await;
    }
}

/// genTestClaim: allocated to `driver`'s `device`, reserved for `reserved` (a UID only).
fn claim(name: &str, driver: &str, reserved: &[&str]) -> serde_json::Value {
    serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": name, "namespace": NS, "uid": format!("{name}-uid")},
    "spec": {"devices": {"requests": [{"name": REQUEST, "exactly": {"deviceClassName": "test-class"}}]}},
    "status": {
        "allocation": {"devices": {"results": [{"request": REQUEST, "pool": POOL, "device": DEVICE, "driver": driver}]}},
        "reservedFor": reserved.iter().map(|u| serde_json::json!({"uid": u})).collect::<Vec<_>>(),
    }})
}

/// A pod using `claims`: (its name for the claim, `resourceClaimName` or
/// `resourceClaimTemplateName`, the name). `used`: its container names them
/// (upstream's "no container uses the claim" has one that does not).
fn pod_with(name: &str, uid: &str, claims: &[(&str, &str, &str)], used: bool) -> Pod {
    let rc: Vec<serde_json::Value> = claims
        .iter()
        .map(|(n, field, v)| {
            let mut e = serde_json::json!({ "name": n });
            e[*field] = serde_json::json!(v);
            e
        })
        .collect();
    let uses: Vec<serde_json::Value> = claims.iter().map(|(n, _, _)| serde_json::json!({ "name": n })).collect();
    let mut container = serde_json::json!({"name": "test-container", "image": "x"});
    if used {
        container["resources"] = serde_json::json!({ "claims": uses });
    }
    let v = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"resourceClaims": rc, "containers": [container]}});
    crate::kubelet::manifest::parse(&v.to_string(), Path::new("pod.json")).unwrap()
}

/// genTestPod: one claim, by name.
fn test_pod() -> Pod {
    pod_with(POD, POD_UID, &[(CLAIM, "resourceClaimName", CLAIM)], true)
}

/// genTestClaimInfo: claim `uid` of `driver` with one device, used by `pods`.
fn claim_info(uid: &str, driver: &str, pods: &[&str], prepared: bool) -> ClaimInfo {
    let a = Allocated {
        request: REQUEST.into(),
        driver: driver.into(),
        pool: POOL.into(),
        device: DEVICE.into(),
        ..Allocated::default()
    };
    let mut c = ClaimInfo::allocated(NS, CLAIM, uid, vec![a]);
    c.pods = pods.iter().map(|p| p.to_string()).collect();
    c.drivers.insert(driver.into(), DriverPrep::Prepared(vec![state_device()]));
    c.done = prepared;
    c
}

/// The device genClaimInfoState(cdiID) records.
fn state_device() -> checkpoint::Device {
    checkpoint::Device {
        pool_name: POOL.into(),
        device_name: DEVICE.into(),
        request_names: Some(vec![REQUEST.into()]),
        cdi_device_ids: Some(vec![CDI_ID.into()]),
        ..Default::default()
    }
}

const TIMEOUT: Duration = Duration::from_secs(1);

struct PrepareCase {
    what: &'static str,
    pod: Pod,
    claim: Option<serde_json::Value>,
    cached: Option<ClaimInfo>,
    resp: Option<NodePrepareResourcesResponse>,
    slow: bool,
    /// The error's text contains this; None: it succeeds.
    err: Option<String>,
    calls: u32,
    /// What the cache then holds for the driver (when it succeeds).
    devices: Vec<checkpoint::Device>,
}

fn prepare_case(what: &'static str) -> PrepareCase {
    PrepareCase {
        what,
        pod: test_pod(),
        claim: Some(claim(CLAIM, DRIVER, &[POD_UID])),
        cached: None,
        resp: None,
        slow: false,
        err: None,
        calls: 1,
        devices: vec![state_device()],
    }
}

/// Port of upstream TestPrepareResources. Not ported: "pod is not allowed to
/// use resource claim from podgroup", "should prepare resource for podgroup,
/// claim not in cache", "should fail to prepare resource for podgroup when
/// the feature is disabled" (dpctl has no pod groups); "should
/// prepare extended resource claim backed by DRA" (dpctl makes and allocates
/// the special claim itself, no API object: extended_tests.rs and the e2e
/// tests cover it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_prepare_resources() {
    let nil_entry = NodePrepareResourcesResponse {
        claims: [(CLAIM_UID.to_string(), NodePrepareResourceResponse::default())].into(),
    };
    let cases = vec![
        PrepareCase {
            claim: None,
            err: Some("fetch ResourceClaim ".into()),
            calls: 0,
            ..prepare_case("claim doesn't exist")
        },
        PrepareCase {
            claim: Some(claim(CLAIM, "unknown driver", &[POD_UID])),
            err: Some("prepare dynamic resources: DRA driver unknown driver is not registered".into()),
            calls: 0,
            ..prepare_case("unknown driver")
        },
        PrepareCase {
            resp: Some(nil_entry),
            devices: vec![],
            ..prepare_case("should prepare resources, driver returns nil value")
        },
        PrepareCase {
            resp: Some(NodePrepareResourcesResponse::default()),
            err: Some("NodePrepareResources skipped 1 ResourceClaims".into()),
            ..prepare_case("driver returns empty result")
        },
        PrepareCase {
            claim: Some(claim(CLAIM, DRIVER, &[""])),
            err: Some("is not allowed to use ResourceClaim ".into()),
            calls: 0,
            ..prepare_case("pod is not allowed to use resource claim")
        },
        PrepareCase {
            pod: pod_with(POD, POD_UID, &[(CLAIM, "resourceClaimName", CLAIM)], false),
            ..prepare_case("no container uses the claim")
        },
        PrepareCase {
            cached: Some(claim_info(CLAIM_UID, DRIVER, &[POD_UID], true)),
            calls: 0,
            ..prepare_case("resource already prepared")
        },
        PrepareCase {
            slow: true,
            err: Some("NodePrepareResources: rpc error: code = DeadlineExceeded".into()),
            ..prepare_case("should timeout")
        },
        prepare_case("should prepare resource, claim not in cache"),
        PrepareCase {
            claim: Some({
                let mut c = claim(CLAIM, DRIVER, &[POD_UID]);
                c["status"]["allocation"]["devices"]["results"][0]["shareID"] = SHARE_ID.into();
                c
            }),
            resp: Some(NodePrepareResourcesResponse {
                claims: [(
                    CLAIM_UID.to_string(),
                    NodePrepareResourceResponse {
                        devices: vec![Device { share_id: Some(SHARE_ID.into()), ..device() }],
                        error: String::new(),
                    },
                )]
                .into(),
            }),
            devices: vec![checkpoint::Device { share_id: Some(SHARE_ID.into()), ..state_device() }],
            ..prepare_case("should prepare resources with share id")
        },
        PrepareCase {
            cached: Some(claim_info("another-claim-uid", DRIVER, &[POD_UID], false)),
            err: Some(format!(
                "old ResourceClaim with same name {CLAIM} and different UID another-claim-uid still exists"
            )),
            calls: 0,
            ..prepare_case("claim UIDs mismatch")
        },
    ];
    for case in cases {
        let what = case.what;
        let fake = Fake { prepare: case.resp, delay: case.slow.then_some(TIMEOUT * 2), ..Fake::default() };
        let node = Node::new(fake, TIMEOUT).await;
        if let Some(c) = case.claim {
            node.put(c);
        }
        if let Some(c) = case.cached {
            node.cache(c);
        }
        let r = node.dra.prepare(&case.pod, 1).await;
        assert_eq!(node.calls().0, case.calls, "{what}: NodePrepareResources calls");
        match case.err {
            Some(want) => {
                let e = r.err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains(&want), "{what}: {e:?} should contain {want:?}");
            }
            None => {
                r.unwrap_or_else(|e| panic!("{what}: {e}"));
                let c = node.cached(CLAIM).unwrap_or_else(|| panic!("{what}: not in the cache"));
                assert!(c.pods.contains(POD_UID), "{what}: {:?}", c.pods);
                assert_eq!((c.uid.as_str(), c.name.as_str(), c.namespace.as_str()), (CLAIM_UID, CLAIM, NS), "{what}");
                let want: BTreeMap<String, DriverPrep> =
                    [(DRIVER.to_string(), DriverPrep::Prepared(case.devices))].into();
                assert_eq!(c.drivers, want, "{what}");
                assert!(c.done, "{what}: the claim should be marked as prepared");
            }
        }
        node.end().await;
    }
}

struct UnprepareCase {
    what: &'static str,
    pod: Pod,
    claim: Option<serde_json::Value>,
    cached: ClaimInfo,
    resp: Option<NodeUnprepareResourcesResponse>,
    slow: bool,
    err: Option<String>,
    calls: u32,
}

fn unprepare_case(what: &'static str) -> UnprepareCase {
    UnprepareCase {
        what,
        pod: test_pod(),
        claim: None,
        cached: claim_info(CLAIM_UID, DRIVER, &[POD_UID], true),
        resp: None,
        slow: false,
        err: None,
        calls: 1,
    }
}

/// Port of upstream TestUnprepareResources. Not ported: "should unprepare
/// already prepared extended resource backed by DRA" (dpctl makes the
/// special claim itself; extended_tests.rs and the e2e tests cover it).
/// Added: the claim's object is deleted before the pod goes (the cache
/// alone says what to unprepare, kubernetes#139772).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_unprepare_resources() {
    let cases = vec![
        UnprepareCase {
            cached: claim_info(CLAIM_UID, "unknown-driver", &[POD_UID], true),
            err: Some("unprepare dynamic resources: DRA driver unknown-driver is not registered".into()),
            calls: 0,
            ..unprepare_case("unknown driver")
        },
        UnprepareCase {
            cached: claim_info(CLAIM_UID, DRIVER, &[POD_UID, "another-pod-uid"], true),
            calls: 0,
            ..unprepare_case("resource claim referenced by other pod(s)")
        },
        UnprepareCase {
            slow: true,
            err: Some("NodeUnprepareResources: rpc error: code = DeadlineExceeded".into()),
            ..unprepare_case("should timeout")
        },
        UnprepareCase {
            resp: Some(NodeUnprepareResourcesResponse::default()),
            err: Some("NodeUnprepareResources skipped 1 ResourceClaims".into()),
            ..unprepare_case("should fail when driver returns empty response")
        },
        UnprepareCase {
            claim: Some(claim(CLAIM, DRIVER, &[POD_UID])),
            ..unprepare_case("should unprepare already prepared resource")
        },
        UnprepareCase { claim: None, ..unprepare_case("the claim was deleted from the API before the pod went") },
        // kubernetes#139772: the pod's claim comes from a template, and the
        // name the pod gives it is not the cached claim's.
        UnprepareCase {
            pod: pod_with(POD, POD_UID, &[(CLAIM, "resourceClaimTemplateName", "test-claim-template")], true),
            claim: Some(claim(CLAIM, DRIVER, &[POD_UID])),
            ..unprepare_case("should unprepare using cache when ResourceClaimStatuses is missing")
        },
        UnprepareCase {
            resp: Some(NodeUnprepareResourcesResponse {
                claims: [(CLAIM_UID.to_string(), NodeUnprepareResourceResponse::default())].into(),
            }),
            ..unprepare_case("should unprepare resource when driver returns nil value")
        },
    ];
    for case in cases {
        let what = case.what;
        let fake = Fake { unprepare: case.resp, delay: case.slow.then_some(TIMEOUT * 2), ..Fake::default() };
        let node = Node::new(fake, TIMEOUT).await;
        if let Some(c) = case.claim {
            node.put(c);
        }
        let shared = case.cached.pods.len() > 1;
        node.cache(case.cached);
        node.dra.track(&case.pod);
        let r = node.dra.unprepare(POD_UID, 1).await;
        assert_eq!(node.calls().1, case.calls, "{what}: NodeUnprepareResources calls");
        match case.err {
            Some(want) => {
                let e = r.err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains(&want), "{what}: {e:?} should contain {want:?}");
            }
            None => {
                r.unwrap_or_else(|e| panic!("{what}: {e}"));
                match node.cached(CLAIM) {
                    Some(c) if shared => assert!(!c.pods.contains(POD_UID), "{what}: the pod's reference goes"),
                    Some(c) => panic!("{what}: still cached after a successful unprepare: {c:?}"),
                    None => assert!(!shared, "{what}: a claim another pod uses stays"),
                }
            }
        }
        node.end().await;
    }
}

/// Port of upstream TestPrepareResourcesWithPreparedAndNewClaim: a pod with
/// a claim another pod prepared and a new one calls the driver once more,
/// for the new one only; both end up prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_prepare_resources_with_prepared_and_new_claim() {
    let node = Node::new(Fake::default(), TIMEOUT).await;
    let second = "test-claim-second";
    let first_pod = pod_with("test-pod-1", "test-pod-uid-1", &[(CLAIM, "resourceClaimName", CLAIM)], true);
    let second_pod = pod_with(
        "test-pod-2",
        "test-pod-uid-2",
        &[(CLAIM, "resourceClaimName", CLAIM), (second, "resourceClaimName", second)],
        true,
    );
    // The first claim is reserved for both pods.
    node.put(claim(CLAIM, DRIVER, &["test-pod-uid-1", "test-pod-uid-2"]));
    node.put(claim(second, DRIVER, &["test-pod-uid-2"]));
    node.dra.prepare(&first_pod, 1).await.unwrap();
    assert_eq!(node.calls().0, 1, "the first pod makes one prepare call");
    node.dra.prepare(&second_pod, 1).await.unwrap();
    assert_eq!(node.calls().0, 2, "the second pod makes one more, for the new claim");
    for name in [CLAIM, second] {
        let c = node.cached(name).unwrap_or_else(|| panic!("{name} should be cached"));
        assert!(c.done, "{name} should be marked as prepared");
    }
    node.end().await;
}

/// Upstream fails a prepare when the driver is not registered even if the
/// claim is prepared already (manager.go prepareResources: "If the driver is
/// currently unavailable, it is better to fail even if the claim is already
/// prepared because something is wrong with the node"). dpctl deliberately
/// does not: a prepared claim needs no call, so it needs no driver (claiminfo.rs
/// plan_prepare looks drivers up only for claims not prepared; 43824a9), and a
/// restored pod whose claims were all prepared before a restart keeps running
/// while its drivers register again (lifecycle.rs). Upstream's reason is a
/// policy (report a broken node), not a call that is needed, so dpctl keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_claim_whose_driver_is_gone_needs_no_call_unlike_upstream() {
    let node = Node::new(Fake::default(), TIMEOUT).await;
    node.put(claim(CLAIM, DRIVER, &[POD_UID]));
    node.cache(claim_info(CLAIM_UID, DRIVER, &[POD_UID], true));
    node.dra.deregister_socket(&node.socket);
    assert!(node.dra.drivers().is_empty());
    let r = node.dra.prepare(&test_pod(), 1).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r, Prepared { called: false });
    assert_eq!(node.calls().0, 0);
    // A claim not prepared yet does need the driver.
    node.cache(claim_info(CLAIM_UID, DRIVER, &[POD_UID], false));
    let e = node.dra.prepare(&test_pod(), 2).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(e, format!("prepare dynamic resources: DRA driver {DRIVER} is not registered"));
    node.end().await;
}

/// Port of upstream TestDelete (plugin/dra_plugin_manager_test.go): a
/// driver whose only instance is removed is not registered any more — the
/// event says so, and a prepare that needs it fails in the kubelet's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_delete() {
    let mut node = Node::new(Fake::default(), TIMEOUT).await;
    assert_eq!(node.dra.drivers().len(), 1);
    node.dra.deregister_socket(&node.socket);
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(e) = node.rx.recv().await {
            if let KubeletEvent::DraDeregistered { driver, instances, .. } = &e.event {
                return Some((driver.clone(), *instances));
            }
        }
        None
    })
    .await;
    assert_eq!(gone, Ok(Some((DRIVER.to_string(), 0))));
    assert!(node.dra.drivers().is_empty(), "the plugin should not exist after being removed");
    node.put(claim(CLAIM, DRIVER, &[POD_UID]));
    let e = node.dra.prepare(&test_pod(), 1).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(e, format!("prepare dynamic resources: DRA driver {DRIVER} is not registered"));
    assert_eq!(node.calls().0, 0);
    node.end().await;
}
