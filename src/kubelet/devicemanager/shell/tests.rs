//! The shell's generation guarantees, without sockets: closing a manager
//! cancels and awaits its tasks (grace timers included), stops its event log
//! and background writes, and leaves exactly one final checkpoint write.

use super::*;
use crate::core::log::{LogFormat, Logger};
use crate::kubelet::devicemanager::core::state::EndpointInfo;
use crate::kubelet::event::Via;
use std::sync::atomic::{AtomicBool, Ordering};

fn manager(dir: &Path, grace: Duration) -> Arc<Manager> {
    let cfg = Config {
        plugin_dir: dir.to_path_buf(),
        checkpoint: dir.join("kubelet_internal_checkpoint"),
        topology: TopologyPolicy::None,
        grace_period: grace,
        max_recv: 1 << 20,
        call_timeout: Duration::from_secs(1),
        pre_start_timeout: Duration::from_secs(1),
        profile: crate::kubelet::profile::Profile::default(),
    };
    let log = Logger::to_file(LogFormat::Human, &dir.join("events.log")).unwrap();
    let m = Manager::new(cfg, EventBus::new(log), Generation::new(7));
    m.start();
    m
}

fn endpoint() -> EndpointInfo {
    EndpointInfo {
        id: 0,
        socket: PathBuf::from("/x/p.sock"),
        via: Via::KubeletSocket,
        pre_start_required: false,
        get_preferred_allocation_available: false,
    }
}

#[tokio::test]
async fn ending_a_generation_awaits_every_task() {
    let gen = Generation::new(1);
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Flag(dropped.clone());
    gen.tasks.spawn(async move {
        let _f = flag;
        std::future::pending::<()>().await;
    });
    gen.tasks.stop().await;
    assert!(dropped.load(Ordering::SeqCst), "the task was cancelled and dropped before end() returned");
    assert!(gen.tasks.is_empty());
}

#[tokio::test]
async fn closing_stops_timers_events_and_writes_except_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Duration::from_secs(3600));
    // The bus delivers every event in order, as the log writes it: read it, not the file (the log writes later).
    let mut events = m.bus.subscribe();
    let id = m.lock().st.register("vendor.example/r", endpoint()).unwrap().id;
    m.snapshot(
        "vendor.example/r",
        id,
        vec![crate::api::deviceplugin::Device { id: "d0".into(), health: "Healthy".into(), topology: None }],
        10,
    );
    m.stream_ended("vendor.example/r", id, "test");
    assert!(!m.gen.tasks.is_empty(), "a grace timer and the writer run");
    m.close().await;
    assert!(m.gen.tasks.is_empty(), "every task of the generation is gone");
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    assert!(
        seen.iter().any(|e| matches!(e.event, KubeletEvent::StreamEnded { .. }) && e.generation == Some(7)),
        "{seen:?}"
    );
    // the grace timer did not remove the resource; the last write holds it
    let cp = crate::client::checkpoint::read(&m.cfg.checkpoint).unwrap().unwrap();
    assert!(cp.checkpoint.data.registered_devices.contains_key("vendor.example/r"));
    // after close: no event, no background write
    m.event(KubeletEvent::Error { error: "after-close".into(), socket: None });
    m.lock().st.registrations.insert("x".into(), 1);
    m.lock().st.version += 1;
    let before = std::fs::read_to_string(&m.cfg.checkpoint).unwrap();
    m.remove_pod("none");
    m.flush(false).await.unwrap();
    m.lock().st.resources.clear();
    m.lock().st.version += 1;
    m.flush(false).await.unwrap();
    assert_eq!(std::fs::read_to_string(&m.cfg.checkpoint).unwrap(), before, "no write after close");
    assert!(events.try_recv().is_err(), "no event after close");
}
