//! Sinks: a tenant's topics applied to a PostgreSQL table exactly once. Each round a worker
//! reads its partitions' committed records, writes them as rows, and stores each
//! partition's next offset and its owner epoch in the same transaction of the target
//! database (`skein_client::exactly_once`); on start it reads its positions from there,
//! never from Kafka, and a worker whose partitions were claimed by another commits nothing.
//!
//! - `spec.rs`: [`SinkSpec`], the topics, the table and the [`Mode`] (the fixed envelope, or
//!   a JSON value's fields mapped to columns, optionally upserted by key);
//! - `target.rs`: the target table's shape and whether the sink's rows fit it, checked
//!   before a sink runs;
//! - `row.rs`: a record as a row, or the reason it does not fit;
//! - `writer.rs`: a batch of rows in one statement, falling back to row by row to find the
//!   rows the database refuses;
//! - `worker.rs`: [`SinkWorker`], the rounds, the dead-letter topic and [`SinkStats`];
//! - `reach.rs`: where a sink may connect ([`TargetPolicy`]), checked after resolution.

mod error;
#[cfg(feature = "postgres")]
pub mod reach;
pub mod row;
pub mod spec;
pub mod target;
#[cfg(feature = "postgres")]
mod worker;
#[cfg(feature = "postgres")]
mod writer;

pub use error::SinkError;
#[cfg(feature = "postgres")]
pub use reach::{connect_target, TargetPolicy};
pub use spec::{ColumnMapping, Mode, RecordAt, SinkSpec, MAX_SKIPPED};
#[cfg(feature = "postgres")]
pub use worker::{prepare, SinkStats, SinkWorker, ERROR_HEADER, SOURCE_HEADERS};
#[cfg(feature = "postgres")]
pub use writer::Writer;
