//! A partition this broker follows: what the replica fetcher does with it. It copies the
//! leader's batches as they are (offsets and epochs included), truncates a divergent tail
//! to the leader's epoch boundary, and learns the leader's high watermark.
//!
//! **Invariant:** an answer changes the log only while the broker it came from still leads
//! in the epoch it was asked in. Each follower keeps one fetcher per leader, so when
//! leadership moves an answer of the old leader can still be in flight after the new
//! leader's fetcher reconciled the log; applied, it would splice the old leader's divergent
//! tail under the new leader's records. The check runs under the log's write lock, so it
//! is ordered with the new fetcher's truncation.

use skein_log::{SharedLog, TopicPartition};
use skein_replication::FollowerLog;

use super::{PartitionError, ReplicaManager};

/// A partition of a known topic whose replicas include this broker and another leads.
pub(crate) struct FollowedPartition<'a> {
    pub(super) manager: &'a ReplicaManager,
    pub(super) tp: TopicPartition,
    pub(super) leader: i32,
    pub(super) leader_epoch: i32,
    pub(super) log: SharedLog,
    /// Whether its fetches count against `follower.replication.throttled.rate`: the topic
    /// throttles this broker's replica of it, and the replica is out of the ISR.
    pub(super) throttled: bool,
}

impl FollowedPartition<'_> {
    /// Whether this replica's fetches are throttled (`follower.replication.throttled.*`).
    pub(crate) fn throttled(&self) -> bool {
        self.throttled
    }

    /// The broker leading the partition, and its epoch.
    pub(crate) fn leader(&self) -> (i32, i32) {
        (self.leader, self.leader_epoch)
    }

    /// Where the next fetch starts: the log end.
    pub(crate) fn log_end(&self) -> i64 {
        self.log.read().log_end_offset() as i64
    }

    /// The latest leader epoch in this log, if it has any records.
    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.log.read().latest_epoch()
    }

    /// Empties the log and starts it at `offset` (the leader's log start, past this log's
    /// end after the leader's retention).
    pub(crate) fn restart_at(&self, offset: i64, asked: (i32, i32)) -> Result<(), PartitionError> {
        let offset = u64::try_from(offset).unwrap_or(0);
        let mut log = self.log.write();
        self.still_led_as(asked)?;
        log.truncate_fully_and_start_at(offset)?;
        drop(log);
        self.manager.progress.truncated(&self.tp, offset);
        self.manager.producers.forget(&self.tp);
        Ok(())
    }

    /// Removes every record at or after `offset`: they are not the leader's.
    pub(crate) fn truncate_to(&self, offset: i64, asked: (i32, i32)) -> Result<(), PartitionError> {
        let offset = u64::try_from(offset).unwrap_or(0);
        let mut log = self.log.write();
        self.still_led_as(asked)?;
        log.truncate_to(offset)?;
        drop(log);
        self.manager.progress.truncated(&self.tp, offset);
        self.manager.producers.forget(&self.tp);
        Ok(())
    }

    /// Appends batches fetched from the leader, then takes its high watermark.
    pub(crate) fn append(
        &self,
        batches: &[u8],
        leader_hw: i64,
        asked: (i32, i32),
    ) -> Result<(), PartitionError> {
        let mut log = self.log.write();
        self.still_led_as(asked)?;
        if !batches.is_empty() {
            log.append_replicated(batches)?;
            // The idempotent producers' state is rebuilt from the log if this replica leads.
            self.manager.producers.forget(&self.tp);
        }
        let log_end = log.log_end_offset();
        drop(log);
        self.manager.progress.follower_learned(
            &self.tp,
            u64::try_from(leader_hw).unwrap_or(0),
            log_end,
        );
        Ok(())
    }
}

impl FollowedPartition<'_> {
    /// Whether the registry still names `asked` (leader, leader epoch) for this partition;
    /// called with the log's write lock held.
    fn still_led_as(&self, asked: (i32, i32)) -> Result<(), PartitionError> {
        let now = self.manager.registered_leader(&self.tp);
        if now == Some(asked) {
            Ok(())
        } else {
            Err(PartitionError::LeaderMoved { asked, now })
        }
    }
}

impl FollowerLog for FollowedPartition<'_> {
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64> {
        self.log
            .read()
            .end_offset_for_epoch(epoch)
            .map(|entry| entry.start_offset as i64)
    }

    fn high_watermark(&self) -> i64 {
        let log = self.log.read();
        self.manager
            .progress
            .high_watermark(&self.tp, log.log_start_offset(), log.log_end_offset()) as i64
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};

    use crate::topics::{PartitionPlacement, Placement};
    use crate::{BrokerConfig, TopicInfo, TopicRegistry};

    use super::super::{PartitionError, ReplicaManager};

    fn placement(leader: i32, leader_epoch: i32, partition_epoch: i32) -> PartitionPlacement {
        PartitionPlacement {
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader,
            leader_epoch,
            partition_epoch,
        }
    }

    /// One record as a leader sends it to followers: at `offset`, in `epoch`.
    fn replicated(offset: i64, epoch: i32) -> Vec<u8> {
        let record = NewRecord {
            value: Some(b"v".to_vec()),
            ..NewRecord::default()
        };
        let mut batch = build_batch(&[record], Compression::None, ProducerFields::NONE).unwrap();
        batch[0..8].copy_from_slice(&offset.to_be_bytes());
        batch[12..16].copy_from_slice(&epoch.to_be_bytes());
        batch
    }

    #[test]
    fn an_answer_of_a_leader_that_no_longer_leads_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = BrokerConfig::new(dir.path());
        config.node_id = 2;
        let topics = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let id = uuid::Uuid::new_v4();
        topics.replace_all(vec![TopicInfo {
            name: "t".to_owned(),
            id,
            partitions: 1,
            configs: Default::default(),
            placement: Placement::Assigned(vec![placement(1, 5, 7)].into()),
        }]);
        let manager = ReplicaManager::open(&config, Arc::clone(&topics)).unwrap();
        let followed = manager.follower("t", 0).unwrap();
        followed.append(&replicated(0, 5), 0, (1, 5)).unwrap();
        assert_eq!(followed.log_end(), 1);

        // Broker 3 now leads in epoch 6; broker 1's answers, asked in epoch 5, arrive late.
        topics.set_partition("t", id, 0, placement(3, 6, 8));
        let followed = manager.follower("t", 0).unwrap();
        let late = followed.append(&replicated(1, 5), 1, (1, 5));
        assert!(
            matches!(late, Err(PartitionError::LeaderMoved { .. })),
            "{late:?}"
        );
        let late = followed.truncate_to(0, (1, 5));
        assert!(
            matches!(late, Err(PartitionError::LeaderMoved { .. })),
            "{late:?}"
        );
        let late = followed.restart_at(100, (1, 5));
        assert!(
            matches!(late, Err(PartitionError::LeaderMoved { .. })),
            "{late:?}"
        );
        assert_eq!(followed.log_end(), 1);
        assert_eq!(followed.latest_epoch(), Some(5));

        // The new leader's answers are applied.
        followed.append(&replicated(1, 6), 1, (3, 6)).unwrap();
        assert_eq!(followed.log_end(), 2);
    }
}
