//! A client of the kubelet's pods API (pods/v1alpha1, KEP-4188) on
//! `<kubelet-root>/pods-api/pods-api.sock`.

use crate::api::pods_v1alpha1::pods_client::PodsClient;
use crate::core::transport::dial_hint;
use crate::core::Result;
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;

/// What points dpctl at the pods API socket, and why it may be absent.
pub const PODS_API_FIX: &str = "the kubelet serves the pods API on <root-dir>/pods-api/pods-api.sock only with the \
     PodsAPI feature gate (alpha, off, in 1.36; beta, on, from 1.37; absent before 1.36); pass --socket or set \
     DPCTL_PODS_API_SOCKET";

/// Dial the pods API socket (answers up to `max_recv` bytes); a missing
/// socket says which kubelets serve it.
pub async fn connect(socket: &Path, timeout: Duration, max_recv: usize) -> Result<PodsClient<Channel>> {
    Ok(PodsClient::new(dial_hint(socket, timeout, PODS_API_FIX).await?).max_decoding_message_size(max_recv))
}

/// One protobuf field's value: a varint, or the bytes of a length-delimited field.
enum Field<'a> {
    Varint,
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Each (number, value) of one message; None when it is not protobuf.
fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let value = match key & 7 {
            0 => varint(b, &mut at).map(|_| Field::Varint)?,
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                at = at.checked_add(n).filter(|e| *e <= b.len())?;
                Field::Varint
            }
            2 => {
                let n = usize::try_from(varint(b, &mut at)?).ok()?;
                let end = at.checked_add(n).filter(|e| *e <= b.len())?;
                let s = &b[at..end];
                at = end;
                Field::Bytes(s)
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

/// A pod's `(uid, namespace/name)` from its core/v1 Pod bytes: only
/// `metadata` (1) and its `name` (1), `namespace` (3) and `uid` (5) are read.
pub fn identity(pod: &[u8]) -> Option<(String, String)> {
    let meta = fields(pod)?.into_iter().find_map(|(n, v)| match (n, v) {
        (1, Field::Bytes(b)) => Some(b),
        _ => None,
    })?;
    let (mut name, mut namespace, mut uid) = (String::new(), String::new(), String::new());
    for (n, v) in fields(meta)? {
        if let Field::Bytes(b) = v {
            let s = String::from_utf8_lossy(b).into_owned();
            match n {
                1 => name = s,
                3 => namespace = s,
                5 => uid = s,
                _ => {}
            }
        }
    }
    (!uid.is_empty()).then(|| (uid, format!("{namespace}/{name}")))
}

/// Every pod's `namespace/name` by UID, from the kubelet's ListPods.
pub async fn names(socket: &Path, timeout: Duration) -> Result<std::collections::BTreeMap<String, String>> {
    let mut c = connect(socket, timeout, 64 * 1024 * 1024).await?;
    let req = crate::core::transport::request(crate::api::pods_v1alpha1::ListPodsRequest {}, timeout);
    let resp = crate::core::transport::call(socket, "ListPods", timeout, c.list_pods(req)).await?;
    Ok(resp.pods.iter().filter_map(|p| identity(p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Pod's bytes as v1.Pod#Marshal writes them: metadata (1) holding
    /// name (1), namespace (3), uid (5); a status (3) after it is skipped.
    #[test]
    fn a_pods_identity_is_read_from_its_metadata() {
        let meta = [&[0x0a, 1, b'a'][..], &[0x1a, 2, b'm', b'l'], &[0x2a, 2, b'u', b'1'], &[0x38, 0x05]].concat();
        let pod = [&[0x0a, meta.len() as u8][..], &meta, &[0x1a, 3, 0x0a, 1, b'R']].concat();
        assert_eq!(identity(&pod), Some(("u1".into(), "ml/a".into())));
        assert_eq!(identity(&pod[..pod.len() - 1]), None, "truncated");
        assert_eq!(identity(&[0x0a, 0]), None, "no UID");
    }
}
