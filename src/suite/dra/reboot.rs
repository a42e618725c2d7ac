//! A node reboot (DRA-REBOOT-001): CDI specs live on tmpfs (`/var/run/cdi`),
//! so a reboot empties the CDI directory while the kubelet's checkpoint
//! and the driver's own survive. The kubelet restores the checkpointed
//! claims unprepared (kubernetes pkg/kubelet/cm/dra/claiminfo.go,
//! newClaimInfoFromState: `prepared: false`) and, re-creating each pod's
//! sandbox, calls NodePrepareResources again
//! (pkg/kubelet/kuberuntime/kuberuntime_manager.go, PrepareDynamicResources
//! before the sandbox). A driver that answers from its checkpoint without
//! writing the specs again hands out CDI IDs that resolve nowhere and the
//! pod is stuck in CreateContainerError (kubernetes#141433, #141966).
//!
//! The mock kubelet restores prepared claims as prepared and models no
//! sandbox: the suite makes the call the kubelet makes after the reboot,
//! with the claims of its checkpoint, in one call for the driver.

use super::session::{call_failed, fail, Sess, REGISTER_WITHIN};
use crate::kubelet::dra::shell::unresolved_cdi;
use crate::kubelet::event::KubeletEvent;
use crate::protocol::dra as rules;
use crate::suite::Outcome;
use std::path::Path;
use std::time::Duration;

const POD: &str = "pod-boot";
const RPC: &str = "NodePrepareResources (after the reboot, as the kubelet calls it for the restored claims)";

/// Empty `dir` as a reboot empties a tmpfs: every entry goes. How many went.
fn empty_dir(dir: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        x => x?,
    };
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
        n += 1;
    }
    Ok(n)
}

/// DRA-REBOOT-001
pub(crate) async fn node_reboot(s: &mut Sess) -> Outcome {
    need!(s.driver().await);
    need!(s.prepare_pod(POD).await);
    let from = s.seen.len();
    if let Some(p) = s.plugin.take() {
        p.stop(Duration::from_secs(10)).await;
    }
    s.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(())).await;
    // The reboot: the kubelet stops too, and the tmpfs under the CDI directory comes back empty.
    let wiped = need!(empty_dir(&s.tree.cdi_dir()).map_err(|e| Outcome::fail(
        "empty the CDI directory (the reboot)",
        e.to_string(),
        "check $TMPDIR"
    )));
    let from = s.seen.len();
    if let Some(k) = &s.kubelet {
        need!(k.restart().await.map_err(|e| Outcome::fail("kubelet restart", e.to_string(), "see the kubelet log")));
    }
    need!(s.start_plugin().map_err(|e| Outcome::fail(
        "start the driver after the reboot",
        e.to_string(),
        "check the command"
    )));
    s.driver = Some(need!(s.registered(from).await));
    let claims: Vec<_> = s.engine_claims.iter().filter(|c| c.name.starts_with(&format!("{POD}-"))).cloned().collect();
    let (c, d) = need!(s.conn().await);
    let t = s.timeout;
    let r =
        need!(c.prepare(&d.service, claims.clone()).await.map_err(|e| call_failed(&rules::SERVICE_ANSWERS, RPC, e, t)));
    let mut ids = Vec::new();
    for claim in &claims {
        match r.claims.get(&claim.uid) {
            None => {
                return fail(
                    &rules::ANSWER_COMPLETE,
                    RPC,
                    format!("no entry for claim {}/{}", claim.namespace, claim.name),
                )
            }
            Some(x) if !x.error.is_empty() => {
                return fail(
                    &rules::ANSWER_COMPLETE,
                    RPC,
                    format!("claim {}/{}: error: {}", claim.namespace, claim.name, x.error),
                )
            }
            Some(x) => ids.extend(x.devices.iter().flat_map(|d| d.cdi_device_ids.iter().cloned())),
        }
    }
    let lost = unresolved_cdi(&[s.tree.cdi_dir()], &ids);
    if !lost.is_empty() {
        return Outcome::fail(
            RPC,
            format!(
                "answered {} for the restored claims, which resolve to no spec file: the reboot emptied the CDI directory ({wiped} file(s)) and the driver did not write them again (the pod stays in CreateContainerError)",
                lost.join(", ")
            ),
            "on every NodePrepareResources write the claim's CDI spec if it is missing, also when your checkpoint says the claim is prepared: /var/run/cdi is a tmpfs that a reboot empties (kubernetes#141433; dra-example-driver#259)",
        );
    }
    need!(s.remove_pod(POD).await);
    Outcome::pass(format!(
        "{wiped} spec file(s) gone with the reboot; {} claim(s) prepared again, their {} CDI ID(s) resolve",
        claims.len(),
        ids.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_empties_the_directory_and_says_how_much_went() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), "{}").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b.json"), "{}").unwrap();
        assert_eq!(empty_dir(d.path()).unwrap(), 2);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        assert_eq!(empty_dir(&d.path().join("missing")).unwrap(), 0);
    }
}
