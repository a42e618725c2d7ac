//! The ceiling for `dpctl serve`'s benchmarks: a bare DevicePlugin server
//! built from the same protos (`proto/`, via dpctl's generated `api`) and
//! served by plain tonic on a Unix socket, with the same runtime shape as
//! `dpctl serve` (one tokio worker). No event log, no `:authority` shim, no
//! templates: ListAndWatch sends one snapshot of N healthy devices and
//! Allocate answers one env per container, as `dpctl serve`'s default does.
//! Whatever dpctl costs beyond this is what `bench/compare.py` reports as
//! a ratio.
//!
//! Usage: `cargo run --release --example bare -- SOCKET [DEVICES]`
//! (SIGINT/SIGTERM stop it and remove the socket).

use dpctl::api::deviceplugin::device_plugin_server::{DevicePlugin, DevicePluginServer};
use dpctl::api::deviceplugin::{
    AllocateRequest, AllocateResponse, ContainerAllocateResponse, ContainerPreferredAllocationResponse, Device,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use tonic::{Request, Response, Status};

struct Bare {
    devices: Vec<Device>,
}

#[tonic::async_trait]
impl DevicePlugin for Bare {
    async fn get_device_plugin_options(&self, _: Request<Empty>) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(DevicePluginOptions::default()))
    }

    type ListAndWatchStream = tokio_stream::wrappers::ReceiverStream<Result<ListAndWatchResponse, Status>>;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let snapshot = ListAndWatchResponse { devices: self.devices.clone() };
        tokio::spawn(async move {
            if tx.send(Ok(snapshot)).await.is_ok() {
                tx.closed().await;
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        r: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let container_responses = r
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| ContainerPreferredAllocationResponse {
                device_i_ds: c.available_device_i_ds.into_iter().take(c.allocation_size.max(0) as usize).collect(),
            })
            .collect();
        Ok(Response::new(PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, r: Request<AllocateRequest>) -> Result<Response<AllocateResponse>, Status> {
        let container_responses = r
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| ContainerAllocateResponse {
                envs: [("FOO_VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into_iter().collect(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(socket), count) = (args.next(), args.next()) else {
        eprintln!("usage: bare SOCKET [DEVICES]");
        std::process::exit(2);
    };
    let Ok(count) = count.as_deref().unwrap_or("8").parse::<usize>() else {
        eprintln!("bare: DEVICES must be a number");
        std::process::exit(2);
    };
    let devices =
        (0..count).map(|i| Device { id: format!("foo-{i}"), health: "Healthy".into(), topology: None }).collect();
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bare: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = rt.block_on(async move {
        let _ = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket)?;
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        let stop = async {
            use tokio::signal::unix::{signal, SignalKind};
            match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
                (Ok(mut t), Ok(mut i)) => {
                    tokio::select! { _ = t.recv() => {}, _ = i.recv() => {} }
                }
                _ => std::future::pending().await,
            }
        };
        let r = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .serve_with_incoming_shutdown(DevicePluginServer::new(Bare { devices }), incoming, stop)
            .await;
        let _ = std::fs::remove_file(&socket);
        r.map_err(std::io::Error::other)
    });
    if let Err(e) = result {
        eprintln!("bare: {e}");
        std::process::exit(1);
    }
}
