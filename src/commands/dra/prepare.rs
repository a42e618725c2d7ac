//! `dpctl dra prepare SOCKET --claim NS/NAME/UID…`: NodePrepareResources,
//! the answer checked against the kubelet's rules and its CDI IDs resolved.

use super::{answer_text, claim_text, dra_service, target, Ctx, DraClaimsArgs};
use crate::commands::shared::cdi::{self, Resolution};
use crate::core::{Error, Result};
use crate::protocol::dra as rules;
use crate::protocol::{Severity, Violation};
use crate::render::{emit, structured, table, Format};
use serde::Serialize;
use std::collections::BTreeMap;

pub(super) const EXAMPLES: &str = "Examples:
  dpctl dra prepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001
  # two claims, called twice (idempotence), CDI IDs resolved, on the deprecated v1beta1 service
  dpctl dra prepare dra.sock --claim ml/a/uid-a --claim ml/b/uid-b --twice --cdi-spec-dir /var/run/cdi --service v1beta1";

/// `-o json` of prepare: the answer and the rules it breaks.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrepareOutput<'a> {
    socket: String,
    service: &'a str,
    claims: &'a BTreeMap<String, crate::api::dra_v1::NodePrepareResourceResponse>,
    violations: Vec<String>,
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraClaimsArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let svc = dra_service(a.service.as_deref(), t.advertised())?;
    let uids: Vec<String> = a.claims.iter().map(|c| c.uid.clone()).collect();
    let resp = t.service.prepare(svc, a.claims.clone()).await?;
    let mut v = rules::prepare_violations(&uids, &resp);
    if a.twice {
        let second = t.service.prepare(svc, a.claims.clone()).await?;
        if !rules::same_answer(&resp, &second) {
            v.push(rules::IDEMPOTENT.violated(format!(
                "the second call answered {} (first: {})",
                answer_text(&second),
                answer_text(&resp)
            )));
        }
    }
    let mut problems: Vec<String> = v.iter().map(Violation::explained).collect();
    // CDI IDs must resolve to a spec, or the runtime fails the container (as probe --allocate checks).
    let ids: Vec<String> = resp
        .claims
        .values()
        .filter(|r| r.error.is_empty())
        .flat_map(|r| &r.devices)
        .flat_map(|d| d.cdi_device_ids.iter().filter(|id| crate::protocol::cdi::name_ok(id)).cloned())
        .collect();
    let dirs = ctx.paths.cdi_spec_dirs(&a.cdi_spec_dir);
    let mut notes = Vec::new();
    match cdi::resolve(&dirs, !a.cdi_spec_dir.is_empty(), &ids) {
        Resolution::Resolved { .. } => {}
        // Not a node with CDI specs (a workstation): say so, do not fail.
        Resolution::NoSpecDirectory { dirs } => notes.push(format!(
            "the CDI IDs cannot be resolved here: no CDI spec directory ({}); on a node unresolvable IDs fail the container (pass --cdi-spec-dir)",
            Resolution::dirs_text(&dirs)
        )),
        Resolution::Unresolvable(bad) => {
            let path = Resolution::dirs_text(&dirs);
            problems.extend(bad.into_iter().map(|b| format!("unresolvable CDI device {b} (CDI search path: {path})")));
        }
    }
    match ctx.format {
        Format::Table => {
            let mut rows = Vec::new();
            for c in &a.claims {
                match resp.claims.get(&c.uid) {
                    None => rows.push(vec![claim_text(c), "-".into(), "-".into(), "-".into(), "(no answer)".into()]),
                    Some(r) if !r.error.is_empty() => {
                        rows.push(vec![claim_text(c), "-".into(), "-".into(), "-".into(), r.error.clone()])
                    }
                    Some(r) if r.devices.is_empty() => rows.push(vec![
                        claim_text(c),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "prepared, no devices".into(),
                    ]),
                    Some(r) => {
                        for d in &r.devices {
                            rows.push(vec![
                                claim_text(c),
                                format!("{}/{}", d.pool_name, d.device_name),
                                if d.request_names.is_empty() { "*".into() } else { d.request_names.join(",") },
                                d.cdi_device_ids.join(","),
                                "prepared".into(),
                            ]);
                        }
                    }
                }
            }
            emit(&table(&["CLAIM", "DEVICE", "REQUESTS", "CDI DEVICE IDS", "RESULT"], &rows))?;
            for p in problems.iter().chain(&notes) {
                eprintln!("warning: {p}");
            }
        }
        f => emit(&structured(
            f,
            &PrepareOutput {
                socket: t.socket.display().to_string(),
                service: svc,
                claims: &resp.claims,
                violations: problems.clone(),
            },
        )?)?,
    }
    let failed: Vec<&String> = a
        .claims
        .iter()
        .filter_map(|c| resp.claims.get(&c.uid))
        .filter(|r| !r.error.is_empty())
        .map(|r| &r.error)
        .collect();
    let fatal = v.iter().any(|x| x.rule.severity == Severity::Fail) || problems.len() > v.len();
    if !failed.is_empty() {
        return Err(Error::failed(format!("{} of {} claim(s) failed to prepare", failed.len(), a.claims.len())));
    }
    if fatal {
        return Err(Error::failed(format!("the answer breaks the kubelet's rules: {}", problems.join("; "))));
    }
    Ok(())
}
