//! The `skein` configuration: compiled-in defaults, then an optional TOML file, then
//! environment variables. Unknown keys are errors.
//!
//! ```toml
//! [broker]
//! node_id = 0
//! rack = "eu-west-1a"                   # broker.rack (optional)
//! auto_create_topics = true             # auto.create.topics.enable
//! default_partitions = 1                # num.partitions
//! default_replication_factor = 1        # default.replication.factor
//! group_initial_rebalance_delay_ms = 3000
//! max_request_bytes = 104857600         # socket.request.max.bytes
//! fetch_max_bytes = 57671680            # fetch.max.bytes
//! offsets_retention_minutes = 10080     # offsets.retention.minutes
//! producer_id_expiration_ms = 86400000  # producer.id.expiration.ms
//! max_connections = 10000               # max.connections
//! connections_max_idle_ms = 600000      # connections.max.idle.ms
//! unauthenticated_acl_changes = false   # may Kafka clients CreateAcls / DeleteAcls
//! replica_lag_time_max_ms = 30000       # replica.lag.time.max.ms
//! leader_replication_throttled_rate = 10485760  # leader.replication.throttled.rate (bytes/s; unset: none)
//! follower_replication_throttled_rate = 10485760  # follower.replication.throttled.rate
//!
//! [log]                                 # topic defaults, under Kafka's names
//! "retention.ms" = "604800000"
//! "segment.bytes" = "1073741824"
//! ```
//!
//! Environment: `SKEIN_LOG_RETENTION_MS=1000` sets `retention.ms` (Kafka's name with dots as
//! underscores, as Kafka's container images do); `SKEIN_BROKER_DEFAULT_PARTITIONS=3` sets a
//! `[broker]` key.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;
use skein_broker::BrokerConfig;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    #[serde(default)]
    broker: BrokerSection,
    #[serde(default)]
    log: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrokerSection {
    node_id: Option<i32>,
    rack: Option<String>,
    default_replication_factor: Option<i32>,
    auto_create_topics: Option<bool>,
    default_partitions: Option<i32>,
    group_initial_rebalance_delay_ms: Option<u64>,
    max_request_bytes: Option<usize>,
    fetch_max_bytes: Option<u64>,
    offsets_retention_minutes: Option<u64>,
    producer_id_expiration_ms: Option<u64>,
    max_connections: Option<usize>,
    connections_max_idle_ms: Option<u64>,
    replica_lag_time_max_ms: Option<u64>,
    leader_replication_throttled_rate: Option<u64>,
    follower_replication_throttled_rate: Option<u64>,
    unauthenticated_acl_changes: Option<bool>,
}

/// Applies the file (if any) and the environment to `config`.
pub(crate) fn apply(
    config: &mut BrokerConfig,
    file: Option<&Path>,
    env: impl Iterator<Item = (String, String)>,
) -> anyhow::Result<()> {
    let parsed: FileConfig = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("failed to read {}", path.display()))?;
            toml::from_str(&text)
                .with_context(|| format!("invalid configuration in {}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let mut broker = parsed.broker;
    let mut log: BTreeMap<String, String> = parsed
        .log
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                toml::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, value)
        })
        .collect();
    for (key, value) in env {
        if key == "SKEIN_LOG_FORMAT" {
            // How log lines are written (`--log-format`), not a log setting.
            continue;
        } else if let Some(name) = key.strip_prefix("SKEIN_LOG_") {
            log.insert(name.to_lowercase().replace('_', "."), value);
        } else if let Some(name) = key.strip_prefix("SKEIN_BROKER_") {
            let parse = |what: &str| format!("{key}={value} is not a valid {what}");
            match name {
                "NODE_ID" => {
                    broker.node_id = Some(value.parse().with_context(|| parse("node id"))?)
                }
                "RACK" => broker.rack = Some(value.clone()),
                "DEFAULT_REPLICATION_FACTOR" => {
                    broker.default_replication_factor =
                        Some(value.parse().with_context(|| parse("replication factor"))?)
                }
                "AUTO_CREATE_TOPICS" => {
                    broker.auto_create_topics =
                        Some(value.parse().with_context(|| parse("boolean"))?)
                }
                "DEFAULT_PARTITIONS" => {
                    broker.default_partitions =
                        Some(value.parse().with_context(|| parse("partition count"))?)
                }
                "GROUP_INITIAL_REBALANCE_DELAY_MS" => {
                    broker.group_initial_rebalance_delay_ms =
                        Some(value.parse().with_context(|| parse("duration in ms"))?)
                }
                "MAX_REQUEST_BYTES" => {
                    broker.max_request_bytes = Some(value.parse().with_context(|| parse("size"))?)
                }
                "OFFSETS_RETENTION_MINUTES" => {
                    broker.offsets_retention_minutes = Some(
                        value
                            .parse()
                            .with_context(|| parse("duration in minutes"))?,
                    )
                }
                "PRODUCER_ID_EXPIRATION_MS" => {
                    broker.producer_id_expiration_ms =
                        Some(value.parse().with_context(|| parse("duration in ms"))?)
                }
                "FETCH_MAX_BYTES" => {
                    broker.fetch_max_bytes = Some(value.parse().with_context(|| parse("size"))?)
                }
                "MAX_CONNECTIONS" => {
                    broker.max_connections = Some(value.parse().with_context(|| parse("count"))?)
                }
                "UNAUTHENTICATED_ACL_CHANGES" => {
                    broker.unauthenticated_acl_changes =
                        Some(value.parse().with_context(|| parse("boolean"))?)
                }
                "REPLICA_LAG_TIME_MAX_MS" => {
                    broker.replica_lag_time_max_ms =
                        Some(value.parse().with_context(|| parse("duration in ms"))?)
                }
                "LEADER_REPLICATION_THROTTLED_RATE" => {
                    broker.leader_replication_throttled_rate =
                        Some(value.parse().with_context(|| parse("bytes per second"))?)
                }
                "FOLLOWER_REPLICATION_THROTTLED_RATE" => {
                    broker.follower_replication_throttled_rate =
                        Some(value.parse().with_context(|| parse("bytes per second"))?)
                }
                "CONNECTIONS_MAX_IDLE_MS" => {
                    broker.connections_max_idle_ms =
                        Some(value.parse().with_context(|| parse("duration in ms"))?)
                }
                // SKEIN_BROKER_CONFIG names the file itself.
                "CONFIG" => {}
                _ => anyhow::bail!("unknown setting {key}"),
            }
        }
    }
    if let Some(v) = broker.node_id {
        config.node_id = v;
    }
    if let Some(v) = broker.rack {
        anyhow::ensure!(
            !v.is_empty() && v.len() <= 255,
            "rack must be 1 to 255 characters"
        );
        config.rack = Some(v);
    }
    if let Some(v) = broker.default_replication_factor {
        anyhow::ensure!(v >= 1, "default_replication_factor must be at least 1");
        config.default_replication_factor = v;
    }
    if let Some(v) = broker.auto_create_topics {
        config.auto_create_topics = v;
    }
    if let Some(v) = broker.default_partitions {
        anyhow::ensure!(v >= 1, "default_partitions must be at least 1");
        config.default_partitions = v;
    }
    if let Some(v) = broker.group_initial_rebalance_delay_ms {
        config.group_initial_rebalance_delay_ms = v;
    }
    if let Some(v) = broker.max_request_bytes {
        config.max_request_bytes = v;
    }
    if let Some(v) = broker.offsets_retention_minutes {
        anyhow::ensure!(v >= 1, "offsets_retention_minutes must be at least 1");
        config.offsets_retention = std::time::Duration::from_secs(v.saturating_mul(60));
    }
    if let Some(v) = broker.producer_id_expiration_ms {
        anyhow::ensure!(v >= 1, "producer_id_expiration_ms must be at least 1");
        config.producer_id_expiration = std::time::Duration::from_millis(v);
    }
    if let Some(v) = broker.fetch_max_bytes {
        anyhow::ensure!(v >= 1, "fetch_max_bytes must be at least 1");
        config.fetch_max_bytes = v;
    }
    if let Some(v) = broker.max_connections {
        anyhow::ensure!(v >= 1, "max_connections must be at least 1");
        config.max_connections = v;
    }
    if let Some(v) = broker.unauthenticated_acl_changes {
        config.unauthenticated_acl_changes = v;
    }
    if let Some(v) = broker.replica_lag_time_max_ms {
        anyhow::ensure!(v >= 1, "replica_lag_time_max_ms must be at least 1");
        config.replica_lag_time_max = std::time::Duration::from_millis(v);
    }
    for (rate, key, set) in [
        (
            broker.leader_replication_throttled_rate,
            "leader_replication_throttled_rate",
            &mut config.leader_replication_throttled_rate,
        ),
        (
            broker.follower_replication_throttled_rate,
            "follower_replication_throttled_rate",
            &mut config.follower_replication_throttled_rate,
        ),
    ] {
        if let Some(v) = rate {
            anyhow::ensure!(v >= 1, "{key} must be at least 1");
            *set = Some(v);
        }
    }
    if let Some(v) = broker.connections_max_idle_ms {
        anyhow::ensure!(v >= 1, "connections_max_idle_ms must be at least 1");
        config.connections_max_idle_ms = v;
    }
    let defaults = skein_broker::topic_defaults(&log)?;
    config.log = defaults.log;
    config.default_min_insync_replicas = defaults.min_insync_replicas;
    config.default_compression = defaults.compression;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_environment_and_unknown_keys_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(
            &path,
            "[broker]\ndefault_partitions = 3\n[log]\n\"retention.ms\" = 1000\n\"cleanup.policy\" = \"compact\"\n\"min.insync.replicas\" = 2\n",
        )
        .unwrap();
        let mut config = BrokerConfig::new(dir.path());
        let env = vec![
            ("SKEIN_LOG_RETENTION_MS".to_owned(), "2000".to_owned()),
            ("SKEIN_LOG_COMPRESSION_TYPE".to_owned(), "lz4".to_owned()),
        ];
        apply(&mut config, Some(&path), env.into_iter()).unwrap();
        assert_eq!(
            config.default_compression.codec(),
            Some(skein_log::batch::Compression::Lz4)
        );
        assert_eq!(config.default_partitions, 3);
        assert_eq!(
            config.log.retention_ms, 2000,
            "the environment wins over the file"
        );
        assert_eq!(config.log.cleanup_policy, skein_log::CleanupPolicy::Compact);
        assert_eq!(
            config.default_min_insync_replicas, 2,
            "kept, not dropped with the log settings"
        );

        std::fs::write(&path, "[broker]\nno_such_key = 1\n").unwrap();
        let err = apply(
            &mut BrokerConfig::new(dir.path()),
            Some(&path),
            std::iter::empty(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("no_such_key"), "{err:#}");
        std::fs::write(&path, "[log]\n\"retention.ms\" = \"soon\"\n").unwrap();
        assert!(apply(
            &mut BrokerConfig::new(dir.path()),
            Some(&path),
            std::iter::empty()
        )
        .is_err());
        let env = vec![("SKEIN_BROKER_BOGUS".to_owned(), "1".to_owned())];
        assert!(apply(&mut BrokerConfig::new(dir.path()), None, env.into_iter()).is_err());
    }

    #[test]
    fn rack_and_default_replication_factor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(
            &path,
            "[broker]\nrack = \"a\"\ndefault_replication_factor = 3\n",
        )
        .unwrap();
        let mut config = BrokerConfig::new(dir.path());
        let env = vec![("SKEIN_BROKER_RACK".to_owned(), "b".to_owned())];
        apply(&mut config, Some(&path), env.into_iter()).unwrap();
        assert_eq!(config.rack.as_deref(), Some("b"));
        assert_eq!(config.default_replication_factor, 3);
        for (key, value) in [
            ("SKEIN_BROKER_DEFAULT_REPLICATION_FACTOR", "0"),
            ("SKEIN_BROKER_RACK", ""),
        ] {
            let env = vec![(key.to_owned(), value.to_owned())];
            assert!(
                apply(&mut BrokerConfig::new(dir.path()), None, env.into_iter()).is_err(),
                "{key}={value:?}"
            );
        }
    }
}
