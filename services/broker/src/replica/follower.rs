//! A partition this broker follows: what the replica fetcher does with it. It copies the
//! leader's batches as they are (offsets and epochs included), truncates a divergent tail
//! to the leader's epoch boundary, and learns the leader's high watermark.

use skein_log::{SharedLog, TopicPartition};

use super::{PartitionError, ReplicaManager};

/// A partition of a known topic whose replicas include this broker and another leads.
pub(crate) struct FollowedPartition<'a> {
    pub(super) manager: &'a ReplicaManager,
    pub(super) tp: TopicPartition,
    pub(super) leader: i32,
    pub(super) leader_epoch: i32,
    pub(super) log: SharedLog,
}

impl FollowedPartition<'_> {
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

    /// Where `epoch` (or the largest below it) ends in this log.
    pub(crate) fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64> {
        self.log
            .read()
            .end_offset_for_epoch(epoch)
            .map(|entry| entry.start_offset as i64)
    }

    /// This replica's high watermark.
    pub(crate) fn high_watermark(&self) -> i64 {
        let log_end = self.log.read().log_end_offset();
        self.manager.progress.high_watermark(&self.tp, log_end) as i64
    }

    /// Empties the log and starts it at `offset` (the leader's log start, past this log's
    /// end after the leader's retention).
    pub(crate) fn restart_at(&self, offset: i64) -> Result<(), PartitionError> {
        let offset = u64::try_from(offset).unwrap_or(0);
        self.log.write().truncate_fully_and_start_at(offset)?;
        self.manager.progress.truncated(&self.tp, offset);
        self.manager.producers.forget(&self.tp);
        Ok(())
    }

    /// Removes every record at or after `offset`: they are not the leader's.
    pub(crate) fn truncate_to(&self, offset: i64) -> Result<(), PartitionError> {
        let offset = u64::try_from(offset).unwrap_or(0);
        self.log.write().truncate_to(offset)?;
        self.manager.progress.truncated(&self.tp, offset);
        self.manager.producers.forget(&self.tp);
        Ok(())
    }

    /// Appends batches fetched from the leader, then takes its high watermark.
    pub(crate) fn append(&self, batches: &[u8], leader_hw: i64) -> Result<(), PartitionError> {
        let mut log = self.log.write();
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
