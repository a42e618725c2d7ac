//! Kubelet-version profiles: what a plugin can observe that differs between
//! the kubelet releases users run. Each behaviour is one row of [`TABLE`]
//! (the version it changed in and the upstream change); a [`Profile`] is the
//! table read at one version. `mock-kubelet --explain-profile` prints it, and
//! the README's copy is checked against [`markdown_table`] by a test.

use std::fmt;

/// The oldest kubelet minor version dpctl models.
pub const OLDEST: u32 = 25;
/// The newest released kubelet minor version (the default profile).
pub const NEWEST: u32 = 37;

/// A kubelet minor version (1.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeletVersion(u32);

impl KubeletVersion {
    /// The newest released version, the default.
    pub const DEFAULT: KubeletVersion = KubeletVersion(NEWEST);

    /// The minor number.
    pub fn minor(self) -> u32 {
        self.0
    }

    /// Every supported version, oldest first.
    pub fn all() -> impl Iterator<Item = KubeletVersion> {
        (OLDEST..=NEWEST).map(KubeletVersion)
    }

    /// `1.31`, `v1.31` or `1.31.4` (the patch is ignored). Errors name the supported range.
    pub fn parse(s: &str) -> Result<Self, String> {
        let range = format!("supported: 1.{OLDEST} to 1.{NEWEST}, e.g. --kubelet-version 1.{NEWEST}");
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let mut parts = t.split('.');
        let (major, minor, patch) = (parts.next(), parts.next(), parts.next());
        fn num(p: Option<&str>) -> Option<&str> {
            p.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        }
        let ok_shape = parts.next().is_none() && patch.is_none_or(|p| num(Some(p)).is_some());
        match (num(major), num(minor)) {
            (Some("1"), Some(m)) if ok_shape => {
                let m: u32 = m.parse().map_err(|_| format!("kubelet version {s:?} is not supported ({range})"))?;
                if (OLDEST..=NEWEST).contains(&m) {
                    Ok(KubeletVersion(m))
                } else {
                    Err(format!("kubelet version {s:?} is not supported ({range})"))
                }
            }
            _ => Err(format!("kubelet version {s:?} is not a version like 1.{NEWEST} ({range})")),
        }
    }

    /// A comma-separated list (`1.31,1.37`), in the order given, without repeats.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        let mut out: Vec<KubeletVersion> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let v = Self::parse(part)?;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        if out.is_empty() {
            return Err(format!("no kubelet version given; pass e.g. --kubelet-version 1.{OLDEST},1.{NEWEST}"));
        }
        Ok(out)
    }
}

/// A comma-separated list of versions (`--kubelet-version 1.31,1.37`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionList(pub Vec<KubeletVersion>);

impl VersionList {
    /// Parse `1.31,1.37` (see [`KubeletVersion::parse_list`]).
    pub fn parse(s: &str) -> Result<Self, String> {
        KubeletVersion::parse_list(s).map(VersionList)
    }
}

impl Default for KubeletVersion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for KubeletVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl std::str::FromStr for KubeletVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

/// How the registration server keys plugin instances of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endpoints {
    /// One client per resource name: a second registration replaces the map
    /// entry without closing the first stream, and when the first stream
    /// ends, the *new* client is disconnected and the resource marked
    /// unhealthy (kubernetes#121994).
    ByResource,
    /// One endpoint per (resource, socket) (kubernetes#135437): instances on
    /// other sockets coexist, a live instance's socket registering again is
    /// refused, and an instance's end leaves the others and the devices (the
    /// last snapshot of any instance) as they are unless it was the last one.
    #[default]
    BySocket,
}

/// Which checks devicesToAllocate makes, and so which texts a rejected pod gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionChecks {
    /// No health checks: "can't allocate unregistered device R", else
    /// "requested number of devices unavailable … Available: 0".
    Legacy,
    /// Registration and health first: "cannot allocate unregistered device R",
    /// "no healthy devices present; …", "previously allocated devices are no longer healthy; …".
    Health,
}

/// The topology manager's choice among non-preferred merged hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintMerge {
    /// The narrowest affinity wins.
    Narrowest,
    /// The affinity whose size is nearest (not above) the largest of each
    /// resource's minimal hint size wins.
    BestNonPreferredCount,
}

/// What PodResources `Get` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodResourcesGet {
    /// The method does not exist (gRPC Unimplemented).
    Absent,
    /// The KubeletPodResourcesGet gate is off by default: "PodResources API Get method disabled".
    Disabled,
    /// Served.
    Enabled,
}

/// A feature gate's state in one version (pkg/features/kube_features.go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The gate does not exist: `--feature-gates` refuses it.
    Absent,
    /// Alpha, off by default.
    Off,
    /// On (by default, or turned on).
    On,
    /// GA and locked to its default: it cannot be turned off.
    Locked,
}

impl Gate {
    /// Whether the feature is on.
    pub fn enabled(self) -> bool {
        matches!(self, Gate::On | Gate::Locked)
    }
}

/// The feature gates `mock-kubelet --feature-gates` can set.
pub const GATES: &[&str] = &["DRAExtendedResource"];

/// A behaviour profile: the kubelet as of one minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The version.
    pub version: KubeletVersion,
    /// Several instances of one plugin.
    pub endpoints: Endpoints,
    /// `initContainers[].restartPolicy: Always` (sidecars) keep dedicated devices
    /// and are listed by PodResources; off: they are plain init containers.
    pub sidecar_devices: bool,
    /// devicesToAllocate's checks and texts.
    pub admission: AdmissionChecks,
    /// Topology hint merging.
    pub hint_merge: HintMerge,
    /// PodResources Get.
    pub pod_resources_get: PodResourcesGet,
    /// DRAExtendedResource (KEP-5004): extended resources served by DRA drivers.
    pub dra_extended_resource: Gate,
}

impl Default for Profile {
    fn default() -> Self {
        Profile::of(KubeletVersion::DEFAULT)
    }
}

/// One behaviour that differs by version: one row of [`TABLE`].
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// The [`Profile`] field.
    pub field: &'static str,
    /// The first minor version with the newer behaviour.
    pub since: u32,
    /// The upstream change (and where to read it).
    pub source: &'static str,
    /// Up to `since - 1`.
    pub before: &'static str,
    /// From `since`.
    pub after: &'static str,
}

/// Every behaviour that differs between supported versions, with the
/// version it changed in and the upstream change. [`Profile::of`] reads it.
pub const TABLE: &[Behaviour] = &[
    Behaviour {
        field: "endpoints",
        since: 37,
        source: "kubernetes#135437 (devicemanager/manager.go endpointStore, plugin/v1beta1/handler.go clients per resource and socket), read with the manager_test.go and handler_test.go of #139338; manager.go itself read only through those tests; bug: #121994, #127803",
        before: "keyed by resource: a 2nd instance replaces the 1st without closing its stream; the 1st stream's end disconnects the 2nd and zeroes allocatable",
        after: "keyed by (resource, socket): instances on other sockets coexist and the last snapshot of any of them is the node's devices (TestDevicePluginReRegistration: 1); an instance's end leaves the others and the devices as they are (the last one's end zeroes allocatable); a live instance's socket registering again is refused: \"device plugin already connected: <socket>\"",
    },
    Behaviour {
        field: "sidecar_devices",
        since: 29,
        source: "KEP-753 SidecarContainers: beta, on by default in 1.29 (pkg/features/kube_features.go); devicemanager Allocate keeps restartable init containers' devices",
        before: "restartPolicy: Always init containers are plain init containers (devices reused by later containers)",
        after: "sidecars get dedicated devices, listed by PodResources List/Get",
    },
    Behaviour {
        field: "admission",
        since: 27,
        source: "kubernetes#114640 (devicemanager/manager.go devicesToAllocate)",
        before: "\"can't allocate unregistered device R\"; no healthy devices: \"requested number of devices unavailable for R. Requested: N, Available: 0\"",
        after: "\"cannot allocate unregistered device R\", \"no healthy devices present; cannot allocate unhealthy devices R\", \"previously allocated devices are no longer healthy; …\"",
    },
    Behaviour {
        field: "hint_merge",
        since: 24,
        source: "kubernetes#108154 (topologymanager/policy.go compareHints); same in every supported version",
        before: "narrowest non-preferred hint",
        after: "non-preferred hint nearest the best non-preferred affinity count",
    },
    Behaviour {
        field: "pod_resources_get",
        since: 34,
        source: "KubeletPodResourcesGet: alpha 1.27, beta (on) 1.34 (pkg/features/kube_features.go; apis/podresources/server_v1.go)",
        before: "1.25-1.26: no Get method (Unimplemented); 1.27-1.33: \"PodResources API Get method disabled\"",
        after: "Get served",
    },
    Behaviour {
        field: "dra_extended_resource",
        since: 36,
        source: "DRAExtendedResource (KEP-5004): alpha 1.34, beta (on) 1.36, GA and locked 1.37 (pkg/features/kube_features.go); scheduler extendeddynamicresources.go, kubelet cm/dra/manager.go",
        before: "1.25-1.33: no such gate; 1.34-1.35: off by default (--feature-gates DRAExtendedResource=true): an extended resource only a DeviceClass maps is refused OutOf<resource>",
        after: "a resource a DeviceClass maps (extendedResourceName or deviceclass.resource.kubernetes.io/<class>) with device-plugin allocatable 0 is served by a special claim <pod>-extended-resources-*; the gate cannot be turned off from 1.37",
    },
];

impl Profile {
    /// The profile of `v`.
    pub fn of(v: KubeletVersion) -> Self {
        let at = |field: &str| TABLE.iter().find(|b| b.field == field).is_some_and(|b| v.0 >= b.since);
        Profile {
            version: v,
            endpoints: if at("endpoints") { Endpoints::BySocket } else { Endpoints::ByResource },
            sidecar_devices: at("sidecar_devices"),
            admission: if at("admission") { AdmissionChecks::Health } else { AdmissionChecks::Legacy },
            hint_merge: if at("hint_merge") { HintMerge::BestNonPreferredCount } else { HintMerge::Narrowest },
            pod_resources_get: match (at("pod_resources_get"), v.0 >= 27) {
                (true, _) => PodResourcesGet::Enabled,
                (false, true) => PodResourcesGet::Disabled,
                (false, false) => PodResourcesGet::Absent,
            },
            dra_extended_resource: match (at("dra_extended_resource"), v.0) {
                (true, 37..) => Gate::Locked,
                (true, _) => Gate::On,
                (false, 34..) => Gate::Off,
                (false, _) => Gate::Absent,
            },
        }
    }

    /// Apply `--feature-gates NAME=BOOL,…` (the kubelet's refusals: an
    /// unknown gate, and a locked gate set against its value).
    pub fn with_gates(mut self, spec: &str) -> Result<Self, String> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| {
                format!("--feature-gates {part:?}: want NAME=true|false, e.g. DRAExtendedResource=true")
            })?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                v => {
                    return Err(format!(
                        "invalid value of {name}: {v}, err: strconv.ParseBool: parsing {v:?}: invalid syntax"
                    ))
                }
            };
            let gate = match name.trim() {
                "DRAExtendedResource" => &mut self.dra_extended_resource,
                n => {
                    return Err(format!(
                        "unrecognized feature gate: {n} (this mock kubelet sets: {})",
                        GATES.join(", ")
                    ))
                }
            };
            *gate = match (*gate, on) {
                (Gate::Absent, _) => {
                    return Err(format!(
                        "unrecognized feature gate: {name} (kubelet {} has no such gate)",
                        self.version
                    ))
                }
                (Gate::Locked, false) => {
                    return Err(format!("cannot set feature gate {name} to false, feature is locked to true"))
                }
                (Gate::Locked, true) => Gate::Locked,
                (_, true) => Gate::On,
                (_, false) => Gate::Off,
            };
        }
        Ok(self)
    }

    /// What `--explain-profile` prints: each behaviour as this version has it.
    pub fn explain(&self) -> String {
        let mut out = format!("kubelet {} profile (supported: 1.{OLDEST} to 1.{NEWEST})\n", self.version);
        for b in TABLE {
            let newer = self.version.0 >= b.since;
            let what = if newer { b.after } else { b.before };
            let when = if newer { format!("since 1.{}", b.since) } else { format!("before 1.{}", b.since) };
            out.push_str(&format!("  {:<18} {when}: {what}\n  {:<18} source: {}\n", b.field, "", b.source));
        }
        out
    }
}

/// The table as markdown, as the README carries it.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| behaviour | changed in | up to then | from then | upstream |\n|---|---|---|---|---|\n");
    for b in TABLE {
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | 1.{} | {} | {} | {} |\n",
            b.field,
            b.since,
            cell(b.before),
            cell(b.after),
            cell(b.source)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions_and_names_the_range() {
        for (s, m) in [("1.31", 31), ("v1.37", 37), ("1.25.3", 25), (" 1.29 ", 29)] {
            assert_eq!(KubeletVersion::parse(s).map(KubeletVersion::minor), Ok(m), "{s}");
        }
        for s in ["1.24", "1.38", "2.31", "131", "1.x", "", "1.31.4.1", "1.31.", "v", "1.99999999999", "1.-1"] {
            let e = KubeletVersion::parse(s).unwrap_err();
            assert!(e.contains("supported: 1.25 to 1.37"), "{s}: {e}");
        }
        assert_eq!(
            KubeletVersion::parse_list("1.31, 1.37,1.31").unwrap(),
            vec![KubeletVersion(31), KubeletVersion(37)]
        );
        assert!(KubeletVersion::parse_list(" , ").unwrap_err().contains("no kubelet version"));
        assert_eq!(Profile::default().version.to_string(), "1.37");
    }

    #[test]
    fn each_boundary_has_two_sides() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!((p(36).endpoints, p(37).endpoints), (Endpoints::ByResource, Endpoints::BySocket));
        assert_eq!((p(28).sidecar_devices, p(29).sidecar_devices), (false, true));
        assert_eq!((p(26).admission, p(27).admission), (AdmissionChecks::Legacy, AdmissionChecks::Health));
        assert_eq!(
            (p(26).pod_resources_get, p(27).pod_resources_get, p(33).pod_resources_get, p(34).pod_resources_get),
            (PodResourcesGet::Absent, PodResourcesGet::Disabled, PodResourcesGet::Disabled, PodResourcesGet::Enabled)
        );
        assert!(KubeletVersion::all().all(|v| p(v.0).hint_merge == HintMerge::BestNonPreferredCount));
        assert_eq!(
            [33, 34, 35, 36, 37].map(|m| p(m).dra_extended_resource),
            [Gate::Absent, Gate::Off, Gate::Off, Gate::On, Gate::Locked]
        );
        assert!(TABLE.iter().all(|b| b.since > 0 && !b.source.is_empty()));
        let e = p(31).explain();
        assert!(e.contains("kubelet 1.31 profile") && e.contains("before 1.37: keyed by resource"), "{e}");
        let e = p(37).explain();
        assert!(e.contains("since 1.37: keyed by (resource, socket)") && e.contains("already connected"), "{e}");
    }

    #[test]
    fn the_dra_extended_resource_gate_turns_on_from_1_34_and_is_locked_from_1_37() {
        let p = |m| Profile::of(KubeletVersion(m));
        let on = |m, s: &str| p(m).with_gates(s).map(|p| p.dra_extended_resource.enabled());
        assert_eq!(on(34, "DRAExtendedResource=true"), Ok(true));
        assert_eq!(on(35, "DRAExtendedResource=false"), Ok(false));
        assert_eq!(on(36, "DRAExtendedResource=false"), Ok(false));
        assert_eq!(on(37, "DRAExtendedResource=true"), Ok(true));
        assert!(on(37, "DRAExtendedResource=false").unwrap_err().contains("locked to true"));
        assert!(on(33, "DRAExtendedResource=true").unwrap_err().contains("kubelet 1.33 has no such gate"));
        assert!(on(36, "Nope=true").unwrap_err().contains("unrecognized feature gate: Nope"));
        assert!(on(36, "DRAExtendedResource=yes").unwrap_err().contains("invalid value"));
    }

    /// The README's profile table is this table.
    #[test]
    fn readme_carries_the_table() {
        let readme = include_str!("../../docs/mock-kubelet.md");
        let table = markdown_table();
        assert!(
            readme.contains(&table),
            "docs/mock-kubelet.md's kubelet-version table is stale; paste this under \"Kubelet versions\":\n{table}"
        );
    }
}
