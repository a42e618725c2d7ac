//! `dpctl preferred SOCKET --available … --size N`: GetPreferredAllocation,
//! and a check of the answer against the rules the kubelet relies on.

use super::Ctx;
use crate::api::deviceplugin::{
    ContainerPreferredAllocationRequest, PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::cli::PreferredArgs;
use crate::core::validate::check_id_list;
use crate::core::{Error, Result};
use crate::render::{emit, structured, Format};
use serde::Serialize;
use std::collections::HashSet;

/// What is off in an answer the kubelet still tolerates: no
/// container_responses at all (the kubelet then picks the devices itself).
pub fn warnings(resp: &PreferredAllocationResponse) -> Vec<String> {
    if resp.container_responses.is_empty() {
        vec!["no container_responses: the kubelet ignores the answer and picks the devices itself".into()]
    } else {
        Vec::new()
    }
}

/// Which rules a preferred allocation breaks, in words (an empty answer
/// breaks none: see [`warnings`]).
pub fn violations(req: &ContainerPreferredAllocationRequest, resp: &PreferredAllocationResponse) -> Vec<String> {
    let mut v = Vec::new();
    let Some(first) = resp.container_responses.first() else {
        return v;
    };
    if resp.container_responses.len() > 1 {
        v.push(format!(
            "{} container_responses for 1 container request (the kubelet reads only the first)",
            resp.container_responses.len()
        ));
    }
    let ids = &first.device_i_ds;
    let size = usize::try_from(req.allocation_size).unwrap_or(0);
    if ids.len() != size {
        v.push(format!("size not honoured: asked for {size}, got {}", ids.len()));
    }
    let available: HashSet<&String> = req.available_device_i_ds.iter().collect();
    let foreign: Vec<&String> = ids.iter().filter(|i| !available.contains(i)).collect();
    if !foreign.is_empty() {
        v.push(format!("IDs not in the available list: {}", join(&foreign)));
    }
    let got: HashSet<&String> = ids.iter().collect();
    let missing: Vec<&String> = req.must_include_device_i_ds.iter().filter(|m| !got.contains(m)).collect();
    if !missing.is_empty() {
        v.push(format!("must-include IDs missing: {}", join(&missing)));
    }
    if got.len() != ids.len() {
        v.push("the answer lists a device more than once".into());
    }
    v
}

fn join(ids: &[&String]) -> String {
    ids.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    advertised: bool,
    request: &'a PreferredAllocationRequest,
    response: Option<&'a PreferredAllocationResponse>,
    violations: &'a [String],
    warnings: &'a [String],
}

const NOT_ADVERTISED: &str = "the plugin does not advertise GetPreferredAllocation \
(get_preferred_allocation_available=false): the kubelet would never call it";

/// Run the command.
pub async fn run(ctx: &Ctx, a: &PreferredArgs) -> Result<()> {
    check_id_list("--available", &a.available)?;
    check_id_list("--must-include", &a.must_include)?;
    if let Some(m) = a.must_include.iter().find(|m| !a.available.contains(m)) {
        return Err(Error::usage(format!("--must-include {m:?} is not in --available")));
    }
    if usize::try_from(a.size).unwrap_or(0) > a.available.len() {
        return Err(Error::usage(format!(
            "--size {} is more than the {} available device(s)",
            a.size,
            a.available.len()
        )));
    }
    let creq = ContainerPreferredAllocationRequest {
        available_device_i_ds: a.available.clone(),
        must_include_device_i_ds: a.must_include.clone(),
        allocation_size: a.size,
    };
    let req = PreferredAllocationRequest { container_requests: vec![creq.clone()] };
    let conn = ctx.plugin(&a.socket).await?;
    let advertised = conn.options().await?.get_preferred_allocation_available;
    if !advertised && ctx.format == Format::Table {
        emit(&format!("{} {NOT_ADVERTISED}", crate::render::verdict("WARN")))?;
    }
    let (resp, mut w, v) = match conn.preferred(req.clone()).await {
        Ok(resp) => {
            let v = violations(&creq, &resp);
            (Some(resp.clone()), warnings(&resp), v)
        }
        // Not advertised and not implemented: what the kubelet expects.
        Err(e) if !advertised && e.code() == Some(tonic::Code::Unimplemented) => {
            (None, vec![format!("GetPreferredAllocation is not implemented ({e})")], Vec::new())
        }
        Err(e) => return Err(e.into()),
    };
    // A plugin that does not advertise it is never asked: its answer breaks nothing.
    let (v, not_called) = if advertised { (v, Vec::new()) } else { (Vec::new(), v) };
    w.extend(not_called.into_iter().map(|x| format!("{x} (the kubelet never calls it)")));
    if !advertised {
        w.insert(0, NOT_ADVERTISED.to_string());
    }
    match ctx.format {
        Format::Table => {
            let ids = resp
                .as_ref()
                .and_then(|r| r.container_responses.first())
                .map(|c| c.device_i_ds.join(","))
                .unwrap_or_default();
            let mut s = format!("preferred: {}\n", if ids.is_empty() { "(none)" } else { &ids });
            if v.is_empty() && w.is_empty() {
                s.push_str(&format!(
                    "{} answer honours size, must-include and available\n",
                    crate::render::verdict("PASS")
                ));
            }
            for x in w.iter().filter(|x| x.as_str() != NOT_ADVERTISED) {
                s.push_str(&format!("{} {x}\n", crate::render::verdict("WARN")));
            }
            for x in &v {
                s.push_str(&format!("{} {x}\n", crate::render::verdict("FAIL")));
            }
            emit(&s)?;
        }
        f => emit(&structured(
            f,
            &Report { advertised, request: &req, response: resp.as_ref(), violations: &v, warnings: &w },
        )?)?,
    }
    if v.is_empty() {
        Ok(())
    } else {
        Err(Error::failed(format!(
            "{}: GetPreferredAllocation broke {} rule(s): {}",
            conn.socket().display(),
            v.len(),
            v.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::ContainerPreferredAllocationResponse;

    fn req(avail: &[&str], must: &[&str], size: i32) -> ContainerPreferredAllocationRequest {
        ContainerPreferredAllocationRequest {
            available_device_i_ds: avail.iter().map(|s| s.to_string()).collect(),
            must_include_device_i_ds: must.iter().map(|s| s.to_string()).collect(),
            allocation_size: size,
        }
    }
    fn resp(ids: &[&str]) -> PreferredAllocationResponse {
        PreferredAllocationResponse {
            container_responses: vec![ContainerPreferredAllocationResponse {
                device_i_ds: ids.iter().map(|s| s.to_string()).collect(),
            }],
        }
    }

    #[test]
    fn names_each_broken_rule() {
        let r = req(&["a", "b", "c"], &["c"], 2);
        assert!(violations(&r, &resp(&["a", "c"])).is_empty());
        let v = violations(&r, &resp(&["a", "x", "b"]));
        assert!(v.iter().any(|s| s.contains("asked for 2, got 3")), "{v:?}");
        assert!(v.iter().any(|s| s.contains("not in the available list: x")), "{v:?}");
        assert!(v.iter().any(|s| s.contains("must-include IDs missing: c")), "{v:?}");
        assert!(violations(&r, &resp(&["c", "c"])).iter().any(|s| s.contains("more than once")));
        assert!(violations(&r, &PreferredAllocationResponse::default()).is_empty());
        assert!(warnings(&PreferredAllocationResponse::default())[0].contains("no container_responses"));
        assert!(warnings(&resp(&["a"])).is_empty());
    }
}
