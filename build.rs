//! Compiles the protocol APIs in `proto/` with protox (pure Rust, no
//! system `protoc`) and tonic-prost-build. Every message also derives serde
//! with the protojson field names (lowerCamelCase of the proto name, e.g.
//! `availableDeviceIDs`, `ID`) and the protojson encoding of 64-bit integers
//! (JSON strings), so `-o json` and trace files read like grpcurl output.

use prost_types::field_descriptor_proto::{Label, Type};
use std::path::Path;

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
/// API server speaks as protobuf; compiled to a descriptor set only (no Rust
/// types: src/kubelet/dra/protobuf.rs converts JSON to and from the wire
/// format by walking these descriptors).
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
    Ok(())
}
