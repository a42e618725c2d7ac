//! The DRA manager on the engine, in process: a real `dpctl dra serve`
//! driver (in process, real sockets) and the local API server over HTTP.

use crate::core::log::{LogFormat, Logger};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::TempNode;
use crate::plugin::dra::slices;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

async fn wait<T>(rx: &mut mpsc::UnboundedReceiver<Arc<Stamped>>, f: impl Fn(&KubeletEvent) -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => {
                if let Some(t) = f(&e.event) {
                    return t;
                }
            }
            _ => panic!("the event did not come within 10s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_drivers_slices_are_wiped_after_the_delay() {
    let node_dir = TempNode::new("dra-wipe").unwrap();
    let tree = node_dir.tree.clone();
    let bus = EventBus::new(Logger::to_file(LogFormat::Json, &tree.logs.join("k.log")).unwrap());
    let mut rx = bus.subscribe();
    let mut spec = NodeSpec::on_tree(&tree);
    spec.api_server = Some(([127, 0, 0, 1], 0).into());
    if let Some(d) = &mut spec.dra {
        d.wipe_delay = Duration::from_millis(300);
    }
    let node = Node::start(spec, bus).await.unwrap();
    let addr = wait(&mut rx, |e| match e {
        KubeletEvent::ApiServer { addr, .. } => Some(addr.trim_start_matches("http://").to_string()),
        _ => None,
    })
    .await;
    let api = slices::ApiServer { authority: addr, prefix: String::new(), token: None };
    let driver = "gpu.example.com";
    let plugin_dir = tree.root.join("plugins").join(driver);
    let cfg = crate::plugin::dra::Config {
        driver: driver.into(),
        pool: "p".into(),
        devices: vec!["d0".into()],
        kubelet_root: tree.root.clone(),
        registry_dir: tree.registry_dir.clone(),
        control_socket: plugin_dir.join("ctl.sock"),
        plugin_dir,
        host_root: Default::default(),
        cdi_dir: tree.cdi_dir(),
        services: vec![crate::protocol::dra::DRA_V1.into()],
        register: true,
        rolling_uid: None,
        health_timeout_secs: 0,
        faults: vec![],
        publish: None,
    };
    let tasks = crate::core::task::Tasks::new();
    {
        let (cfg, log, child) =
            (cfg, Logger::to_file(LogFormat::Json, &tree.logs.join("d.log")).unwrap(), tasks.child());
        tasks.spawn(async move {
            let _ = crate::plugin::dra::run(cfg, log, child).await;
        });
    }
    wait(&mut rx, |e| matches!(e, KubeletEvent::DraRegistered { .. }).then_some(())).await;
    // A slice the driver left behind (as a crashed driver does).
    let obj = slices::slice("left", crate::kubelet::dra::NODE_NAME, driver, "p", &["d0".into()]);
    slices::publish(&api, &obj, Duration::from_secs(5)).await.unwrap();
    let other = slices::slice("other", "another-node", driver, "p", &["d0".into()]);
    slices::publish(&api, &other, Duration::from_secs(5)).await.unwrap();
    tasks.stop().await;
    let gone = wait(&mut rx, |e| match e {
        KubeletEvent::DraSlicesWiped { driver, slices } => Some((driver.clone(), slices.clone())),
        _ => None,
    })
    .await;
    assert_eq!(gone, (driver.to_string(), vec!["left".to_string()]));
    let (_, list) = slices::request(&api, "GET", slices::SLICES_PATH, None, Duration::from_secs(5)).await.unwrap();
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|s| s["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["other"], "another node's slice stays");
    node.stop().await;
}
