//! Per-partition log settings, named after Kafka's topic configs.

use crate::batch::{TimestampType, HEADER_LEN};
use crate::error::{LogError, Result};

/// `cleanup.policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    #[default]
    Delete,
    /// Only the newest record per key is kept.
    Compact,
    /// Both.
    CompactDelete,
}

impl CleanupPolicy {
    pub fn deletes(self) -> bool {
        matches!(self, Self::Delete | Self::CompactDelete)
    }

    pub fn compacts(self) -> bool {
        matches!(self, Self::Compact | Self::CompactDelete)
    }
}

/// The settings of one partition's log. Defaults are Kafka's.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment took its first append this long ago
    /// (wall clock, since the log was opened).
    pub segment_ms: i64,
    /// `segment.index.bytes`: preallocated size of each index file.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes of log between two index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms`; -1 keeps segments forever.
    pub retention_ms: i64,
    /// `retention.bytes`; -1 means no size limit.
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long compaction keeps tombstones.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: maintenance compacts a partition once the closed bytes
    /// written since its last compaction are at least this share of all closed bytes.
    pub min_cleanable_dirty_ratio: f64,
    /// `flush.messages`: fsync after this many appended records; `i64::MAX` never.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the oldest unflushed append is this old; `i64::MAX` never.
    pub flush_ms: i64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: u64,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
        }
    }
}

impl LogConfig {
    /// Checks the ranges Kafka enforces for these settings.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: &str| {
            Err(LogError::InvalidConfig {
                reason: reason.to_owned(),
            })
        };
        if self.segment_bytes < (HEADER_LEN as u64) * 4 || self.segment_bytes > i32::MAX as u64 {
            return invalid("segment.bytes must be between 244 and 2147483647");
        }
        if self.segment_ms < 1 {
            return invalid("segment.ms must be at least 1");
        }
        if self.segment_index_bytes < 12 || self.segment_index_bytes > i32::MAX as u64 {
            return invalid("segment.index.bytes must be between 12 and 2147483647");
        }
        if self.retention_ms < -1 || self.retention_bytes < -1 {
            return invalid("retention.ms and retention.bytes must be -1 or more");
        }
        if self.delete_retention_ms < 0 || self.flush_messages < 1 || self.flush_ms < 0 {
            return invalid("delete.retention.ms, flush.messages and flush.ms must be positive");
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return invalid("min.cleanable.dirty.ratio must be between 0 and 1");
        }
        if self.max_message_bytes < HEADER_LEN as u64 {
            return invalid("max.message.bytes must hold at least a batch header");
        }
        Ok(())
    }
}
