//! Topic configs under Kafka's names: which exist, their defaults (the broker's), how a value
//! is checked, and how overrides turn into the log's settings. The broker applies them; the
//! control plane checks them before it stores a topic's overrides.

use std::collections::BTreeMap;

use crate::batch::{Compression, TimestampType};
use crate::{CleanupPolicy, LogConfig};

/// Every topic config this broker knows, in the order DescribeConfigs lists them.
pub const NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// Why a config is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown topic config {name}")]
    Unknown { name: String },
    #[error("invalid value {value:?} for {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
}

/// The effective settings of a topic: broker defaults plus its overrides.
#[derive(Clone, Debug)]
pub struct TopicSettings {
    pub log: LogConfig,
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`: an out-of-sync replica may lead when no in-sync
    /// one is live (the controller reads it; records only the old ISR had are lost).
    pub unclean_leader_election: bool,
    /// `compression.type`: the codec the leader stores every batch under.
    pub compression: TopicCompression,
    /// `leader.replication.throttled.replicas`: the replicas that, leading, serve
    /// out-of-sync followers within the broker's `leader.replication.throttled.rate`.
    pub leader_throttled: ThrottledReplicas,
    /// `follower.replication.throttled.replicas`: the replicas that, following while out of
    /// the ISR, fetch within the broker's `follower.replication.throttled.rate`.
    pub follower_throttled: ThrottledReplicas,
}

impl Default for TopicSettings {
    /// Kafka's defaults: the log's, `min.insync.replicas` 1, no unclean election, the
    /// producer's codec, no throttled replicas.
    fn default() -> Self {
        Self {
            log: LogConfig::default(),
            min_insync_replicas: 1,
            unclean_leader_election: false,
            compression: TopicCompression::Producer,
            leader_throttled: ThrottledReplicas::None,
            follower_throttled: ThrottledReplicas::None,
        }
    }
}

/// `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`
/// under Kafka's syntax: empty (none), `*` (every replica) or `partition:broker` pairs
/// separated by commas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    #[default]
    None,
    All,
    Listed(std::collections::BTreeSet<(i32, i32)>),
}

impl ThrottledReplicas {
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "" => Some(Self::None),
            "*" => Some(Self::All),
            list => list
                .split(',')
                .map(|pair| {
                    let (partition, broker) = pair.trim().split_once(':')?;
                    Some((partition.parse().ok()?, broker.parse().ok()?))
                })
                .collect::<Option<_>>()
                .map(Self::Listed),
        }
    }

    /// Whether partition `partition`'s replica on broker `broker` is throttled.
    pub fn covers(&self, partition: i32, broker: i32) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }

    fn value(&self) -> String {
        match self {
            Self::None => String::new(),
            Self::All => "*".to_owned(),
            Self::Listed(pairs) => pairs
                .iter()
                .map(|(p, b)| format!("{p}:{b}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// `compression.type`: keep each producer's codec (`producer`, the default), or store every
/// batch under one (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`), recompressing the
/// batches that arrive under another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TopicCompression {
    #[default]
    Producer,
    Codec(Compression),
}

impl TopicCompression {
    /// The value of `compression.type` under Kafka's names.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "producer" => Self::Producer,
            "uncompressed" => Self::Codec(Compression::None),
            "gzip" => Self::Codec(Compression::Gzip),
            "snappy" => Self::Codec(Compression::Snappy),
            "lz4" => Self::Codec(Compression::Lz4),
            "zstd" => Self::Codec(Compression::Zstd),
            _ => return None,
        })
    }

    /// The codec a batch must be stored under, if the topic names one.
    pub fn codec(self) -> Option<Compression> {
        match self {
            Self::Producer => None,
            Self::Codec(codec) => Some(codec),
        }
    }
}

fn int(name: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        name: name.to_owned(),
        value: value.to_owned(),
        reason,
    };
    let parsed: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid("not an integer".to_owned()))?;
    if parsed < min {
        return Err(invalid(format!("must be at least {min}")));
    }
    Ok(parsed)
}

/// Applies one override to `settings`, checking it.
pub fn apply(settings: &mut TopicSettings, name: &str, value: &str) -> Result<(), ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        name: name.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    // A throttled-replicas list may be empty: no replica is throttled.
    let may_be_empty = name.ends_with(".replication.throttled.replicas");
    if value.chars().any(char::is_whitespace) || (value.is_empty() && !may_be_empty) {
        return Err(invalid("must be a non-empty value without spaces"));
    }
    let log = &mut settings.log;
    match name {
        "cleanup.policy" => {
            let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
            parts.sort_unstable();
            log.cleanup_policy = match parts.as_slice() {
                ["delete"] => CleanupPolicy::Delete,
                ["compact"] => CleanupPolicy::Compact,
                ["compact", "delete"] => CleanupPolicy::CompactDelete,
                _ => return Err(invalid("must be delete, compact or compact,delete")),
            };
        }
        "compression.type" => {
            settings.compression = TopicCompression::parse(value).ok_or_else(|| {
                invalid("must be producer, uncompressed, gzip, snappy, lz4 or zstd")
            })?
        }
        "delete.retention.ms" => log.delete_retention_ms = int(name, value, 0)?,
        "flush.messages" => log.flush_messages = int(name, value, 1)?,
        "flush.ms" => log.flush_ms = int(name, value, 0)?,
        "index.interval.bytes" => log.index_interval_bytes = int(name, value, 0)? as u64,
        "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas" => {
            let parsed = ThrottledReplicas::parse(value).ok_or_else(|| {
                invalid("must be *, or partition:broker pairs separated by commas")
            })?;
            if name.starts_with("leader") {
                settings.leader_throttled = parsed;
            } else {
                settings.follower_throttled = parsed;
            }
        }
        "max.message.bytes" => log.max_message_bytes = int(name, value, 61)? as u64,
        "message.timestamp.type" => {
            log.message_timestamp_type = match value {
                "CreateTime" => TimestampType::CreateTime,
                "LogAppendTime" => TimestampType::LogAppendTime,
                _ => return Err(invalid("must be CreateTime or LogAppendTime")),
            }
        }
        "min.cleanable.dirty.ratio" => {
            let ratio: f64 = value.trim().parse().map_err(|_| invalid("not a number"))?;
            if !(0.0..=1.0).contains(&ratio) {
                return Err(invalid("must be between 0 and 1"));
            }
            log.min_cleanable_dirty_ratio = ratio;
        }
        "min.insync.replicas" => settings.min_insync_replicas = int(name, value, 1)? as i32,
        "retention.bytes" => log.retention_bytes = int(name, value, -1)?,
        "retention.ms" => log.retention_ms = int(name, value, -1)?,
        "segment.bytes" => log.segment_bytes = int(name, value, 14)? as u64,
        "segment.index.bytes" => log.segment_index_bytes = int(name, value, 12)? as u64,
        "segment.ms" => log.segment_ms = int(name, value, 1)?,
        "unclean.leader.election.enable" => {
            settings.unclean_leader_election = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(invalid("must be true or false")),
            }
        }
        _ => {
            return Err(ConfigError::Unknown {
                name: name.to_owned(),
            })
        }
    }
    settings.log.validate().map_err(|e| invalid(&e.to_string()))
}

/// Broker defaults plus `overrides`.
pub fn settings(
    defaults: &TopicSettings,
    overrides: &BTreeMap<String, String>,
) -> Result<TopicSettings, ConfigError> {
    let mut settings = defaults.clone();
    for (name, value) in overrides {
        apply(&mut settings, name, value)?;
    }
    Ok(settings)
}

/// The value of a config as DescribeConfigs shows it.
pub fn value_of(settings: &TopicSettings, name: &str) -> Option<String> {
    let log = &settings.log;
    Some(match name {
        "cleanup.policy" => match log.cleanup_policy {
            CleanupPolicy::Delete => "delete".to_owned(),
            CleanupPolicy::Compact => "compact".to_owned(),
            CleanupPolicy::CompactDelete => "compact,delete".to_owned(),
        },
        "compression.type" => match settings.compression {
            TopicCompression::Producer => "producer",
            TopicCompression::Codec(Compression::None) => "uncompressed",
            TopicCompression::Codec(Compression::Gzip) => "gzip",
            TopicCompression::Codec(Compression::Snappy) => "snappy",
            TopicCompression::Codec(Compression::Lz4) => "lz4",
            TopicCompression::Codec(Compression::Zstd) => "zstd",
        }
        .to_owned(),
        "delete.retention.ms" => log.delete_retention_ms.to_string(),
        "flush.messages" => log.flush_messages.to_string(),
        "flush.ms" => log.flush_ms.to_string(),
        "index.interval.bytes" => log.index_interval_bytes.to_string(),
        "leader.replication.throttled.replicas" => settings.leader_throttled.value(),
        "follower.replication.throttled.replicas" => settings.follower_throttled.value(),
        "max.message.bytes" => log.max_message_bytes.to_string(),
        "message.timestamp.type" => match log.message_timestamp_type {
            TimestampType::CreateTime => "CreateTime".to_owned(),
            TimestampType::LogAppendTime => "LogAppendTime".to_owned(),
        },
        "min.cleanable.dirty.ratio" => log.min_cleanable_dirty_ratio.to_string(),
        "min.insync.replicas" => settings.min_insync_replicas.to_string(),
        "retention.bytes" => log.retention_bytes.to_string(),
        "retention.ms" => log.retention_ms.to_string(),
        "segment.bytes" => log.segment_bytes.to_string(),
        "segment.index.bytes" => log.segment_index_bytes.to_string(),
        "segment.ms" => log.segment_ms.to_string(),
        "unclean.leader.election.enable" => settings.unclean_leader_election.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> TopicSettings {
        TopicSettings::default()
    }

    #[test]
    fn overrides_apply_and_bad_ones_are_refused() {
        let mut overrides = BTreeMap::new();
        overrides.insert("retention.ms".to_owned(), "1000".to_owned());
        overrides.insert("cleanup.policy".to_owned(), "delete,compact".to_owned());
        let s = settings(&defaults(), &overrides).unwrap();
        assert_eq!(s.log.retention_ms, 1000);
        assert_eq!(value_of(&s, "cleanup.policy").unwrap(), "compact,delete");
        assert_eq!(value_of(&s, "segment.bytes").unwrap(), "1073741824");
        assert_eq!(value_of(&s, "compression.type").unwrap(), "producer");
        let mut codec = BTreeMap::new();
        codec.insert("compression.type".to_owned(), "zstd".to_owned());
        let zstd = settings(&defaults(), &codec).unwrap();
        assert_eq!(zstd.compression.codec(), Some(Compression::Zstd));
        assert_eq!(value_of(&zstd, "compression.type").unwrap(), "zstd");
        codec.insert("compression.type".to_owned(), "brotli".to_owned());
        assert!(settings(&defaults(), &codec).is_err());
        let mut throttled = BTreeMap::new();
        throttled.insert(
            "leader.replication.throttled.replicas".to_owned(),
            "0:1,2:3".to_owned(),
        );
        let listed = settings(&defaults(), &throttled).unwrap();
        assert!(listed.leader_throttled.covers(2, 3) && !listed.leader_throttled.covers(2, 1));
        assert_eq!(
            value_of(&listed, "leader.replication.throttled.replicas").unwrap(),
            "0:1,2:3"
        );
        throttled.insert(
            "leader.replication.throttled.replicas".to_owned(),
            "0-1".to_owned(),
        );
        assert!(settings(&defaults(), &throttled).is_err());
        overrides.insert("retention.ms".to_owned(), "-5".to_owned());
        assert!(matches!(
            settings(&defaults(), &overrides),
            Err(ConfigError::Invalid { .. })
        ));
        let mut unknown = BTreeMap::new();
        unknown.insert("no.such.config".to_owned(), "1".to_owned());
        assert!(matches!(
            settings(&defaults(), &unknown),
            Err(ConfigError::Unknown { .. })
        ));
    }
}
