//! The driver's device health, without I/O: the state live control
//! changes, and the DRAResourceHealth snapshot made of it. The shell keeps
//! the state in a watch channel and streams the snapshots.

use crate::api::dra_health_v1::{DeviceHealth, DeviceIdentifier, HealthStatus};
use crate::protocol::dra::{health_word, parse_health};
use serde::{Deserialize, Serialize};

/// One simulated device's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceState {
    /// Device name (unique in the pool).
    pub name: String,
    /// Healthy, Unhealthy or Unknown.
    pub health: String,
    /// The health message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Unix seconds of the last health change.
    pub updated: i64,
}

/// Why a health change was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HealthError {
    /// The health is not a known word.
    Word,
    /// No device named.
    NoDevices,
    /// Devices the pool does not have.
    Unknown {
        /// The names asked for, listed.
        unknown: String,
        /// The pool.
        pool: String,
        /// Its devices, listed.
        devices: String,
    },
}

impl std::fmt::Display for HealthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HealthError::Word => f.write_str("health must be Healthy, Unhealthy or Unknown"),
            HealthError::NoDevices => f.write_str("no device names given"),
            HealthError::Unknown { unknown, pool, devices } => {
                write!(f, "no device {unknown} in pool {pool} (devices: {devices})")
            }
        }
    }
}

impl std::error::Error for HealthError {}

/// Every device Healthy since `now`.
pub fn initial(devices: &[String], now: i64) -> Vec<DeviceState> {
    devices
        .iter()
        .map(|n| DeviceState { name: n.clone(), health: "Healthy".into(), message: String::new(), updated: now })
        .collect()
}

/// A health change of `names` in pool `pool` (its devices `all`), checked;
/// the word as the protocol spells it.
pub fn check_change(names: &[String], health: &str, pool: &str, all: &[String]) -> Result<&'static str, HealthError> {
    let h = parse_health(health).ok_or(HealthError::Word)?;
    if names.is_empty() {
        return Err(HealthError::NoDevices);
    }
    let unknown: Vec<&String> = names.iter().filter(|d| !all.contains(d)).collect();
    if !unknown.is_empty() {
        return Err(HealthError::Unknown {
            unknown: crate::core::text::id_list(&unknown),
            pool: pool.to_string(),
            devices: crate::core::text::id_list(all),
        });
    }
    Ok(health_word(h as i32))
}

/// Apply a checked change to `devs`.
pub fn apply(devs: &mut [DeviceState], names: &[String], word: &str, message: &str, now: i64) {
    for d in devs.iter_mut().filter(|d| names.contains(&d.name)) {
        d.health = word.into();
        d.message = message.to_string();
        d.updated = now;
    }
}

/// The DRAResourceHealth snapshot of `devices` in `pool`.
pub fn snapshot(devices: &[DeviceState], pool: &str, timeout_secs: i64) -> Vec<DeviceHealth> {
    devices
        .iter()
        .map(|d| DeviceHealth {
            device: Some(DeviceIdentifier { pool_name: pool.to_string(), device_name: d.name.clone() }),
            health: parse_health(&d.health).unwrap_or(HealthStatus::Unknown) as i32,
            last_updated_time: d.updated,
            health_check_timeout_seconds: timeout_secs,
            message: d.message.clone(),
        })
        .collect()
}

/// How often an unchanged health snapshot is sent again: half the
/// `health_check_timeout_seconds` sent (the kubelet's 30 s default when 0).
pub fn resend_every(timeout_secs: i64) -> std::time::Duration {
    let t = u64::try_from(timeout_secs).ok().filter(|s| *s > 0).unwrap_or(30);
    std::time::Duration::from_millis(t * 500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_snapshot_is_resent_every_half_timeout() {
        assert_eq!(resend_every(0), std::time::Duration::from_secs(15));
        assert_eq!(resend_every(-3), std::time::Duration::from_secs(15));
        assert_eq!(resend_every(2), std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_change_names_known_devices_and_a_known_word() {
        let all = vec!["d0".to_string(), "d1".to_string()];
        let mut devs = initial(&all, 5);
        let word = check_change(&["d1".into()], "unhealthy", "p", &all).unwrap();
        apply(&mut devs, &["d1".into()], word, "XID 79", 9);
        assert_eq!((devs[1].health.as_str(), devs[1].message.as_str(), devs[1].updated), ("Unhealthy", "XID 79", 9));
        assert_eq!(devs[0].updated, 5);
        let snap = snapshot(&devs, "p", 10);
        assert_eq!(snap[1].health, HealthStatus::Unhealthy as i32);
        assert_eq!(snap[1].device.as_ref().map(|d| d.pool_name.as_str()), Some("p"));
        assert_eq!(snap[0].health_check_timeout_seconds, 10);
        assert_eq!(check_change(&["d1".into()], "sick", "p", &all), Err(HealthError::Word));
        assert_eq!(check_change(&[], "Healthy", "p", &all), Err(HealthError::NoDevices));
        let e = check_change(&["d9".into()], "Healthy", "p", &all).unwrap_err().to_string();
        assert!(e.starts_with("no device ") && e.contains("in pool p"), "{e}");
    }
}
