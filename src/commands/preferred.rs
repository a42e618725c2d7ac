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

/// Which rules a preferred allocation breaks, in words.
pub fn violations(req: &ContainerPreferredAllocationRequest, resp: &PreferredAllocationResponse) -> Vec<String> {
    let mut v = Vec::new();
    let Some(first) = resp.container_responses.first() else {
        return vec!["no container_responses: the kubelet reads container_responses[0]".into()];
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
    request: &'a PreferredAllocationRequest,
    response: &'a PreferredAllocationResponse,
    violations: &'a [String],
}

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
    let resp = conn.preferred(req.clone()).await?;
    let v = violations(&creq, &resp);
    match ctx.format {
        Format::Table => {
            let ids = resp.container_responses.first().map(|c| c.device_i_ds.join(",")).unwrap_or_default();
            let mut s = format!("preferred: {}\n", if ids.is_empty() { "(none)" } else { &ids });
            if v.is_empty() {
                s.push_str(&format!(
                    "{} answer honours size, must-include and available\n",
                    crate::render::verdict("PASS")
                ));
            }
            for x in &v {
                s.push_str(&format!("{} {x}\n", crate::render::verdict("FAIL")));
            }
            emit(&s)?;
        }
        f => emit(&structured(f, &Report { request: &req, response: &resp, violations: &v })?)?,
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
        assert!(violations(&r, &PreferredAllocationResponse::default())[0].contains("no container_responses"));
    }
}
