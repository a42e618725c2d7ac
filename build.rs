//! Compiles the protocol APIs in `proto/` with protox (pure Rust, no
//! system `protoc`) and tonic-prost-build. Every message also derives serde
//! with the protojson field names (lowerCamelCase of the proto name, e.g.
//! `availableDeviceIDs`, `ID`) and the protojson encoding of 64-bit integers
//! (JSON strings), so `-o json` and trace files read like grpcurl output.
//!
//! The Kubernetes API types in `proto/k8s/` (a subset, upstream's field
//! numbers) are compiled twice: to a descriptor set (`k8s_descriptors.bin`,
//! read by the descriptor-driven protobuf codec `src/controlplane/protobuf.rs`)
//! and to Rust types (`crate::api::k8s`, the nested packages
//! `k8s.io.api.core.v1` … as modules) that deserialize Kubernetes' JSON:
//! every field under its proto name (which is its JSON name in upstream's
//! generated.proto), 64-bit integers as plain numbers, `null` lists and maps
//! as empty (Go's encoding/json), inline messages (`json:",inline"`)
//! flattened, and the special JSON forms of Time, MicroTime, Quantity,
//! IntOrString, RawExtension and FieldsV1 (src/api/k8s.rs). They derive
//! `Deserialize` only (what dpctl writes as JSON is still built as
//! `serde_json::Value`).
//! Their cost: see `K8S_PROTOS`.

use prost_types::field_descriptor_proto::{Label, Type};
use std::path::Path;

#[path = "src/api/k8s_inline.rs"]
mod k8s_inline;
#[path = "src/version/source.rs"]
mod source;
use prost_types::{DescriptorProto, FileDescriptorSet};

const PROTOS: &[&str] = &[
    "proto/deviceplugin/v1beta1/api.proto",
    "proto/pluginregistration/v1/api.proto",
    "proto/podresources/v1/api.proto",
    "proto/dra/v1/api.proto",
    "proto/dra/v1beta1/api.proto",
    "proto/dra-health/v1alpha1/api.proto",
    "proto/dra-health/v1/api.proto",
    "proto/pods/v1alpha1/api.proto",
];

/// The Kubernetes API types (a subset, upstream's field numbers) the local
/// API server speaks as protobuf (src/controlplane/protobuf.rs converts JSON
/// to and from the wire format by walking their descriptors) and dpctl reads
/// as typed values (`crate::api::k8s`).
///
/// Build time of the Rust types (2026-12-06, the shared 2-core machine at
/// load 3–3.5), measured as a crate of their own (the generated files and
/// src/api/k8s.rs, with a Pod and a DeviceClass read from a `&Value`
/// through serde_path_to_error, as dpctl instantiates them; `touch` and
/// `CARGO_INCREMENTAL=0 cargo build`, three runs): debug 8.6–9.7 s wall,
/// 7.9–9.6 s user; release with dpctl's `codegen-units = 4` 15.5–16.5 s
/// wall, 14.6–14.7 s user (prost's `Debug` impls are ≈ 0.7 s of the debug
/// time and nothing measurable in release). Measured inside dpctl's lib the
/// difference drowns in the machine's noise (the same commit took 72 s and
/// 94 s). k8s-openapi 0.29 costs +20 s debug / +29 s release on a cold
/// build, compiles one API version per build and refuses a Quantity written
/// as a JSON number; but, a crate of its own, it is compiled once, where
/// these types are part of dpctl's lib: every non-incremental (release)
/// build of dpctl pays their ≈ 16 s, an incremental one little (`touch
/// build.rs && cargo build`: 15 s before, 19 s after).
const K8S_PROTOS: &[&str] = &[
    "proto/k8s/apimachinery/pkg/runtime/generated.proto",
    "proto/k8s/apimachinery/pkg/api/resource/generated.proto",
    "proto/k8s/apimachinery/pkg/apis/meta/v1/generated.proto",
    "proto/k8s/apimachinery/pkg/util/intstr/generated.proto",
    "proto/k8s/api/core/v1/generated.proto",
    "proto/k8s/api/resource/v1/generated.proto",
    "proto/k8s/api/apps/v1/generated.proto",
    "proto/k8s/api/coordination/v1/generated.proto",
];

/// protoc's ToJsonName: drop underscores and upper-case the letter after one.
fn json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
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

fn field_attributes(
    prefix: &str,
    msg: &DescriptorProto,
    mut builder: tonic_prost_build::Builder,
) -> tonic_prost_build::Builder {
    let name = msg.name();
    let path = format!("{prefix}.{name}");
    for field in &msg.field {
        let fpath = format!("{path}.{}", field.name());
        let mut attrs = vec![format!("#[serde(rename = \"{}\")]", json_name(field.name()))];
        let repeated = field.label() == Label::Repeated;
        match (field.r#type(), repeated) {
            (Type::Int64, false) => attrs.push("#[serde(with = \"crate::api::pj::int64\")]".into()),
            (Type::Int64, true) => attrs.push("#[serde(with = \"crate::api::pj::int64_list\")]".into()),
            (Type::Uint64, false) => attrs.push("#[serde(with = \"crate::api::pj::uint64\")]".into()),
            _ => {}
        }
        if field.proto3_optional() {
            attrs.push("#[serde(skip_serializing_if = \"::std::option::Option::is_none\")]".into());
        }
        for a in attrs {
            builder = builder.field_attribute(&fpath, a);
        }
    }
    for nested in &msg.nested_type {
        builder = field_attributes(&path, nested, builder);
    }
    builder
}

/// The Kubernetes messages with a JSON form of their own (src/api/k8s.rs
/// converts it): each derives `Deserialize` through `from`/`try_from` that
/// type instead of field by field.
const K8S_SPECIAL: &[(&str, &str)] = &[
    (".k8s.io.apimachinery.pkg.apis.meta.v1.Time", "from = \"crate::api::k8s::json::Rfc3339\""),
    (".k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime", "from = \"crate::api::k8s::json::Rfc3339\""),
    (".k8s.io.apimachinery.pkg.api.resource.Quantity", "from = \"crate::api::k8s::json::QuantityJson\""),
    (".k8s.io.apimachinery.pkg.util.intstr.IntOrString", "try_from = \"crate::api::k8s::json::IntOrStringJson\""),
    (".k8s.io.apimachinery.pkg.runtime.RawExtension", "from = \"::serde_json::Value\""),
    (".k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1", "from = \"::serde_json::Value\""),
];

/// Kubernetes' JSON for one message of proto/k8s (and its nested ones): a
/// `Deserialize` derive, the field names as written (no protojson
/// lowerCamelCase: they are the JSON names already), and no 64-bit integers
/// as strings.
fn k8s_attributes(
    prefix: &str,
    msg: &DescriptorProto,
    mut builder: tonic_prost_build::Builder,
) -> tonic_prost_build::Builder {
    let path = format!("{prefix}.{}", msg.name());
    if msg.options.as_ref().is_some_and(|o| o.map_entry()) {
        return builder;
    }
    if let Some((_, from)) = K8S_SPECIAL.iter().find(|(p, _)| *p == path) {
        return builder.message_attribute(&path, format!("#[derive(::serde::Deserialize)] #[serde({from})]"));
    }
    builder = builder.message_attribute(&path, "#[derive(::serde::Deserialize)] #[serde(default)]");
    for field in &msg.field {
        let fpath = format!("{path}.{}", field.name());
        let attr = if field.r#type() == Type::Message && k8s_inline::INLINE.contains(&field.type_name()) {
            "#[serde(flatten, deserialize_with = \"crate::api::k8s::json::inline\")]".to_string()
        } else if field.label() == Label::Repeated {
            format!("#[serde(rename = \"{}\", deserialize_with = \"crate::api::k8s::json::or_empty\")]", field.name())
        } else {
            format!("#[serde(rename = \"{}\")]", field.name())
        };
        builder = builder.field_attribute(&fpath, attr);
    }
    for nested in &msg.nested_type {
        builder = k8s_attributes(&path, nested, builder);
    }
    builder
}

/// `dpctl --version`: the commit (`DPCTL_GIT_COMMIT` from the release
/// script, else the checkout's HEAD, else `unknown`) and the target triple.
fn version_info() {
    println!("cargo:rerun-if-env-changed=DPCTL_GIT_COMMIT");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let checkout = source::git_commit(Path::new(&manifest));
    if let Some((_, watch)) = &checkout {
        for p in watch {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let over = std::env::var("DPCTL_GIT_COMMIT").ok();
    let commit = source::resolve(over.as_deref(), checkout.as_ref().map(|(c, _)| c.as_str()));
    let target = std::env::var("TARGET").unwrap_or_else(|_| source::UNKNOWN.into());
    println!("cargo:rustc-env=DPCTL_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=DPCTL_TARGET={target}");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    version_info();
    for p in PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds: FileDescriptorSet = protox::compile(PROTOS, ["proto"])?;
    // The descriptors themselves, for the test that holds every message's
    // fields to upstream's generated Go types (tests/upstream/cmd/protofields).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("dpctl_descriptors.bin");
    let mut own = protox::Compiler::new(["proto"])?;
    own.open_files(PROTOS)?;
    std::fs::write(out, own.encode_file_descriptor_set())?;
    let mut builder = tonic_prost_build::configure()
        .btree_map(".")
        .message_attribute(".", "#[derive(::serde::Serialize, ::serde::Deserialize)] #[serde(default)]")
        .enum_attribute(".", "#[derive(::serde::Serialize, ::serde::Deserialize)]");
    for file in &fds.file {
        let prefix = format!(".{}", file.package());
        for msg in &file.message_type {
            builder = field_attributes(&prefix, msg, builder);
        }
    }
    builder.compile_fds(fds)?;
    for p in K8S_PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    let mut k8s = protox::Compiler::new(["proto"])?;
    k8s.include_imports(true).open_files(K8S_PROTOS)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("k8s_descriptors.bin");
    std::fs::write(out, k8s.encode_file_descriptor_set())?;
    // Their Rust types: one module tree (k8s.io.rs includes each package's file).
    let fds = k8s.file_descriptor_set();
    let mut builder =
        tonic_prost_build::configure().build_client(false).build_server(false).btree_map(".").include_file("k8s.io.rs");
    for file in &fds.file {
        let prefix = format!(".{}", file.package());
        for msg in &file.message_type {
            builder = k8s_attributes(&prefix, msg, builder);
        }
    }
    builder.compile_fds(fds)?;
    Ok(())
}
