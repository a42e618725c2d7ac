//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! as kube-apiserver speaks it, for the local API server: pure functions
//! from the JSON objects the store holds to bytes and back, driven by the
//! descriptors of a subset of upstream's `generated.proto` files
//! (`proto/k8s/`, compiled by build.rs; upstream's field numbers).
//!
//! - An object is `k8s\0` followed by a `runtime.Unknown` whose `typeMeta`
//!   names it (`apiVersion`, `kind`) and whose `raw` is the object's own
//!   message (apimachinery pkg/runtime/serializer/protobuf/protobuf.go).
//! - A watch is `Content-Type: application/vnd.kubernetes.protobuf;stream=watch`;
//!   every frame is a 4-byte big-endian length and a raw (no envelope)
//!   `metav1.WatchEvent{type, object: RawExtension{raw}}`, whose `raw` is the
//!   enveloped object (the apiserver's watch handler frames events with the
//!   raw serializer and embeds objects with the enveloped one).
//! - Kubernetes' JSON forms of its special types: `metav1.Time` is an RFC 3339
//!   string (the zero time is null), `resource.Quantity` a string,
//!   `runtime.RawExtension` and `metav1.FieldsV1` the JSON they hold.
//!
//! Fields outside the subset are skipped both ways (never an error); a field
//! whose JSON value has the wrong shape is left out. Fields are written in
//! field-number order and map entries sorted by key, as Go's generated
//! marshallers do, so the bytes are deterministic. Empty strings read from
//! the wire are dropped (Go writes every non-pointer string; its JSON omits
//! empty ones).

use crate::api::k8s::INLINE;
use crate::core::time::{parse_unix, unix_rfc3339, unix_rfc3339_micro};
use base64::Engine as _;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The media type of Kubernetes protobuf.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The magic every enveloped object starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const TIME: &str = ".k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const QUANTITY: &str = ".k8s.io.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = ".k8s.io.apimachinery.pkg.runtime.RawExtension";
const FIELDS_V1: &str = ".k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const MICRO_TIME: &str = ".k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const INT_OR_STRING: &str = ".k8s.io.apimachinery.pkg.util.intstr.IntOrString";

/// The messages of proto/k8s by full name (`.k8s.io.api.resource.v1.ResourceSlice`).
struct Schema {
    messages: HashMap<String, DescriptorProto>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/k8s_descriptors.bin"));
        // build.rs wrote these bytes from the same prost-types; a decode
        // failure would leave the schema empty (every message unknown).
        let set = prost_types::FileDescriptorSet::decode(&bytes[..]).unwrap_or_default();
        let mut messages = HashMap::new();
        for f in set.file {
            let prefix = format!(".{}", f.package());
            for m in f.message_type {
                add(&prefix, m, &mut messages);
            }
        }
        Schema { messages }
    })
}

fn add(prefix: &str, m: DescriptorProto, into: &mut HashMap<String, DescriptorProto>) {
    let name = format!("{prefix}.{}", m.name());
    for n in &m.nested_type {
        add(&name, n.clone(), into);
    }
    into.insert(name, m);
}

/// The message of a kind the server serves, by the object's `kind`.
pub fn message_for(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Node" => ".k8s.io.api.core.v1.Node",
        "Status" => ".k8s.io.apimachinery.pkg.apis.meta.v1.Status",
        "DeleteOptions" => ".k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "ResourceSlice" => ".k8s.io.api.resource.v1.ResourceSlice",
        "ResourceSliceList" => ".k8s.io.api.resource.v1.ResourceSliceList",
        "ResourceClaim" => ".k8s.io.api.resource.v1.ResourceClaim",
        "ResourceClaimList" => ".k8s.io.api.resource.v1.ResourceClaimList",
        "Deployment" => ".k8s.io.api.apps.v1.Deployment",
        "DeploymentList" => ".k8s.io.api.apps.v1.DeploymentList",
        "DaemonSet" => ".k8s.io.api.apps.v1.DaemonSet",
        "DaemonSetList" => ".k8s.io.api.apps.v1.DaemonSetList",
        "Lease" => ".k8s.io.api.coordination.v1.Lease",
        "LeaseList" => ".k8s.io.api.coordination.v1.LeaseList",
        _ => return None,
    })
}

// ---- the wire format ----

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_tag(out: &mut Vec<u8>, number: i32, wire: u8) {
    put_varint(out, ((number as u64) << 3) | wire as u64);
}

fn put_bytes(out: &mut Vec<u8>, number: i32, b: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// One field's value as read from the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Why a protobuf body or message cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtobufError {
    /// The body ends inside a varint.
    TruncatedVarint,
    /// A varint longer than 10 bytes.
    LongVarint,
    /// The body ends inside a field.
    TruncatedField,
    /// A length that does not fit in memory.
    LongLength,
    /// A wire type protobuf does not have (or a group): the type and the field number.
    WireType(u64, u64),
    /// A message name the schema does not know.
    UnknownMessage(String),
    /// A string field (this one) that is not UTF-8.
    NotUtf8(String),
    /// A field (name, number) with a wire type its type cannot have.
    UnexpectedWire(String, i32),
    /// A kind (this one) with no protobuf message here.
    NoProtobufForm(String),
    /// A body without the `k8s\0` magic.
    NoMagic,
    /// A `contentEncoding` (this one) in the envelope.
    ContentEncoding(String),
    /// An envelope's kind this server does not serve.
    NotServed {
        /// The envelope's kind.
        kind: String,
        /// The envelope's apiVersion.
        api_version: String,
    },
    /// A watch event longer than its 4-byte length can say.
    EventTooLarge,
}

impl std::fmt::Display for ProtobufError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtobufError::TruncatedVarint => f.write_str("truncated varint"),
            ProtobufError::LongVarint => f.write_str("varint over 10 bytes"),
            ProtobufError::TruncatedField => f.write_str("truncated field"),
            ProtobufError::LongLength => f.write_str("length over usize"),
            ProtobufError::WireType(w, n) => write!(f, "unsupported wire type {w} (field {n})"),
            ProtobufError::UnknownMessage(name) => write!(f, "{name} is not a known message"),
            ProtobufError::NotUtf8(name) => write!(f, "field {name}: not UTF-8"),
            ProtobufError::UnexpectedWire(name, n) => write!(f, "field {name} ({n}): unexpected wire type"),
            ProtobufError::NoProtobufForm(kind) => write!(f, "kind {kind:?} has no protobuf form here"),
            ProtobufError::NoMagic => f.write_str("the body does not start with the protobuf magic k8s\\0"),
            ProtobufError::ContentEncoding(e) => write!(f, "contentEncoding {e:?} is not supported"),
            ProtobufError::NotServed { kind, api_version } => {
                write!(f, "kind {kind:?} (apiVersion {api_version:?}) is not served here")
            }
            ProtobufError::EventTooLarge => f.write_str("a watch event over 4 GiB"),
        }
    }
}

impl std::error::Error for ProtobufError {}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, ProtobufError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or(ProtobufError::TruncatedVarint)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(ProtobufError::LongVarint)
}

fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], ProtobufError> {
    let end = at.checked_add(n).filter(|e| *e <= buf.len()).ok_or(ProtobufError::TruncatedField)?;
    let s = &buf[*at..end];
    *at = end;
    Ok(s)
}

/// Every (field number, value) of one message, in wire order.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtobufError> {
    let mut out = Vec::new();
    each_field(buf, |n, v| out.push((n, v)))?;
    Ok(out)
}

// ---- JSON -> wire ----

/// Encode `obj` (Kubernetes JSON) as the message `name`: no envelope.
pub fn encode(name: &str, obj: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(m) = schema().messages.get(name) {
        encode_message(m, obj, &mut out);
    }
    out
}

/// A field of a message type Go embeds in its parent's JSON
/// (`json:",inline"`, [`INLINE`]): it holds the parent object's own fields.
fn inline(f: &FieldDescriptorProto) -> bool {
    f.r#type() == Type::Message && INLINE.contains(&f.type_name())
}

fn encode_message(m: &DescriptorProto, whole: &Value, out: &mut Vec<u8>) {
    let Some(obj) = whole.as_object() else { return };
    let mut fs: Vec<&FieldDescriptorProto> = m.field.iter().collect();
    fs.sort_by_key(|f| f.number());
    for f in fs {
        let v = if inline(f) { Some(whole) } else { obj.get(f.name()).filter(|v| !v.is_null()) };
        let Some(v) = v else { continue };
        if let Some(entry) = map_entry(f) {
            let Some(o) = v.as_object() else { continue };
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            for k in keys {
                let mut e = Vec::new();
                encode_value(&entry.field[0], &Value::String(k.clone()), &mut e);
                encode_value(&entry.field[1], &o[k], &mut e);
                put_bytes(out, f.number(), &e);
            }
        } else if f.label() == Label::Repeated {
            for x in v.as_array().into_iter().flatten() {
                encode_value(f, x, out);
            }
        } else {
            encode_value(f, v, out);
        }
    }
}

/// The map entry message of a map field.
fn map_entry(f: &FieldDescriptorProto) -> Option<&'static DescriptorProto> {
    if f.label() != Label::Repeated || f.r#type() != Type::Message {
        return None;
    }
    let m = schema().messages.get(f.type_name())?;
    let is_map = m.options.as_ref().and_then(|o| o.map_entry).unwrap_or(false) && m.field.len() == 2;
    is_map.then_some(m)
}

fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn encode_value(f: &FieldDescriptorProto, v: &Value, out: &mut Vec<u8>) {
    let n = f.number();
    match f.r#type() {
        Type::String => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(x) => x.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return,
            };
            put_bytes(out, n, s.as_bytes());
        }
        Type::Bytes => {
            if let Some(b) = v.as_str().and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok()) {
                put_bytes(out, n, &b);
            }
        }
        Type::Bool => {
            if let Some(b) = v.as_bool() {
                put_tag(out, n, 0);
                put_varint(out, u64::from(b));
            }
        }
        Type::Int64 | Type::Int32 | Type::Uint64 | Type::Uint32 | Type::Enum => {
            if let Some(i) = as_i64(v) {
                put_tag(out, n, 0);
                put_varint(out, i as u64);
            }
        }
        Type::Double => {
            if let Some(d) = v.as_f64() {
                put_tag(out, n, 1);
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
        Type::Float => {
            if let Some(d) = v.as_f64() {
                put_tag(out, n, 5);
                out.extend_from_slice(&(d as f32).to_le_bytes());
            }
        }
        Type::Message => {
            let mut body = Vec::new();
            match f.type_name() {
                TIME => {
                    let Some(secs) = v.as_str().and_then(parse_unix).map(|(secs, _)| secs) else { return };
                    put_tag(&mut body, 1, 0);
                    put_varint(&mut body, secs as u64);
                }
                QUANTITY => {
                    let s = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(x) => x.to_string(),
                        _ => return,
                    };
                    put_bytes(&mut body, 1, s.as_bytes());
                }
                MICRO_TIME => {
                    let Some((secs, nanos)) = v.as_str().and_then(parse_unix) else { return };
                    put_tag(&mut body, 1, 0);
                    put_varint(&mut body, secs as u64);
                    if nanos != 0 {
                        put_tag(&mut body, 2, 0);
                        put_varint(&mut body, u64::from(nanos));
                    }
                }
                INT_OR_STRING => match v {
                    // type 0 (Int): intVal; type 1 (String): strVal; Go writes all three.
                    Value::Number(x) => {
                        put_tag(&mut body, 1, 0);
                        put_varint(&mut body, 0);
                        put_tag(&mut body, 2, 0);
                        put_varint(&mut body, x.as_i64().unwrap_or(0) as u64);
                        put_bytes(&mut body, 3, b"");
                    }
                    Value::String(t) => {
                        put_tag(&mut body, 1, 0);
                        put_varint(&mut body, 1);
                        put_tag(&mut body, 2, 0);
                        put_varint(&mut body, 0);
                        put_bytes(&mut body, 3, t.as_bytes());
                    }
                    _ => return,
                },
                RAW_EXTENSION | FIELDS_V1 => put_bytes(&mut body, 1, v.to_string().as_bytes()),
                name => match schema().messages.get(name) {
                    Some(m) if v.is_object() => encode_message(m, v, &mut body),
                    _ => return,
                },
            }
            put_bytes(out, n, &body);
        }
        // Not used by the Kubernetes types served here.
        _ => {}
    }
}

// ---- wire -> JSON ----

/// Decode the message `name` (no envelope) into Kubernetes JSON.
pub fn decode(name: &str, buf: &[u8]) -> Result<Value, ProtobufError> {
    let m = schema().messages.get(name).ok_or_else(|| ProtobufError::UnknownMessage(name.to_string()))?;
    decode_message(m, buf)
}

fn decode_message(m: &DescriptorProto, buf: &[u8]) -> Result<Value, ProtobufError> {
    let mut obj = Map::new();
    for (num, w) in fields(buf)? {
        let Some(f) = m.field.iter().find(|f| f.number() as u64 == num) else { continue };
        if let Some(entry) = map_entry(f) {
            let Wire::Bytes(b) = w else { continue };
            let (mut k, mut val) = (String::new(), Value::Null);
            for (en, ew) in fields(b)? {
                if en == 1 {
                    k = decode_value(&entry.field[0], ew)?.as_str().unwrap_or_default().to_string();
                } else if en == 2 {
                    val = decode_value(&entry.field[1], ew)?;
                }
            }
            if val.is_null() && entry.field[1].r#type() == Type::String {
                val = json!("");
            }
            let slot = obj.entry(f.name().to_string()).or_insert_with(|| json!({}));
            if let Some(o) = slot.as_object_mut() {
                o.insert(k, val);
            }
        } else if f.label() == Label::Repeated {
            let slot = obj.entry(f.name().to_string()).or_insert_with(|| json!([]));
            let Some(list) = slot.as_array_mut() else { continue };
            match w {
                // A packed run of scalars.
                Wire::Bytes(b) if !matches!(f.r#type(), Type::String | Type::Bytes | Type::Message) => {
                    let mut at = 0;
                    while at < b.len() {
                        list.push(decode_value(f, Wire::Varint(varint(b, &mut at)?))?);
                    }
                }
                _ => list.push(decode_value(f, w)?),
            }
        } else if inline(f) {
            // Its fields are the parent's (Go's json:",inline").
            if let Value::Object(fields) = decode_value(f, w)? {
                obj.extend(fields);
            }
        } else {
            let v = decode_value(f, w)?;
            if v.is_null() || v.as_str() == Some("") {
                obj.remove(f.name());
            } else {
                obj.insert(f.name().to_string(), v);
            }
        }
    }
    Ok(Value::Object(obj))
}

fn decode_value(f: &FieldDescriptorProto, w: Wire<'_>) -> Result<Value, ProtobufError> {
    let wrong = || ProtobufError::UnexpectedWire(f.name().to_string(), f.number());
    Ok(match (f.r#type(), w) {
        (Type::String, Wire::Bytes(b)) => {
            Value::String(String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::NotUtf8(f.name().to_string()))?)
        }
        (Type::Bytes, Wire::Bytes(b)) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        (Type::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Type::Int64 | Type::Enum, Wire::Varint(v)) => json!(v as i64),
        (Type::Int32, Wire::Varint(v)) => json!(v as i64 as i32),
        (Type::Uint64, Wire::Varint(v)) => json!(v),
        (Type::Uint32, Wire::Varint(v)) => json!(v as u32),
        (Type::Double, Wire::Fixed64(v)) => json!(f64::from_bits(v)),
        (Type::Float, Wire::Fixed32(v)) => json!(f32::from_bits(v)),
        (Type::Message, Wire::Bytes(b)) => match f.type_name() {
            TIME => {
                let mut secs = 0i64;
                for (n, w) in fields(b)? {
                    if let (1, Wire::Varint(v)) = (n, w) {
                        secs = v as i64;
                    }
                }
                if secs == 0 {
                    Value::Null
                } else {
                    Value::String(unix_rfc3339(secs))
                }
            }
            MICRO_TIME => {
                let (mut secs, mut nanos) = (0i64, 0u32);
                for (n, w) in fields(b)? {
                    match (n, w) {
                        (1, Wire::Varint(v)) => secs = v as i64,
                        (2, Wire::Varint(v)) => nanos = v as u32,
                        _ => {}
                    }
                }
                if secs == 0 && nanos == 0 {
                    Value::Null
                } else {
                    Value::String(unix_rfc3339_micro(secs, nanos))
                }
            }
            INT_OR_STRING => {
                let (mut kind, mut int, mut text) = (0u64, 0i64, String::new());
                for (n, w) in fields(b)? {
                    match (n, w) {
                        (1, Wire::Varint(v)) => kind = v,
                        (2, Wire::Varint(v)) => int = i64::from(v as i32),
                        (3, Wire::Bytes(s)) => text = String::from_utf8_lossy(s).into_owned(),
                        _ => {}
                    }
                }
                if kind == 1 {
                    Value::String(text)
                } else {
                    json!(int)
                }
            }
            QUANTITY => fields(b)?
                .into_iter()
                .find_map(|(n, w)| match (n, w) {
                    (1, Wire::Bytes(s)) => Some(Value::String(String::from_utf8_lossy(s).into_owned())),
                    _ => None,
                })
                .unwrap_or(Value::Null),
            RAW_EXTENSION | FIELDS_V1 => fields(b)?
                .into_iter()
                .find_map(|(n, w)| match (n, w) {
                    (1, Wire::Bytes(s)) => serde_json::from_slice(s).ok(),
                    _ => None,
                })
                .unwrap_or(Value::Null),
            name => match schema().messages.get(name) {
                Some(m) => decode_message(m, b)?,
                None => Value::Null,
            },
        },
        (Type::String | Type::Bytes | Type::Message, _) => return Err(wrong()),
        (
            Type::Bool
            | Type::Int64
            | Type::Int32
            | Type::Uint64
            | Type::Uint32
            | Type::Enum
            | Type::Double
            | Type::Float,
            _,
        ) => return Err(wrong()),
        // Not used by the Kubernetes types served here.
        _ => Value::Null,
    })
}

// ---- the envelope and watch frames ----

/// `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding: "", contentType: ""}`
/// around the object's message (as Go writes it: the two empty strings included).
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// An object (its `kind` and `apiVersion` fields naming it) as an enveloped protobuf body.
pub fn encode_object(obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = message_for(kind).ok_or_else(|| ProtobufError::NoProtobufForm(kind.to_string()))?;
    Ok(envelope(obj["apiVersion"].as_str().unwrap_or_default(), kind, &encode(name, obj)))
}

/// An enveloped protobuf body as Kubernetes JSON (with `apiVersion` and `kind` from the envelope).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body.strip_prefix(&MAGIC[..]).ok_or(ProtobufError::NoMagic)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, w) in fields(rest)? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (tn, tw) in fields(tm)? {
                    match (tn, tw) {
                        (1, Wire::Bytes(s)) => api_version = String::from_utf8_lossy(s).into_owned(),
                        (2, Wire::Bytes(s)) => kind = String::from_utf8_lossy(s).into_owned(),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = r,
            (3, Wire::Bytes(e)) if !e.is_empty() => {
                return Err(ProtobufError::ContentEncoding(String::from_utf8_lossy(e).into_owned()))
            }
            _ => {}
        }
    }
    let name = message_for(&kind)
        .ok_or_else(|| ProtobufError::NotServed { kind: kind.clone(), api_version: api_version.clone() })?;
    let mut obj = decode(name, raw)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

/// Call `f` with each (field number, value) of one message, in wire order, keeping nothing.
fn each_field<'a>(buf: &'a [u8], mut f: impl FnMut(u64, Wire<'a>)) -> Result<(), ProtobufError> {
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let v = match key & 7 {
            0 => Wire::Varint(varint(buf, &mut at)?),
            1 => Wire::Fixed64(u64::from_le_bytes(fixed(take(buf, &mut at, 8)?)?)),
            2 => {
                let n = usize::try_from(varint(buf, &mut at)?).map_err(|_| ProtobufError::LongLength)?;
                Wire::Bytes(take(buf, &mut at, n)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(fixed(take(buf, &mut at, 4)?)?)),
            w => return Err(ProtobufError::WireType(w, key >> 3)),
        };
        f(key >> 3, v);
    }
    Ok(())
}

/// `N` bytes [`take`] gave as an array.
fn fixed<const N: usize>(b: &[u8]) -> Result<[u8; N], ProtobufError> {
    b.try_into().map_err(|_| ProtobufError::TruncatedField)
}

/// An enveloped protobuf ResourceSlice read at the wire level, building
/// nothing: its `metadata.name` (else `generateName`), how many
/// `spec.devices`, and whether any has taints or consumes counters.
/// `None` when the body is not such an object (the full decode says why).
pub fn slice_shape(body: &[u8]) -> Option<(String, usize, bool)> {
    let rest = body.strip_prefix(&MAGIC[..])?;
    let mut raw = None;
    each_field(rest, |n, w| {
        if let (2, Wire::Bytes(r)) = (n, w) {
            raw = Some(r);
        }
    })
    .ok()?;
    let (mut name, mut generate) = (String::new(), String::new());
    let (mut devices, mut advanced, mut ok) = (0usize, false, true);
    each_field(raw?, |n, w| match (n, w) {
        // ResourceSlice.metadata: ObjectMeta name = 1, generateName = 2.
        (1, Wire::Bytes(meta)) => {
            ok &= each_field(meta, |mn, mw| match (mn, mw) {
                (1, Wire::Bytes(s)) => name = String::from_utf8_lossy(s).into_owned(),
                (2, Wire::Bytes(s)) => generate = String::from_utf8_lossy(s).into_owned(),
                _ => {}
            })
            .is_ok();
        }
        // ResourceSlice.spec: devices = 6; Device consumesCounters = 4, taints = 8.
        (2, Wire::Bytes(spec)) => {
            ok &= each_field(spec, |sn, sw| {
                if let (6, Wire::Bytes(dev)) = (sn, sw) {
                    devices += 1;
                    if !advanced {
                        ok &= each_field(dev, |dn, _| advanced |= dn == 4 || dn == 8).is_ok();
                    }
                }
            })
            .is_ok();
        }
        _ => {}
    })
    .ok()?;
    ok.then_some((if name.is_empty() { generate } else { name }, devices, advanced))
}

/// One protobuf watch frame: a 4-byte big-endian length, then the raw
/// `WatchEvent{type, object: RawExtension{raw: the enveloped object}}`.
pub fn watch_frame(kind: &str, obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let mut raw_ext = Vec::new();
    put_bytes(&mut raw_ext, 1, &encode_object(obj)?);
    let mut ev = Vec::new();
    put_bytes(&mut ev, 1, kind.as_bytes());
    put_bytes(&mut ev, 2, &raw_ext);
    let len = u32::try_from(ev.len()).map_err(|_| ProtobufError::EventTooLarge)?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(&ev);
    Ok(out)
}

// ---- content negotiation ----

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Media {
    /// The Content-Type of an answer (`watch`: a watch stream).
    pub fn content_type(self, watch: bool) -> &'static str {
        match (self, watch) {
            (Media::Json, _) => "application/json",
            (Media::Protobuf, false) => PROTOBUF,
            (Media::Protobuf, true) => PROTOBUF_WATCH,
        }
    }
}

/// One media range of an Accept header, as goautoneg parses it.
struct Clause {
    ty: String,
    sub: String,
    q: f32,
    params: Vec<(String, String)>,
}

fn parse_accept(header: &str) -> Vec<Clause> {
    let mut out: Vec<Clause> = header
        .split(',')
        .filter_map(|part| {
            let mut it = part.trim().split(';');
            let range = it.next()?.trim().to_ascii_lowercase();
            let (ty, sub) = match range.split_once('/') {
                Some((t, s)) => (t.trim().to_string(), s.trim().to_string()),
                None if range == "*" => ("*".to_string(), "*".to_string()),
                None => return None,
            };
            let mut c = Clause { ty, sub, q: 1.0, params: vec![] };
            for p in it {
                let Some((k, v)) = p.split_once('=') else { continue };
                if k.trim() == "q" {
                    c.q = v.trim().parse().unwrap_or(0.0);
                } else {
                    c.params.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            Some(c)
        })
        .collect();
    // Higher q first; at equal q a concrete type before a wildcard; else the client's order.
    out.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.ty == "*").cmp(&(b.ty == "*")))
            .then((a.sub == "*").cmp(&(b.sub == "*")))
    });
    out
}

/// The answer's encoding for an `Accept` header, as kube-apiserver negotiates
/// it (apiserver pkg/endpoints/handlers/negotiation/negotiate.go over
/// goautoneg): clauses by `q` (a concrete type before a wildcard, then the
/// client's order), each matched against the types served in the server's
/// order (JSON, then protobuf: so `*/*` and `application/*` mean JSON); a
/// clause asking for a conversion (`as=Table`…), another stream than
/// `watch` or a server version (`sv`) is passed over; other parameters
/// (`charset`…) are ignored. When nothing matches, the server's first type,
/// JSON — kube-apiserver answers rather than refusing (YAML and CBOR, which
/// it also serves, are not served here, so they get JSON too).
pub fn negotiate(accept: &str) -> Media {
    const SERVED: [(&str, &str, Media); 2] =
        [("application", "json", Media::Json), ("application", "vnd.kubernetes.protobuf", Media::Protobuf)];
    for c in parse_accept(accept) {
        for (ty, sub, media) in SERVED {
            let matches = (c.ty == ty && (c.sub == sub || c.sub == "*")) || (c.ty == "*" && c.sub == "*");
            let refused = c.params.iter().any(|(k, v)| match k.as_str() {
                "as" | "g" | "v" => true,
                "stream" => !v.is_empty() && v != "watch",
                "sv" => !v.is_empty(),
                _ => false,
            });
            if matches && !refused {
                return media;
            }
        }
    }
    Media::Json
}

/// A request body's encoding by its Content-Type (none: JSON); `None`: not supported (415).
pub fn request_media(content_type: &str) -> Option<Media> {
    let ty = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match ty.as_str() {
        "" | "application/json" => Some(Media::Json),
        PROTOBUF => Some(Media::Protobuf),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #47 item 4: NVIDIA's gpu-kubelet-plugin creates its MPS daemon's
    /// Deployment in protobuf (it got 400 "not served here"); Deployments,
    /// DaemonSets and Leases round-trip: their pod template (env, volumes
    /// inline in JSON, mounts, security context), IntOrString (number and
    /// string) and MicroTime (microseconds).
    #[test]
    fn apps_and_coordination_kinds_round_trip() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mps", "namespace": "nvidia"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "mps"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                "template": {"metadata": {"labels": {"app": "mps"}}, "spec": {"nodeName": "n1", "hostPID": true,
                    "containers": [{"name": "ctl", "image": "nvcr.io/x:1", "command": ["mps-control"], "args": ["-d"],
                        "env": [{"name": "A", "value": "1"}, {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                        "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}}],
                    "volumes": [{"name": "shm", "hostPath": {"path": "/run/mps", "type": "DirectoryOrCreate"}},
                                {"name": "cfg", "configMap": {"name": "mps-config", "items": [{"key": "k", "path": "p"}]}}],
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}});
        let back = decode_object(&encode_object(&d).unwrap()).unwrap();
        assert_eq!(back, d);
        let l = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2025-01-02T03:04:05.123456Z"}});
        assert_eq!(decode_object(&encode_object(&l).unwrap()).unwrap(), l);
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "plugin"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(decode_object(&encode_object(&ds).unwrap()).unwrap(), ds);
    }

    /// A small ResourceSlice, its bytes written by hand from upstream's
    /// field numbers (resource/v1: ResourceSlice metadata=1 spec=2;
    /// ResourceSliceSpec driver=1 pool=2 nodeName=3 devices=6; ResourcePool
    /// name=1 generation=2 resourceSliceCount=3; Device name=1 attributes=2;
    /// DeviceAttribute int=2 string=4; meta/v1 ObjectMeta name=1
    /// resourceVersion=6 creationTimestamp=8 labels=11; Time seconds=1;
    /// runtime Unknown typeMeta=1 raw=2 contentEncoding=3 contentType=4,
    /// TypeMeta apiVersion=1 kind=2).
    fn slice() -> (Value, Vec<u8>) {
        let obj = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "s", "resourceVersion": "7", "creationTimestamp": "1970-01-01T00:02:00Z", "labels": {"b": "2", "a": "1"}},
            "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "g", "attributes": {"x": {"int": 300}, "m": {"string": "v"}}}]},
            "somethingNew": {"ignored": true},
        });
        // Built inside out, so each length is visible.
        let pool: Vec<u8> = vec![0x0a, 1, b'p', 0x10, 1, 0x18, 1];
        let attr_x: Vec<u8> = vec![0x0a, 1, b'x', 0x12, 3, 0x10, 0xac, 0x02]; // int (2) = 300 (varint ac 02)
        let attr_m: Vec<u8> = vec![0x0a, 1, b'm', 0x12, 3, 0x22, 1, b'v']; // string (4) = "v"
        let mut device: Vec<u8> = vec![0x0a, 1, b'g'];
        device.extend([0x12, attr_m.len() as u8]);
        device.extend(&attr_m);
        device.extend([0x12, attr_x.len() as u8]);
        device.extend(&attr_x);
        let mut spec: Vec<u8> = vec![0x0a, 1, b'd'];
        spec.extend([0x12, pool.len() as u8]);
        spec.extend(&pool);
        spec.extend([0x1a, 1, b'n']);
        spec.extend([0x32, device.len() as u8]);
        spec.extend(&device);
        let meta: Vec<u8> = vec![
            0x0a, 1, b's', 0x32, 1, b'7', 0x42, 2, 0x08, 120, 0x5a, 6, 0x0a, 1, b'a', 0x12, 1, b'1', 0x5a, 6, 0x0a, 1,
            b'b', 0x12, 1, b'2',
        ];
        let mut msg = vec![0x0a, meta.len() as u8];
        msg.extend(&meta);
        msg.extend([0x12, spec.len() as u8]);
        msg.extend(&spec);
        let tm: Vec<u8> = [&[0x0a, 18][..], b"resource.k8s.io/v1", &[0x12, 13], b"ResourceSlice"].concat();
        let mut whole = b"k8s\0".to_vec();
        whole.extend([0x0a, tm.len() as u8]);
        whole.extend(&tm);
        whole.extend([0x12, msg.len() as u8]);
        whole.extend(&msg);
        whole.extend([0x1a, 0, 0x22, 0]);
        (obj, whole)
    }

    #[test]
    fn a_resource_slice_encodes_to_the_bytes_upstream_field_numbers_give() {
        let (obj, want) = slice();
        assert_eq!(encode_object(&obj).unwrap(), want);
    }

    #[test]
    fn the_bytes_decode_back_to_the_json_and_unknown_fields_are_skipped() {
        let (mut obj, bytes) = slice();
        obj.as_object_mut().unwrap().remove("somethingNew");
        assert_eq!(decode_object(&bytes).unwrap(), obj);
        // A field number the subset does not know (99, a string): skipped.
        let mut raw = encode(".k8s.io.api.resource.v1.ResourceSlice", &obj);
        raw.extend([0x9a, 0x06, 2, b'h', b'i']);
        let again = decode(".k8s.io.api.resource.v1.ResourceSlice", &raw).unwrap();
        assert_eq!((&again["metadata"], &again["spec"]), (&obj["metadata"], &obj["spec"]));
        // Go writes every string, empty ones too: they read as absent.
        let raw = [0x0a, 4, 0x0a, 0, 0x12, 0];
        assert_eq!(decode(".k8s.io.api.resource.v1.ResourceSlice", &raw).unwrap(), json!({"metadata": {}}));
    }

    #[test]
    fn bad_bodies_are_errors_not_panics() {
        assert_eq!(decode_object(b"{\"kind\":\"x\"}").unwrap_err(), ProtobufError::NoMagic);
        assert!(decode_object(b"k8s\0\x0a\x05ab").is_err(), "truncated");
        let other = envelope("v1", "Pod", b"");
        assert!(decode_object(&other).unwrap_err().to_string().contains("\"Pod\""));
        // Every prefix of a good body either decodes or is an error.
        let (_, good) = slice();
        for n in 0..good.len() {
            let _ = decode_object(&good[..n]);
        }
        // Random bytes behind the magic, and bit flips of a good body: never a panic.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let n = (next() % 64) as usize;
            let mut b = MAGIC.to_vec();
            b.extend((0..n).map(|_| next() as u8));
            let _ = decode_object(&b);
            let mut g = good.clone();
            let at = 4 + (next() as usize) % (g.len() - 4);
            g[at] ^= 1 << (next() % 8);
            let _ = decode_object(&g);
        }
        // A string field given as a varint is an error.
        assert!(decode(".k8s.io.api.resource.v1.ResourceSlice", &[0x12, 2, 0x08, 1]).is_err());
    }

    #[test]
    fn a_watch_frame_is_a_length_and_a_raw_watch_event_around_the_enveloped_object() {
        let (obj, enveloped) = slice();
        let f = watch_frame("ADDED", &obj).unwrap();
        let len = u32::from_be_bytes(f[..4].try_into().unwrap()) as usize;
        assert_eq!(len, f.len() - 4);
        let ev = &f[4..];
        assert!(!ev.starts_with(b"k8s\0"), "the frame itself carries no envelope");
        let mut want = vec![0x0a, 5];
        want.extend(b"ADDED");
        let mut raw_ext = vec![0x0a];
        put_varint(&mut raw_ext, enveloped.len() as u64);
        raw_ext.extend(&enveloped);
        want.push(0x12);
        put_varint(&mut want, raw_ext.len() as u64);
        want.extend(&raw_ext);
        assert_eq!(ev, &want[..]);
    }

    #[test]
    fn accept_headers_are_negotiated_as_kube_apiserver_does() {
        let n = negotiate;
        assert_eq!(n("application/vnd.kubernetes.protobuf,application/json"), Media::Protobuf, "client-go");
        assert_eq!(n("application/json, application/vnd.kubernetes.protobuf"), Media::Json);
        assert_eq!(n("application/vnd.kubernetes.protobuf;q=0.5,application/json;q=0.9"), Media::Json);
        assert_eq!(n("*/*;q=0.8,application/vnd.kubernetes.protobuf"), Media::Protobuf);
        assert_eq!(n("*/*,application/vnd.kubernetes.protobuf"), Media::Protobuf, "a concrete type before a wildcard");
        assert_eq!(n("application/*"), Media::Json, "the server's first type");
        assert_eq!(
            n("application/json;as=Table;v=v1;g=meta.k8s.io,application/vnd.kubernetes.protobuf"),
            Media::Protobuf
        );
        assert_eq!(n("application/vnd.kubernetes.protobuf;stream=watch"), Media::Protobuf);
        assert_eq!(n("application/vnd.kubernetes.protobuf;stream=other,application/json"), Media::Json);
        assert_eq!(
            n("application/vnd.kubernetes.protobuf; charset=utf-8"),
            Media::Protobuf,
            "unknown parameters are ignored"
        );
        assert_eq!(n(""), Media::Json);
        assert_eq!(n("application/yaml"), Media::Json, "nothing served matches: JSON, not 406");
        assert_eq!(n("text/html,garbage"), Media::Json);
        assert_eq!(request_media("application/vnd.kubernetes.protobuf"), Some(Media::Protobuf));
        assert_eq!(request_media("application/json; charset=utf-8"), Some(Media::Json));
        assert_eq!(request_media("application/yaml"), None);
    }

    #[test]
    fn status_list_and_node_have_their_messages() {
        let st = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "m", "reason": "NotFound", "code": 404});
        let b = encode_object(&st).unwrap();
        assert_eq!(decode_object(&b).unwrap(), st);
        let list = json!({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion": "3"}, "items": [{"metadata": {"name": "a"}}]});
        assert_eq!(decode_object(&encode_object(&list).unwrap()).unwrap(), list);
        assert!(encode_object(&json!({"kind": "Pod"})).is_err());
    }
}
