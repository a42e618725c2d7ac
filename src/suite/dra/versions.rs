//! DRA-VER-001: every service version a driver advertises answers, and
//! alike. The kubelet talks to the first DRAPlugin service of
//! `supported_versions` it knows and follows one health service (the
//! newest), so the others a driver advertises go untested by every other
//! scenario, yet another kubelet version picks them: a 1.33 kubelet
//! v1beta1.DRAPlugin, a 1.36 one v1alpha1.DRAResourceHealth (upstream's
//! test/e2e_node/dra_test.go runs its health cases for v1alpha1 only, v1
//! only and both). Each advertised DRAPlugin service the kubelet did not
//! choose prepares one of DRA-PREP-001's claims again (idempotent) and must
//! answer the kubelet's CDI IDs; each health service it does not follow
//! must send a snapshot naming the same devices as the one it follows.

use super::races::answered_ids;
use super::session::{call_failed, fail, Sess};
use crate::client::dra::DraConn;
use crate::protocol::dra::{self as rules, DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1};
use crate::suite::Outcome;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a health service may take to send its first snapshot.
const SNAPSHOT_WITHIN: Duration = Duration::from_secs(5);

/// The DRAPlugin and health services of `advertised` the suite can call, other than `used` (pure).
fn others<'a>(advertised: &'a [String], used: &[&str]) -> (Vec<&'a str>, Vec<&'a str>) {
    let known = |s: &&'a str, set: &[&str]| set.contains(s) && !used.contains(s);
    let list: Vec<&str> = advertised.iter().map(String::as_str).collect();
    let dra = list.iter().copied().filter(|s| known(s, &[DRA_V1, DRA_V1BETA1])).collect();
    let health = list.iter().copied().filter(|s| known(s, &[HEALTH_V1, HEALTH_V1ALPHA1])).collect();
    (dra, health)
}

/// Why a health service gave no first snapshot.
#[derive(Debug)]
enum NoSnapshot {
    /// The call or the stream failed.
    Call(crate::core::Error),
    /// Nothing came within the time given.
    Late(Duration),
    /// The stream ended first.
    Ended,
}

impl std::fmt::Display for NoSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoSnapshot::Call(e) => write!(f, "{e}"),
            NoSnapshot::Late(d) => write!(f, "no snapshot within {d:?}"),
            NoSnapshot::Ended => f.write_str("the stream ended before its first snapshot"),
        }
    }
}

impl std::error::Error for NoSnapshot {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NoSnapshot::Call(e) => Some(e),
            _ => None,
        }
    }
}

/// The first snapshot's `pool/device` names from `service`.
async fn snapshot(c: &DraConn, service: &str) -> Result<BTreeSet<String>, NoSnapshot> {
    let socket = c.socket().to_path_buf();
    let first = async {
        let mut stream = c.health(service).await?;
        stream.next(&socket).await
    };
    match tokio::time::timeout(SNAPSHOT_WITHIN, first).await {
        Err(_) => Err(NoSnapshot::Late(SNAPSHOT_WITHIN)),
        Ok(Err(e)) => Err(NoSnapshot::Call(e)),
        Ok(Ok(None)) => Err(NoSnapshot::Ended),
        Ok(Ok(Some(devices))) => Ok(devices
            .iter()
            .map(|d| {
                let (pool, name) =
                    d.device.as_ref().map(|x| (x.pool_name.as_str(), x.device_name.as_str())).unwrap_or_default();
                format!("{pool}/{name}")
            })
            .collect()),
    }
}

/// DRA-VER-001
pub(crate) async fn each_service(s: &mut Sess) -> Outcome {
    let Some((uid, _)) = s.prepared_claims.first().cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let Some(claim) = s.engine_claims.iter().find(|c| c.uid == uid).cloned() else {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    };
    let d = need!(s.driver().await);
    let t = s.timeout;
    let reg = need!(DraConn::connect(&d.socket, t).await.map_err(|e| fail(
        &rules::ENDPOINT_REACHABLE,
        "dial the registration socket",
        e.to_string()
    )));
    let info = need!(reg.info().await.map_err(|e| call_failed(&rules::VERSIONS, "GetInfo", e, t)));
    let mut used = vec![d.service.as_str()];
    used.extend(d.health.as_deref());
    let (dra, health) = others(&info.supported_versions, &used);
    if dra.is_empty() && health.is_empty() {
        return Outcome::pass(format!("one service of each kind advertised: {}", info.supported_versions.join(", ")));
    }
    let (c, _) = need!(s.conn().await);
    // The reference: the same prepare on the kubelet's service now (a repeat
    // prepare that misbehaves there is DRA-PREP-003's to judge).
    let want = if dra.is_empty() {
        Vec::new()
    } else {
        let mut twice = Vec::new();
        for _ in 0..2 {
            let r = need!(c.prepare(&d.service, vec![claim.clone()]).await.map_err(|e| call_failed(
                &rules::IDEMPOTENT,
                format!("NodePrepareResources on {}", d.service),
                e,
                t
            )));
            match answered_ids(&r, &claim.uid) {
                Ok(ids) => twice.push(ids),
                Err(e) => {
                    return Outcome::skip(format!(
                        "preparing the claim again on {} fails ({e}): DRA-PREP-003 judges that",
                        d.service
                    ))
                }
            }
        }
        if twice[0] != twice[1] {
            return Outcome::skip(format!(
                "{} answers a repeat prepare differently: DRA-PREP-003 judges that",
                d.service
            ));
        }
        twice.swap_remove(0)
    };
    let mut checked = Vec::new();
    for service in dra {
        let rpc = format!("NodePrepareResources on {service} (advertised; the kubelet uses {})", d.service);
        let r = need!(c.prepare(service, vec![claim.clone()]).await.map_err(|e| call_failed(
            &rules::VERSIONS,
            rpc.clone(),
            e,
            t
        )));
        match answered_ids(&r, &claim.uid) {
            Ok(ids) if ids == want => checked.push(format!("{service} answers alike")),
            Ok(ids) => {
                return fail(
                    &rules::VERSIONS,
                    rpc,
                    format!("CDI IDs [{}], where {} answered [{}]", ids.join(", "), d.service, want.join(", ")),
                )
            }
            Err(e) => return fail(&rules::VERSIONS, rpc, e.to_string()),
        }
    }
    if !health.is_empty() {
        let followed = match d.health.as_deref() {
            Some(h) => snapshot(&c, h).await.ok(),
            None => None,
        };
        for service in health {
            let rpc = format!(
                "NodeWatchResources on {service} (advertised; the kubelet follows {})",
                d.health.as_deref().unwrap_or("none")
            );
            match snapshot(&c, service).await {
                Err(e) => return fail(&rules::HEALTH_ANSWERS, rpc, e.to_string()),
                Ok(got) if followed.as_ref().is_some_and(|f| *f != got) => {
                    let f = followed.unwrap_or_default();
                    return fail(
                        &rules::HEALTH_DEVICE,
                        rpc,
                        format!(
                            "its snapshot names [{}], the followed service's [{}]",
                            got.into_iter().collect::<Vec<_>>().join(", "),
                            f.into_iter().collect::<Vec<_>>().join(", ")
                        ),
                    );
                }
                Ok(got) => checked.push(format!("{service} sends a snapshot ({} device(s))", got.len())),
            }
        }
    }
    Outcome::pass(checked.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_left_to_check_are_the_known_ones_the_kubelet_does_not_use() {
        let adv: Vec<String> =
            [DRA_V1, DRA_V1BETA1, "v9.Future", HEALTH_V1, HEALTH_V1ALPHA1].iter().map(|s| s.to_string()).collect();
        let (dra, health) = others(&adv, &[DRA_V1, HEALTH_V1]);
        assert_eq!((dra, health), (vec![DRA_V1BETA1], vec![HEALTH_V1ALPHA1]));
        let (dra, health) = others(&adv[..1], &[DRA_V1]);
        assert!(dra.is_empty() && health.is_empty());
    }
}
