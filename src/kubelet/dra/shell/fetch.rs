//! The claims of a pod of the API server, read from it at every prepare
//! attempt as manager.go PrepareResources reads them (one GET per claim, no
//! cache): a claim the scheduler or a controller writes after the pod
//! reached the node is seen at the next attempt. The reader is the node's
//! API server client ([`crate::kubelet::cluster`]); the manager only asks
//! ([`super::DraManager::prepare`]) and judges the answer
//! ([`crate::kubelet::dra::core::fetch`]).

use crate::kubelet::dra::core::fetch::FetchError;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// One claim read: the stored object, or why not.
pub type Read<'a> = Pin<Box<dyn Future<Output = Result<Value, FetchError>> + Send + 'a>>;

/// Where the claims of pods of the API server are read.
pub trait ClaimReader: Send + Sync + std::fmt::Debug {
    /// ResourceClaim `namespace/name` as the API server stores it.
    fn claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> Read<'a>;

    /// Deallocate ResourceClaim `namespace/name` (its `reservedFor`,
    /// `allocation` and `devices` cleared), as kube-scheduler's Unreserve
    /// leaves a claim whose binding failed: a node of dpctl's own cluster
    /// does the scheduler's PreBind wait ([`super::DraSpec::joined_dpctl_plane`]).
    fn deallocate<'a>(&'a self, namespace: &'a str, name: &'a str) -> Read<'a>;
}
