//! `dpctl bench allocate | preferred | list-and-watch`: a device plugin's
//! RPCs driven at a chosen concurrency.

use super::{progress, show_load, Ctx, LoadArgs};
use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest, Empty, PreferredAllocationRequest,
};
use crate::api::HEALTHY;
use crate::bench::{load, Budget};
use crate::client::conn::{PluginConn, Update};
use crate::core::status::grpc_go_code;
use crate::core::{Error, Result};
use std::sync::Arc;

async fn healthy_ids(conn: &PluginConn) -> Result<Vec<String>> {
    let mut s = conn.list_and_watch().await?;
    match s.next().await? {
        Update::Snapshot(r) => Ok(r.devices.into_iter().filter(|d| d.health == HEALTHY).map(|d| d.id).collect()),
        Update::Closed => Err(Error::failed(format!(
            "{}: the plugin closed ListAndWatch before its first snapshot",
            conn.socket().display()
        ))),
    }
}

pub(super) async fn load_cmd(ctx: &Ctx, a: &LoadArgs, which: &str) -> Result<()> {
    let conn =
        PluginConn::connect(&ctx.paths.resolve_socket(&a.socket), ctx.timeout, crate::commands::INSPECT_MAX_RECV)
            .await?;
    let budget = a.duration.map(Budget::Duration).unwrap_or(Budget::Requests(a.requests));
    let c = a.concurrency as usize;
    let k = a.devices_per_request as usize;
    let report = match which {
        "ListAndWatch" => {
            let client = conn.client();
            load(
                "ListAndWatch",
                c,
                budget,
                progress(ctx, a.duration, a.requests, "calls"),
                crate::core::interrupted(),
                move |_| {
                    let mut client = client.clone();
                    async move {
                        let mut s = client.list_and_watch(Empty {}).await.map_err(|s| grpc_go_code(&s))?.into_inner();
                        s.message().await.map_err(|s| grpc_go_code(&s))?.ok_or(tonic::Code::Unavailable).map(|_| ())
                    }
                },
            )
            .await
        }
        _ => {
            let ids = Arc::new(healthy_ids(&conn).await?);
            if ids.len() < k {
                return Err(Error::usage(format!(
                    "--devices-per-request {k} is more than the plugin's {} healthy device(s)",
                    ids.len()
                )));
            }
            let client = conn.client();
            if which == "Allocate" {
                load(
                    "Allocate",
                    c,
                    budget,
                    progress(ctx, a.duration, a.requests, "calls"),
                    crate::core::interrupted(),
                    move |i| {
                        let (mut client, ids) = (client.clone(), ids.clone());
                        async move {
                            let n = ids.len() as u64;
                            let start = ((i % n) as usize * k) % ids.len();
                            let devs: Vec<String> = (0..k).map(|j| ids[(start + j) % ids.len()].clone()).collect();
                            let req = AllocateRequest {
                                container_requests: vec![ContainerAllocateRequest { devices_ids: devs }],
                            };
                            client.allocate(req).await.map(|_| ()).map_err(|s| grpc_go_code(&s))
                        }
                    },
                )
                .await
            } else {
                load(
                    "GetPreferredAllocation",
                    c,
                    budget,
                    progress(ctx, a.duration, a.requests, "calls"),
                    crate::core::interrupted(),
                    move |_| {
                        let (mut client, ids) = (client.clone(), ids.clone());
                        async move {
                            let req = PreferredAllocationRequest {
                                container_requests: vec![ContainerPreferredAllocationRequest {
                                    available_device_i_ds: ids.to_vec(),
                                    must_include_device_i_ds: vec![],
                                    allocation_size: k as i32,
                                }],
                            };
                            client.get_preferred_allocation(req).await.map(|_| ()).map_err(|s| grpc_go_code(&s))
                        }
                    },
                )
                .await
            }
        }
    };
    show_load(ctx, &report)?;
    match report.failure() {
        Some(f) => Err(Error::failed(format!("{}: {f}", conn.socket().display()))),
        None => Ok(()),
    }
}
