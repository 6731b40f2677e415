//! Sinks run by the control plane: `secret.rs` seals each sink's target database URL for
//! the catalog; `runner.rs` runs the sinks' workers on every replica that has the sink key,
//! sharing the partitions among the live ones, and `metrics.rs` counts what they do. The
//! admin API's side is `admin/sinks.rs`; the exactly-once work itself is `skein-sink`'s.

mod metrics;
mod runner;
mod secret;

pub use metrics::{SinkLabels, SinkMetrics, SINK_SERIES};
pub use runner::{run, SinkRunnerConfig};
pub use secret::{SealError, SinkKey};
pub use skein_sink::TargetPolicy;
