//! The partitions this broker hosts. [`ReplicaManager`] owns their logs and their idempotent
//! producers' state; a handler gets a `Partition` from `ReplicaManager::leader` and
//! calls its operations (append, read, offsets, delete records), never a log itself.
//!
//! Which broker leads a partition, and in which leader epoch, is the controller's decision
//! (the topic's [`Placement`](crate::topics::Placement)); a broker on its own leads every
//! partition in epoch 0. Clients are served only by the leader: another broker answers
//! NOT_LEADER_OR_FOLLOWER naming the leader, and a request carrying a leader epoch (KIP-320)
//! older than the partition's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
//! Followers copy their leaders' logs through `FollowedPartition` (driven by
//! `replica_fetcher.rs`); the leader's high watermark is the smallest log end offset in the
//! ISR (`skein_replication::Progress`), consumers read below it, and `acks=all` waits for it.
//!
//! **Invariant:** a partition is served only from a log whose directory names its topic's
//! current id. One of another id (a deleted topic of the same name) is deleted and an empty
//! log made in its place; one from before topic ids is adopted by the topic of its name.
//! Opening, creating and deleting logs for a topic id happen under one lock, with the topic
//! read again from the registry under it, so a request holding a topic that was replaced
//! meanwhile cannot delete the new topic's log to make room for the old one.

mod error;
mod follower;
mod partition;

use std::sync::Arc;

pub use error::PartitionError;
pub(crate) use follower::FollowedPartition;
pub(crate) use partition::{
    Acknowledgement, Isolation, OffsetSpec, Partition, ReadLimit, Replicated,
};
use skein_log::topic_config::{self, TopicSettings};
use skein_log::{LogError, LogManager, LogManagerConfig, SystemClock, TopicPartition};
use skein_replication::{LeaderView, Progress, Wakers};
use tokio::sync::Notify;

use crate::producer::ProducerStates;
use crate::{BrokerConfig, TopicInfo, TopicRegistry};

#[derive(Debug)]
pub struct ReplicaManager {
    /// This broker's node id: the replica it is in every placement.
    node_id: i32,
    logs: LogManager,
    topics: Arc<TopicRegistry>,
    defaults: TopicSettings,
    producers: ProducerStates,
    /// Woken on an append to a partition this broker leads, so the followers' fetches
    /// waiting on it read again.
    appended: Wakers,
    /// High watermarks and followers' progress.
    progress: Progress,
    /// Held while a partition log is opened, created or deleted for a topic id.
    log_identity: parking_lot::Mutex<()>,
}

impl ReplicaManager {
    /// Opens the logs under `<data>/logs` and settles which topic each belongs to.
    pub(crate) fn open(
        config: &BrokerConfig,
        topics: Arc<TopicRegistry>,
    ) -> Result<Self, LogError> {
        let logs = LogManager::open(
            config.data_dir.join("logs"),
            LogManagerConfig {
                default_log: config.log.clone(),
                ..LogManagerConfig::default()
            },
            Arc::new(SystemClock),
        )?;
        let producers =
            ProducerStates::new(topics.tenancy(), config.max_producer_states_per_tenant);
        let manager = Self {
            node_id: config.node_id,
            logs,
            topics,
            defaults: TopicSettings {
                log: config.log.clone(),
                min_insync_replicas: config.default_min_insync_replicas,
                compression: config.default_compression,
                ..TopicSettings::default()
            },
            producers,
            appended: Wakers::default(),
            progress: Progress::default(),
            log_identity: parking_lot::Mutex::new(()),
        };
        manager.settle_partitions();
        // Logs were opened with the broker defaults; give each its topic's settings.
        for info in manager.topics.list_all() {
            manager.apply_settings(&info);
        }
        Ok(manager)
    }

    /// The log engine underneath, for maintenance, recovery reports and the internal topics.
    pub fn logs(&self) -> &LogManager {
        &self.logs
    }

    /// Closes every log cleanly.
    pub(crate) fn close(self) -> Result<(), LogError> {
        self.logs.close()
    }

    /// The (leader, leader epoch) the registry names for `tp` now. Writers check it with the
    /// partition log's write lock held, so that a leader's append and a follower's never
    /// interleave across a change of leadership.
    pub(crate) fn registered_leader(&self, tp: &TopicPartition) -> Option<(i32, i32)> {
        self.topics
            .get(&tp.topic)
            .and_then(|info| info.placement_of(tp.partition, self.node_id))
            .map(|p| (p.leader, p.leader_epoch))
    }

    /// A partition of a known topic that this broker leads, for a client's request: the
    /// cluster's internal topics are unknown to clients. See [`Self::leader_of_any`].
    pub(crate) fn leader(
        &self,
        topic: &str,
        index: i32,
        current_leader_epoch: i32,
    ) -> Result<Partition<'_>, PartitionError> {
        if self.topics.is_internal(topic) {
            return Err(PartitionError::UnknownTopicOrPartition {
                topic: topic.to_owned(),
                partition: index,
            });
        }
        self.leader_of_any(topic, index, current_leader_epoch)
    }

    /// A partition of a known topic, internal ones included, that this broker leads, its log
    /// opened (or created) with the topic's settings: for other brokers' replica requests
    /// and the broker's own use. `current_leader_epoch` is the epoch the caller believes
    /// current (KIP-320), -1 for a caller that does not say.
    pub(crate) fn leader_of_any(
        &self,
        topic: &str,
        index: i32,
        current_leader_epoch: i32,
    ) -> Result<Partition<'_>, PartitionError> {
        let unknown = || PartitionError::UnknownTopicOrPartition {
            topic: topic.to_owned(),
            partition: index,
        };
        let info = self.topics.get(topic).ok_or_else(unknown)?;
        let placement = info.placement_of(index, self.node_id).ok_or_else(unknown)?;
        let current = placement.leader_epoch;
        if current_leader_epoch >= 0 && current_leader_epoch < current {
            return Err(PartitionError::FencedLeaderEpoch {
                requested: current_leader_epoch,
                current,
            });
        }
        if current_leader_epoch > current {
            return Err(PartitionError::UnknownLeaderEpoch {
                requested: current_leader_epoch,
                current,
            });
        }
        if placement.leader != self.node_id {
            return Err(PartitionError::NotLeader {
                topic: topic.to_owned(),
                partition: index,
                leader: (placement.leader >= 0).then_some((placement.leader, current)),
            });
        }
        let tp = TopicPartition::new(topic, index);
        let log = match self.logs.get_for(&tp, info.id) {
            Some(log) => log,
            None => self.open_partition_log(&tp).ok_or_else(unknown)?,
        };
        // The first time this process serves the partition, its high watermark starts at
        // the log start: what the log holds past the mark may never have reached another
        // replica. Then it is worked out for the ISR as it stands: a leader new in its
        // epoch, or alone in the ISR, moves it on without waiting for a write (which
        // min.insync.replicas may refuse).
        let (log_start, log_end) = {
            let log = log.read();
            (log.log_start_offset(), log.log_end_offset())
        };
        self.progress.high_watermark(&tp, log_start, log_end);
        self.progress.leader_advanced(
            &tp,
            LeaderView {
                node_id: self.node_id,
                epoch: current,
                log_start,
                log_end,
                isr: &placement.isr,
            },
        );
        Ok(Partition {
            manager: self,
            tp,
            info,
            leader_epoch: current,
            placement,
            log,
        })
    }

    /// The high watermark of a partition this broker holds a replica of (leading or
    /// following), as far as it knows it; `None` for one it holds none of or has not
    /// served yet.
    pub(crate) fn high_watermark_here(&self, topic: &str, index: i32) -> Option<i64> {
        let info = self.topics.get(topic)?;
        let tp = TopicPartition::new(topic, index);
        let log = self.logs.get_for(&tp, info.id)?;
        let log_end = log.read().log_end_offset();
        let known = self.progress.known_high_watermark(&tp)?;
        Some(known.min(log_end) as i64)
    }

    /// A partition this broker follows (a replica, not the leader), its log opened.
    pub(crate) fn follower(
        &self,
        topic: &str,
        index: i32,
    ) -> Result<FollowedPartition<'_>, PartitionError> {
        let unknown = || PartitionError::UnknownTopicOrPartition {
            topic: topic.to_owned(),
            partition: index,
        };
        let info = self.topics.get(topic).ok_or_else(unknown)?;
        let placement = info.placement_of(index, self.node_id).ok_or_else(unknown)?;
        if placement.leader == self.node_id || !placement.replicas.contains(&self.node_id) {
            return Err(unknown());
        }
        let tp = TopicPartition::new(topic, index);
        let log = match self.logs.get_for(&tp, info.id) {
            Some(log) => log,
            None => self.open_partition_log(&tp).ok_or_else(unknown)?,
        };
        let throttled = !placement.isr.contains(&self.node_id)
            && info
                .configs
                .get("follower.replication.throttled.replicas")
                .and_then(|v| topic_config::ThrottledReplicas::parse(v))
                .is_some_and(|t| t.covers(index, self.node_id));
        Ok(FollowedPartition {
            manager: self,
            tp,
            leader: placement.leader,
            leader_epoch: placement.leader_epoch,
            log,
            throttled,
        })
    }

    /// The metadata changed: `acks=all` writes waiting on a partition this broker may no
    /// longer lead look again.
    pub(crate) fn leadership_changed(&self) {
        self.progress.wake();
    }

    /// Every partition this broker leads and shares with other replicas: (topic, partition).
    pub(crate) fn led(&self) -> Vec<(String, i32)> {
        let mut led = Vec::new();
        for info in self.topics.list_all() {
            for index in 0..info.partitions {
                let Some(placement) = info.placement_of(index, self.node_id) else {
                    continue;
                };
                if placement.leader == self.node_id && placement.replicas.len() > 1 {
                    led.push((info.name.clone(), index));
                }
            }
        }
        led
    }

    /// Every partition this broker follows, by its leader: (topic, partition).
    pub(crate) fn followed(&self) -> std::collections::BTreeMap<i32, Vec<(String, i32)>> {
        let mut by_leader: std::collections::BTreeMap<i32, Vec<(String, i32)>> =
            std::collections::BTreeMap::new();
        for info in self.topics.list_all() {
            for index in 0..info.partitions {
                let Some(placement) = info.placement_of(index, self.node_id) else {
                    continue;
                };
                if placement.leader >= 0
                    && placement.leader != self.node_id
                    && placement.replicas.contains(&self.node_id)
                {
                    by_leader
                        .entry(placement.leader)
                        .or_default()
                        .push((info.name.clone(), index));
                }
            }
        }
        by_leader
    }

    /// What a fetch of `partitions` waits on: a follower's on appends to them, a
    /// consumer's on advances of their high watermarks (what a follower copied becomes
    /// readable without a new append, and nothing past the mark is readable before it).
    /// Each wait is [`skein_replication::any_woken`] of these, made before reading. Only
    /// partitions of known topics get one, so a request naming others leaves nothing behind.
    pub(crate) fn wakers<'t>(
        &self,
        partitions: impl Iterator<Item = (&'t str, i32)>,
        follower: bool,
    ) -> Vec<Arc<Notify>> {
        let mut seen = std::collections::HashSet::new();
        // The topic's partition count, looked up once per run of the same topic.
        let mut counted: Option<(&str, i32)> = None;
        let mut wakers = Vec::new();
        for (topic, index) in partitions {
            let count = match counted {
                Some((name, count)) if name == topic => count,
                _ => {
                    let count = self.topics.get(topic).map_or(0, |info| info.partitions);
                    counted = Some((topic, count));
                    count
                }
            };
            if !(0..count).contains(&index) {
                continue;
            }
            let tp = TopicPartition::new(topic, index);
            if !seen.insert((topic, index)) {
                continue;
            }
            wakers.push(match follower {
                true => self.appended.of(&tp),
                false => self.progress.advanced(&tp),
            });
        }
        wakers
    }

    /// Opens (or creates, or replaces) the log of `tp` for the topic the registry names now.
    fn open_partition_log(&self, tp: &TopicPartition) -> Option<skein_log::SharedLog> {
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

    /// Settles, at start, which topic each partition found on disk belongs to: one whose
    /// directory names another id than the topic of its name is deleted now (that topic was
    /// deleted, and its name reused, while this broker was down; left alone it would never
    /// be served either, this frees the space), and one from before topic ids is adopted by
    /// the topic of its name.
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

    /// Forgets a deleted topic's partitions: producer state and logs. Only logs of the
    /// topic's own id go: a newer topic of the same name keeps its partitions.
    pub(crate) fn drop_partitions(&self, info: &TopicInfo) {
        let _turn = self.log_identity.lock();
        for partition in 0..info.partitions {
            let tp = TopicPartition::new(&info.name, partition);
            match self.logs.delete_for(&tp, info.id) {
                Ok(true) => {
                    self.producers.forget(&tp);
                    self.progress.forget(&tp);
                    self.appended.forget(&tp);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(topic = %info.name, partition, error = %e, "failed to delete partition log");
                }
            }
        }
    }

    /// Deletes the logs of `info`'s partitions that the controller placed on other brokers
    /// only (a completed reassignment moved them away): this broker no longer follows or
    /// leads them, and their records live on the replicas that do.
    pub(crate) fn drop_unplaced(&self, info: &TopicInfo) {
        let crate::topics::Placement::Assigned(partitions) = &info.placement else {
            return;
        };
        let _turn = self.log_identity.lock();
        for (index, placement) in (0..).zip(partitions.iter()) {
            if placement.replicas.contains(&self.node_id) {
                continue;
            }
            let tp = TopicPartition::new(&info.name, index);
            match self.logs.delete_for(&tp, info.id) {
                Ok(true) => {
                    tracing::info!(partition = %tp, replicas = ?placement.replicas,
                        "deleted a partition moved to other brokers");
                    self.producers.forget(&tp);
                    self.progress.forget(&tp);
                    self.appended.forget(&tp);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(partition = %tp, error = %e, "failed to delete a moved partition");
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

    /// The effective settings of a topic (broker defaults plus its overrides).
    pub(crate) fn settings(&self, info: &TopicInfo) -> TopicSettings {
        topic_config::settings(&self.defaults, &info.configs).unwrap_or_else(|e| {
            tracing::warn!(topic = %info.name, error = %e, "ignoring stored topic configs");
            self.defaults.clone()
        })
    }

    /// The broker-wide topic defaults.
    pub(crate) fn defaults(&self) -> TopicSettings {
        self.defaults.clone()
    }

    /// A topic's `min.insync.replicas`, read without working out its other settings (the
    /// produce path asks for it on every acks=all request).
    pub(crate) fn min_insync_replicas(&self, info: &TopicInfo) -> i32 {
        info.configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.defaults.min_insync_replicas)
    }

    /// The codec a topic stores its batches under (`compression.type`), if it names one;
    /// read without working out its other settings, as the produce path asks on every write.
    pub(crate) fn compression(&self, info: &TopicInfo) -> Option<skein_log::batch::Compression> {
        info.configs
            .get("compression.type")
            .and_then(|v| topic_config::TopicCompression::parse(v))
            .unwrap_or(self.defaults.compression)
            .codec()
    }

    /// Forgets idempotent producers idle for `expiration_ms`; answers how many.
    pub(crate) fn expire_producers(&self, expiration_ms: i64) -> usize {
        self.producers.expire(expiration_ms)
    }
}
