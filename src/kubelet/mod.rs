//! The kubelet role: one engine ([`node`]) on a node tree ([`tree`]) —
//! registration and the plugin watcher, the device manager
//! ([`devicemanager`] core + [`shell`]), checkpoint, PodResources, metrics —
//! reporting typed events ([`event`]).
pub mod against;
pub mod devicemanager;
pub mod dra;
pub mod event;
pub mod generation;
pub mod manifest;
pub mod metrics;
pub mod node;
pub mod podresources;
pub mod profile;
pub mod registration;
pub mod reproduce;
pub mod shell;
pub mod tree;
pub mod watcher;
