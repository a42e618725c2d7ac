//! The DRA driver scenarios: each a plain function of the session, run by
//! the suite engine from [`super::SCENARIOS`].

use super::session::{call_failed, fail, Sess};
use crate::kubelet::dra::shell::unresolved_cdi;
use crate::kubelet::event::KubeletEvent;
use crate::protocol::dra as rules;
use crate::suite::Outcome;
use std::time::{Duration, Instant};

/// DRA-REG-001
pub(crate) async fn registers(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    Outcome::pass(format!("{} at {}", d.name, d.endpoint.display()))
}

/// DRA-SLICE-001: the node's slices of the driver make complete pools with devices.
pub(crate) async fn publishes_slice(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    need!(s.api());
    let node = crate::kubelet::dra::core::NODE_NAME;
    // A driver publishes its slices after it registers: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let slices = need!(s.node_slices(&d.name).await);
        match super::pools::judge(&slices, node) {
            Ok(note) => return Outcome::pass(note),
            Err(why) if Instant::now() > deadline => {
                return Outcome::fail(
                    "GET /apis/resource.k8s.io/v1/resourceslices",
                    why.to_string(),
                    "publish the node's devices as ResourceSlices, every slice of a pool (resourceSliceCount) at its generation (pass {kubeconfig} and {node-name} to the driver)",
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// DRA-REG-002
pub(crate) async fn talks_v1(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    // The newest service this kubelet version speaks (v1beta1 before 1.34).
    let newest = s.profile.dra_services.newest().unwrap_or(rules::DRA_V1);
    if d.service == newest {
        Outcome::pass(if newest == rules::DRA_V1 {
            String::new()
        } else {
            format!("kubelet {}: {newest}", s.profile.version)
        })
    } else {
        fail(&rules::VERSION_ORDER, "GetInfo supported_versions", format!("the kubelet chose {}", d.service))
    }
}

/// DRA-PREP-001
pub(crate) async fn prepares_pod(s: &mut Sess) -> Outcome {
    // The specs a driver writes at start (shared, per device) are not the claims'.
    need!(s.driver().await);
    s.cdi_before = super::cdi::defined(&super::cdi::scan(&s.tree.cdi_dir()));
    let claims = need!(s.prepare_pod("pod-1").await);
    s.prepared = Some(claims.iter().flat_map(|(_, ids)| ids.iter().cloned()).collect());
    s.prepared_claims = claims;
    Outcome::pass("2 claims")
}

/// DRA-PREP-002
pub(crate) async fn prepared_devices(s: &mut Sess) -> Outcome {
    // A claim the kubelet allocated and prepared (a helper-based driver GETs it).
    let Some(claim) = s.engine_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let (c, d) = need!(s.conn().await);
    let uid = claim.uid.clone();
    let t = s.timeout;
    let r = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| call_failed(
        &rules::SERVICE_ANSWERS,
        "NodePrepareResources",
        e,
        t
    )));
    if let Some(o) = extra_uids(std::slice::from_ref(&uid), &r, "NodePrepareResources") {
        return o;
    }
    let v: Vec<String> = rules::prepare_violations(&[uid], &r)
        .into_iter()
        .filter(|v| v.rule.id == rules::DEVICE_FIELDS.id || v.rule.id == rules::CDI_ID.id)
        .map(|v| v.to_string())
        .collect();
    if let Some(e) = r.claims.values().find(|x| !x.error.is_empty()) {
        return fail(&rules::ANSWER_COMPLETE, "NodePrepareResources", format!("error: {}", e.error));
    }
    if v.is_empty() {
        Outcome::pass("")
    } else {
        fail(&rules::DEVICE_FIELDS, "NodePrepareResources", v.join("; "))
    }
}

/// An answer naming claims nobody asked for fails the kubelet's whole prepare (pure).
fn extra_uids(asked: &[String], r: &crate::api::dra_v1::NodePrepareResourcesResponse, rpc: &str) -> Option<Outcome> {
    let extra = r.claims.keys().find(|u| !asked.contains(u))?;
    Some(fail(
        &rules::ANSWER_EXTRA,
        rpc,
        format!(
            "NodePrepareResources returned result for unknown claim UID {extra} (the kubelet fails the pod's prepare)"
        ),
    ))
}

/// DRA-PREP-003: a claim DRA-PREP-001 prepared, prepared twice more: both
/// answers are the first successful one (the kubelet's, in DRA-PREP-001).
pub(crate) async fn prepare_twice(s: &mut Sess) -> Outcome {
    let Some(claim) = s.engine_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let first: Vec<String> =
        s.prepared_claims.iter().find(|(u, _)| *u == claim.uid).map(|(_, i)| i.clone()).unwrap_or_default();
    let (c, d) = need!(s.conn().await);
    let mut answers = Vec::new();
    for n in ["", " (again)"] {
        let rpc = format!("NodePrepareResources{n}");
        let r = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| call_failed(
            &rules::IDEMPOTENT,
            rpc.clone(),
            e,
            s.timeout
        )));
        if let Some(o) = extra_uids(std::slice::from_ref(&claim.uid), &r, &rpc) {
            return o;
        }
        let Some(x) = r.claims.get(&claim.uid) else {
            return fail(&rules::ANSWER_COMPLETE, rpc, "no entry for the claim");
        };
        if !x.error.is_empty() {
            return fail(
                &rules::IDEMPOTENT,
                rpc,
                format!("error: {} (the claim was prepared in DRA-PREP-001: the first answer stands)", x.error),
            );
        }
        let mut ids: Vec<String> = x.devices.iter().flat_map(|d| d.cdi_device_ids.iter().cloned()).collect();
        ids.sort();
        let mut want = first.clone();
        want.sort();
        if ids != want {
            return fail(
                &rules::IDEMPOTENT,
                rpc,
                format!("CDI IDs [{}]; the first answer (DRA-PREP-001) had [{}]", ids.join(", "), want.join(", ")),
            );
        }
        answers.push(r);
    }
    if rules::same_answer(&answers[0], &answers[1]) {
        Outcome::pass("")
    } else {
        fail(
            &rules::IDEMPOTENT,
            "NodePrepareResources twice",
            format!("first {:?}, then {:?}", answers[0].claims, answers[1].claims),
        )
    }
}

/// DRA-PREP-004: per claim DRA-PREP-001 prepared, the devices the kubelet
/// allocated (claim-allocated) against those the driver prepared (claim-prepared).
pub(crate) async fn allocated_devices_prepared(s: &mut Sess) -> Outcome {
    if s.engine_claims.is_empty() {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    }
    // driver/pool/device; without the pool when the answer names none
    // (a missing pool name is DRA-PREP-002's finding, not this one's).
    let sorted = |v: &[String], pool: bool| {
        let mut v: Vec<String> = v
            .iter()
            .map(|w| {
                let parts: Vec<&str> = w.split('/').collect();
                let (drv, dev) = (parts.first().unwrap_or(&""), parts.last().unwrap_or(&""));
                if pool {
                    format!("{drv}/{}/{dev}", parts.get(1).unwrap_or(&""))
                } else {
                    format!("{drv}/{dev}")
                }
            })
            .collect();
        v.sort();
        v
    };
    let mut wrong = Vec::new();
    for c in &s.engine_claims {
        let key = format!("{}/{}", c.namespace, c.name);
        let prepared_raw = s.seen.iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimPrepared { claim, devices, .. } if *claim == key => Some(devices.clone()),
            _ => None,
        });
        let pool = prepared_raw.iter().flatten().all(|w| w.split('/').nth(1).is_some_and(|p| !p.is_empty()));
        let allocated = s.seen.iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimAllocated { claim, devices, .. } if *claim == key => Some(sorted(devices, pool)),
            _ => None,
        });
        let prepared = prepared_raw.map(|p| sorted(&p, pool));
        if let (Some(a), Some(p)) = (allocated, prepared) {
            if a != p {
                wrong.push(format!("{key}: allocated {}, prepared {}", a.join(", "), p.join(", ")));
            }
        }
    }
    if wrong.is_empty() {
        Outcome::pass(format!("{} claim(s)", s.engine_claims.len()))
    } else {
        fail(&rules::ALLOCATED_DEVICES, "NodePrepareResources (the kubelet, on admission)", wrong.join("; "))
    }
}

/// DRA-CDI-001
pub(crate) async fn cdi_resolves(s: &mut Sess) -> Outcome {
    let Some(ids) = s.prepared.clone() else { return Outcome::skip("DRA-PREP-001 did not prepare") };
    if ids.is_empty() {
        return Outcome::skip("the driver returned no CDI IDs");
    }
    // The runtime's CDI cache refuses a spec the CDI library rejects: its devices do not resolve.
    let refused: Vec<String> = super::cdi::scan(&s.tree.cdi_dir())
        .into_iter()
        .filter(|f| f.ids.iter().any(|i| ids.contains(i)))
        .filter_map(|f| f.problem.map(|p| format!("spec file {}: {p}", f.name)))
        .collect();
    if !refused.is_empty() {
        return Outcome::fail(
            "CDI spec files in {cdi-dir} (validated as tags.cncf.io/container-device-interface does)",
            format!("{} (the runtime refuses the spec: its CDI IDs do not resolve)", refused.join("; ")),
            "write specs the CDI library accepts: a known cdiVersion, vendor/class kind, valid device names, non-empty containerEdits per device",
        );
    }
    let bad = unresolved_cdi(&[s.tree.cdi_dir()], &ids);
    if bad.is_empty() {
        Outcome::pass(format!("{} CDI ID(s)", ids.len()))
    } else {
        Outcome::fail(
            "CDI spec files in {cdi-dir}",
            format!("{} resolve to no spec file", bad.join(", ")),
            "write a CDI spec defining each returned ID (kind=name) into the CDI directory ({cdi-dir}) before answering",
        )
    }
}

/// DRA-UNPREP-001
pub(crate) async fn unprepares_pod(s: &mut Sess) -> Outcome {
    if s.prepared.is_none() {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    }
    need!(s.remove_pod("pod-1").await);
    Outcome::pass("2 claims")
}

/// DRA-CDI-002: what prepare created for each claim is gone (specs the
/// driver shares between claims or wrote at start may stay).
pub(crate) async fn cdi_removed(s: &mut Sess) -> Outcome {
    if s.prepared_claims.iter().all(|(_, ids)| ids.is_empty()) {
        return Outcome::skip("nothing was prepared with CDI IDs");
    }
    let after = super::cdi::scan(&s.tree.cdi_dir());
    let left = super::cdi::leftovers(&s.prepared_claims, &s.cdi_before, &after);
    if left.is_empty() {
        Outcome::pass(format!("{} claim(s)", s.prepared_claims.len()))
    } else {
        Outcome::fail(
            "CDI spec files after NodeUnprepareResources",
            left.join("; "),
            "remove the claim's CDI spec on unprepare (a spec shared by claims or written at start may stay)",
        )
    }
}

/// DRA-UNPREP-002
pub(crate) async fn unprepare_twice(s: &mut Sess) -> Outcome {
    // A claim the kubelet prepared and (DRA-UNPREP-001) unprepared: twice more.
    let Some(claim) = s.engine_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let (c, d) = need!(s.conn().await);
    let uid = claim.uid.clone();
    for n in ["", " (again)"] {
        let r = need!(c.unprepare(&d.service, vec![claim.clone()]).await.map_err(|e| call_failed(
            &rules::IDEMPOTENT,
            format!("NodeUnprepareResources{n}"),
            e,
            s.timeout
        )));
        let v = rules::unprepare_violations(std::slice::from_ref(&uid), &r);
        if let Some(v) = v.first() {
            return fail(v.rule, format!("NodeUnprepareResources{n}"), v.text.clone());
        }
        if let Some(e) = r.claims.values().find(|x| !x.error.is_empty()) {
            return fail(&rules::IDEMPOTENT, format!("NodeUnprepareResources{n}"), format!("error: {}", e.error));
        }
    }
    Outcome::pass("")
}

/// DRA-UNPREP-003
pub(crate) async fn unprepare_unknown(s: &mut Sess) -> Outcome {
    let (c, d) = need!(s.conn().await);
    let claim = s.claim();
    let uid = claim.uid.clone();
    let r = need!(c.unprepare(&d.service, vec![claim]).await.map_err(|e| call_failed(
        &rules::SERVICE_ANSWERS,
        "NodeUnprepareResources",
        e,
        s.timeout
    )));
    if let Some(v) = rules::unprepare_violations(&[uid], &r).first() {
        return fail(v.rule, "NodeUnprepareResources (a claim never prepared)", v.text.clone());
    }
    match r.claims.values().find(|x| !x.error.is_empty()) {
        Some(e) => {
            fail(&rules::IDEMPOTENT, "NodeUnprepareResources (a claim never prepared)", format!("error: {}", e.error))
        }
        None => Outcome::pass(""),
    }
}

/// DRA-HEALTH-001
pub(crate) async fn health_stream(s: &mut Sess) -> Outcome {
    let (c, d) = need!(s.conn().await);
    let Some(h) = d.health.clone() else {
        if s.profile.dra_health == crate::kubelet::profile::DraHealth::Off {
            return Outcome::skip(format!(
                "kubelet {} opens no health stream (on by default from 1.36)",
                s.profile.version
            ));
        }
        return Outcome::skip("no health service advertised");
    };
    let mut stream =
        need!(c.health(&h).await.map_err(|e| call_failed(&rules::HEALTH_ANSWERS, "NodeWatchResources", e, s.timeout)));
    let first = tokio::time::timeout(s.timeout, stream.next(&d.endpoint)).await;
    let snap = match first {
        Err(_) => {
            return fail(&rules::HEALTH_STREAM, "NodeWatchResources", format!("no snapshot within {:?}", s.timeout))
        }
        Ok(Err(e)) => return fail(&rules::HEALTH_ANSWERS, "NodeWatchResources", e.to_string()),
        Ok(Ok(None)) => return fail(&rules::HEALTH_STREAM, "NodeWatchResources", "the stream ended before a snapshot"),
        Ok(Ok(Some(x))) => x,
    };
    let now = crate::plugin::dra::driver::now_secs();
    if let Some(v) = rules::health_violations(&snap, now).first() {
        return fail(v.rule, "NodeWatchResources", v.text.clone());
    }
    // Health names devices of the driver's slices (when it publishes any).
    let published = super::pools::devices(&s.node_slices(&d.name).await.unwrap_or_default());
    if !published.is_empty() {
        let strange: Vec<String> = snap
            .iter()
            .filter_map(|h| h.device.as_ref())
            .filter(|x| !published.contains(&(x.pool_name.clone(), x.device_name.clone())))
            .map(|x| format!("{}/{}", x.pool_name, x.device_name))
            .collect();
        if !strange.is_empty() {
            return fail(
                &rules::HEALTH_DEVICE,
                "NodeWatchResources",
                format!(
                    "health for {}, which no ResourceSlice of the driver on this node lists (the kubelet cannot tie it to a claim)",
                    strange.join(", ")
                ),
            );
        }
    }
    // Refreshed within health_check_timeout_seconds (0: the kubelet's 30 s), or
    // the kubelet marks the devices Unknown; checked when that is short.
    let secs = snap.iter().map(|h| h.health_check_timeout_seconds).filter(|t| *t > 0).min().unwrap_or(30);
    let timeout = Duration::from_secs(u64::try_from(secs).unwrap_or(30));
    let wait = if timeout <= HEALTH_REFRESH_CHECKED {
        timeout + Duration::from_millis(500)
    } else {
        Duration::from_millis(500)
    };
    match tokio::time::timeout(wait, stream.next(&d.endpoint)).await {
        Ok(Ok(None)) => fail(&rules::HEALTH_STREAM, "NodeWatchResources", "the stream ended after its first snapshot"),
        Err(_) if timeout <= HEALTH_REFRESH_CHECKED => fail(
            &rules::HEALTH_STREAM,
            "NodeWatchResources",
            format!(
                "no snapshot within health_check_timeout_seconds ({secs}s) after the first: the kubelet marks the devices Unknown"
            ),
        ),
        _ if timeout <= HEALTH_REFRESH_CHECKED => Outcome::pass(format!("{} device(s); refreshed within {secs}s", snap.len())),
        _ => Outcome::pass(format!(
            "{} device(s); refresh not waited for (health_check_timeout_seconds {secs}s)",
            snap.len()
        )),
    }
}

/// HEALTH-001 waits for a refresh when health_check_timeout_seconds is at most this.
const HEALTH_REFRESH_CHECKED: Duration = Duration::from_secs(10);
