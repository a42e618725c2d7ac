//! `dpctl preferred SOCKET --available … --size N`: GetPreferredAllocation,
//! and a check of the answer against the rules the kubelet relies on.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{
    ContainerPreferredAllocationRequest, PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::core::validate::check_id_list;
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::protocol::deviceplugin;
use crate::render::{emit, structured, Format};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;

/// `dpctl preferred`: its surface.
pub const COMMAND: Spec = Spec {
    name: "preferred",
    about: "Call GetPreferredAllocation and check the answer against the request",
    group: super::surface::Group::Plugin,
    args: surface::args::<PreferredArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<PreferredArgs>,
};

const EXAMPLES: &str = "Examples:
  # Ask for 2 of 4 devices, foo-3 included, and check the answer
  dpctl preferred vendor.sock --available foo-0,foo-1,foo-2,foo-3 --must-include foo-3 --size 2";

/// `dpctl preferred`
#[derive(Debug, Args)]
pub struct PreferredArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Candidate device IDs, comma-separated
    #[arg(long, value_delimiter = ',', required = true, value_name = "ID,ID")]
    pub available: Vec<String>,
    /// Device IDs the answer must include, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub must_include: Vec<String>,
    /// How many devices to ask for
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    pub size: i32,
}

impl Invocation for PreferredArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// The answer checked by the rulebook: (violations that FAIL, warnings).
pub fn judge(
    req: &ContainerPreferredAllocationRequest,
    resp: &PreferredAllocationResponse,
) -> (Vec<String>, Vec<String>) {
    let (fail, warn): (Vec<_>, Vec<_>) = deviceplugin::preferred(req, resp).into_iter().partition(|v| v.is_fail());
    (fail.iter().map(ToString::to_string).collect(), warn.iter().map(ToString::to_string).collect())
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
            let (v, w) = judge(&creq, &resp);
            (Some(resp), w, v)
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

    #[test]
    fn fails_and_warns_by_the_rulebook() {
        let req = ContainerPreferredAllocationRequest {
            available_device_i_ds: vec!["a".into(), "b".into()],
            must_include_device_i_ds: vec![],
            allocation_size: 1,
        };
        let resp = |ids: &[&str]| PreferredAllocationResponse {
            container_responses: vec![ContainerPreferredAllocationResponse {
                device_i_ds: ids.iter().map(|s| s.to_string()).collect(),
            }],
        };
        assert_eq!(judge(&req, &resp(&["a"])), (vec![], vec![]));
        let (v, w) = judge(&req, &resp(&["x"]));
        assert!(v[0].contains("IDs not in the available list: x") && w.is_empty(), "{v:?}");
        let (v, w) = judge(&req, &PreferredAllocationResponse::default());
        assert!(v.is_empty() && w[0].contains("no container_responses"), "{w:?}");
    }
}
