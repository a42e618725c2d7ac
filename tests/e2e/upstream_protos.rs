//! dpctl against upstream Kubernetes' own Go code (tests/upstream, pinned to
//! one release): the oracles and peers tests/upstream/build.sh builds.

use crate::support::*;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use std::collections::{BTreeMap, BTreeSet};

/// dpctl's compiled protocol APIs (build.rs writes them next to the
/// generated code).
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dpctl_descriptors.bin"));

/// protoc's ToJsonName.
fn json_name(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines cmd/protofields prints, from dpctl's descriptors.
fn dpctl_lines() -> BTreeSet<String> {
    let fds = FileDescriptorSet::decode(DESCRIPTORS).expect("dpctl's descriptor set decodes");
    let mut maps: BTreeMap<String, (String, String)> = BTreeMap::new();
    fn index(prefix: &str, m: &DescriptorProto, maps: &mut BTreeMap<String, (String, String)>) {
        let full = format!("{prefix}.{}", m.name());
        if m.options.as_ref().is_some_and(|o| o.map_entry()) {
            let kind = |n: &str| m.field.iter().find(|f| f.name() == n).map(kind).unwrap_or_default();
            maps.insert(full.clone(), (kind("key"), kind("value")));
        }
        for n in &m.nested_type {
            index(&full, n, maps);
        }
    }
    fn kind(f: &prost_types::FieldDescriptorProto) -> String {
        match f.r#type() {
            Type::Message | Type::Group | Type::Enum => f.type_name().to_string(),
            t => t.as_str_name().trim_start_matches("TYPE_").to_lowercase(),
        }
    }
    for file in &fds.file {
        for m in &file.message_type {
            index(&format!(".{}", file.package()), m, &mut maps);
        }
    }
    fn enums(out: &mut BTreeSet<String>, prefix: &str, es: &[EnumDescriptorProto]) {
        for e in es {
            let full = format!("{prefix}.{}", e.name());
            out.insert(format!("enum {full}"));
            for v in &e.value {
                out.insert(format!("value {full}.{} {}", v.name(), v.number()));
            }
        }
    }
    fn messages(
        out: &mut BTreeSet<String>,
        prefix: &str,
        ms: &[DescriptorProto],
        maps: &BTreeMap<String, (String, String)>,
    ) {
        for m in ms {
            if m.options.as_ref().is_some_and(|o| o.map_entry()) {
                continue;
            }
            let full = format!("{prefix}.{}", m.name());
            out.insert(format!("message {full}"));
            for f in &m.field {
                let map = maps.get(f.type_name());
                let (kind, label) = match (map, f.label()) {
                    (Some((k, v)), _) => (format!("map<{k},{v}>"), "map"),
                    (None, Label::Repeated) => (kind(f), "repeated"),
                    (None, _) if f.proto3_optional() => (kind(f), "optional"),
                    (None, _) => (kind(f), "singular"),
                };
                let json = f.json_name.clone().unwrap_or_else(|| json_name(f.name()));
                out.insert(format!("field {full}.{} {} {kind} {label} json={json}", f.name(), f.number()));
            }
            enums(out, &full, &m.enum_type);
            messages(out, &full, &m.nested_type, maps);
        }
    }
    let mut out = BTreeSet::new();
    for file in &fds.file {
        let pkg = file.package();
        out.insert(format!("file {pkg} {}", file.syntax()));
        messages(&mut out, pkg, &file.message_type, &maps);
        enums(&mut out, pkg, &file.enum_type);
        for s in &file.service {
            let full = format!("{pkg}.{}", s.name());
            out.insert(format!("service {full}"));
            for m in &s.method {
                out.insert(format!(
                    "rpc {full}.{} {} {} client_streaming={} server_streaming={}",
                    m.name(),
                    m.input_type(),
                    m.output_type(),
                    m.client_streaming(),
                    m.server_streaming()
                ));
            }
        }
    }
    out
}

/// Every message, field (name, number, type, label, JSON name), enum value
/// and RPC of the kubelet plugin APIs dpctl serves or calls is upstream's,
/// as upstream's generated Go types describe them (cmd/protofields, built
/// against the pinned k8s.io/kubelet): a field upstream adds is a failure
/// here, naming it.
#[test]
fn the_protos_match_upstream_field_for_field() {
    let Some(bin) = upstream_peer("protofields") else { return };
    let out = std::process::Command::new(&bin).output().expect("run protofields");
    assert!(out.status.success(), "protofields: {}", String::from_utf8_lossy(&out.stderr));
    let upstream: BTreeSet<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    let ours = dpctl_lines();
    let missing: Vec<&String> = upstream.difference(&ours).collect();
    let extra: Vec<&String> = ours.difference(&upstream).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "proto/ differs from upstream's generated types:\n  upstream only (bring into proto/):\n    {}\n  dpctl only:\n    {}",
        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    "),
        extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    ")
    );
    assert!(upstream.len() > 200, "protofields printed only {} lines", upstream.len());
}
