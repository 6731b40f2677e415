//! Replication progress: each hosted partition's high watermark and, where this broker
//! leads, its followers' log end offsets as their fetches report them.
//!
//! The leader's high watermark is the smallest log end offset among the in-sync replicas
//! (itself included) and never moves back; a follower's is the leader's, as its fetches
//! answer, capped at its own log end. An advance wakes the waiters of that partition
//! ([`Progress::advanced`]): the `acks=all` writes and the consumers' fetches waiting on it.
//!
//! The high watermark is kept in memory. A partition first seen by this process starts
//! from its log start offset, never its log end: what the log holds past the last high
//! watermark may never have reached another replica, and a consumer must not read it until
//! the ISR has it (the leader's first computation moves the mark to the log end at once
//! when the leader is alone in the ISR; a follower takes its leader's).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use parking_lot::Mutex;
use skein_log::TopicPartition;
use tokio::sync::Notify;

use crate::Wakers;
use tokio::time::Instant;

#[derive(Debug)]
struct PartitionProgress {
    high_watermark: u64,
    /// The leader epoch `followers` were reported in: a new epoch starts them afresh.
    epoch: i32,
    /// When this broker started leading in `epoch`: an in-sync follower that has not
    /// caught up since counts as caught up then.
    epoch_started: Instant,
    /// Follower id -> what its latest fetch reported.
    followers: BTreeMap<i32, Follower>,
}

#[derive(Debug, Clone, Copy)]
struct Follower {
    log_end: u64,
    /// When the follower last had everything the leader had: a fetch from the leader's log
    /// end, or from where the leader's log ended at the follower's previous fetch (then
    /// caught up as of that fetch, as Kafka reckons it under steady writes).
    caught_up_at: Option<Instant>,
    /// The leader's log end at this follower's latest fetch, and when that was.
    last_fetch: (u64, Instant),
}

impl PartitionProgress {
    fn new(high_watermark: u64, epoch: i32) -> Self {
        Self {
            high_watermark,
            epoch,
            epoch_started: Instant::now(),
            followers: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct Progress {
    partitions: Mutex<HashMap<TopicPartition, PartitionProgress>>,
    advanced: Wakers,
}

/// What the leader knows of a partition when it works out the high watermark.
#[derive(Debug, Clone, Copy)]
pub struct LeaderView<'a> {
    pub node_id: i32,
    pub epoch: i32,
    pub log_start: u64,
    pub log_end: u64,
    pub isr: &'a [i32],
}

impl Progress {
    /// The partition's high watermark (its log start offset, the first time it is asked).
    pub fn high_watermark(&self, tp: &TopicPartition, log_start: u64, log_end: u64) -> u64 {
        let mut partitions = self.partitions.lock();
        let progress = partitions
            .entry(tp.clone())
            .or_insert_with(|| PartitionProgress::new(log_start.min(log_end), -1));
        progress.high_watermark.min(log_end)
    }

    /// The partition's high watermark if it was ever worked out here.
    pub fn known_high_watermark(&self, tp: &TopicPartition) -> Option<u64> {
        self.partitions
            .lock()
            .get(tp)
            .map(|progress| progress.high_watermark)
    }

    /// A follower fetched from `fetch_offset`: everything before it is on its log. Answers
    /// the high watermark after the report.
    pub fn follower_fetched(
        &self,
        tp: &TopicPartition,
        view: LeaderView<'_>,
        follower: i32,
        fetch_offset: u64,
    ) -> u64 {
        self.update(tp, view, Some((follower, fetch_offset)))
    }

    /// The leader's log grew (or its ISR changed): the high watermark may move.
    pub fn leader_advanced(&self, tp: &TopicPartition, view: LeaderView<'_>) -> u64 {
        self.update(tp, view, None)
    }

    fn update(&self, tp: &TopicPartition, view: LeaderView<'_>, report: Option<(i32, u64)>) -> u64 {
        let mut partitions = self.partitions.lock();
        let progress = partitions.entry(tp.clone()).or_insert_with(|| {
            PartitionProgress::new(view.log_start.min(view.log_end), view.epoch)
        });
        if progress.epoch != view.epoch {
            progress.epoch = view.epoch;
            progress.epoch_started = Instant::now();
            progress.followers.clear();
        }
        if let Some((follower, offset)) = report {
            let now = Instant::now();
            let previous = progress.followers.get(&follower).copied();
            let caught_up_at = if offset >= view.log_end {
                Some(now)
            } else {
                match previous {
                    Some(f) if offset >= f.last_fetch.0 => Some(f.last_fetch.1),
                    Some(f) => f.caught_up_at,
                    None => None,
                }
            };
            progress.followers.insert(
                follower,
                Follower {
                    log_end: offset.min(view.log_end),
                    caught_up_at,
                    last_fetch: (view.log_end, now),
                },
            );
        }
        let mut smallest = view.log_end;
        for member in view.isr.iter().filter(|id| **id != view.node_id) {
            // An in-sync replica that has not fetched in this epoch holds the mark back.
            let log_end = progress.followers.get(member).map_or(0, |f| f.log_end);
            smallest = smallest.min(log_end);
        }
        if smallest > progress.high_watermark {
            progress.high_watermark = smallest;
            drop(partitions);
            self.advanced.wake(tp);
            return smallest;
        }
        progress.high_watermark
    }

    /// A follower learned the leader's high watermark: its own is that, capped at its log end.
    pub fn follower_learned(&self, tp: &TopicPartition, leader_hw: u64, log_end: u64) {
        let mut partitions = self.partitions.lock();
        let progress = partitions
            .entry(tp.clone())
            .or_insert_with(|| PartitionProgress::new(0, -1));
        progress.high_watermark = leader_hw
            .min(log_end)
            .max(progress.high_watermark.min(log_end));
    }

    /// The log was truncated to `offset`: the mark cannot stay above it.
    pub fn truncated(&self, tp: &TopicPartition, offset: u64) {
        if let Some(progress) = self.partitions.lock().get_mut(tp) {
            progress.high_watermark = progress.high_watermark.min(offset);
        }
    }

    /// The ISR the leader should ask for, if it differs from `view.isr`: in-sync followers
    /// that have not caught up with the log end within `lag_max`
    /// (`replica.lag.time.max.ms`) leave it; replicas outside it whose log reaches the high
    /// watermark, caught up within `lag_max`, join it.
    pub fn wanted_isr(
        &self,
        tp: &TopicPartition,
        view: LeaderView<'_>,
        replicas: &[i32],
        lag_max: Duration,
    ) -> Option<Vec<i32>> {
        let partitions = self.partitions.lock();
        let progress = partitions.get(tp).filter(|p| p.epoch == view.epoch)?;
        let now = Instant::now();
        let mut isr: Vec<i32> = view
            .isr
            .iter()
            .copied()
            .filter(|id| {
                if *id == view.node_id {
                    return true;
                }
                let since = progress
                    .followers
                    .get(id)
                    .and_then(|f| f.caught_up_at)
                    .map_or(progress.epoch_started, |at| at.max(progress.epoch_started));
                now.duration_since(since) <= lag_max
            })
            .collect();
        for id in replicas {
            if isr.contains(id) {
                continue;
            }
            let joins = progress.followers.get(id).is_some_and(|f| {
                f.log_end >= progress.high_watermark
                    && f.caught_up_at
                        .is_some_and(|at| now.duration_since(at) <= lag_max)
            });
            if joins {
                isr.push(*id);
            }
        }
        (isr != view.isr).then_some(isr)
    }

    /// Forgets a partition (its log was deleted).
    pub fn forget(&self, tp: &TopicPartition) {
        self.partitions.lock().remove(tp);
        self.advanced.forget(tp);
    }

    /// Wakes every waiter, without an advance.
    pub fn wake(&self) {
        self.advanced.wake_all();
    }

    /// What the partition's high-watermark advances notify: take a `notified()` of it before
    /// checking the mark, so an advance in between is not missed.
    pub fn advanced(&self, tp: &TopicPartition) -> std::sync::Arc<Notify> {
        self.advanced.of(tp)
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
            log_start: 0,
            log_end,
            isr: &isr,
        };
        assert_eq!(progress.high_watermark(&tp, 0, 0), 0);
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
            log_start: 0,
            log_end: 15,
            isr: &alone,
        };
        assert_eq!(progress.leader_advanced(&tp, view), 15);
        // A new epoch forgets followers' reports.
        let view = LeaderView {
            node_id: 1,
            epoch: 1,
            log_start: 0,
            log_end: 20,
            isr: &isr,
        };
        assert_eq!(progress.leader_advanced(&tp, view), 15);
        assert_eq!(progress.follower_fetched(&tp, view, 2, 20), 15);
        assert_eq!(progress.follower_fetched(&tp, view, 3, 18), 18);
    }
}
