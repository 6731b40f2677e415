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
pub mod controller_link;
mod dispatch;
mod fetch_session;
mod frame;
mod group;
mod handler;
mod listener;
mod producer;
mod quota;
pub mod topics;

use std::sync::Arc;

use skein_log::topic_config;
use skein_log::{LogManager, LogManagerConfig, SharedLog, SystemClock, TopicPartition};
use tokio::sync::Notify;

pub use config::BrokerConfig;

/// Broker-wide topic defaults from settings under Kafka's names (`retention.ms`, ...),
/// checked as topic configs are.
/// Returns the log defaults and the default `min.insync.replicas`.
pub fn topic_defaults(
    settings: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<(skein_log::LogConfig, i32)> {
    let base = topic_config::TopicSettings {
        log: skein_log::LogConfig::default(),
        min_insync_replicas: 1,
    };
    let effective = topic_config::settings(&base, settings)?;
    Ok((effective.log, effective.min_insync_replicas))
}
pub use listener::serve;
pub use topics::{TopicInfo, TopicRegistry};

/// How long a topic must stay out of the controller's snapshots before its logs go.
///
/// This is for ordering, not for stale data: a topic's logs are told apart from those of any
/// other topic of the same name by its id (every partition directory names it, and
/// [`Broker::partition_log`] never serves one of another id), so a name reused by a new
/// topic never finds the old records, grace or not. The grace is there because a snapshot
/// may lack a live topic: one computed before the topic's creation was committed. Deleting
/// the logs at once would cost that topic its records when the next snapshot brings it back
/// under the same id; after the grace, the logs go only if no topic of that id is back.
pub const LOG_DELETION_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

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
    fetch_sessions: fetch_session::FetchSessions,
    /// Woken on every append, so waiting fetches re-read.
    appended: Notify,
    /// The controller, when this broker joined one.
    controller: Option<controller_link::ControllerLink>,
    /// This tenant's ACL bindings, as the controller last sent them.
    acls: parking_lot::RwLock<Vec<skein_auth::AclBinding>>,
    /// This tenant's quota, as the controller last sent it.
    quotas: quota::TenantQuotas,
    /// Topics gone from the controller's snapshots, with when; their logs wait out
    /// [`LOG_DELETION_GRACE`]. Kept in memory only: a deletion lost with it costs disk space
    /// until a topic of that name comes (its id check deletes the old logs), never records.
    doomed: parking_lot::Mutex<Vec<(TopicInfo, std::time::Instant)>>,
    /// Held while a partition log is opened, created or deleted for a topic id, with the
    /// topic read again from the registry under it: a request holding a topic that was
    /// replaced meanwhile must not delete the new topic's log to make room for the old one.
    log_identity: parking_lot::Mutex<()>,
}

impl Broker {
    /// A broker on its own: topics from `<data>/topics`.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let topics = TopicRegistry::open(&config.data_dir)?;
        Self::open_with(config, topics, None)
    }

    /// A broker whose topics come from the controller: its first metadata snapshot fills the
    /// registry, and [`Broker::follow_controller`] applies the ones after it.
    pub async fn open_controlled(
        config: BrokerConfig,
        link: controller_link::ControllerLink,
    ) -> anyhow::Result<(Arc<Self>, controller_link::Snapshots)> {
        let mut snapshots = link.watch().await?;
        let first = snapshots
            .message()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the controller closed the metadata stream"))?;
        let topics = TopicRegistry::controlled(link.clone(), link.topics_of(&first));
        let acls = link.acls_of(&first);
        let quota = link.quota_of(&first);
        let controller = Some(link);
        let broker =
            tokio::task::spawn_blocking(move || Self::open_with(config, topics, controller))
                .await??;
        *broker.acls.write() = acls;
        broker.quotas.set(quota);
        Ok((broker, snapshots))
    }

    /// Applies metadata snapshots until the task is aborted. A topic missing from a
    /// snapshot leaves the registry at once, but its logs are deleted only after
    /// [`LOG_DELETION_GRACE`], and only if no topic of its id is back by then (see there
    /// why). A topic of the same name under a new id needs no such care: its partitions
    /// never open the old id's logs. A broken stream is reopened.
    pub fn follow_controller(
        self: &Arc<Self>,
        link: controller_link::ControllerLink,
        mut snapshots: controller_link::Snapshots,
    ) -> tokio::task::JoinHandle<()> {
        let broker = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(std::time::Duration::from_millis(500));
            loop {
                tokio::select! {
                    message = snapshots.message() => match message {
                        Ok(Some(snapshot)) => {
                            let replaced = broker.topics.replace_all(link.topics_of(&snapshot));
                            let now = std::time::Instant::now();
                            broker
                                .doomed
                                .lock()
                                .extend(replaced.removed.into_iter().map(|t| (t, now)));
                            for changed in &replaced.changed {
                                broker.apply_settings(changed);
                            }
                            *broker.acls.write() = link.acls_of(&snapshot);
                            broker.quotas.set(link.quota_of(&snapshot));
                        }
                        Ok(None) | Err(_) => {
                            tracing::warn!("metadata stream ended; reopening");
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                            match link.watch().await {
                                Ok(reopened) => snapshots = reopened,
                                Err(e) => tracing::warn!(error = %e, "metadata stream unavailable"),
                            }
                        }
                    },
                    _ = ticks.tick() => {}
                }
                for topic in broker.expired_deletions() {
                    if broker.topics.get(&topic.name).map(|t| t.id) != Some(topic.id) {
                        tracing::info!(topic = %topic.name, id = %topic.id, "topic deleted by the controller");
                        broker.drop_partitions(&topic);
                    }
                }
            }
        })
    }

    /// Takes the topics whose [`LOG_DELETION_GRACE`] is over out of `doomed`.
    fn expired_deletions(&self) -> Vec<TopicInfo> {
        let mut doomed = self.doomed.lock();
        let (expired, waiting) = std::mem::take(&mut *doomed)
            .into_iter()
            .partition(|(_, since)| since.elapsed() >= LOG_DELETION_GRACE);
        *doomed = waiting;
        expired.into_iter().map(|(topic, _)| topic).collect()
    }

    fn open_with(
        config: BrokerConfig,
        topics: TopicRegistry,
        controller: Option<controller_link::ControllerLink>,
    ) -> anyhow::Result<Arc<Self>> {
        let logs = LogManager::open(
            config.data_dir.join("logs"),
            LogManagerConfig {
                default_log: config.log.clone(),
                ..LogManagerConfig::default()
            },
            Arc::new(SystemClock),
        )?;
        let offsets = group::OffsetStore::open(&logs)?;
        let producer_ids = match &controller {
            Some(link) => producer::ProducerIds::controlled(link.clone()),
            None => producer::ProducerIds::open(&config.data_dir),
        };
        let groups = group::Coordinator::new(std::time::Duration::from_millis(
            config.group_initial_rebalance_delay_ms,
        ));
        let broker = Arc::new(Self {
            config,
            logs,
            topics,
            groups,
            offsets,
            producer_ids,
            producers: producer::ProducerStates::default(),
            fetch_sessions: fetch_session::FetchSessions::default(),
            appended: Notify::new(),
            controller,
            acls: parking_lot::RwLock::new(Vec::new()),
            quotas: quota::TenantQuotas::default(),
            doomed: parking_lot::Mutex::new(Vec::new()),
            log_identity: parking_lot::Mutex::new(()),
        });
        broker.settle_partitions();
        // Logs were opened with the broker defaults; give each its topic's settings.
        for info in broker.topics.list() {
            broker.apply_settings(&info);
        }
        Ok(broker)
    }

    /// Settles, at start, which topic each partition found on disk belongs to: one whose
    /// directory names another id than the topic of its name is deleted now (that topic was
    /// deleted, and its name reused, while this broker was down; left alone it would never
    /// be served either, this frees the space), and one from before topic ids is adopted by
    /// the topic of its name, so it gets that topic's settings below.
    fn settle_partitions(&self) {
        let _turn = self.log_identity.lock();
        for tp in self.logs.partitions() {
            let Some(info) = self.topics.get(&tp.topic) else {
                continue;
            };
            match self.logs.topic_id(&tp) {
                Some(stored) if stored == info.id => {}
                Some(stored) => {
                    tracing::info!(partition = %tp, stale = %stored, current = %info.id,
                        "deleting a partition of a deleted topic of the same name");
                    self.producers.forget(&tp);
                    if let Err(e) = self.logs.delete_for(&tp, stored) {
                        tracing::warn!(partition = %tp, error = %e, "failed to delete partition log");
                    }
                }
                None if tp.partition < info.partitions => {
                    let config = Some(self.settings(&info).log);
                    if let Err(e) = self.logs.get_or_create_for(&tp, info.id, config) {
                        tracing::warn!(partition = %tp, error = %e, "failed to adopt partition log");
                    }
                }
                None => {}
            }
        }
    }

    /// The log of a partition of a known topic, created on first use with the topic's
    /// settings. Only a log whose directory belongs to the topic's current id is served: one
    /// of another id (a deleted topic of the same name) is deleted and a new empty log made,
    /// and one from before topic ids is adopted by the current id.
    /// Forgets state nobody has used for its retention, as Kafka does: committed offsets of
    /// groups without members after `offsets.retention.minutes` since their last commit
    /// (tombstones in `__consumer_offsets`, then the group itself), and idempotent producers
    /// idle for `producer.id.expiration.ms`.
    pub(crate) fn expire_idle_state(&self) {
        let now = skein_log::Clock::now_ms(&skein_log::SystemClock);
        let retention =
            i64::try_from(self.config.offsets_retention.as_millis()).unwrap_or(i64::MAX);
        for group in self.offsets.committed_before(now, retention) {
            if self.groups.has_members(&group) {
                continue;
            }
            let keys: Vec<(String, i32)> = self
                .offsets
                .all(&group)
                .into_iter()
                .map(|(t, p, _)| (t, p))
                .collect();
            match self.offsets.delete(&group, &keys, now) {
                Ok(()) => {
                    self.groups.remove_if_empty(&group);
                    tracing::info!(%group, offsets = keys.len(), "expired the offsets of an empty group");
                }
                Err(e) => tracing::warn!(%group, error = %e, "failed to expire group offsets"),
            }
        }
        let expiration =
            i64::try_from(self.config.producer_id_expiration.as_millis()).unwrap_or(i64::MAX);
        let forgotten = self.producers.expire(expiration);
        if forgotten > 0 {
            tracing::info!(producers = forgotten, "expired idle producer states");
        }
    }

    pub(crate) fn partition_log(&self, topic: &str, partition: i32) -> Option<SharedLog> {
        let info = self.topics.get(topic)?;
        if partition < 0 || partition >= info.partitions {
            return None;
        }
        let tp = TopicPartition::new(topic, partition);
        if let Some(log) = self.logs.get_for(&tp, info.id) {
            return Some(log);
        }
        self.open_partition_log(&tp)
    }

    /// Opens (or creates, or replaces) the log of `tp` for the topic the registry names now,
    /// under [`Broker::log_identity`].
    fn open_partition_log(&self, tp: &TopicPartition) -> Option<SharedLog> {
        let _turn = self.log_identity.lock();
        let info = self.topics.get(&tp.topic)?;
        if tp.partition >= info.partitions {
            return None;
        }
        let adopting = self.logs.get(tp).is_some() && self.logs.topic_id(tp).is_none();
        if !adopting && self.logs.topic_id(tp) != Some(info.id) {
            // A new log, or one replacing a deleted topic's: no producer state carries over.
            self.producers.forget(tp);
        }
        match self
            .logs
            .get_or_create_for(tp, info.id, Some(self.settings(&info).log))
        {
            Ok(log) => Some(log),
            Err(e) => {
                tracing::warn!(partition = %tp, error = %e, "failed to open partition log");
                None
            }
        }
    }

    /// The effective settings of a topic (broker defaults plus its overrides).
    pub(crate) fn settings(&self, info: &TopicInfo) -> topic_config::TopicSettings {
        topic_config::settings(&self.defaults(), &info.configs).unwrap_or_else(|e| {
            tracing::warn!(topic = %info.name, error = %e, "ignoring stored topic configs");
            self.defaults()
        })
    }

    /// The broker-wide topic defaults.
    pub(crate) fn defaults(&self) -> topic_config::TopicSettings {
        topic_config::TopicSettings {
            log: self.config.log.clone(),
            min_insync_replicas: self.config.default_min_insync_replicas,
        }
    }

    /// A topic's `min.insync.replicas`, read without working out its other settings (the
    /// produce path asks for it on every acks=all request).
    pub(crate) fn min_insync_replicas(&self, info: &TopicInfo) -> i32 {
        info.configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.config.default_min_insync_replicas)
    }

    /// Forgets a deleted topic's partitions: producer state and logs. Only logs of the
    /// topic's own id go: a newer topic of the same name keeps its partitions.
    pub(crate) fn drop_partitions(&self, info: &TopicInfo) {
        let _turn = self.log_identity.lock();
        for partition in 0..info.partitions {
            let tp = TopicPartition::new(&info.name, partition);
            match self.logs.delete_for(&tp, info.id) {
                Ok(true) => self.producers.forget(&tp),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(topic = %info.name, partition, error = %e, "failed to delete partition log");
                }
            }
        }
    }

    /// Applies a topic's settings to its open partition logs.
    pub(crate) fn apply_settings(&self, info: &TopicInfo) {
        let settings = self.settings(info);
        for partition in 0..info.partitions {
            let tp = TopicPartition::new(&info.name, partition);
            if let Some(log) = self.logs.get_for(&tp, info.id) {
                if let Err(e) = log.write().set_config(settings.log.clone()) {
                    tracing::warn!(topic = %info.name, partition, error = %e, "config not applied");
                }
            }
        }
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
