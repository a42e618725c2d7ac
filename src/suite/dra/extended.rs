//! The DRA scenarios of extended resources (KEP-5004): a pod asking for an
//! extended resource a DeviceClass maps to the driver is served through the
//! special claim the scheduler creates (requests `container-<i>-request-<j>`);
//! the kubelet hands a container the CDI devices whose request names
//! include the request mapped to it (manager.go GetResources,
//! claiminfo.go cdiDevicesAsList) — a driver answering other request names
//! is prepared and injects nothing (dra-driver-cpu#197).

use super::session::{Sess, NS, POD_WITHIN};
use crate::kubelet::event::KubeletEvent;
use crate::kubelet::lifecycle::Phase;
use crate::kubelet::manifest::extended::DEVICE_CLASS_PREFIX;
use crate::suite::Outcome;

/// The class the scenarios write, and the resource it maps.
const CLASS: &str = "dpctl-test-ext";
const RESOURCE: &str = "dpctl.test/ext";

/// What became of one pod asking for `resource` in containers `a` and `b`.
struct Served {
    /// `namespace/name` of the special claim.
    claim: String,
    /// The kubelet's texts for containers that got no CDI device.
    unserved: Vec<String>,
}

/// Write the class (mapping RESOURCE to every device of the driver) and a
/// pod `pod` whose two containers ask for one `resource` each; wait until the
/// pod runs (its special claim prepared) or the kubelet gives up.
async fn admit(s: &mut Sess, pod: &str, resource: &str) -> Result<Served, Outcome> {
    if s.prepared.is_none() {
        return Err(Outcome::skip("DRA-PREP-001 did not prepare"));
    }
    let d = s.driver().await?;
    let class = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {CLASS}}}\nspec:\n  extendedResourceName: {RESOURCE}\n  selectors:\n  - cel: {{expression: 'device.driver == \"{}\"'}}\n",
        d.name
    );
    let is_class = |e: &KubeletEvent| matches!(e, KubeletEvent::DraObject { key, .. } if key.ends_with(CLASS));
    if !s.seen.iter().any(|e| is_class(&e.event)) {
        let from = s.seen.len();
        s.write(&format!("{CLASS}.yaml"), &class)?;
        s.wait(from, POD_WITHIN, |e| is_class(e).then_some(())).await;
    }
    let from = s.seen.len();
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: {NS}, uid: {pod}-uid}}\nspec:\n  containers:\n  - name: a\n    resources: {{limits: {{{resource}: 1}}}}\n  - name: b\n    resources: {{limits: {{{resource}: 1}}}}\n"
    );
    let manifest = format!("/{pod}.yaml");
    s.write(&manifest[1..], &text)?;
    let key = format!("{NS}/{pod}");
    let got = s
        .wait(from, POD_WITHIN, |e| match e {
            KubeletEvent::PodPhase { pod, phase: Phase::Running, .. } if *pod == key => Some(Ok(())),
            KubeletEvent::PodRejected { reason, file, .. } if file.ends_with(&manifest) => {
                Some(Err(Some(reason.clone())))
            }
            KubeletEvent::ClaimPrepareFailed { pod, error, attempt } if *pod == key && *attempt >= 3 => {
                Some(Err(Some(error.clone())))
            }
            _ => None,
        })
        .await;
    let claim = s.seen[from..].iter().find_map(|e| match &e.event {
        KubeletEvent::ExtendedResourceClaim { pod, claim, .. } if *pod == key => Some(format!("{NS}/{claim}")),
        _ => None,
    });
    match (got, claim) {
        (Some(Ok(())), Some(claim)) => {
            let unserved = s.seen[from..]
                .iter()
                .filter_map(|e| match &e.event {
                    KubeletEvent::ExtendedResourceUnserved { pod, message, .. } if *pod == key => Some(message.clone()),
                    _ => None,
                })
                .collect();
            Ok(Served { claim, unserved })
        }
        (_, None) => Err(Outcome::skip(
            "this kubelet serves no extended resource by DRA (DRAExtendedResource is off before 1.36)",
        )),
        (Some(Err(e)), Some(_)) => Err(Outcome::fail(
            "NodePrepareResources of the special claim (the kubelet, on admission)",
            e.unwrap_or_default(),
            "prepare claims whose requests are named container-<i>-request-<j> with deviceClassName the class",
        )),
        (None, Some(_)) => Err(Outcome::fail(
            "NodePrepareResources of the special claim (the kubelet, on admission)",
            s.last_error(from, false).unwrap_or_else(|| format!("the pod did not run within {POD_WITHIN:?}")),
            "answer NodePrepareResources for the special claim",
        )),
    }
}

/// Remove the pod; wait until its special claim is unprepared.
async fn remove(s: &mut Sess, pod: &str, claim: &str) {
    let from = s.seen.len();
    let _ = std::fs::remove_file(s.tree.manifests.join(format!("{pod}.yaml")));
    s.wait(from, POD_WITHIN, |e| {
        matches!(e, KubeletEvent::ClaimUnprepared { claim: c, .. } if c == claim).then_some(())
    })
    .await;
}

/// DRA-EXT-001: every container mapped to the special claim gets CDI devices.
pub(crate) async fn request_names_map(s: &mut Sess) -> Outcome {
    let served = need!(admit(s, "ext-1", RESOURCE).await);
    remove(s, "ext-1", &served.claim).await;
    if served.unserved.is_empty() {
        Outcome::pass(format!("{} prepared; containers a and b get CDI devices", served.claim))
    } else {
        Outcome::fail(
            "NodePrepareResources of the special claim: each device's request_names",
            served.unserved.join("; "),
            "answer each device with the request names of the claim's allocation results (container-<i>-request-<j>), or none",
        )
    }
}

/// DRA-EXT-002: a pod asking for the class's implicit name is served.
pub(crate) async fn implicit_class_name(s: &mut Sess) -> Outcome {
    let resource = format!("{DEVICE_CLASS_PREFIX}{CLASS}");
    let served = need!(admit(s, "ext-2", &resource).await);
    remove(s, "ext-2", &served.claim).await;
    Outcome::pass(format!("{resource}: {} prepared", served.claim))
}
