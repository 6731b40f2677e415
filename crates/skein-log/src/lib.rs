//! The Skein log engine: each partition is a directory of segments holding Kafka record
//! batches exactly as they travel on the wire, with sparse memory-mapped indexes by offset
//! and by timestamp. No networking and no Kafka requests: the broker hands it batches and
//! offsets, and sends the file regions it returns.
//!
//! Organization:
//! - [`batch`]: the RecordBatch v2 format (header, records, codecs, a builder), which is
//!   the `skein-records` crate.
//! - [`Log`]: one partition: append, read, lookups, truncation, retention, compaction,
//!   flushing and crash recovery.
//! - [`LogManager`]: every partition of a data directory, with one bound on open files;
//!   each partition directory names its topic's id (`partition.metadata`), and one of
//!   another id is deleted rather than served.
//! - [`LogConfig`]: per-partition settings under Kafka's names.
//!
//! The files, byte by byte, are described in `docs/log-format.md`.
//!
//! ```
//! use std::sync::Arc;
//! use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};
//! use skein_log::{HandleCache, Log, LogConfig, SystemClock};
//!
//! let dir = tempfile::tempdir()?;
//! let cache = HandleCache::new(64);
//! let mut log = Log::open(dir.path(), LogConfig::default(), Arc::new(SystemClock), cache)?;
//! let record = NewRecord { key: Some(b"k".to_vec()), value: Some(b"v".to_vec()), ..Default::default() };
//! let mut batch = build_batch(&[record], Compression::None, ProducerFields::NONE)?;
//! let info = log.append(&mut batch, 0)?;
//! assert_eq!(info.first_offset, 0);
//! let slice = log.read(0, 1 << 20, None)?;
//! assert_eq!(slice.to_verified_bytes()?, batch);
//! log.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The RecordBatch v2 format, from `skein-records`.
pub use skein_records as batch;
mod checkpoint;
mod cleaner;
mod clock;
mod config;
mod epoch;
mod error;
mod files;
mod index;
mod log;
mod manager;
mod partition_dir;
mod read;
mod scan;
mod segment;
pub mod topic_config;
pub mod transactions;

pub use cleaner::CompactionReport;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{CleanupPolicy, LogConfig};
pub use epoch::EpochEntry;
pub use error::{LogError, Result};
pub use files::HandleCache;
pub use log::{AppendInfo, Log, LogStats, RecoveryReport, RetentionReport};
pub use manager::{LogManager, LogManagerConfig, MaintenanceReport, SharedLog, TopicPartition};
pub use partition_dir::{read_topic_id, write_topic_id, PARTITION_METADATA};
pub use read::{FileRegion, ReadSlice};
