//! The DRA driver scenarios: each a plain function of the session, run by
//! the suite engine from [`super::SCENARIOS`].

use super::session::{fail, Sess, POD_WITHIN, REGISTER_WITHIN};
use crate::kubelet::dra::unresolved_cdi;
use crate::kubelet::event::KubeletEvent;
use crate::protocol::dra as rules;
use crate::suite::env::log_tail;
use crate::suite::Outcome;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// DRA-REG-001
pub(crate) async fn registers(s: &mut Sess) -> Outcome {
    let d = need!(s.registered(0).await);
    let note = format!("{} at {}", d.name, d.endpoint.display());
    s.driver = Some(d);
    Outcome::pass(note)
}

/// DRA-SLICE-001
pub(crate) async fn publishes_slice(s: &mut Sess) -> Outcome {
    let d = need!(s.driver().await);
    let Some(kubeconfig) = s.seen.iter().find_map(|e| match &e.event {
        KubeletEvent::ApiServer { kubeconfig, .. } => Some(kubeconfig.clone()),
        _ => None,
    }) else {
        return Outcome::skip("no local API server");
    };
    let api = need!(crate::plugin::dra::slices::load_kubeconfig(std::path::Path::new(&kubeconfig))
        .map_err(|e| Outcome::fail("read the local API server's kubeconfig", e.to_string(), "report this bug")));
    let node = crate::kubelet::dra::NODE_NAME;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let path = format!("{}?fieldSelector=spec.driver%3D{}", crate::plugin::dra::slices::SLICES_PATH, d.name);
        let (_, list) = need!(crate::plugin::dra::slices::request(&api, "GET", &path, None, s.timeout)
            .await
            .map_err(|e| Outcome::fail("list ResourceSlices", e.to_string(), "report this bug")));
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if let Some(slice) = items.iter().find(|x| x["spec"]["nodeName"] == node) {
            let n = slice["spec"]["devices"].as_array().map(Vec::len).unwrap_or(0);
            return Outcome::pass(format!(
                "{n} device(s) in pool {}",
                slice["spec"]["pool"]["name"].as_str().unwrap_or("?")
            ));
        }
        if Instant::now() > deadline {
            let nodes: Vec<String> = items.iter().map(|x| x["spec"]["nodeName"].to_string()).collect();
            return Outcome::fail(
                "GET /apis/resource.k8s.io/v1/resourceslices",
                if items.is_empty() {
                    "no ResourceSlice of the driver".to_string()
                } else {
                    format!("slices for nodes {} only", nodes.join(", "))
                },
                "publish the devices for the node (pass {kubeconfig} and {node-name} to the driver)",
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
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
    let r = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| fail(
        &rules::SERVICE_ANSWERS,
        "NodePrepareResources",
        e.to_string()
    )));
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

/// DRA-PREP-003
pub(crate) async fn prepare_twice(s: &mut Sess) -> Outcome {
    let Some(claim) = s.engine_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let (c, d) = need!(s.conn().await);
    let a = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| fail(
        &rules::SERVICE_ANSWERS,
        "NodePrepareResources",
        e.to_string()
    )));
    let b = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| fail(
        &rules::IDEMPOTENT,
        "NodePrepareResources (again)",
        e.to_string()
    )));
    if rules::same_answer(&a, &b) {
        Outcome::pass("")
    } else {
        fail(&rules::IDEMPOTENT, "NodePrepareResources twice", format!("first {:?}, then {:?}", a.claims, b.claims))
    }
}

/// DRA-PREP-004: per claim DRA-PREP-001 prepared, the devices the kubelet
/// allocated (claim-allocated) against those the driver prepared (claim-prepared).
pub(crate) async fn allocated_devices_prepared(s: &mut Sess) -> Outcome {
    if s.engine_claims.is_empty() {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    }
    // driver/device: a missing pool name is DRA-PREP-002's finding, not this one's.
    let sorted = |v: &[String]| {
        let mut v: Vec<String> = v
            .iter()
            .map(|w| {
                let parts: Vec<&str> = w.split('/').collect();
                format!("{}/{}", parts.first().unwrap_or(&""), parts.last().unwrap_or(&""))
            })
            .collect();
        v.sort();
        v
    };
    let mut wrong = Vec::new();
    for c in &s.engine_claims {
        let key = format!("{}/{}", c.namespace, c.name);
        let allocated = s.seen.iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimAllocated { claim, devices, .. } if *claim == key => Some(sorted(devices)),
            _ => None,
        });
        let prepared = s.seen.iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimPrepared { claim, devices, .. } if *claim == key => Some(sorted(devices)),
            _ => None,
        });
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
        let r = need!(c.unprepare(&d.service, vec![claim.clone()]).await.map_err(|e| fail(
            &rules::IDEMPOTENT,
            format!("NodeUnprepareResources{n}"),
            e.to_string()
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
    let r = need!(c.unprepare(&d.service, vec![claim]).await.map_err(|e| fail(
        &rules::SERVICE_ANSWERS,
        "NodeUnprepareResources",
        e.to_string()
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
        need!(c.health(&h).await.map_err(|e| fail(&rules::HEALTH_ANSWERS, "NodeWatchResources", e.to_string())));
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
    // The stream stays open: nothing (or another snapshot) for a while, never its end.
    if let Ok(Ok(None)) = tokio::time::timeout(Duration::from_millis(500), stream.next(&d.endpoint)).await {
        return fail(&rules::HEALTH_STREAM, "NodeWatchResources", "the stream ended after its first snapshot");
    }
    Outcome::pass(format!("{} device(s)", snap.len()))
}

/// DRA-RESTART-001
pub(crate) async fn kubelet_restart(s: &mut Sess) -> Outcome {
    s.driver = Some(need!(s.registered(0).await));
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
    need!(s.remove_pod("pod-r").await);
    Outcome::pass("re-registered; claims kept; unprepared after")
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
    s.driver = Some(need!(s.registered(0).await));
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
                format!("{other:?}; driver log: {}", log_tail(&s.tree.logs.join("driver-b.log"), 5)),
                "name both sockets after the rolling-update UID (<driver>-<uid>-reg.sock, a distinct endpoint)",
            )
        }
    };
    if let Some(d) = &mut s.driver {
        d.endpoint = PathBuf::from(&newest);
    }
    need!(s.prepare_pod("pod-u").await);
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
            format!("instances left: {left:?}"),
            "remove only this instance's sockets on exit",
        );
    }
    need!(s.remove_pod("pod-u").await);
    Outcome::pass("two instances; unprepared through the older one")
}

/// DRA-RESTART-002
pub(crate) async fn driver_restart(s: &mut Sess) -> Outcome {
    s.driver = Some(need!(s.registered(0).await));
    need!(s.prepare_pod("pod-d").await);
    let from = s.seen.len();
    if let Some(p) = s.plugin.take() {
        p.stop(Duration::from_secs(10)).await;
    }
    s.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(())).await;
    let from = s.seen.len();
    need!(s.start_plugin().map_err(|e| Outcome::fail("restart the driver", e.to_string(), "check the command")));
    s.driver = Some(need!(s.registered(from).await));
    need!(s.remove_pod("pod-d").await);
    Outcome::pass("re-registered; unprepared through the new instance")
}
