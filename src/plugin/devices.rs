//! A plugin's device inventory: one `tokio::sync::watch` of an immutable
//! snapshot. Every ListAndWatch stream holds its own receiver, so every
//! stream sees every change (a known bug of real plugins is that only one of
//! several streams hears about it).

use crate::api::deviceplugin::{Device, ListAndWatchResponse, NumaNode, TopologyInfo};
use crate::api::{HEALTHY, UNHEALTHY};
use crate::plugin::config::DeviceSpec;
use crate::protocol::rule::Violation;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::watch;

/// Why a change to the served devices was refused (nothing changed).
#[derive(Debug)]
pub enum InventoryError {
    /// IDs no device has.
    Unknown(Vec<String>),
    /// The one ID a toggle names, which no device has.
    UnknownDevice(String),
    /// More devices than dpctl serves.
    TooMany {
        /// How many there would be.
        count: usize,
    },
    /// A device ID longer than dpctl allows.
    IdTooLong {
        /// The ID.
        id: String,
    },
    /// A protocol rule the change breaks (a health value, a device's fields).
    Rule(Violation),
}

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::core::limits::{MAX_DEVICES, MAX_ID_LEN};
        match self {
            InventoryError::UnknownDevice(id) => write!(f, "unknown device {}", crate::core::text::quote(id)),
            InventoryError::Unknown(ids) => write!(f, "unknown device(s): {}", crate::core::text::id_list(ids)),
            InventoryError::TooMany { count } => {
                write!(f, "{count} devices would be served; at most {MAX_DEVICES} are allowed")
            }
            InventoryError::IdTooLong { id } => write!(
                f,
                "device ID {} is {} bytes; at most {MAX_ID_LEN} are allowed",
                crate::core::text::quote(id),
                id.len()
            ),
            InventoryError::Rule(v) => v.fmt(f),
        }
    }
}

impl std::error::Error for InventoryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InventoryError::Rule(v) => Some(v),
            _ => None,
        }
    }
}

/// The IDs of `ids` no device of `devices` has.
fn unknown(devices: &[Device], ids: &[String]) -> Vec<String> {
    let have: HashSet<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    ids.iter().filter(|id| !have.contains(id.as_str())).cloned().collect()
}

/// An immutable view of the devices.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The ListAndWatch message for this state.
    pub response: ListAndWatchResponse,
    index: HashMap<String, usize>,
}

impl Snapshot {
    fn new(devices: Vec<Device>) -> Self {
        let index = devices.iter().enumerate().map(|(i, d)| (d.id.clone(), i)).collect();
        Snapshot { response: ListAndWatchResponse { devices }, index }
    }

    /// A device's position in the served list (its index, `{i}` in templates).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// A device by ID.
    pub fn get(&self, id: &str) -> Option<&Device> {
        self.index.get(id).map(|&i| &self.response.devices[i])
    }

    /// The NUMA node of a device (the first, if several).
    pub fn numa(&self, id: &str) -> Option<i64> {
        self.get(id).and_then(|d| d.topology.as_ref()).and_then(|t| t.nodes.first()).map(|n| n.id)
    }

    /// All devices.
    pub fn devices(&self) -> &[Device] {
        &self.response.devices
    }
}

/// A proto Device from a spec.
pub fn to_device(d: &DeviceSpec) -> Device {
    Device {
        id: d.id.clone(),
        health: d.health.clone(),
        topology: d.numa.map(|n| TopologyInfo { nodes: vec![NumaNode { id: n }] }),
    }
}

/// The live inventory.
#[derive(Debug, Clone)]
pub struct Inventory {
    tx: Arc<watch::Sender<Arc<Snapshot>>>,
}

impl Inventory {
    /// An inventory holding `devices`.
    pub fn new(devices: Vec<Device>) -> Self {
        let (tx, _) = watch::channel(Arc::new(Snapshot::new(devices)));
        Inventory { tx: Arc::new(tx) }
    }

    /// The current snapshot.
    pub fn current(&self) -> Arc<Snapshot> {
        self.tx.borrow().clone()
    }

    /// A receiver that sees every future change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.tx.subscribe()
    }

    fn update(&self, f: impl FnOnce(&mut Vec<Device>) -> Result<(), InventoryError>) -> Result<(), InventoryError> {
        let mut result = Ok(());
        self.tx.send_if_modified(|snap| {
            let mut devices = snap.response.devices.clone();
            match f(&mut devices) {
                Ok(()) => {
                    *snap = Arc::new(Snapshot::new(devices));
                    true
                }
                Err(e) => {
                    result = Err(e);
                    false
                }
            }
        });
        result
    }

    /// Replace the whole device list (one change, seen by every stream).
    pub fn replace(&self, devices: Vec<Device>) {
        self.tx.send_replace(Arc::new(Snapshot::new(devices)));
    }

    /// Set the health of devices; unknown IDs are an error and change nothing.
    pub fn set_health(&self, ids: &[String], health: &str) -> Result<(), InventoryError> {
        crate::protocol::deviceplugin::parse_health(health).map_err(InventoryError::Rule)?;
        // Sets, not nested scans: a control request may name 100,000 IDs.
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        self.update(|devices| {
            let unknown = unknown(devices, ids);
            if !unknown.is_empty() {
                return Err(InventoryError::Unknown(unknown));
            }
            for d in devices.iter_mut().filter(|d| wanted.contains(d.id.as_str())) {
                d.health = health.to_string();
            }
            Ok(())
        })
    }

    /// Toggle one device between Healthy and Unhealthy; returns the new health.
    pub fn toggle(&self, id: &str) -> Result<String, InventoryError> {
        let mut new = String::new();
        self.update(|devices| {
            let d =
                devices.iter_mut().find(|d| d.id == id).ok_or_else(|| InventoryError::UnknownDevice(id.to_string()))?;
            d.health = if d.health == HEALTHY { UNHEALTHY } else { HEALTHY }.to_string();
            new = d.health.clone();
            Ok(())
        })?;
        Ok(new)
    }

    /// Add devices; an ID that exists already is an error and changes nothing.
    pub fn add(&self, new: Vec<Device>) -> Result<(), InventoryError> {
        use crate::core::limits::{MAX_DEVICES, MAX_ID_LEN};
        self.update(|devices| {
            if devices.len() + new.len() > MAX_DEVICES {
                return Err(InventoryError::TooMany { count: devices.len() + new.len() });
            }
            if let Some(d) = new.iter().find(|d| d.id.len() > MAX_ID_LEN) {
                return Err(InventoryError::IdTooLong { id: d.id.clone() });
            }
            // The protocol's device rules, from the rulebook: a new device breaking a FAIL rule changes nothing.
            let old = devices.len();
            devices.extend(new);
            let broken = crate::protocol::deviceplugin::devices(devices.iter())
                .into_iter()
                .find(|v| v.is_fail() && v.device.is_some_and(|i| i >= old));
            if let Some(v) = broken {
                devices.truncate(old);
                return Err(InventoryError::Rule(v));
            }
            Ok(())
        })
    }

    /// Remove devices; unknown IDs are an error and change nothing.
    pub fn remove(&self, ids: &[String]) -> Result<(), InventoryError> {
        let gone: HashSet<&str> = ids.iter().map(String::as_str).collect();
        self.update(|devices| {
            let unknown = unknown(devices, ids);
            if !unknown.is_empty() {
                return Err(InventoryError::Unknown(unknown));
            }
            devices.retain(|d| !gone.contains(d.id.as_str()));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv() -> Inventory {
        Inventory::new(vec![
            to_device(&DeviceSpec { id: "a".into(), health: HEALTHY.into(), numa: Some(0) }),
            to_device(&DeviceSpec { id: "b".into(), health: HEALTHY.into(), numa: None }),
        ])
    }

    #[tokio::test]
    async fn every_subscriber_sees_every_change() {
        let inv = inv();
        let mut r1 = inv.subscribe();
        let mut r2 = inv.subscribe();
        inv.set_health(&["a".into()], UNHEALTHY).unwrap();
        for r in [&mut r1, &mut r2] {
            r.changed().await.unwrap();
            assert_eq!(r.borrow_and_update().get("a").unwrap().health, UNHEALTHY);
        }
        inv.add(vec![Device { id: "c".into(), health: HEALTHY.into(), topology: None }]).unwrap();
        inv.remove(&["b".into()]).unwrap();
        let ids: Vec<String> = inv.current().devices().iter().map(|d| d.id.clone()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(inv.current().numa("a"), Some(0));
    }

    #[test]
    fn bad_changes_change_nothing() {
        let inv = inv();
        let mut r = inv.subscribe();
        r.borrow_and_update();
        assert!(inv.set_health(&["a".into(), "zz".into()], UNHEALTHY).unwrap_err().to_string().contains("zz"));
        assert!(inv.set_health(&["a".into()], "healthy").is_err());
        let dup =
            inv.add(vec![Device { id: "a".into(), health: HEALTHY.into(), topology: None }]).unwrap_err().to_string();
        assert_eq!(dup, "device ID \"a\" appears more than once", "the rulebook's text");
        let bad =
            inv.add(vec![Device { id: "c".into(), health: "ok".into(), topology: None }]).unwrap_err().to_string();
        assert!(bad.starts_with("device \"c\" has health \"ok\""), "{bad}");
        assert!(inv.add(vec![Device { id: String::new(), health: HEALTHY.into(), topology: None }]).is_err());
        assert!(inv.remove(&["nope".into()]).is_err());
        let many: Vec<Device> = (0..crate::core::limits::MAX_DEVICES)
            .map(|i| Device { id: format!("n{i}"), health: HEALTHY.into(), topology: None })
            .collect();
        assert!(matches!(inv.add(many), Err(InventoryError::TooMany { .. })));
        let e = inv.add(vec![Device { id: "x".repeat(5000), ..Default::default() }]).unwrap_err().to_string();
        assert!(e.contains("is 5000 bytes") && e.len() < 200, "{e}");
        assert!(!r.has_changed().unwrap());
        assert_eq!(inv.current().get("a").unwrap().health, HEALTHY);
        assert_eq!(inv.toggle("b").unwrap(), UNHEALTHY);
        assert_eq!(inv.toggle("b").unwrap(), HEALTHY);
        assert_eq!(inv.toggle("zz").unwrap_err().to_string(), "unknown device \"zz\"");
    }

    #[test]
    fn warn_rules_are_the_simulators_to_break() {
        // An ID over 63 characters breaks a WARN rule only: a simulated plugin may serve it on purpose.
        let inv = inv();
        inv.add(vec![Device { id: "x".repeat(64), health: HEALTHY.into(), topology: None }]).unwrap();
        assert_eq!(inv.current().devices().len(), 3);
    }
}
