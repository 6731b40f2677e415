//! Where a topic's replicas go, as Kafka's controller places them: partition `p`'s first
//! replica (its preferred leader) on broker `(p + start) % n`, the others on the brokers
//! after it shifted by a per-topic offset that grows every `n` partitions, so leaders and
//! followers both spread evenly and no broker holds two replicas of one partition. When every
//! broker names a rack (`broker.rack`), the brokers are ordered alternating racks and a
//! partition's replicas go to as many different racks as there are.

use std::collections::{BTreeMap, BTreeSet};

/// A broker that may host replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub node_id: i32,
    pub rack: Option<String>,
}

/// Why replicas could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("replication factor {0} must be positive")]
    NonPositive(i32),
    #[error("replication factor {replication} is larger than the {brokers} broker(s) available")]
    TooFewBrokers { replication: i32, brokers: usize },
}

/// The random choices of one placement: where the first leader goes and how far the second
/// replica is shifted from it. Kafka draws both at random per topic, so topics with few
/// partitions do not all lead on the same broker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offsets {
    pub start: usize,
    pub shift: usize,
}

impl Offsets {
    pub fn random(brokers: usize) -> Self {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let n = brokers.max(1);
        Self {
            start: rng.gen_range(0..n),
            shift: rng.gen_range(0..n),
        }
    }
}

/// Replicas for partitions `first..first + count`, each list preferred leader first.
pub fn place(
    brokers: &[Candidate],
    first: i32,
    count: i32,
    replication: i32,
    offsets: Offsets,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if replication <= 0 {
        return Err(PlacementError::NonPositive(replication));
    }
    let rf = replication as usize;
    if brokers.len() < rf {
        return Err(PlacementError::TooFewBrokers {
            replication,
            brokers: brokers.len(),
        });
    }
    let racked = brokers.iter().all(|b| b.rack.is_some());
    let arranged = arranged(brokers);
    let n = arranged.len();
    if n < rf {
        return Err(PlacementError::TooFewBrokers {
            replication,
            brokers: n,
        });
    }
    let rack_of: BTreeMap<i32, &str> = brokers
        .iter()
        .map(|b| (b.node_id, b.rack.as_deref().unwrap_or("")))
        .collect();
    let racks = rack_of.values().collect::<BTreeSet<_>>().len();
    let mut placement = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for partition in first..first.saturating_add(count.max(0)) {
        let p = partition as usize;
        // The shift grows every n partitions, so a topic's followers spread as its leaders do.
        let shift = offsets.shift + p / n;
        let leader_index = (p + offsets.start) % n;
        let mut replicas = Vec::with_capacity(rf);
        replicas.push(arranged[leader_index]);
        if racked {
            let mut used_racks = BTreeSet::from([rack_of[&arranged[leader_index]]]);
            let mut k = 0;
            while replicas.len() < rf {
                let broker = arranged[follower_index(leader_index, shift * racks, k, n)];
                let rack = rack_of[&broker];
                let rack_ok = !used_racks.contains(rack) || used_racks.len() == racks;
                if rack_ok && !replicas.contains(&broker) {
                    replicas.push(broker);
                    used_racks.insert(rack);
                }
                k += 1;
            }
        } else {
            for j in 0..rf - 1 {
                replicas.push(arranged[follower_index(leader_index, shift, j, n)]);
            }
        }
        placement.push(replicas);
    }
    Ok(placement)
}

/// The brokers in the order placement walks them: alternating racks when every broker names
/// one, else by node id. [`Offsets::start`] indexes this list.
pub fn arranged(brokers: &[Candidate]) -> Vec<i32> {
    if brokers.iter().all(|b| b.rack.is_some()) {
        rack_alternated(brokers)
    } else {
        let mut ids: Vec<i32> = brokers.iter().map(|b| b.node_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Kafka's replica index: the `j`th follower sits `1 + (shift + j) % (n - 1)` brokers after
/// the leader, never on the leader itself.
fn follower_index(leader: usize, shift: usize, j: usize, n: usize) -> usize {
    let step = 1 + (shift + j) % (n - 1).max(1);
    (leader + step) % n
}

/// Brokers ordered so consecutive ones are on different racks: the first of each rack
/// (racks in name order), then the second of each, and so on.
fn rack_alternated(brokers: &[Candidate]) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for b in brokers {
        by_rack
            .entry(b.rack.as_deref().unwrap_or(""))
            .or_default()
            .push(b.node_id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
        ids.dedup();
    }
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    let mut arranged = Vec::with_capacity(brokers.len());
    for i in 0..longest {
        for ids in by_rack.values() {
            if let Some(id) = ids.get(i) {
                arranged.push(*id);
            }
        }
    }
    arranged
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn brokers(racks: &[Option<&str>]) -> Vec<Candidate> {
        racks
            .iter()
            .enumerate()
            .map(|(i, rack)| Candidate {
                node_id: i as i32,
                rack: rack.map(str::to_owned),
            })
            .collect()
    }

    fn counts(placement: &[Vec<i32>], n: usize, leaders_only: bool) -> Vec<usize> {
        let mut counts = vec![0; n];
        for replicas in placement {
            let take = if leaders_only { 1 } else { replicas.len() };
            for id in &replicas[..take] {
                counts[*id as usize] += 1;
            }
        }
        counts
    }

    #[test]
    fn replicas_are_distinct_and_leaders_and_replicas_spread_evenly() {
        let cluster = brokers(&[None, None, None]);
        for start in 0..3 {
            for shift in 0..3 {
                let placement = place(&cluster, 0, 6, 3, Offsets { start, shift }).unwrap();
                for replicas in &placement {
                    let distinct: BTreeSet<_> = replicas.iter().collect();
                    assert_eq!(distinct.len(), 3, "{placement:?}");
                }
                assert_eq!(counts(&placement, 3, true), vec![2, 2, 2], "{placement:?}");
                assert_eq!(counts(&placement, 3, false), vec![6, 6, 6]);
            }
        }
        let five = brokers(&[None; 5]);
        let placement = place(&five, 0, 10, 2, Offsets::default()).unwrap();
        assert_eq!(counts(&placement, 5, true), vec![2; 5]);
        assert_eq!(counts(&placement, 5, false), vec![4; 5]);
    }

    #[test]
    fn replicas_span_racks_when_every_broker_names_one() {
        // Racks of unequal size: a, a, a, b, b, c.
        let cluster = brokers(&[
            Some("a"),
            Some("a"),
            Some("a"),
            Some("b"),
            Some("b"),
            Some("c"),
        ]);
        let rack = |id: i32| cluster[id as usize].rack.clone().unwrap();
        for start in 0..6 {
            let placement = place(&cluster, 0, 12, 3, Offsets { start, shift: 1 }).unwrap();
            for replicas in &placement {
                let racks: BTreeSet<_> = replicas.iter().map(|id| rack(*id)).collect();
                assert_eq!(racks.len(), 3, "{replicas:?} in {placement:?}");
            }
            assert_eq!(counts(&placement, 6, true), vec![2; 6]);
        }
        // Two racks, three replicas: both racks hold one, no broker two.
        let two = brokers(&[Some("a"), Some("a"), Some("b"), Some("b")]);
        for replicas in place(&two, 0, 8, 3, Offsets::default()).unwrap() {
            let racks: BTreeSet<_> = replicas
                .iter()
                .map(|id| two[*id as usize].rack.clone())
                .collect();
            assert_eq!(racks.len(), 2);
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
        }
    }

    #[test]
    fn a_factor_the_brokers_cannot_meet_is_refused() {
        let cluster = brokers(&[None, None]);
        assert_eq!(
            place(&cluster, 0, 1, 3, Offsets::default()),
            Err(PlacementError::TooFewBrokers {
                replication: 3,
                brokers: 2
            })
        );
        assert_eq!(
            place(&cluster, 0, 1, 0, Offsets::default()),
            Err(PlacementError::NonPositive(0))
        );
        assert_eq!(
            place(&brokers(&[None]), 0, 3, 1, Offsets::default()).unwrap(),
            vec![vec![0]; 3]
        );
    }

    #[test]
    fn grown_partitions_continue_the_pattern() {
        let cluster = brokers(&[None, None, None]);
        let offsets = Offsets { start: 1, shift: 2 };
        let whole = place(&cluster, 0, 9, 2, offsets).unwrap();
        let grown = place(&cluster, 4, 5, 2, offsets).unwrap();
        assert_eq!(&whole[4..], &grown[..]);
    }
}
