//! The restart scenarios: a kubelet restart (DRA-RESTART-001), a driver
//! restart (DRA-RESTART-002) and a rolling update (DRA-ROLL-001). Each
//! decides on the kubelet's events; across a driver's instance change the
//! claims prepared before are checked again: their CDI IDs still resolve,
//! preparing them again gives the same answer, and unpreparing them
//! through the new instance removes what prepare created.

use super::session::{call_failed, fail, Sess, POD_WITHIN, REGISTER_WITHIN};
use crate::kubelet::dra::shell::unresolved_cdi;
use crate::kubelet::event::KubeletEvent;
use crate::protocol::dra as rules;
use crate::suite::env::log_tail;
use crate::suite::Outcome;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long DRA-RESTART-001 waits for the slices the kubelet wiped to be
/// published again: the kubeletplugin helper's resourceslice controller
/// syncs a pool `DefaultSyncDelay` (30 s) after a slice's delete event
/// (dynamic-resource-allocation v0.37.2 resourceslice/
/// resourceslicecontroller.go:69 and :667, `queue.AddAfter(pool,
/// c.syncDelay)`; the helper sets no other delay), so every driver on it
/// takes 30 s; 10 s failed the real helper.
pub(crate) const REPUBLISH_WITHIN: Duration = Duration::from_secs(40);

/// DRA-RESTART-001
pub(crate) async fn kubelet_restart(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    need!(s.prepare_pod("pod-r").await);
    let from = s.seen.len();
    if let Some(k) = &s.kubelet {
        need!(k.restart().await.map_err(|e| Outcome::fail("kubelet restart", e.to_string(), "see the kubelet log")));
    }
    need!(s.registered(from).await);
    let cached = s
        .wait(from, POD_WITHIN, |e| match e {
            KubeletEvent::ClaimPrepared { claim, cached, .. } if claim.ends_with("pod-r-a") => Some(*cached),
            _ => None,
        })
        .await;
    if cached != Some(true) {
        return Outcome::fail(
            "kubelet restart",
            format!("the claim was not restored prepared ({cached:?})"),
            "report this bug: the kubelet's checkpoint",
        );
    }
    // The kubelet deleted the node's slices at start: the driver publishes them again.
    let wiped = s.seen[from..].iter().find_map(|e| match &e.event {
        KubeletEvent::DraNodeSlicesWiped { slices, .. } => Some(slices.clone()),
        _ => None,
    });
    let mut note = String::new();
    if let Some(wiped) = wiped {
        let t0 = Instant::now();
        loop {
            let now = need!(s.node_slices(&d.name).await);
            if !now.is_empty() {
                note = format!("; slices published again {:.1}s after the wipe", t0.elapsed().as_secs_f64());
                break;
            }
            if t0.elapsed() > REPUBLISH_WITHIN {
                return Outcome::fail(
                    "GET /apis/resource.k8s.io/v1/resourceslices after the kubelet's restart",
                    format!(
                        "the kubelet deleted the node's ResourceSlices at start ({}); the driver published none again within {REPUBLISH_WITHIN:?}",
                        wiped.join(", ")
                    ),
                    "watch your ResourceSlices and publish them again when they are deleted (the kubeletplugin helper's slice controller does, 30 s after the delete; kubernetes#132683)",
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    need!(s.remove_pod("pod-r").await);
    Outcome::pass(format!("re-registered; claims kept; unprepared after{note}"))
}

/// DRA-RESTART-002
pub(crate) async fn driver_restart(s: &mut Sess) -> Outcome {
    need!(s.driver().await);
    let before = super::cdi::defined(&super::cdi::scan(&s.tree.cdi_dir()));
    let claims = need!(s.prepare_pod("pod-d").await);
    let from = s.seen.len();
    if let Some(p) = s.plugin.take() {
        p.stop(Duration::from_secs(10)).await;
    }
    s.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(())).await;
    let from = s.seen.len();
    need!(s.start_plugin().map_err(|e| Outcome::fail("restart the driver", e.to_string(), "check the command")));
    s.driver = Some(need!(s.registered(from).await));
    need!(recheck(s, "pod-d", &claims, &before, "the restarted driver").await);
    Outcome::pass(
        "re-registered; the claims prepared before resolve, answer the same and unprepare through the new instance",
    )
}

/// DRA-ROLL-001
pub(crate) async fn rolling_update(s: &mut Sess) -> Outcome {
    if s.profile.dra_instances == crate::kubelet::profile::DraInstances::Replace {
        return Outcome::skip(format!(
            "kubelet {} keeps one instance per driver (rolling updates from 1.33, kubernetes#129832)",
            s.profile.version
        ));
    }
    if !s.argv.iter().any(|a| a.contains("{rolling-uid}")) {
        return Outcome::skip("the command has no {rolling-uid}: pass it to the driver's rolling-update option");
    }
    let older = need!(s.driver().await);
    let from = s.seen.len();
    s.second = Some(need!(s.spawn_instance("b", "driver-b.log").map_err(|e| Outcome::fail(
        "start a second instance",
        e.to_string(),
        "check the command"
    ))));
    let two = s
        .wait(from, REGISTER_WITHIN, |e| match e {
            KubeletEvent::DraRegistered { instances, endpoint, .. } => Some((*instances, endpoint.clone())),
            KubeletEvent::RegistrationRejected { error, .. } => Some((0, error.clone())),
            _ => None,
        })
        .await;
    let newest = match two {
        Some((2, ep)) => ep,
        other => {
            return Outcome::fail(
                "a second instance's registration",
                format!("{other:?}; instance b's log: {}", log_tail(&s.tree.logs.join("driver-b.log"), 5)),
                "name both sockets after the rolling-update UID (<driver>-<uid>-reg.sock, a distinct endpoint)",
            )
        }
    };
    if let Some(d) = &mut s.driver {
        d.endpoint = PathBuf::from(&newest);
    }
    let before = super::cdi::defined(&super::cdi::scan(&s.tree.cdi_dir()));
    let claims = need!(s.prepare_pod("pod-u").await);
    let from = s.seen.len();
    if let Some(p) = s.second.take() {
        p.stop(Duration::from_secs(10)).await;
    }
    let left = s
        .wait(from, REGISTER_WITHIN, |e| match e {
            KubeletEvent::DraDeregistered { instances, .. } => Some(*instances),
            _ => None,
        })
        .await;
    if left != Some(1) {
        return Outcome::fail(
            "the newest instance stops",
            format!("the kubelet's instances of the driver after it went: {left:?} (want 1, the older one)"),
            "remove only this instance's sockets on exit",
        );
    }
    s.driver = Some(older);
    need!(recheck(s, "pod-u", &claims, &before, "the older instance").await);
    Outcome::pass(
        "two instances; the older one answers the same for the claims the newest prepared and unprepares them",
    )
}

/// After an instance change: the claims `claims` (UID, CDI IDs as first
/// prepared) of pod `pod` still resolve, prepare the same through the
/// driver now registered, and unprepare (the kubelet, on the pod's removal)
/// leaving nothing prepare created (`before`: IDs defined before they were prepared).
async fn recheck(
    s: &mut Sess,
    pod: &str,
    claims: &[(String, Vec<String>)],
    before: &BTreeSet<String>,
    who: &str,
) -> Result<(), Outcome> {
    let ids: Vec<String> = claims.iter().flat_map(|(_, i)| i.iter().cloned()).collect();
    let bad = unresolved_cdi(&[s.tree.cdi_dir()], &ids);
    if !bad.is_empty() {
        return Err(Outcome::fail(
            format!("CDI spec files after the instance change ({who} serves)"),
            format!("{} of claims still prepared resolve to no spec file", bad.join(", ")),
            "keep the CDI specs of prepared claims across restarts: do not wipe them at start or remove them at exit (ROCm#75, kubernetes#141433)",
        ));
    }
    let (c, d) = s.conn().await?;
    // The pod's first claim is prepared again; the second is left to
    // unprepare alone, as the kubelet does after a restart (no prepare call
    // rebuilds what the driver lost).
    let first_claim = s.engine_claims.iter().find(|c| c.name == format!("{pod}-a")).cloned();
    if let Some((claim, first)) =
        first_claim.and_then(|c| claims.iter().find(|(u, _)| *u == c.uid).map(|(_, f)| (c, f.clone())))
    {
        let r = c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| {
            call_failed(
                &rules::IDEMPOTENT,
                format!("NodePrepareResources ({who}, a claim prepared before)"),
                e,
                s.timeout,
            )
        })?;
        let Some(x) = r.claims.get(&claim.uid) else {
            return Err(fail(
                &rules::ANSWER_COMPLETE,
                format!("NodePrepareResources ({who})"),
                "no entry for the claim",
            ));
        };
        if !x.error.is_empty() {
            return Err(fail(
                &rules::IDEMPOTENT,
                format!("NodePrepareResources ({who}, a claim prepared before)"),
                format!("error: {}", x.error),
            ));
        }
        let mut now: Vec<String> = x.devices.iter().flat_map(|d| d.cdi_device_ids.iter().cloned()).collect();
        let mut was = first;
        now.sort();
        was.sort();
        if now != was {
            return Err(Outcome::fail(
                format!("NodePrepareResources ({who}, a claim prepared before)"),
                format!("claim {}/{}: CDI IDs were [{}], now [{}]", claim.namespace, claim.name, was.join(", "), now.join(", ")),
                "answer the same CDI IDs for a claim across restarts: containers already use them (kubernetes#140471, #120550)",
            ));
        }
    }
    s.remove_pod(pod).await?;
    let left = super::cdi::leftovers(claims, before, &super::cdi::scan(&s.tree.cdi_dir()));
    if !left.is_empty() {
        return Err(Outcome::fail(
            format!("NodeUnprepareResources through {who}"),
            format!("unprepare answered success but left {}", left.join("; ")),
            "keep what unprepare needs on disk (a checkpoint): the instance that unprepares may not be the one that prepared (nvidia-gpu#342, dra-example-driver#249)",
        ));
    }
    Ok(())
}

/// The driver's slices on the node: name → UID.
async fn slice_uids(s: &Sess, driver: &str) -> Result<std::collections::BTreeMap<String, String>, Outcome> {
    Ok(s.node_slices(driver)
        .await?
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (m["name"].as_str().unwrap_or_default().to_string(), m["uid"].as_str().unwrap_or_default().to_string())
        })
        .collect())
}

/// What became of the slices `before` (name → UID) in `after`: each one
/// deleted or re-created under another UID (pure).
fn slices_lost(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    before
        .iter()
        .filter_map(|(name, uid)| match after.get(name) {
            None => Some(format!("{name} deleted")),
            Some(u) if u != uid => Some(format!("{name} deleted and created again (UID {uid} → {u})")),
            Some(_) => None,
        })
        .collect()
}

const SLICES_KEPT_FIX: &str = "leave your ResourceSlices in place when you stop (the kubeletplugin helper does; the kubelet deletes a gone driver's slices 30 s after the last instance went) and update them in place when you start, so devices stay allocatable across a quick update";

/// DRA-ROLL-002: a sequential update (a DaemonSet with maxSurge 0): the
/// driver is stopped and started again; the slices it published survive
/// the downtime (same objects: the kubelet wipes them only 30 s after the
/// last instance went), and the new instance prepares a new pod's claims.
pub(crate) async fn sequential_update(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    let before = need!(slice_uids(s, &d.name).await);
    if before.is_empty() {
        return Outcome::skip("the driver publishes no ResourceSlice");
    }
    let from = s.seen.len();
    let t0 = Instant::now();
    if let Some(p) = s.plugin.take() {
        p.stop(Duration::from_secs(10)).await;
    }
    s.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(())).await;
    let from = s.seen.len();
    need!(s.start_plugin().map_err(|e| Outcome::fail("start the new instance", e.to_string(), "check the command")));
    s.driver = Some(need!(s.registered(from).await));
    let downtime = t0.elapsed();
    need!(s.prepare_pod("pod-s").await);
    let after = need!(slice_uids(s, &d.name).await);
    need!(s.remove_pod("pod-s").await);
    let lost = slices_lost(&before, &after);
    if !lost.is_empty() {
        return Outcome::fail(
            format!("GET /apis/resource.k8s.io/v1/resourceslices after a sequential update ({downtime:.1?} down)"),
            format!("the slices did not survive the update: {}", lost.join("; ")),
            SLICES_KEPT_FIX,
        );
    }
    Outcome::pass(format!(
        "{} slice(s) kept over {downtime:.1?} of downtime; the new instance prepared a pod",
        before.len()
    ))
}

/// DRA-ROLL-003: a failed update: a second instance starts beside the
/// running one (rolling update) and fails (stops); the older one serves
/// on, its slices the same objects, and prepares a new pod's claims.
pub(crate) async fn failed_update(s: &mut Sess) -> Outcome {
    if s.profile.dra_instances == crate::kubelet::profile::DraInstances::Replace {
        return Outcome::skip(format!(
            "kubelet {} keeps one instance per driver (rolling updates from 1.33, kubernetes#129832)",
            s.profile.version
        ));
    }
    if !s.argv.iter().any(|a| a.contains("{rolling-uid}")) {
        return Outcome::skip("the command has no {rolling-uid}: pass it to the driver's rolling-update option");
    }
    let older = need!(s.driver().await);
    // The slices as DRA-ROLL-001 left them (published again, if an instance's exit took them).
    let deadline = Instant::now() + Duration::from_secs(5);
    let before = loop {
        let now = need!(slice_uids(s, &older.name).await);
        if !now.is_empty() || Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if before.is_empty() {
        return Outcome::skip("the driver publishes no ResourceSlice");
    }
    let from = s.seen.len();
    let newer = need!(s.spawn_instance("c", "driver-c.log").map_err(|e| Outcome::fail(
        "start a second instance",
        e.to_string(),
        "check the command"
    )));
    let two = s
        .wait(from, REGISTER_WITHIN, |e| match e {
            KubeletEvent::DraRegistered { instances, .. } => Some(*instances),
            _ => None,
        })
        .await;
    let from = s.seen.len();
    newer.stop(Duration::from_secs(10)).await;
    if two != Some(2) {
        return Outcome::skip(format!(
            "the second instance did not register beside the first ({two:?}): DRA-ROLL-001 judges that"
        ));
    }
    s.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(())).await;
    s.driver = Some(older.clone());
    need!(s.prepare_pod("pod-f").await);
    let after = need!(slice_uids(s, &older.name).await);
    need!(s.remove_pod("pod-f").await);
    let lost = slices_lost(&before, &after);
    if !lost.is_empty() {
        return Outcome::fail(
            "GET /apis/resource.k8s.io/v1/resourceslices after a failed update (the new instance stopped)",
            format!("the running instance's slices did not survive: {}", lost.join("; ")),
            SLICES_KEPT_FIX,
        );
    }
    Outcome::pass(format!("{} slice(s) unchanged; the older instance prepared a pod", before.len()))
}

#[cfg(test)]
mod update_tests {
    use super::slices_lost;
    use std::collections::BTreeMap;

    #[test]
    fn a_slice_is_lost_when_deleted_or_created_again() {
        let m = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
            v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        let before = m(&[("s-0", "u0"), ("s-1", "u1")]);
        assert!(slices_lost(&before, &m(&[("s-0", "u0"), ("s-1", "u1"), ("s-2", "u2")])).is_empty());
        assert_eq!(
            slices_lost(&before, &m(&[("s-0", "u9")])),
            ["s-0 deleted and created again (UID u0 → u9)", "s-1 deleted"]
        );
    }
}
