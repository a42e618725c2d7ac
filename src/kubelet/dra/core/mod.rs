//! The DRA manager's core, without I/O, awaits or clocks (pkg/kubelet/cm/dra's
//! decisions): the manager's state by concern — the plugin registry
//! ([`registry`]), the DRA objects and the allocator's candidates
//! ([`object_cache`]), the claims and the pods using them ([`claims`], over
//! [`claiminfo`]'s claim cache and prepare/unprepare plans), the health
//! cache with its log ([`health`], over [`healthinfo`] and [`healthlog`]),
//! taint eviction ([`taints`]) — and what it shows ([`view`], [`extended`],
//! [`claim_objects`]). The shell ([`crate::kubelet::dra::shell`]) makes the
//! calls, writes the files, keeps the time and reports the events.
pub mod claim_objects;
pub mod claiminfo;
pub mod claims;
pub mod extended;
pub mod fetch;
pub mod health;
pub mod healthinfo;
pub mod healthlog;
pub mod object_cache;
pub mod registry;
pub mod taints;
pub mod view;

pub use object_cache::NODE_NAME;
