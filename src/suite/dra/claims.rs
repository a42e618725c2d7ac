//! The claim-identity scenarios: the claim the kubelet names is not the
//! API server's (DRA-PREP-005, kubernetes#131617: a claim deleted and
//! re-created under the same name has another UID), and a claim that is
//! gone before the driver fetches it (DRA-PREP-006: an error, the driver
//! stays up). The kubeletplugin helper fails the whole call for either
//! (draplugin.go getResourceClaims: "claim NS/NAME got replaced", "retrieve
//! claim …"); a per-claim error is as good: only that claim is asked. Both apply to drivers that read claims from the API
//! server (they publish slices there); others are skipped.

use super::session::{fail, hung, past_deadline, Sess, NS};
use crate::api::dra_v1::Claim;
use crate::protocol::dra as rules;
use crate::suite::Outcome;

/// Whether the driver uses the API server (it published a slice for the node).
pub(super) async fn uses_api_server(s: &mut Sess) -> Result<(), Outcome> {
    let d = s.driver().await?;
    if s.node_slices(&d.name).await?.is_empty() {
        return Err(Outcome::skip(
            "the driver publishes no ResourceSlice: it does not read claims from the API server",
        ));
    }
    Ok(())
}

/// DRA-PREP-005
pub(crate) async fn uid_mismatch(s: &mut Sess) -> Outcome {
    let Some(real) = s.engine_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    need!(uses_api_server(s).await);
    let (c, d) = need!(s.conn().await);
    let other = Claim { uid: format!("{}-recreated", real.uid), ..real.clone() };
    let r = c.prepare(&d.service, vec![other.clone()]).await;
    // Whatever it did, leave nothing prepared for the made-up UID.
    let _ = c.unprepare(&d.service, vec![other.clone()]).await;
    // The kubeletplugin helper fails the whole call ("get resource claims: …
    // got replaced"), others the claim: either refuses it.
    let answer = match r {
        Err(e) if past_deadline(&e) => {
            return hung("NodePrepareResources (a claim whose UID is not the API server's)", s.timeout)
        }
        Err(e) => return Outcome::pass(format!("refused (the call): {e}")),
        Ok(r) => r.claims.get(&other.uid).cloned().unwrap_or_default(),
    };
    if !answer.error.is_empty() {
        return Outcome::pass(format!("refused: {}", answer.error));
    }
    Outcome::fail(
        "NodePrepareResources (a claim whose UID is not the API server's)",
        format!(
            "prepared {}/{} for UID {} although the API server's claim of that name has UID {} ({} device(s))",
            other.namespace,
            other.name,
            other.uid,
            real.uid,
            answer.devices.len()
        ),
        "compare the fetched claim's metadata.uid with the UID the kubelet sent and fail that claim when they differ (kubernetes#131617)",
    )
}

/// DRA-PREP-006
pub(crate) async fn deleted_claim(s: &mut Sess) -> Outcome {
    if s.engine_claims.is_empty() {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    }
    need!(uses_api_server(s).await);
    let (c, d) = need!(s.conn().await);
    let mut gone = s.claim();
    gone.name = format!("deleted-{}", gone.name);
    gone.namespace = NS.into();
    let rpc = "NodePrepareResources (a claim deleted before the driver fetched it)";
    let r = c.prepare(&d.service, vec![gone.clone()]).await;
    // Still up: the process runs and answers another call.
    let exited = s.plugin.as_mut().and_then(|p| p.exited());
    let after = c.unprepare(&d.service, vec![gone.clone()]).await;
    if let Some(st) = exited {
        return Outcome::fail(
            rpc,
            format!("the driver exited ({st})"),
            "answer a claim the API server does not have with an error for that claim, and keep serving",
        );
    }
    if let Err(e) = &r {
        if past_deadline(e) {
            return hung(rpc, s.timeout);
        }
    }
    if let Err(e) = after {
        if past_deadline(&e) {
            return hung("NodeUnprepareResources (after a claim the API server does not have)", s.timeout);
        }
        return Outcome::fail(
            rpc,
            format!("the driver stopped answering after it: {e}"),
            "answer a claim the API server does not have with an error for that claim, and keep serving",
        );
    }
    match r {
        // The kubeletplugin helper fails the whole call ("retrieve claim …: not found"): one claim asked, the same.
        Err(e) => Outcome::pass(format!("refused (the call): {e}")),
        Ok(r) => match r.claims.get(&gone.uid) {
            Some(x) if !x.error.is_empty() => Outcome::pass(format!("per-claim error: {}", x.error)),
            Some(x) => Outcome::fail(
                rpc,
                format!("prepared {} device(s) for a claim the API server does not have", x.devices.len()),
                "fetch the claim and fail it when it is not found",
            ),
            None => fail(&rules::ANSWER_COMPLETE, rpc, "no entry for the claim"),
        },
    }
}
