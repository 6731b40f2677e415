//! The Skein broker: Kafka's wire protocol over the log engine.
//!
//! Organization, in the order a request travels:
//! - [`serve`] accepts connections (`listener.rs`); `connection.rs` reads length-prefixed
//!   frames (capped at `socket.request.max.bytes`), answers them in order, and closes the
//!   connection with a logged reason on a frame it cannot parse;
//! - `dispatch.rs` maps API keys and versions to handlers; the ApiVersions answer is derived
//!   from its table;
//! - `handler/<api>.rs`, one file per Kafka API, reads topics through [`TopicRegistry`] and
//!   partitions through the log engine.

pub mod config;
mod connection;
mod dispatch;
mod group;
mod handler;
mod listener;
mod producer;
pub mod topics;

use std::sync::Arc;

use skein_log::{LogManager, LogManagerConfig, SharedLog, SystemClock, TopicPartition};
use tokio::sync::Notify;

pub use config::BrokerConfig;
pub use listener::serve;
pub use topics::{TopicInfo, TopicRegistry};

/// Everything a handler can reach.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    pub logs: LogManager,
    pub topics: TopicRegistry,
    groups: group::Coordinator,
    offsets: group::OffsetStore,
    producer_ids: producer::ProducerIds,
    producers: producer::ProducerStates,
    /// Woken on every append, so waiting fetches re-read.
    appended: Notify,
}

impl Broker {
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let logs = LogManager::open(
            config.data_dir.join("logs"),
            LogManagerConfig {
                default_log: config.log.clone(),
                ..LogManagerConfig::default()
            },
            Arc::new(SystemClock),
        )?;
        let topics = TopicRegistry::open(&config.data_dir)?;
        let offsets = group::OffsetStore::open(&logs)?;
        let producer_ids = producer::ProducerIds::open(&config.data_dir);
        let groups = group::Coordinator::new(std::time::Duration::from_millis(
            config.group_initial_rebalance_delay_ms,
        ));
        Ok(Arc::new(Self {
            config,
            logs,
            topics,
            groups,
            offsets,
            producer_ids,
            producers: producer::ProducerStates::default(),
            appended: Notify::new(),
        }))
    }

    /// The log of a partition of a known topic, created on first use.
    pub(crate) fn partition_log(&self, topic: &str, partition: i32) -> Option<SharedLog> {
        let info = self.topics.get(topic)?;
        if partition < 0 || partition >= info.partitions {
            return None;
        }
        self.logs
            .get_or_create(&TopicPartition::new(topic, partition), None)
            .ok()
    }

    /// Closes every log cleanly.
    pub fn shutdown(self: Arc<Self>) -> anyhow::Result<()> {
        match Arc::try_unwrap(self) {
            Ok(broker) => {
                let Broker { logs, offsets, .. } = broker;
                // The offset store shares its log; let go of it so the log closes cleanly.
                drop(offsets);
                Ok(logs.close()?)
            }
            Err(_) => anyhow::bail!("the broker is still in use"),
        }
    }
}
