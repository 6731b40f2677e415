//! Every service's operations listener (`--ops-listen`): `/healthz` (the process serves),
//! `/readyz` (it can do its work: what that means is the service's own check) and
//! `/metrics` (Prometheus, in the OpenMetrics text format). It is a listener of its own so
//! that probes and scrapers never pass the public APIs' authentication, and the public APIs
//! never expose the numbers.
//!
//! Metric labels are bounded: a label whose values come from peers (topics, tenants, groups)
//! goes through a [`LabelCap`], which keeps the first values it sees and folds the rest into
//! one.
//!
//! [`telemetry`] exports traces over OTLP and carries their context in record headers.

mod cap;
mod server;
pub mod telemetry;

pub use cap::{bounded, LabelCap, MAX_LABEL_BYTES, OTHER};
pub use prometheus_client;
pub use server::{serve, Ops, Readiness};
