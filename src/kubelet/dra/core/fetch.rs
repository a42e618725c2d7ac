//! A claim read from the API server for a pod of it, judged without I/O:
//! whether a claim made from the pod's template is the pod's
//! (resourceclaim.IsForPod), and why a claim could not be read. The reading
//! is the shell's ([`crate::kubelet::dra::shell::fetch`]).

use serde_json::Value;

/// resourceclaim.IsForPod: claim `claim` (as read) is the one the
/// resourceclaim controller made for `pod` — its controller owner is the pod,
/// or, with DRAWorkloadResourceClaims (`group_owner`), the pod's PodGroup by
/// name (a pod does not know its PodGroup's UID). The error is upstream's text.
pub fn is_for_pod(pod: &crate::kubelet::manifest::Pod, claim: &Value, group_owner: bool) -> Result<(), NotForPod> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (ns, name) = (text(&claim["metadata"]["namespace"]), text(&claim["metadata"]["name"]));
    let not = |owner| NotForPod { claim: format!("{ns}/{name}"), pod: pod.key(), owner };
    if ns != pod.namespace {
        return Err(not(Owner::OtherNamespace));
    }
    let owners = claim["metadata"]["ownerReferences"].as_array().map(Vec::as_slice).unwrap_or_default();
    let controller = owners.iter().find(|o| o["controller"] == true);
    if controller.is_some_and(|o| o["uid"] == pod.uid.as_str()) {
        return Ok(());
    }
    match pod.pod_group.as_deref().filter(|_| group_owner) {
        Some(group) => {
            let by_group = controller.is_some_and(|o| {
                o["name"] == group
                    && o["kind"] == "PodGroup"
                    && o["apiVersion"].as_str().is_some_and(|v| v.starts_with("scheduling.k8s.io/"))
            });
            if by_group {
                Ok(())
            } else {
                Err(not(Owner::NeitherPodNorGroup(group.to_string())))
            }
        }
        None => Err(not(Owner::NotPod)),
    }
}

/// Why a claim is not the pod's ([`is_for_pod`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The claim is in another namespace than the pod.
    OtherNamespace,
    /// The pod is not the claim's controller owner.
    NotPod,
    /// Neither the pod nor its PodGroup (this name) is the claim's controller owner.
    NeitherPodNorGroup(String),
}

/// A claim made from a template of a pod that is not the pod's
/// (resourceclaim.IsForPod); its text is upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotForPod {
    /// The claim, `namespace/name`.
    pub claim: String,
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Why not.
    pub owner: Owner,
}

impl std::fmt::Display for NotForPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NotForPod { claim, pod, owner } = self;
        match owner {
            Owner::OtherNamespace => write!(f, "ResourceClaim {claim} is not in the same namespace as Pod {pod}"),
            Owner::NotPod => write!(f, "ResourceClaim {claim} was not created for Pod {pod} (Pod is not owner)"),
            Owner::NeitherPodNorGroup(group) => write!(
                f,
                "ResourceClaim {claim} was not created for Pod {pod} (neither Pod nor PodGroup {group} is the owner)"
            ),
        }
    }
}

impl std::error::Error for NotForPod {}

/// Why a claim could not be read.
#[derive(Debug)]
pub enum FetchError {
    /// The API server answered with an error status: its message (what
    /// client-go's StatusError says, e.g. `resourceclaims.resource.k8s.io
    /// "gpu" not found`).
    Refused {
        /// The HTTP status.
        code: u16,
        /// The Status message.
        message: String,
    },
    /// No answer (connection, TLS, credentials, timeout).
    Call(Box<crate::core::Error>),
    /// The answer is no ResourceClaim this kubelet can read.
    Invalid(crate::controlplane::objects::ObjectError),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Refused { message, .. } => f.write_str(message),
            FetchError::Call(e) => write!(f, "{e}"),
            FetchError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Refused { .. } => None,
            FetchError::Invalid(e) => Some(e),
            FetchError::Call(e) => Some(&**e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(group: Option<&str>) -> crate::kubelet::manifest::Pod {
        let mut v = json!({"metadata": {"name": "p", "namespace": "ml", "uid": "pod-uid"},
            "spec": {"containers": [{"name": "c"}]}});
        if let Some(g) = group {
            v["spec"]["schedulingGroup"] = json!({"podGroupName": g});
        }
        crate::kubelet::manifest::from_object(&v).unwrap()
    }

    fn claim(ns: &str, owner: Value) -> Value {
        json!({"metadata": {"name": "p-g-x7k2q", "namespace": ns, "ownerReferences": [owner]}})
    }

    /// resourceclaim.IsForPod (v0.37.2): the pod as controller, or its
    /// PodGroup by name with the gate; otherwise upstream's words.
    #[test]
    fn a_generated_claim_must_be_the_pods_or_its_pod_groups() {
        let by_pod = json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true});
        assert_eq!(is_for_pod(&pod(None), &claim("ml", by_pod.clone()), false), Ok(()));
        let not_controller = json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"});
        assert_eq!(
            is_for_pod(&pod(None), &claim("ml", not_controller), false).unwrap_err().to_string(),
            "ResourceClaim ml/p-g-x7k2q was not created for Pod ml/p (Pod is not owner)"
        );
        assert_eq!(
            is_for_pod(&pod(None), &claim("other", by_pod), false).unwrap_err().to_string(),
            "ResourceClaim other/p-g-x7k2q is not in the same namespace as Pod ml/p"
        );
        let by_group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "team",
            "uid": "group-uid", "controller": true});
        assert_eq!(is_for_pod(&pod(Some("team")), &claim("ml", by_group.clone()), true), Ok(()));
        assert_eq!(
            is_for_pod(&pod(Some("team")), &claim("ml", by_group.clone()), false).unwrap_err().to_string(),
            "ResourceClaim ml/p-g-x7k2q was not created for Pod ml/p (Pod is not owner)",
            "the gate off: a PodGroup owner is no owner of the pod"
        );
        assert_eq!(
            is_for_pod(&pod(Some("other")), &claim("ml", by_group), true).unwrap_err().to_string(),
            "ResourceClaim ml/p-g-x7k2q was not created for Pod ml/p (neither Pod nor PodGroup other is the owner)"
        );
    }
}
