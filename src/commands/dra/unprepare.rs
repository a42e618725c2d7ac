//! `dpctl dra unprepare SOCKET --claim NS/NAME/UID…`: NodeUnprepareResources.

use super::{claim_text, dra_service, target, Ctx, DraClaimsArgs};
use crate::core::{Error, Result};
use crate::protocol::dra as rules;
use crate::protocol::{Severity, Violation};
use crate::render::{emit, structured, table, Format};

pub(super) const EXAMPLES: &str = "Examples:
  dpctl dra unprepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001";

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraClaimsArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let svc = dra_service(a.service.as_deref(), t.advertised())?;
    let uids: Vec<String> = a.claims.iter().map(|c| c.uid.clone()).collect();
    let resp = t.service.unprepare(svc, a.claims.clone()).await?;
    let v = rules::unprepare_violations(&uids, &resp);
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = a
                .claims
                .iter()
                .map(|c| {
                    let r = match resp.claims.get(&c.uid) {
                        None => "(no answer)".to_string(),
                        Some(r) if r.error.is_empty() => "unprepared".into(),
                        Some(r) => r.error.clone(),
                    };
                    vec![claim_text(c), r]
                })
                .collect();
            emit(&table(&["CLAIM", "RESULT"], &rows))?;
            for x in &v {
                eprintln!("warning: {}", x.explained());
            }
        }
        f => emit(&structured(f, &resp)?)?,
    }
    let failed = resp.claims.values().filter(|r| !r.error.is_empty()).count();
    if failed > 0 {
        return Err(Error::failed(format!("{failed} of {} claim(s) failed to unprepare", a.claims.len())));
    }
    if v.iter().any(|x| x.rule.severity == Severity::Fail) {
        let t: Vec<String> = v.iter().map(Violation::explained).collect();
        return Err(Error::failed(format!("the answer breaks the kubelet's rules: {}", t.join("; "))));
    }
    Ok(())
}
