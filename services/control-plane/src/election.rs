//! Leader election, run by the active controller: when a broker's session lapses (no
//! heartbeat within `broker_session`), it leaves the ISR of every partition, and each
//! partition it led gets a new leader from the live members of its ISR, in replica order,
//! with the leader epoch bumped. Where no ISR member is live, the partition stays without a
//! leader (-1) unless its topic sets `unclean.leader.election.enable`, when the first live
//! replica leads with an ISR of itself, and what only the old ISR had is lost. A returning
//! broker rejoins the ISR through its leader (AlterPartition). With
//! `auto.leader.rebalance.enable` leadership moves back to the preferred (first) replica once
//! it is live and in the ISR.
//!
//! [`decide`] is the whole decision, a pure function of one partition and the live brokers,
//! so it is tested (and simulated) without a database; [`spawn`] applies it to the catalog
//! as compare-and-set updates on the partition epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_catalog::{Catalog, CatalogError, Partition, PartitionUpdate};

use crate::controller::{now_ms, ControllerConfig, Leadership};

/// What a topic's configs say about elections.
#[derive(Debug, Clone, Copy, Default)]
pub struct ElectionPolicy {
    /// `unclean.leader.election.enable`: an out-of-sync replica may lead.
    pub unclean: bool,
    /// `auto.leader.rebalance.enable` (the controller's): leadership returns to the
    /// preferred replica.
    pub rebalance: bool,
}

impl ElectionPolicy {
    /// The policy from a topic's config overrides (Kafka's default: no unclean election)
    /// and the controller's rebalance setting.
    pub fn of(configs: &BTreeMap<String, String>, rebalance: bool) -> Self {
        Self {
            unclean: configs
                .get("unclean.leader.election.enable")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            rebalance,
        }
    }
}

/// The change a partition needs given the live brokers, or `None`.
pub fn decide(
    partition: &Partition,
    live: &BTreeSet<i32>,
    policy: ElectionPolicy,
) -> Option<PartitionUpdate> {
    let update = |leader: i32, isr: Vec<i32>| PartitionUpdate {
        expected_partition_epoch: partition.partition_epoch,
        leader,
        isr,
    };
    // Dead brokers leave the ISR, but it is never emptied: its last member stays, as the one
    // replica known to hold every committed record.
    let mut isr: Vec<i32> = partition
        .isr
        .iter()
        .copied()
        .filter(|id| live.contains(id))
        .collect();
    let leader_live = partition.leader >= 0 && live.contains(&partition.leader);
    if leader_live && isr.contains(&partition.leader) {
        if policy.rebalance {
            if let Some(&preferred) = partition.replicas.first() {
                if preferred != partition.leader && isr.contains(&preferred) {
                    return Some(update(preferred, isr));
                }
            }
        }
        return (isr != partition.isr).then(|| update(partition.leader, isr));
    }
    // The leader is gone: the first live ISR member in replica order leads.
    let in_sync = partition
        .replicas
        .iter()
        .copied()
        .find(|id| isr.contains(id));
    if let Some(leader) = in_sync {
        return Some(update(leader, isr));
    }
    if policy.unclean {
        if let Some(leader) = partition
            .replicas
            .iter()
            .copied()
            .find(|id| live.contains(id))
        {
            return Some(update(leader, vec![leader]));
        }
    }
    if isr.is_empty() {
        isr = partition.isr.clone();
        if partition.leader >= 0 && !isr.contains(&partition.leader) {
            isr.push(partition.leader);
        }
        isr.truncate(1);
    }
    (partition.leader != -1 || isr != partition.isr).then(|| update(-1, isr))
}

/// An election an operator asked for (Kafka's ElectLeaders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// Leadership to the preferred (first) replica.
    Preferred,
    /// A leader for a partition without a live one, from the live ISR if it can, else any
    /// live replica (what only the old ISR had is lost).
    Unclean,
}

/// Why an asked-for election changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoElection {
    /// The partition already has the leader asked for.
    NotNeeded,
    /// The preferred replica is not live or not in the ISR.
    PreferredLeaderNotAvailable,
    /// No live replica may lead.
    EligibleLeadersNotAvailable,
    /// No such topic or partition of the tenant's.
    UnknownTopicOrPartition,
}

/// The change an asked-for election makes to a partition given the live brokers.
pub fn on_request(
    partition: &Partition,
    live: &BTreeSet<i32>,
    requested: Requested,
) -> Result<PartitionUpdate, NoElection> {
    let update = |leader: i32, isr: Vec<i32>| PartitionUpdate {
        expected_partition_epoch: partition.partition_epoch,
        leader,
        isr,
    };
    let leader_live = partition.leader >= 0 && live.contains(&partition.leader);
    match requested {
        Requested::Preferred => {
            let preferred = *partition
                .replicas
                .first()
                .ok_or(NoElection::PreferredLeaderNotAvailable)?;
            if preferred == partition.leader && leader_live {
                return Err(NoElection::NotNeeded);
            }
            if !live.contains(&preferred) || !partition.isr.contains(&preferred) {
                return Err(NoElection::PreferredLeaderNotAvailable);
            }
            let isr = partition
                .isr
                .iter()
                .copied()
                .filter(|id| live.contains(id))
                .collect();
            Ok(update(preferred, isr))
        }
        Requested::Unclean => {
            if leader_live {
                return Err(NoElection::NotNeeded);
            }
            let policy = ElectionPolicy {
                unclean: true,
                rebalance: false,
            };
            match decide(partition, live, policy) {
                Some(change) if change.leader >= 0 => Ok(change),
                _ => Err(NoElection::EligibleLeadersNotAvailable),
            }
        }
    }
}

/// Runs elections every `interval` while this replica is the active controller. A replica
/// that just became active waits one broker session first, so brokers that could not
/// heartbeat while no controller was active are not taken for dead.
pub fn spawn(
    catalog: Catalog,
    config: ControllerConfig,
    leadership: Arc<Leadership>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut active_since: Option<(i64, Instant)> = None;
        loop {
            tokio::time::sleep(interval).await;
            let Some(epoch) = leadership.active_epoch() else {
                active_since = None;
                continue;
            };
            let since = match active_since {
                Some((e, since)) if e == epoch => since,
                _ => {
                    active_since = Some((epoch, Instant::now()));
                    continue;
                }
            };
            if since.elapsed() < config.broker_session {
                continue;
            }
            if let Err(e) = elect_once(&catalog, &config, &leadership).await.map(drop) {
                tracing::warn!(error = %e, "election pass failed");
            }
        }
    })
}

/// What one election pass left: each replicated partition's leader after it.
#[derive(Debug, Default)]
pub struct Elected {
    leaders: Vec<i32>,
}

impl Elected {
    /// How many partitions with more than one replica `node` leads.
    pub fn led_by(&self, node: i32) -> i32 {
        i32::try_from(self.leaders.iter().filter(|l| **l == node).count()).unwrap_or(i32::MAX)
    }
}

/// One election pass over every partition. Brokers whose session lapsed count as gone, and
/// so do brokers in a controlled shutdown, except for partitions they are the only replica
/// of (nothing could lead those instead: they stay until the broker stops).
pub async fn elect_once(
    catalog: &Catalog,
    config: &ControllerConfig,
    leadership: &Leadership,
) -> Result<Elected, CatalogError> {
    let session = i64::try_from(config.broker_session.as_millis()).unwrap_or(i64::MAX);
    let stopping = leadership.stopping_brokers();
    let alive: BTreeSet<i32> = catalog
        .live_brokers(now_ms() - session)
        .await?
        .into_iter()
        .map(|b| b.node_id)
        .collect();
    let staying: BTreeSet<i32> = alive.difference(&stopping).copied().collect();
    let mut elected = Elected::default();
    let policies: BTreeMap<String, (String, ElectionPolicy)> = catalog
        .all_topics()
        .await?
        .into_iter()
        .map(|(_, topic)| {
            let policy = ElectionPolicy::of(&topic.configs, config.auto_leader_rebalance);
            (topic.id, (topic.name, policy))
        })
        .collect();
    for partition in catalog.all_partitions().await? {
        let Some((name, policy)) = policies.get(&partition.topic_id) else {
            continue;
        };
        let replicated = partition.replicas.len() > 1;
        let live = if replicated { &staying } else { &alive };
        let mut note = |leader: i32| {
            if replicated {
                elected.leaders.push(leader);
            }
        };
        // A reassignment whose target is in sync completes before anything else is decided.
        if partition.complete_reassignment().is_some() {
            if leadership.active_epoch().is_none() {
                note(partition.leader);
                return Ok(elected);
            }
            let completed = catalog
                .change_partition(&partition.topic_id, partition.partition, |current| {
                    current
                        .complete_reassignment()
                        .ok_or(CatalogError::Conflict {
                            what: "partition",
                            expected: i64::from(partition.partition_epoch),
                        })
                })
                .await;
            match completed {
                Ok(stored) => {
                    tracing::info!(
                        topic = %name, partition = stored.partition, replicas = ?stored.replicas,
                        leader = stored.leader, isr = ?stored.isr, "reassignment completed"
                    );
                    note(stored.leader);
                }
                Err(CatalogError::Conflict { .. }) => note(partition.leader),
                Err(e) => return Err(e),
            }
            continue;
        }
        let Some(update) = decide(&partition, live, *policy) else {
            note(partition.leader);
            continue;
        };
        // The lease may have lapsed during the pass: stop acting at once.
        if leadership.active_epoch().is_none() {
            note(partition.leader);
            return Ok(elected);
        }
        match catalog
            .update_partition(&partition.topic_id, partition.partition, &update)
            .await
        {
            Ok(stored) => {
                tracing::info!(
                    topic = %name, partition = stored.partition, leader = stored.leader,
                    leader_epoch = stored.leader_epoch, isr = ?stored.isr, "partition leadership changed"
                );
                note(stored.leader);
            }
            // Changed meanwhile (an ISR change from its leader): decided again next pass.
            Err(CatalogError::Conflict { .. }) => note(partition.leader),
            Err(e) => return Err(e),
        }
    }
    Ok(elected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> Partition {
        Partition {
            topic_id: "t".into(),
            partition: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 4,
            partition_epoch: 9,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    fn live(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    const CLEAN: ElectionPolicy = ElectionPolicy {
        unclean: false,
        rebalance: false,
    };

    fn decided(update: Option<PartitionUpdate>) -> Option<(i32, Vec<i32>)> {
        update.map(|u| {
            assert_eq!(u.expected_partition_epoch, 9);
            (u.leader, u.isr)
        })
    }

    #[test]
    fn asked_for_elections_move_leadership_only_where_kafka_would() {
        use super::NoElection::*;
        let all = live(&[1, 2, 3]);
        // Preferred: to the first replica when it is live and in sync.
        let away = partition(&[1, 2, 3], &[1, 2, 3], 2);
        let change = on_request(&away, &all, Requested::Preferred).unwrap();
        assert_eq!(decided(Some(change)), Some((1, vec![1, 2, 3])));
        let home = partition(&[1, 2, 3], &[1, 2, 3], 1);
        assert_eq!(
            on_request(&home, &all, Requested::Preferred),
            Err(NotNeeded)
        );
        let behind = partition(&[1, 2, 3], &[2, 3], 2);
        assert_eq!(
            on_request(&behind, &all, Requested::Preferred),
            Err(PreferredLeaderNotAvailable)
        );
        assert_eq!(
            on_request(&away, &live(&[2, 3]), Requested::Preferred),
            Err(PreferredLeaderNotAvailable)
        );
        // Unclean: only where no live leader is, in-sync replicas first.
        assert_eq!(on_request(&away, &all, Requested::Unclean), Err(NotNeeded));
        let leaderless = partition(&[1, 2, 3], &[1], -1);
        let change = on_request(&leaderless, &live(&[2, 3]), Requested::Unclean).unwrap();
        assert_eq!(decided(Some(change)), Some((2, vec![2])));
        let in_sync_alive = partition(&[1, 2, 3], &[1, 3], 1);
        let change = on_request(&in_sync_alive, &live(&[2, 3]), Requested::Unclean).unwrap();
        assert_eq!(decided(Some(change)), Some((3, vec![3])));
        assert_eq!(
            on_request(&leaderless, &live(&[]), Requested::Unclean),
            Err(EligibleLeadersNotAvailable)
        );
    }

    #[test]
    fn nothing_changes_while_the_leader_and_its_isr_live() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 1);
        assert_eq!(decide(&p, &live(&[1, 2, 3]), CLEAN), None);
        let p = partition(&[1, 2, 3], &[1, 2], 1);
        assert_eq!(
            decide(&p, &live(&[1, 2, 3]), CLEAN),
            None,
            "3 rejoins through its leader"
        );
    }

    #[test]
    fn a_dead_follower_leaves_the_isr() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 1);
        assert_eq!(
            decided(decide(&p, &live(&[1, 3]), CLEAN)),
            Some((1, vec![1, 3]))
        );
    }

    #[test]
    fn a_dead_leader_is_replaced_by_the_first_live_isr_member() {
        let p = partition(&[1, 2, 3], &[3, 1, 2], 1);
        assert_eq!(
            decided(decide(&p, &live(&[2, 3]), CLEAN)),
            Some((2, vec![3, 2]))
        );
        // Out of sync replicas never lead by default.
        let p = partition(&[1, 2, 3], &[1, 3], 1);
        assert_eq!(
            decided(decide(&p, &live(&[2, 3]), CLEAN)),
            Some((3, vec![3]))
        );
    }

    #[test]
    fn without_a_live_isr_member_the_partition_waits_unless_unclean_election_is_on() {
        let p = partition(&[1, 2, 3], &[1], 1);
        assert_eq!(
            decided(decide(&p, &live(&[2, 3]), CLEAN)),
            Some((-1, vec![1]))
        );
        let offline = partition(&[1, 2, 3], &[1], -1);
        assert_eq!(decide(&offline, &live(&[2, 3]), CLEAN), None);
        // The last ISR member returns: it leads again.
        assert_eq!(
            decided(decide(&offline, &live(&[1, 2]), CLEAN)),
            Some((1, vec![1]))
        );
        let unclean = ElectionPolicy {
            unclean: true,
            rebalance: false,
        };
        assert_eq!(
            decided(decide(&offline, &live(&[3, 2]), unclean)),
            Some((2, vec![2]))
        );
        // Everyone dead: the ISR keeps one member.
        let p = partition(&[1, 2, 3], &[2, 1], 2);
        assert_eq!(decided(decide(&p, &live(&[]), CLEAN)), Some((-1, vec![2])));
    }

    #[test]
    fn leadership_returns_to_the_preferred_replica_when_rebalancing() {
        let rebalance = ElectionPolicy {
            unclean: false,
            rebalance: true,
        };
        let p = partition(&[1, 2, 3], &[2, 3, 1], 2);
        assert_eq!(
            decided(decide(&p, &live(&[1, 2, 3]), rebalance)),
            Some((1, vec![2, 3, 1]))
        );
        // Not while the preferred replica is out of sync.
        let p = partition(&[1, 2, 3], &[2, 3], 2);
        assert_eq!(decide(&p, &live(&[1, 2, 3]), rebalance), None);
    }

    #[test]
    fn policies_read_kafkas_configs_and_defaults() {
        let policy = ElectionPolicy::of(&BTreeMap::new(), true);
        assert!(!policy.unclean && policy.rebalance);
        let configs = BTreeMap::from([(
            "unclean.leader.election.enable".to_owned(),
            "TRUE".to_owned(),
        )]);
        let policy = ElectionPolicy::of(&configs, false);
        assert!(policy.unclean && !policy.rebalance);
    }
}
