//! Where a follower cuts its log before it follows a leader in a new epoch (KIP-101,
//! KIP-279): it asks the leader where the follower's latest epoch ends in the leader's log
//! (OffsetForLeaderEpoch) and keeps only what both logs share.

/// The leader's answer to OffsetForLeaderEpoch: the largest epoch at or below the one asked
/// that its log holds, and where that epoch ends there (-1, -1 when it holds none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochAnswer {
    pub leader_epoch: i32,
    pub end_offset: i64,
}

/// The offset the follower truncates its log to, given the leader's answer for `asked` (the
/// follower's latest epoch). The follower's own log answers `ours`: where an epoch (or the
/// largest below it) ends in it, and its high watermark.
pub fn truncation_point(
    answer: EpochAnswer,
    asked: i32,
    log_end: i64,
    ours: &impl FollowerLog,
) -> i64 {
    if answer.leader_epoch < 0 {
        // The leader has no record of this epoch or any before it: keep only what was
        // known committed.
        return ours.high_watermark().min(log_end);
    }
    if answer.leader_epoch == asked {
        return answer.end_offset.min(log_end);
    }
    // The leader's largest epoch below ours ends at `end_offset`; ours of that epoch may end
    // sooner.
    let our_end = ours.end_offset_for_epoch(answer.leader_epoch).unwrap_or(0);
    answer.end_offset.min(our_end).min(log_end)
}

/// What [`truncation_point`] asks of the follower's log.
pub trait FollowerLog {
    /// Where `epoch` (or the largest below it) ends in this log.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64>;
    /// This replica's high watermark.
    fn high_watermark(&self) -> i64;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follower log whose only epoch below the latest is 2, ending at `ends`.
    struct Ours {
        ends: Option<i64>,
        high_watermark: i64,
    }

    impl FollowerLog for Ours {
        fn end_offset_for_epoch(&self, epoch: i32) -> Option<i64> {
            self.ends.filter(|_| epoch == 2)
        }
        fn high_watermark(&self) -> i64 {
            self.high_watermark
        }
    }

    fn ours(ends: Option<i64>, high_watermark: i64) -> Ours {
        Ours {
            ends,
            high_watermark,
        }
    }

    #[test]
    fn a_shared_epoch_keeps_what_the_leader_has() {
        let answer = EpochAnswer {
            leader_epoch: 3,
            end_offset: 40,
        };
        assert_eq!(truncation_point(answer, 3, 55, &ours(None, 30)), 40);
        // A follower behind the leader keeps everything.
        assert_eq!(truncation_point(answer, 3, 35, &ours(None, 30)), 35);
    }

    #[test]
    fn an_epoch_the_leader_never_had_is_cut_where_the_older_one_ends() {
        // The follower led epoch 4 alone; the leader's epochs go 2 then 5.
        let answer = EpochAnswer {
            leader_epoch: 2,
            end_offset: 20,
        };
        assert_eq!(truncation_point(answer, 4, 30, &ours(Some(25), 10)), 20);
        assert_eq!(truncation_point(answer, 4, 30, &ours(Some(18), 10)), 18);
    }

    #[test]
    fn without_a_common_epoch_only_the_committed_part_stays() {
        let answer = EpochAnswer {
            leader_epoch: -1,
            end_offset: -1,
        };
        assert_eq!(truncation_point(answer, 4, 30, &ours(Some(5), 12)), 12);
    }
}
