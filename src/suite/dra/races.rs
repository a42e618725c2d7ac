//! Redundant and racing prepares (DRA-PREP-007): the kubelet calls
//! NodePrepareResources again for a claim whose earlier call it gave up on
//! (45 s) while that call may still run in the driver, so prepares of one
//! claim overlap. Drivers that re-ran the preparation on a repeat
//! overwrote their "prepare completed" state and the claim's CDI spec
//! (dra-driver-nvidia-gpu#729, #754; #782 asks for this test).

use super::session::{call_failed, fail, past_deadline, Sess};
use crate::api::dra_v1::NodePrepareResourcesResponse;
use crate::kubelet::dra::shell::unresolved_cdi;
use crate::protocol::dra as rules;
use crate::suite::Outcome;

/// How many prepares of the claim run at once.
const CONCURRENT: usize = 4;

/// What is wrong with a NodePrepareResources answer for one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BadAnswer {
    /// An entry for a claim UID (this one) that was not asked.
    NotAsked(String),
    /// No entry for the claim.
    NoEntry,
    /// The claim's entry has this error.
    Error(String),
}

impl std::fmt::Display for BadAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadAnswer::NotAsked(uid) => write!(f, "an entry for claim UID {uid}, which was not asked"),
            BadAnswer::NoEntry => f.write_str("no entry for the claim"),
            BadAnswer::Error(e) => write!(f, "error: {e}"),
        }
    }
}

impl std::error::Error for BadAnswer {}

/// The sorted CDI IDs answered for `uid`, or what is wrong with the answer (pure).
pub(super) fn answered_ids(r: &NodePrepareResourcesResponse, uid: &str) -> Result<Vec<String>, BadAnswer> {
    if let Some(extra) = r.claims.keys().find(|u| *u != uid) {
        return Err(BadAnswer::NotAsked(extra.clone()));
    }
    let Some(x) = r.claims.get(uid) else { return Err(BadAnswer::NoEntry) };
    if !x.error.is_empty() {
        return Err(BadAnswer::Error(x.error.clone()));
    }
    let mut ids: Vec<String> = x.devices.iter().flat_map(|d| d.cdi_device_ids.iter().cloned()).collect();
    ids.sort();
    Ok(ids)
}

/// DRA-PREP-007: one of DRA-PREP-001's claims is unprepared, then prepared
/// by [`CONCURRENT`] calls at once and twice more in sequence: every answer
/// is the same, and every CDI ID answered (the first answer's included)
/// resolves at the end. The kubelet still counts the claim prepared, as it
/// is again when the scenario ends.
pub(crate) async fn concurrent_prepares(s: &mut Sess) -> Outcome {
    let Some(claim) = s.engine_claims.get(1).or(s.engine_claims.first()).cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let (c, d) = need!(s.conn().await);
    let t = s.timeout;
    let r = need!(c.unprepare(&d.service, vec![claim.clone()]).await.map_err(|e| call_failed(
        &rules::SERVICE_ANSWERS,
        "NodeUnprepareResources (before the concurrent prepares)",
        e,
        t
    )));
    if let Some(e) = r.claims.get(&claim.uid).filter(|x| !x.error.is_empty()) {
        return fail(
            &rules::IDEMPOTENT,
            "NodeUnprepareResources (before the concurrent prepares)",
            format!("error: {}", e.error),
        );
    }
    let one = || c.prepare(&d.service, vec![claim.clone()]);
    let (a, b, x, y) = tokio::join!(one(), one(), one(), one());
    let mut answers = Vec::with_capacity(CONCURRENT + 2);
    for (i, r) in [a, b, x, y].into_iter().enumerate() {
        let rpc = format!("NodePrepareResources ({} of {CONCURRENT} at once)", i + 1);
        answers.push((rpc.clone(), need!(r.map_err(|e| call_failed(&rules::IDEMPOTENT, rpc, e, t)))));
    }
    for n in 1..=2 {
        let rpc = format!("NodePrepareResources (again, {n} of 2 in sequence)");
        let r = need!(one().await.map_err(|e| call_failed(&rules::IDEMPOTENT, rpc.clone(), e, t)));
        answers.push((rpc, r));
    }
    let mut ids = Vec::with_capacity(answers.len());
    for (rpc, r) in &answers {
        match answered_ids(r, &claim.uid) {
            Ok(i) => ids.push((rpc.clone(), i)),
            Err(e) => return fail(&rules::IDEMPOTENT, rpc.clone(), e.to_string()),
        }
    }
    let first = ids[0].1.clone();
    let differ: Vec<String> =
        ids.iter().filter(|(_, i)| *i != first).map(|(rpc, i)| format!("{rpc}: [{}]", i.join(", "))).collect();
    let all: Vec<String> = {
        let mut v: Vec<String> = ids.iter().flat_map(|(_, i)| i.iter().cloned()).collect();
        v.sort();
        v.dedup();
        v
    };
    let lost = unresolved_cdi(&[s.tree.cdi_dir()], &all);
    // What the claim is prepared as now, for DRA-CDI-002's check after the kubelet unprepares it.
    if let Some(last) = ids.last() {
        if let Some(p) = s.prepared_claims.iter_mut().find(|(u, _)| *u == claim.uid) {
            p.1 = last.1.clone();
        }
    }
    const FIX: &str = "prepare a claim once: record \"prepared\" under the lock that checks it, answer a repeat (or a call overlapping one still running) from that record, and never rewrite a prepared claim's CDI spec under new names (dra-driver-nvidia-gpu#729, #754)";
    if !differ.is_empty() {
        return Outcome::fail(
            format!(
                "NodePrepareResources of claim {}/{}, {CONCURRENT} at once then 2 in sequence",
                claim.namespace, claim.name
            ),
            format!("answers differ: {} first [{}]; {}", ids[0].0, first.join(", "), differ.join("; ")),
            FIX,
        );
    }
    if !lost.is_empty() {
        return Outcome::fail(
            format!("CDI spec files after {} prepares of claim {}/{}", answers.len(), claim.namespace, claim.name),
            format!(
                "{} answered for the claim resolve to no spec file (a container given them fails)",
                lost.join(", ")
            ),
            FIX,
        );
    }
    Outcome::pass(format!(
        "{} prepares ({CONCURRENT} at once) answered [{}]; every ID resolves",
        answers.len(),
        first.join(", ")
    ))
}

/// The deadlines DRA-PREP-008 gives its prepares, shortest first: a
/// driver's preparation outlasts at least the first.
const LATE_DEADLINES: [std::time::Duration; 3] =
    [std::time::Duration::from_millis(2), std::time::Duration::from_millis(20), std::time::Duration::from_millis(100)];

/// How long DRA-PREP-008 watches for a preparation finishing after its
/// call was given up (a driver that holds one longer goes unseen).
const LATE_WINDOW: std::time::Duration = std::time::Duration::from_millis(750);

/// DRA-PREP-008: the kubelet gives up on a prepare at its deadline and,
/// when the pod goes, unprepares the claim; a driver whose preparation
/// outlives the call (not tied to the call's context) finishes it after
/// the unprepare and leaves the claim prepared: its CDI spec stays, its
/// devices stay taken (dra-driver-nvidia-gpu#1162, #1188). One of
/// DRA-PREP-001's claims is unprepared, then prepared with a deadline too
/// short to finish (each of [`LATE_DEADLINES`]) and unprepared at once;
/// [`LATE_WINDOW`] later nothing prepare creates for the claim may exist.
/// The claim is prepared again at the end, as the kubelet counts it.
pub(crate) async fn late_prepare(s: &mut Sess) -> Outcome {
    let Some((uid, ids)) = s.prepared_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let Some(claim) = s.engine_claims.iter().find(|c| c.uid == uid).cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let (c, d) = need!(s.conn().await);
    let t = s.timeout;
    let unprepare = |rpc: &'static str| {
        let c = &c;
        let claim = claim.clone();
        let service = d.service.clone();
        async move {
            let r = c
                .unprepare(&service, vec![claim.clone()])
                .await
                .map_err(|e| call_failed(&rules::SERVICE_ANSWERS, rpc, e, t))?;
            match r.claims.get(&claim.uid).filter(|x| !x.error.is_empty()) {
                Some(x) => Err(fail(&rules::IDEMPOTENT, rpc, format!("error: {}", x.error))),
                None => Ok(()),
            }
        }
    };
    need!(unprepare("NodeUnprepareResources (before the late prepares)").await);
    let before = super::cdi::defined(&super::cdi::scan(&s.tree.cdi_dir()));
    let kept =
        super::cdi::leftovers(&[(uid.clone(), ids.clone())], &s.cdi_before, &super::cdi::scan(&s.tree.cdi_dir()));
    if !kept.is_empty() {
        // A spec an unprepare leaves is DRA-CDI-002's to judge; here it would hide a late one.
        let _ = c.prepare(&d.service, vec![claim.clone()]).await;
        return Outcome::skip(format!(
            "an unprepare leaves the claim's CDI spec ({}): DRA-CDI-002 judges that",
            kept.join("; ")
        ));
    }
    let mut gave_up = Vec::new();
    for deadline in LATE_DEADLINES {
        let short = c.with_timeout(deadline);
        match short.prepare(&d.service, vec![claim.clone()]).await {
            Err(e) if past_deadline(&e) => gave_up.push(format!("{deadline:?}")),
            // Finished in time, or refused: the unprepare below undoes either.
            _ => {}
        }
        need!(unprepare("NodeUnprepareResources (right after a prepare given up at its deadline)").await);
    }
    // Whatever is still running in the driver finishes within the window, or goes unseen.
    let end = tokio::time::Instant::now() + LATE_WINDOW;
    let mut left = Vec::new();
    while tokio::time::Instant::now() < end {
        left = super::cdi::leftovers(&[(uid.clone(), ids.clone())], &before, &super::cdi::scan(&s.tree.cdi_dir()));
        if !left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Prepared again for the kubelet, which never unprepared it; DRA-UNPREP-001 does.
    let again = c.prepare(&d.service, vec![claim.clone()]).await;
    let again = need!(again.map_err(|e| call_failed(
        &rules::IDEMPOTENT,
        "NodePrepareResources (after the late prepares)",
        e,
        t
    )));
    if let Ok(new_ids) = answered_ids(&again, &claim.uid) {
        if let Some(p) = s.prepared_claims.iter_mut().find(|(u, _)| *u == claim.uid) {
            p.1 = new_ids;
        }
    }
    if !left.is_empty() {
        return Outcome::fail(
            format!(
                "NodePrepareResources of claim {}/{} given up at its deadline ({}), then NodeUnprepareResources",
                claim.namespace,
                claim.name,
                gave_up.join(", ")
            ),
            format!(
                "after the unprepare answered, a preparation still finished and left the claim prepared: {}",
                left.join("; ")
            ),
            "tie the preparation to the call's context: stop (and undo) it when the call is cancelled or its deadline passes, and serialize prepare and unprepare of a claim so an unprepare that comes after wins (dra-driver-nvidia-gpu#1162, #1188)",
        );
    }
    Outcome::pass(if gave_up.is_empty() {
        format!("every prepare finished within {:?}; nothing left after unprepare", LATE_DEADLINES[0])
    } else {
        format!("prepares given up at {}; nothing left after unprepare", gave_up.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::dra_v1::{Device, NodePrepareResourceResponse};

    fn answer(uid: &str, ids: &[&str], error: &str) -> NodePrepareResourcesResponse {
        let mut r = NodePrepareResourcesResponse::default();
        r.claims.insert(
            uid.into(),
            NodePrepareResourceResponse {
                devices: vec![Device {
                    cdi_device_ids: ids.iter().map(|s| s.to_string()).collect(),
                    ..Default::default()
                }],
                error: error.into(),
            },
        );
        r
    }

    #[test]
    fn an_answer_gives_its_sorted_ids_or_says_what_is_wrong() {
        assert_eq!(answered_ids(&answer("u", &["v/c=b", "v/c=a"], ""), "u").unwrap(), ["v/c=a", "v/c=b"]);
        assert_eq!(answered_ids(&answer("u", &[], "boom"), "u").unwrap_err().to_string(), "error: boom");
        assert_eq!(
            answered_ids(&answer("u", &[], ""), "w").unwrap_err().to_string(),
            "an entry for claim UID u, which was not asked"
        );
        let e = answered_ids(&NodePrepareResourcesResponse::default(), "u").unwrap_err();
        assert_eq!((e.to_string().as_str(), e), ("no entry for the claim", BadAnswer::NoEntry));
    }
}
