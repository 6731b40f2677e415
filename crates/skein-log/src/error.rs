use std::path::PathBuf;

use crate::batch::BatchError;

/// What went wrong in a log operation. A refused append (invalid input) leaves the log as it
/// was. An operation that fails after it began changing files (an I/O error while writing,
/// flushing, rolling or truncating) fences the log: it refuses further writes with
/// [`LogError::Fenced`] until it is reopened, and opening recovers it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: u64,
        log_start: u64,
        log_end: u64,
    },
    #[error("batch {index} of the append is invalid")]
    InvalidBatch {
        index: usize,
        #[source]
        source: BatchError,
    },
    #[error("batch {index} of the append has {size} bytes; the limit is {max}")]
    BatchTooLarge {
        index: usize,
        size: usize,
        max: usize,
    },
    #[error("batch {index} of the append is not a transaction marker")]
    NotAMarker { index: usize },
    #[error("append is empty")]
    EmptyAppend,
    #[error("replicated batch starts at offset {base_offset}, below the log end offset {log_end}")]
    NonMonotonicOffset { base_offset: i64, log_end: u64 },
    #[error(
        "batch {index} has {records_count} records but a last offset delta of {last_offset_delta}"
    )]
    InconsistentRecordCount {
        index: usize,
        records_count: i32,
        last_offset_delta: i32,
    },
    #[error("offset {offset} is beyond the largest offset a log can hold")]
    OffsetOverflow { offset: u64 },
    #[error("index {path} is shorter than its entries")]
    IndexTruncated { path: PathBuf },
    #[error("segment {base_offset} is corrupt at byte {position}")]
    CorruptSegment {
        base_offset: u64,
        position: u64,
        #[source]
        source: BatchError,
    },
    #[error("i/o error on {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// After a failed write or fsync the log refuses further writes until it is reopened,
    /// because the state of the file is no longer known.
    #[error("log {path} is fenced after a previous i/o error")]
    Fenced { path: PathBuf },
    #[error("{path} is not a partition directory (expected <topic>-<partition>)")]
    InvalidPartitionDir { path: PathBuf },
    #[error("invalid log configuration: {reason}")]
    InvalidConfig { reason: String },
    /// A `partition.metadata` file that does not say which topic its directory belongs to.
    #[error("{path} line {line}: {reason}")]
    InvalidPartitionMetadata {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;
