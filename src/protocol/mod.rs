//! The rulebook: each protocol rule once, as data (id, what it checks, what
//! the kubelet does, severity, the kubelet's text, fix, upstream source) with
//! a pure check beside it, consulted by the mock kubelet, the client commands
//! (`probe`, `preferred`, `dra probe`), the simulated plugins and drivers
//! (`serve`'s and `dra serve`'s own configuration), `dpctl test` and `doctor`.
//!
//! [`rule`] holds the one [`Rule`], [`Severity`] and [`Violation`] every
//! protocol uses; [`deviceplugin`] the device-plugin rules (devices,
//! snapshots, answers), [`registration`] the device-plugin registration
//! rules, [`dra`] the DRA kubelet-plugin rules (registration, answers,
//! health), [`cdi`] what a qualified CDI device name and spec are.

pub mod cdi;
pub mod deviceplugin;
pub mod dra;
pub mod registration;
pub mod rule;

pub use rule::{go_status, Kubelet, Rule, Severity, Violation};

/// Every rule of every protocol: the device plugin's (registration's too), then DRA's.
pub fn all_rules() -> impl Iterator<Item = &'static Rule> {
    deviceplugin::RULES.iter().chain(dra::RULES).copied()
}

/// The rule with this id, in any protocol (ids are unique across the rulebook).
pub fn rule_by_id(id: &str) -> Option<&'static Rule> {
    all_rules().find(|r| r.id == id)
}

/// The name of the cluster extension a dpctl mock kubelet writes into the
/// kubeconfig of its local API server, and a mock kubelet joining with that
/// kubeconfig reads: this control plane binds no pod (they come bound), so
/// the node does kube-scheduler's PreBind wait itself. A named extension,
/// which client-go keeps as an unknown object and otherwise ignores (as
/// minikube's `cluster_info`).
pub const DPCTL_PLANE_EXTENSION: &str = "dpctl.dev/control-plane";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_table_is_whole_and_citable() {
        let mut seen = HashSet::new();
        for r in all_rules() {
            assert!(seen.insert(r.id), "{} twice", r.id);
            assert_eq!(rule_by_id(r.id).map(|x| x.id), Some(r.id));
            assert!(!r.checks.is_empty() && !r.fix.is_empty(), "{}", r.id);
            // A reader of the repository can open the source: upstream, never our own notes.
            assert!(r.source.starts_with("kubernetes ") || r.source.starts_with("https://"), "{}: {}", r.id, r.source);
            assert!(!r.source.contains("seeds/") && !r.source.contains("shared/"), "{}", r.id);
            if r.kubelet == Kubelet::Rejects {
                assert!(r.kubelet_text.is_some(), "{}: the kubelet rejects it, so it has a text", r.id);
            }
        }
        assert_eq!(seen.len(), deviceplugin::RULES.len() + dra::RULES.len());
        assert!(rule_by_id("no-such-rule").is_none());
    }

    #[test]
    fn resource_names_and_driver_names_share_one_dns_checker() {
        let t = crate::core::validate::DNS_SUBDOMAIN_TEXT;
        let p = registration::resource_name_problem("Gpu.example/x").expect("invalid");
        assert_eq!(p, format!("prefix \"Gpu.example\" is not a lowercase DNS subdomain: {t}"));
        let d = dra::driver_name_problem("Gpu.example").expect("invalid");
        assert_eq!(d, format!("\"Gpu.example\" is not a lowercase DNS subdomain: {t}"));
        // IsDNS1123Subdomain limits the whole name, not a label; a driver name is at most 63.
        let label = "a".repeat(64);
        assert_eq!(registration::resource_name_problem(&format!("{label}.example/x")), None);
        assert_eq!(
            dra::driver_name_problem(&label).as_deref(),
            Some("the driver name is 64 characters long: must be no more than 63 characters")
        );
        assert_eq!(dra::driver_name_problem("gpu.example.com"), None);
    }

    #[test]
    fn violations_say_the_text_alone_or_explained() {
        let v = dra::DRIVER_NAME.violated("bad name");
        assert_eq!(v.to_string(), "bad name");
        assert_eq!(v.explained(), format!("bad name (driver-name; fix: {})", dra::DRIVER_NAME.fix));
        assert!(v.is_fail() && !dra::VERSION_ORDER.is_fail());
    }
}
