//! Skein's gRPC definitions, generated from `proto/` at build time.

/// `skein.controller.v1`: brokers and the cluster's controller.
#[allow(
    missing_debug_implementations,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used
)]
pub mod controller {
    tonic::include_proto!("skein.controller.v1");
}
