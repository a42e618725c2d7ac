//! The DRA manager's health shell: the health stream of each driver
//! (DRAResourceHealth.NodeWatchResources), what its snapshots change in the
//! health cache and the log ([`crate::kubelet::dra::core::health`], pure),
//! and the cache's file `<root>/dra_health_state` (healthinfo.go).

use super::*;
use crate::kubelet::dra::core::health;

/// How long after a health stream ended the kubelet opens it again
/// (dra_plugin_manager.go: wait.UntilWithContext with 5*time.Second, 1.34-1.37).
pub const HEALTH_RETRY: Duration = Duration::from_secs(5);

impl DraManager {
    pub(super) async fn follow_health(self: Arc<Self>, driver: String, conn: DraConn, service: &'static str) {
        loop {
            let mut ended: Option<crate::core::Error> = None;
            match conn.health(service).await {
                Ok(mut s) => loop {
                    let stale = self.refresh_health(&driver).await;
                    let got = tokio::select! {
                        r = s.next(conn.socket()) => Some(r),
                        _ = async { match stale {
                            Some(t) => tokio::time::sleep_until(t + Duration::from_millis(1)).await,
                            None => std::future::pending().await,
                        } } => None,
                    };
                    match got {
                        Some(Ok(Some(snap))) => self.health_report(&driver, &snap),
                        Some(Ok(None)) => break,
                        Some(Err(e)) => {
                            ended = Some(e);
                            break;
                        }
                        None => {}
                    }
                },
                // tonic reports the server's status when the call is made;
                // grpc-go (the kubelet) on the stream's first Recv.
                Err(e) => ended = Some(e),
            }
            // The stream ended (or never opened): the kubelet's
            // HandleWatchResourcesStream clears the driver's health (every
            // device Unknown at once), then reconnects.
            self.lock().health.cache.clear_driver(&driver);
            self.refresh_health(&driver).await;
            let unimplemented =
                matches!(&ended, Some(crate::core::Error::Rpc { code: tonic::Code::Unimplemented, .. }));
            if unimplemented && self.spec.profile.dra_health_unimplemented_stops {
                // dra_plugin_manager.go (1.37): "Driver does not support
                // WatchResources health stream, stopping".
                self.event(KubeletEvent::DraHealthStopped {
                    driver: driver.clone(),
                    service: service.to_string(),
                    error: ended.map(|e| e.to_string()).unwrap_or_default(),
                });
                return;
            }
            // wait.UntilWithContext(..., 5*time.Second): the next attempt
            // 5 s after this one ended.
            tokio::time::sleep(HEALTH_RETRY).await;
        }
    }

    /// Record one snapshot of the driver's health stream.
    pub(super) fn health_report(&self, driver: &str, snap: &[crate::api::dra_health_v1::DeviceHealth]) {
        let snapshot = snap
            .iter()
            .filter_map(|d| {
                let id = d.device.as_ref()?;
                let timeout =
                    u64::try_from(d.health_check_timeout_seconds).ok().filter(|s| *s > 0).map(Duration::from_secs);
                let key = (id.pool_name.clone(), id.device_name.clone());
                let health = rules::health_word(d.health).to_string();
                Some(healthinfo::Snapshot { key, health, message: d.message.clone(), timeout })
            })
            .collect();
        self.lock().health.record(driver, snapshot, tokio::time::Instant::now());
    }

    /// Recompute the health the driver's devices count as now; an event
    /// naming what changed ([`crate::kubelet::dra::core::healthlog`]: at most one a second per driver,
    /// the rest folded into the next). When to look again: the next report
    /// going stale, or folded changes falling due.
    pub(super) async fn refresh_health(&self, driver: &str) -> Option<tokio::time::Instant> {
        let now = tokio::time::Instant::now();
        let health::Refresh { changed, line, next } = self.lock().health.refresh(driver, now);
        if let Some(l) = line {
            self.event(KubeletEvent::DraHealth {
                driver: driver.to_string(),
                devices: l.changed,
                summary: l.summary,
                folded: l.folded,
            });
        }
        if changed {
            self.changed.notify_waiters();
            self.save_health().await;
        }
        next
    }

    /// The health cache's file (healthinfo.go's stateFile).
    pub fn health_state(&self) -> PathBuf {
        self.spec.root.join(healthinfo::STATE_FILE)
    }

    /// Write the health cache to `<root>/dra_health_state` (healthinfo.go
    /// saveToCheckpointInternal: on every change and when a stream ends).
    /// As the claim checkpoint ([`super::persist`]): on the blocking pool,
    /// and coalesced ([`crate::core::coalesced`]) — one write covers every
    /// change made before it began, so a flood of health changes from many
    /// drivers costs a few fsynced writes, never a runtime worker held by each.
    pub(super) async fn save_health(&self) {
        let upto = self.health_file.changed();
        let path = self.health_state();
        let target = path.clone();
        let snapshot =
            || Some(self.lock().health.cache.to_state(tokio::time::Instant::now(), std::time::SystemTime::now()));
        let write = move |bytes: Vec<u8>| {
            // As the kubelet's health cache writes it (healthinfo.go: no sync).
            crate::core::files::write_atomic_with(&target, &bytes, crate::core::files::Durability::Unsynced)
        };
        if let Err(e) = self.health_file.write(upto, snapshot, write).await {
            self.event(KubeletEvent::DraCheckpointError { path: path.display().to_string(), error: e.to_string() })
        }
    }

    /// Read the health cache a previous kubelet left (healthinfo.go
    /// newHealthInfoCache: a file that cannot be read leaves the cache empty).
    pub fn restore_health(&self) {
        let path = self.health_state();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.event(KubeletEvent::DraCheckpointError { path: path.display().to_string(), error: e.to_string() });
                return;
            }
        };
        let now = tokio::time::Instant::now();
        match HealthCache::from_state(&bytes, now, std::time::SystemTime::now()) {
            Err(e) => self.event(KubeletEvent::DraCheckpointError {
                path: path.display().to_string(),
                error: format!("{e}; starting with an empty health cache"),
            }),
            Ok(cache) => {
                let devices = cache
                    .drivers()
                    .iter()
                    .flat_map(|d| cache.words(d).into_iter().map(move |w| format!("{d} {w}")))
                    .collect();
                self.lock().health.cache = cache;
                self.event(KubeletEvent::DraHealthRestored { path: path.display().to_string(), devices });
            }
        }
    }
}
