//! The kubelet role: one engine ([`node`]) on a node tree ([`tree`]) —
//! registration and the plugin watcher dispatching to one handler per
//! plugin type ([`watcher`], [`handler`]), the container manager ([`cm`])
//! holding the device manager ([`devicemanager`]) and the DRA manager
//! ([`dra`]) side by side, each a sans-IO core and an async shell, and running the pod
//! lifecycle ([`lifecycle`]), checkpoints, PodResources, metrics —
//! reporting typed events ([`event`]); as a node of a cluster ([`cluster`])
//! it registers with an API server and runs the pods bound to it.
pub mod against;
pub mod cluster;
pub mod cm;
pub mod devicemanager;
pub mod dirwatch;
pub mod dra;
pub mod event;
pub mod generation;
pub mod handler;
pub mod lifecycle;
pub mod manifest;
pub mod metrics;
pub mod node;
pub mod podresources;
pub mod pods;
pub mod profile;
pub mod registration;
pub mod reproduce;
pub mod tree;
pub mod watcher;
