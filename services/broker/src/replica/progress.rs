//! Replication progress: each hosted partition's high watermark and, where this broker
//! leads, its followers' log end offsets as their fetches report them.
//!
//! The leader's high watermark is the smallest log end offset among the in-sync replicas
//! (itself included) and never moves back; a follower's is the leader's, as its fetches
//! answer, capped at its own log end. Every advance wakes the `acks=all` requests waiting in
//! [`Progress::replicated`], which is how the produce purgatory learns of follower fetches.
//!
//! The high watermark is kept in memory: a partition first seen by this process starts
//! from its log end offset.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use skein_log::TopicPartition;
use tokio::sync::Notify;

#[derive(Debug)]
struct PartitionProgress {
    high_watermark: u64,
    /// The leader epoch `followers` were reported in: a new epoch starts them afresh.
    epoch: i32,
    /// Follower id -> the log end offset its latest fetch reported.
    followers: BTreeMap<i32, u64>,
}

#[derive(Debug, Default)]
pub(crate) struct Progress {
    partitions: Mutex<HashMap<TopicPartition, PartitionProgress>>,
    advanced: Notify,
}

/// What the leader knows of a partition when it works out the high watermark.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaderView<'a> {
    pub node_id: i32,
    pub epoch: i32,
    pub log_end: u64,
    pub isr: &'a [i32],
}

impl Progress {
    /// The partition's high watermark (its log end offset, the first time it is asked).
    pub(crate) fn high_watermark(&self, tp: &TopicPartition, log_end: u64) -> u64 {
        let mut partitions = self.partitions.lock();
        let progress = partitions.entry(tp.clone()).or_insert(PartitionProgress {
            high_watermark: log_end,
            epoch: -1,
            followers: BTreeMap::new(),
        });
        progress.high_watermark.min(log_end)
    }

    /// A follower fetched from `fetch_offset`: everything before it is on its log. Answers
    /// the high watermark after the report.
    pub(crate) fn follower_fetched(
        &self,
        tp: &TopicPartition,
        view: LeaderView<'_>,
        follower: i32,
        fetch_offset: u64,
    ) -> u64 {
        self.update(tp, view, Some((follower, fetch_offset)))
    }

    /// The leader's log grew (or its ISR changed): the high watermark may move.
    pub(crate) fn leader_advanced(&self, tp: &TopicPartition, view: LeaderView<'_>) -> u64 {
        self.update(tp, view, None)
    }

    fn update(&self, tp: &TopicPartition, view: LeaderView<'_>, report: Option<(i32, u64)>) -> u64 {
        let mut partitions = self.partitions.lock();
        let progress = partitions.entry(tp.clone()).or_insert(PartitionProgress {
            high_watermark: view.log_end,
            epoch: view.epoch,
            followers: BTreeMap::new(),
        });
        if progress.epoch != view.epoch {
            progress.epoch = view.epoch;
            progress.followers.clear();
        }
        if let Some((follower, offset)) = report {
            progress
                .followers
                .insert(follower, offset.min(view.log_end));
        }
        let mut smallest = view.log_end;
        for member in view.isr.iter().filter(|id| **id != view.node_id) {
            // An in-sync replica that has not fetched in this epoch holds the mark back.
            smallest = smallest.min(progress.followers.get(member).copied().unwrap_or(0));
        }
        if smallest > progress.high_watermark {
            progress.high_watermark = smallest;
            drop(partitions);
            self.advanced.notify_waiters();
            return smallest;
        }
        progress.high_watermark
    }

    /// A follower learned the leader's high watermark: its own is that, capped at its log end.
    pub(crate) fn follower_learned(&self, tp: &TopicPartition, leader_hw: u64, log_end: u64) {
        let mut partitions = self.partitions.lock();
        let progress = partitions.entry(tp.clone()).or_insert(PartitionProgress {
            high_watermark: 0,
            epoch: -1,
            followers: BTreeMap::new(),
        });
        progress.high_watermark = leader_hw
            .min(log_end)
            .max(progress.high_watermark.min(log_end));
    }

    /// The log was truncated to `offset`: the mark cannot stay above it.
    pub(crate) fn truncated(&self, tp: &TopicPartition, offset: u64) {
        if let Some(progress) = self.partitions.lock().get_mut(tp) {
            progress.high_watermark = progress.high_watermark.min(offset);
        }
    }

    /// Forgets a partition (its log was deleted).
    pub(crate) fn forget(&self, tp: &TopicPartition) {
        self.partitions.lock().remove(tp);
    }

    /// A future that completes at the next advance of any high watermark; create it before
    /// checking, so an advance in between is not missed.
    pub(crate) fn replicated(&self) -> tokio::sync::futures::Notified<'_> {
        self.advanced.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_the_smallest_in_sync_log_end_and_never_goes_back() {
        let progress = Progress::default();
        let tp = TopicPartition::new("t", 0);
        let isr = [1, 2, 3];
        let view = |log_end| LeaderView {
            node_id: 1,
            epoch: 0,
            log_end,
            isr: &isr,
        };
        assert_eq!(progress.high_watermark(&tp, 0), 0);
        // The leader wrote 10; nobody else has them.
        assert_eq!(progress.leader_advanced(&tp, view(10)), 0);
        assert_eq!(progress.follower_fetched(&tp, view(10), 2, 10), 0);
        assert_eq!(progress.follower_fetched(&tp, view(10), 3, 4), 4);
        assert_eq!(progress.follower_fetched(&tp, view(10), 3, 10), 10);
        // A follower that reports less (it truncated) does not move the mark back.
        assert_eq!(progress.follower_fetched(&tp, view(10), 3, 2), 10);
        // Alone in the ISR, the leader's log end is the mark.
        let alone = [1];
        let view = LeaderView {
            node_id: 1,
            epoch: 0,
            log_end: 15,
            isr: &alone,
        };
        assert_eq!(progress.leader_advanced(&tp, view), 15);
        // A new epoch forgets followers' reports.
        let view = LeaderView {
            node_id: 1,
            epoch: 1,
            log_end: 20,
            isr: &isr,
        };
        assert_eq!(progress.leader_advanced(&tp, view), 15);
        assert_eq!(progress.follower_fetched(&tp, view, 2, 20), 15);
        assert_eq!(progress.follower_fetched(&tp, view, 3, 18), 18);
    }
}
