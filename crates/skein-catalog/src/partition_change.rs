//! How a partition's leadership and ISR may change: the rules every writer (the controller's
//! elections, a leader's AlterPartition) goes through, as pure functions of the partition as
//! stored. The catalog applies their result as one compare-and-set statement on the
//! partition epoch; the replication simulation applies them to its own state.

use crate::topics::{Partition, PartitionUpdate};
use crate::{CatalogError, Result};

impl Partition {
    /// The partition after an election: [`CatalogError::Conflict`] unless it is still at
    /// `update.expected_partition_epoch`. A new leader bumps the leader epoch; every change
    /// bumps the partition epoch. Leader -1 means no replica may lead (none in the ISR is
    /// live).
    pub fn elect(&self, update: &PartitionUpdate) -> Result<Partition> {
        if update.leader != -1 && !update.isr.contains(&update.leader) {
            return Err(CatalogError::Invalid {
                what: "partition update",
                reason: format!(
                    "leader {} is not in the ISR {:?}",
                    update.leader, update.isr
                ),
            });
        }
        if self.partition_epoch != update.expected_partition_epoch {
            return Err(CatalogError::Conflict {
                what: "partition",
                expected: i64::from(update.expected_partition_epoch),
            });
        }
        let leader_epoch = if update.leader == self.leader {
            self.leader_epoch
        } else {
            self.leader_epoch + 1
        };
        Ok(Partition {
            leader: update.leader,
            isr: update.isr.clone(),
            leader_epoch,
            partition_epoch: self.partition_epoch + 1,
            ..self.clone()
        })
    }

    /// The partition after its leader's ISR change (AlterPartition): applied only while
    /// `leader` still leads it in `leader_epoch` and it is at `partition_epoch` (so a fenced
    /// leader, or one that missed a change, changes nothing: [`CatalogError::Conflict`]).
    /// The ISR must hold the leader and only its replicas, each once.
    pub fn change_isr(
        &self,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> Result<Partition> {
        let invalid = |reason: String| CatalogError::Invalid {
            what: "ISR change",
            reason,
        };
        if !isr.contains(&leader) {
            return Err(invalid(format!(
                "leader {leader} is not in the ISR {isr:?}"
            )));
        }
        if self.leader != leader
            || self.leader_epoch != leader_epoch
            || self.partition_epoch != partition_epoch
        {
            return Err(CatalogError::Conflict {
                what: "partition",
                expected: i64::from(partition_epoch),
            });
        }
        if let Some(outsider) = isr.iter().find(|id| !self.replicas.contains(id)) {
            return Err(invalid(format!("broker {outsider} is not a replica")));
        }
        let mut sorted = isr.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != isr.len() {
            return Err(invalid(format!("the ISR {isr:?} names a broker twice")));
        }
        Ok(Partition {
            isr: isr.to_vec(),
            partition_epoch: partition_epoch + 1,
            ..self.clone()
        })
    }
}

/// Reassignment (Kafka's KIP-455): while a partition moves to a target set of replicas it
/// has the target followed by the leaving originals as its replicas, so the new ones
/// follow the leader and copy its log; once every target replica is in the ISR the
/// partition keeps only the target.
impl Partition {
    /// Whether a reassignment is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replicas before the reassignment in progress (the replicas when there is none).
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|id| !self.adding.contains(id))
            .collect()
    }

    /// The replicas the reassignment in progress moves to (the replicas when there is none).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|id| !self.removing.contains(id))
            .collect()
    }

    /// Begins a reassignment to `target` (preferred leader first), replacing one in
    /// progress. Leadership and the ISR stay as they are; the new replicas join the ISR as
    /// they catch up. A target equal to the original replicas cancels what is in progress.
    pub fn reassign(&self, target: &[i32]) -> Result<Partition> {
        let invalid = |reason: String| CatalogError::Invalid {
            what: "replica assignment",
            reason,
        };
        if target.is_empty() {
            return Err(invalid("a partition needs at least one replica".to_owned()));
        }
        let mut sorted = target.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != target.len() {
            return Err(invalid(format!("{target:?} names a broker twice")));
        }
        let original = self.original_replicas();
        let mut replicas = target.to_vec();
        replicas.extend(original.iter().filter(|id| !target.contains(id)));
        Ok(Partition {
            adding: target
                .iter()
                .copied()
                .filter(|id| !original.contains(id))
                .collect(),
            removing: original
                .iter()
                .copied()
                .filter(|id| !target.contains(id))
                .collect(),
            replicas,
            partition_epoch: self.partition_epoch + 1,
            ..self.clone()
        })
    }

    /// Cancels the reassignment in progress: back to the original replicas, the added ones
    /// leaving the ISR (and the lead, which then goes to the first original replica in
    /// sync, or to none). `None` when there is none in progress.
    pub fn cancel_reassignment(&self) -> Option<Partition> {
        self.is_reassigning()
            .then(|| self.settle(self.original_replicas()))
    }

    /// Completes the reassignment in progress once every target replica is in the ISR: the
    /// leaving replicas drop out of the replicas and the ISR, and if the leader is one of
    /// them the first target replica leads in a new leader epoch. `None` while a target
    /// replica is still catching up, or when no reassignment is in progress.
    pub fn complete_reassignment(&self) -> Option<Partition> {
        let target = self.target_replicas();
        let in_sync = target.iter().all(|id| self.isr.contains(id));
        (self.is_reassigning() && in_sync).then(|| self.settle(target))
    }

    /// The partition with `replicas` as its whole set and no reassignment in progress.
    fn settle(&self, replicas: Vec<i32>) -> Partition {
        let mut isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| replicas.contains(id))
            .collect();
        let leader = if replicas.contains(&self.leader) && isr.contains(&self.leader) {
            self.leader
        } else {
            replicas
                .iter()
                .copied()
                .find(|id| isr.contains(id))
                .unwrap_or(-1)
        };
        if isr.is_empty() {
            // No original replica is in sync (a cancel after they all fell behind): the ISR
            // keeps its first member, as an election does, and nothing leads until it does.
            isr = self.isr.iter().copied().take(1).collect();
        }
        let leader_epoch = if leader == self.leader {
            self.leader_epoch
        } else {
            self.leader_epoch + 1
        };
        Partition {
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch: self.partition_epoch + 1,
            adding: Vec::new(),
            removing: Vec::new(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> Partition {
        Partition {
            topic_id: "t".into(),
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 9,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    #[test]
    fn a_reassignment_adds_the_target_then_drops_the_leavers_once_in_sync() {
        let p = stored();
        let moving = p.reassign(&[4, 2, 5]).unwrap();
        assert_eq!(
            moving.replicas,
            [4, 2, 5, 1, 3],
            "target first, leavers after"
        );
        assert_eq!(
            (moving.adding.clone(), moving.removing.clone()),
            (vec![4, 5], vec![1, 3])
        );
        assert_eq!(
            (moving.leader, moving.leader_epoch, moving.isr.clone()),
            (1, 4, vec![1, 2, 3]),
            "leadership and ISR stay while the new replicas catch up"
        );
        assert_eq!(
            moving.complete_reassignment(),
            None,
            "4 and 5 not in sync yet"
        );
        let caught_up = Partition {
            isr: vec![1, 2, 3, 4],
            ..moving.clone()
        };
        assert_eq!(caught_up.complete_reassignment(), None, "5 still behind");
        let in_sync = Partition {
            isr: vec![1, 2, 3, 4, 5],
            ..moving.clone()
        };
        let done = in_sync.complete_reassignment().unwrap();
        assert_eq!(done.replicas, [4, 2, 5]);
        assert_eq!(done.isr, [2, 4, 5]);
        assert!(!done.is_reassigning());
        assert_eq!(
            (done.leader, done.leader_epoch),
            (4, 5),
            "the leaving leader hands over to the first target replica, in a new epoch"
        );

        // A replacement keeps the original set as its base (in the order the replicas
        // hold them, as Kafka's `replicas -- adding`).
        let again = moving.reassign(&[2, 6]).unwrap();
        assert_eq!(again.original_replicas(), [2, 1, 3]);
        assert_eq!(
            (again.adding.clone(), again.removing.clone()),
            (vec![6], vec![1, 3])
        );
        // Cancelled: back to the originals, the added replica out of the ISR.
        let joined = Partition {
            isr: vec![1, 2, 3, 6],
            ..again
        };
        let cancelled = joined.cancel_reassignment().unwrap();
        assert_eq!(
            (
                cancelled.replicas.clone(),
                cancelled.isr.clone(),
                cancelled.leader
            ),
            (vec![2, 1, 3], vec![1, 2, 3], 1)
        );
        assert_eq!(cancelled.cancel_reassignment(), None, "nothing in progress");
        // A shrink completes as soon as it begins: the target is in sync already.
        let shrunk = p
            .reassign(&[2, 3])
            .unwrap()
            .complete_reassignment()
            .unwrap();
        assert_eq!((shrunk.replicas, shrunk.leader), (vec![2, 3], 2));
        assert!(p.reassign(&[2, 2]).is_err());
        assert!(p.reassign(&[]).is_err());
    }

    #[test]
    fn an_election_bumps_the_leader_epoch_only_for_a_new_leader() {
        let p = stored();
        let same = p
            .elect(&PartitionUpdate {
                expected_partition_epoch: 9,
                leader: 1,
                isr: vec![1, 2],
            })
            .unwrap();
        assert_eq!((same.leader_epoch, same.partition_epoch), (4, 10));
        let moved = p
            .elect(&PartitionUpdate {
                expected_partition_epoch: 9,
                leader: 2,
                isr: vec![2, 3],
            })
            .unwrap();
        assert_eq!(
            (moved.leader, moved.leader_epoch, moved.partition_epoch),
            (2, 5, 10)
        );
        let stale = p.elect(&PartitionUpdate {
            expected_partition_epoch: 8,
            leader: 2,
            isr: vec![2],
        });
        assert!(matches!(stale, Err(CatalogError::Conflict { .. })));
    }

    #[test]
    fn only_the_current_leader_in_its_epochs_changes_the_isr() {
        let p = stored();
        assert_eq!(p.change_isr(1, 4, 9, &[1, 3]).unwrap().isr, vec![1, 3]);
        for (leader, leader_epoch, partition_epoch) in [(2, 4, 9), (1, 3, 9), (1, 4, 8)] {
            assert!(matches!(
                p.change_isr(leader, leader_epoch, partition_epoch, &[leader, 3]),
                Err(CatalogError::Conflict { .. })
            ));
        }
        assert!(matches!(
            p.change_isr(1, 4, 9, &[1, 4]),
            Err(CatalogError::Invalid { .. })
        ));
        assert!(matches!(
            p.change_isr(1, 4, 9, &[1, 1]),
            Err(CatalogError::Invalid { .. })
        ));
        assert!(matches!(
            p.change_isr(1, 4, 9, &[2, 3]),
            Err(CatalogError::Invalid { .. })
        ));
    }
}
