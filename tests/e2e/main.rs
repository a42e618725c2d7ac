//! End-to-end tests: the real `dpctl` binary against real gRPC servers on
//! Unix sockets in temp dirs. One test binary keeps link time down.

mod apiserver;
mod authority;
mod bench;
mod claims;
mod cli;
mod client;
mod controlplane;
mod corpus;
mod devicemanager_diff;
mod doctor;
mod dra;
mod dra_alloc;
mod dra_kubelet;
mod dramanager_diff;
mod extended;
mod generations;
mod hardening;
mod interop;
mod kubeconfig;
mod lifecycle;
mod log;
mod mock_kubelet;
mod operator;
mod pods;
mod record;
mod release;
mod rules;
mod serve;
mod suite;
mod suite_gaps;
mod support;
mod tls;
mod upstream;
mod upstream_protos;
mod versions;
