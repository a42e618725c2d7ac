//! Discovery as client-go's discovery client reads it (the legacy,
//! unaggregated documents, always JSON): `/api`, `/api/v1`, `/apis`,
//! `/apis/resource.k8s.io` and `/apis/resource.k8s.io/VERSION`, and the
//! groups of the built-in kinds stored ([`super::builtin`]: `apps/v1`,
//! `coordination.k8s.io/v1`, `scheduling.k8s.io/v1beta1`), naming exactly the resources and verbs this
//! server serves.

use serde_json::{json, Value};

const GROUP: &str = "resource.k8s.io";

fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str]) -> Value {
    let singular = if name.contains('/') { String::new() } else { kind.to_lowercase() };
    json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs})
}

/// The resources of `resource.k8s.io/version`.
fn resources(version: &str, taint_rules: Option<&str>) -> Vec<Value> {
    let mut out = vec![
        resource(
            "resourceclaims",
            "ResourceClaim",
            true,
            &["create", "delete", "get", "list", "patch", "update", "watch"],
        ),
        resource("resourceclaims/status", "ResourceClaim", true, &["get", "patch", "update"]),
    ];
    if version == "v1" {
        out.push(resource(
            "resourceslices",
            "ResourceSlice",
            false,
            &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        ));
        out.extend(super::builtin::discovery(GROUP, "v1"));
    }
    if taint_rules == Some(version) {
        out.extend(super::builtin::discovery_of(GROUP, version, "devicetaintrules"));
    }
    out
}

/// The group, with the versions served (preferred first).
fn group(served: &[&str]) -> Value {
    let versions: Vec<Value> =
        served.iter().map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v})).collect();
    json!({"name": GROUP, "versions": versions, "preferredVersion": versions[0]})
}

/// The groups of built-in kinds besides core, as `/apis` lists them (after resource.k8s.io).
/// (group, its one version): scheduling.k8s.io's version is the PodGroups' served.
const BUILTIN_GROUPS: &[(&str, &str)] = &[("apps", "v1"), ("coordination.k8s.io", "v1")];

/// A built-in group's APIGroup entry (its one version).
fn builtin_group(g: &str, version: &str) -> Value {
    let v = json!({"groupVersion": format!("{g}/{version}"), "version": version});
    json!({"name": g, "versions": [v], "preferredVersion": v})
}

/// The discovery document at `path`, if it is one (`extra`: the groups
/// CustomResourceDefinitions declare, listed in `/apis` after this one;
/// `pod_groups`: the scheduling.k8s.io version PodGroups are served in
/// (GenericWorkload on) — none, kube-apiserver lists no version of the group
/// that this server serves, so the group is left out; `resource_versions`: the
/// resource.k8s.io versions served, preferred first; `taint_rules`: the
/// version DeviceTaintRules are served in, if any).
pub fn answer(
    path: &str,
    extra: Vec<Value>,
    pod_groups: Option<&str>,
    resource_versions: &[&str],
    taint_rules: Option<&str>,
) -> Option<Value> {
    let path = path.trim_end_matches('/');
    let scheduling = pod_groups.map(|v| ("scheduling.k8s.io", v));
    let all: Vec<(&str, &str)> = BUILTIN_GROUPS.iter().copied().chain(scheduling).collect();
    let builtin_groups = || all.iter();
    Some(match path {
        "/api" => json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1",
            "resources": super::builtin::discovery("", "v1")}),
        "/apis" => {
            let mut groups = vec![group(resource_versions)];
            groups.extend(builtin_groups().map(|(g, v)| builtin_group(g, v)));
            groups.extend(extra);
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        "/apis/resource.k8s.io" => {
            let mut g = group(resource_versions);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
        _ if builtin_groups().any(|(g, _)| path.strip_prefix("/apis/") == Some(*g)) => {
            let g = &path["/apis/".len()..];
            let v = all.iter().find(|(x, _)| *x == g).map_or("v1", |(_, v)| v);
            let mut g = builtin_group(g, v);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
        _ if builtin_groups().any(|(g, v)| path.strip_prefix("/apis/") == Some(&format!("{g}/{v}"))) => {
            let (g, v) = path["/apis/".len()..].split_once('/').unwrap_or_default();
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{g}/{v}"),
                "resources": super::builtin::discovery(g, v)})
        }
        _ => {
            let v = path.strip_prefix("/apis/resource.k8s.io/")?;
            if !resource_versions.contains(&v) {
                return None;
            }
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{v}"), "resources": resources(v, taint_rules)})
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&str] = &["v1", "v1beta2", "v1beta1"];

    /// 1.34–1.37's default: resource.k8s.io/v1 only (betaAPIGroupVersionsDisabledByDefault).
    #[test]
    fn the_resource_betas_are_discovered_only_when_served() {
        let g = answer("/apis/resource.k8s.io", vec![], None, &["v1"], Some("v1")).unwrap();
        assert_eq!(g["versions"], json!([{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]));
        assert!(answer("/apis/resource.k8s.io/v1beta1", vec![], None, &["v1"], Some("v1")).is_none());
        assert!(answer("/apis/resource.k8s.io/v1beta2", vec![], None, &["v1", "v1beta1"], Some("v1")).is_none());
        assert!(answer("/apis/resource.k8s.io/v1beta1", vec![], None, &["v1", "v1beta1"], Some("v1")).is_some());
    }

    #[test]
    fn discovery_names_the_served_resources_and_verbs() {
        let g = answer("/apis", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap();
        assert_eq!(g["groups"][0]["preferredVersion"]["groupVersion"], "resource.k8s.io/v1");
        let v1 = answer("/apis/resource.k8s.io/v1", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap();
        let names: Vec<&str> = v1["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "resourceclaims",
                "resourceclaims/status",
                "resourceslices",
                "resourceclaimtemplates",
                "deviceclasses",
                "devicetaintrules",
                "devicetaintrules/status"
            ]
        );
        // DRADeviceTaintRules off: none.
        let off = answer("/apis/resource.k8s.io/v1", vec![], None, ALL, None).unwrap();
        assert!(!off["resources"].as_array().unwrap().iter().any(|r| r["kind"] == "DeviceTaintRule"), "{off}");
        assert_eq!(v1["resources"][1]["verbs"], json!(["get", "patch", "update"]));
        assert_eq!(
            v1["resources"][0]["verbs"],
            json!(["create", "delete", "get", "list", "patch", "update", "watch"]),
            "clients write claims"
        );
        let core = answer("/api/v1", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap();
        assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/status"), "{core}");
        assert!(
            answer("/apis/resource.k8s.io/v1beta1", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap()["resources"]
                .as_array()
                .unwrap()
                .len()
                == 2
        );
        assert!(answer("/apis/resource.k8s.io/v2", vec![], Some("v1beta1"), ALL, Some("v1")).is_none());
        assert_eq!(
            answer("/apis/resource.k8s.io", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap()["kind"],
            "APIGroup"
        );
        // PodGroups (KEP-4671/5729) as 1.37 serves them: scheduling.k8s.io/v1beta1 only.
        let g = answer("/apis/scheduling.k8s.io", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap();
        assert_eq!(g["preferredVersion"]["groupVersion"], "scheduling.k8s.io/v1beta1", "{g}");
        let s = answer("/apis/scheduling.k8s.io/v1beta1", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap();
        let names: Vec<&str> = s["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(names, ["podgroups", "podgroups/status"], "{s}");
        assert!(answer("/apis/scheduling.k8s.io/v1", vec![], Some("v1beta1"), ALL, Some("v1")).is_none());
        assert_eq!(
            answer("/apis/apps/v1", vec![], Some("v1beta1"), ALL, Some("v1")).unwrap()["groupVersion"],
            "apps/v1"
        );
    }

    /// GenericWorkload off (1.37's default): kube-apiserver serves no
    /// scheduling.k8s.io/v1beta1, and lists the group with v1 only
    /// (PriorityClasses, which this server does not serve): the group is not listed.
    #[test]
    fn pod_groups_are_not_discovered_with_generic_workload_off() {
        let g = answer("/apis", vec![], None, ALL, Some("v1")).unwrap();
        let names: Vec<&str> = g["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
        assert_eq!(names, ["resource.k8s.io", "apps", "coordination.k8s.io"], "{g}");
        assert!(answer("/apis/scheduling.k8s.io", vec![], None, ALL, Some("v1")).is_none());
        assert!(answer("/apis/scheduling.k8s.io/v1beta1", vec![], None, ALL, Some("v1")).is_none());
        assert_eq!(answer("/apis/apps", vec![], None, ALL, Some("v1")).unwrap()["kind"], "APIGroup");
    }
}
