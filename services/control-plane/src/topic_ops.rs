//! Topic changes shared by the gRPC controller and the admin API: placement of replicas on
//! live brokers and the catalog writes, accepted only on the active controller. Each caller
//! maps [`TopicOpError`] once, to a gRPC status or a problem.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use skein_catalog::{Catalog, CatalogError, NewTopic, Partition, Topic};

use crate::controller::{now_ms, ControllerConfig, Leadership};
use crate::election::{self, NoElection, Requested};
use crate::placement::{self, Candidate, PlacementError};

/// Why a topic change was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopicOpError {
    #[error("this replica is not the active controller; try another")]
    NotActive,
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// An ISR change would add a broker whose session has lapsed (Kafka's KIP-841).
    #[error("broker {0} is not live and cannot join the ISR")]
    IneligibleReplica(i32),
    #[error("replication factor {replication} is larger than the {live} live broker(s) serving the tenant")]
    NotEnoughBrokers { replication: i32, live: usize },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// A topic with its partitions.
pub type TopicWithPartitions = (Topic, Vec<Partition>);

/// Why a partition's reassignment request changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoReassignment {
    UnknownTopicOrPartition,
    /// A cancel, with no reassignment in progress.
    NotInProgress,
    InvalidAssignment(String),
}

/// Where a new topic's replicas go.
enum Replicas {
    /// Placed by the controller, as Kafka does.
    Placed { partitions: i32, replication: i32 },
    /// Chosen by an operator, by partition index.
    Assigned(Vec<Vec<i32>>),
}

/// Creates, grows, deletes and describes tenants' topics.
#[derive(Debug, Clone)]
pub struct TopicOps {
    catalog: Catalog,
    config: ControllerConfig,
    leadership: Arc<Leadership>,
}

/// The most partitions one topic may have: placement builds every partition in one
/// transaction, and a request for billions must not try.
pub const MAX_PARTITIONS: i32 = 10_000;

/// Replicas of a tenant's `__consumer_offsets`, at most (Kafka's
/// `offsets.topic.replication.factor`); fewer when the tenant has fewer brokers.
pub const OFFSETS_REPLICATION: usize = 3;

impl TopicOps {
    pub fn new(catalog: Catalog, config: ControllerConfig, leadership: Arc<Leadership>) -> Self {
        Self {
            catalog,
            config,
            leadership,
        }
    }

    /// Checks overrides under Kafka's names and rules, as a broker applying them would.
    fn check_configs(configs: &BTreeMap<String, String>) -> Result<(), TopicOpError> {
        let base = skein_log::topic_config::TopicSettings::default();
        skein_log::topic_config::settings(&base, configs)
            .map(|_| ())
            .map_err(|e| TopicOpError::InvalidConfig(e.to_string()))
    }

    fn require_active(&self) -> Result<i64, TopicOpError> {
        self.leadership
            .active_epoch()
            .ok_or(TopicOpError::NotActive)
    }

    /// Replicas for partitions `first..first + count` over the live brokers that serve
    /// `tenant`, placed as Kafka does ([`placement::place`]); `leader_of_first` is the
    /// preferred leader of the topic's partition 0 when it grows, so new partitions continue
    /// its pattern.
    async fn place(
        &self,
        tenant: &str,
        first: i32,
        count: i32,
        replication: i32,
        leader_of_first: Option<i32>,
    ) -> Result<Vec<Vec<i32>>, TopicOpError> {
        let live = self.live_candidates(tenant).await?;
        let mut offsets = placement::Offsets::random(live.len());
        if let Some(start) = leader_of_first.and_then(|leader| {
            placement::arranged(&live)
                .iter()
                .position(|id| *id == leader)
        }) {
            // Partition p then leads where the topic's pattern puts it.
            offsets.start = start;
        }
        placement::place(&live, first, count, replication, offsets).map_err(|e| match e {
            PlacementError::NonPositive(_) => TopicOpError::InvalidReplicationFactor(e.to_string()),
            PlacementError::TooFewBrokers {
                replication,
                brokers,
            } => TopicOpError::NotEnoughBrokers {
                replication,
                live: brokers,
            },
        })
    }

    /// The ids of the live brokers that may host `tenant`'s partitions.
    async fn live_ids(&self, tenant: &str) -> Result<BTreeSet<i32>, TopicOpError> {
        Ok(self
            .live_candidates(tenant)
            .await?
            .into_iter()
            .map(|c| c.node_id)
            .collect())
    }

    /// The live brokers that may host `tenant`'s partitions.
    async fn live_candidates(&self, tenant: &str) -> Result<Vec<Candidate>, TopicOpError> {
        let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
        Ok(self
            .catalog
            .live_brokers(now_ms() - session)
            .await?
            .into_iter()
            .filter(|b| b.tenant.as_deref().is_none_or(|t| t == tenant))
            .map(|b| Candidate {
                node_id: b.node_id,
                rack: b.rack,
            })
            .collect())
    }

    /// A tenant's topic with its partitions.
    pub async fn describe(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        let tenant = self.catalog.tenant_by_name(tenant).await?;
        let topic = self.catalog.topic(&tenant.id, name).await?;
        let partitions = self.catalog.partitions(&topic.id).await?;
        Ok((topic, partitions))
    }

    /// Creates a topic of `partitions` partitions, each on `replication` live brokers.
    pub async fn create(
        &self,
        tenant: &str,
        name: &str,
        partitions: i32,
        replication: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.create_with(
            tenant,
            name,
            Replicas::Placed {
                partitions,
                replication,
            },
            configs,
        )
        .await
    }

    /// Creates a topic whose partitions have the replicas an operator chose: `assigned[p]`
    /// for partition `p`, preferred leader first (CreateTopics with assignments).
    pub async fn create_assigned(
        &self,
        tenant: &str,
        name: &str,
        assigned: Vec<Vec<i32>>,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.create_with(tenant, name, Replicas::Assigned(assigned), configs)
            .await
    }

    async fn create_with(
        &self,
        tenant: &str,
        name: &str,
        replicas: Replicas,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.require_active()?;
        skein_catalog::validate_tenant_topic_name(tenant, name)?;
        let partitions = match &replicas {
            Replicas::Placed { partitions, .. } => *partitions,
            Replicas::Assigned(assigned) => i32::try_from(assigned.len()).unwrap_or(i32::MAX),
        };
        if partitions <= 0 || partitions > MAX_PARTITIONS {
            return Err(TopicOpError::InvalidPartitions(format!(
                "partition count {partitions} must be between 1 and {MAX_PARTITIONS}"
            )));
        }
        Self::check_configs(&configs)?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let (placement, replication) = match replicas {
            Replicas::Placed { replication, .. } => (
                self.place(tenant, 0, partitions, replication, None).await?,
                replication,
            ),
            Replicas::Assigned(assigned) => {
                let live = self.live_ids(tenant).await?;
                let replication = Self::check_assignment(&live, &assigned, None)?;
                (assigned, replication)
            }
        };
        let topic = NewTopic {
            name: name.to_owned(),
            placement,
            configs,
        };
        self.catalog.create_topic(&owner.id, &topic).await?;
        tracing::info!(%tenant, topic = %name, partitions, replication, "created topic");
        self.describe(tenant, name).await
    }

    /// Creates one of the tenant's internal topics (`__consumer_offsets` or
    /// `__transaction_state`: one partition, compacted) on up to [`OFFSETS_REPLICATION`] of
    /// its live brokers, unless it exists: answers it as stored.
    pub async fn ensure_internal(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        match self.describe(tenant, name).await {
            Err(TopicOpError::Catalog(CatalogError::NotFound { .. })) => {}
            found => return found,
        }
        self.require_active()?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let live = self.live_candidates(tenant).await?.len();
        let replication = i32::try_from(live.min(OFFSETS_REPLICATION))
            .unwrap_or(1)
            .max(1);
        let placement = self.place(tenant, 0, 1, replication, None).await?;
        let topic = NewTopic {
            name: name.to_owned(),
            placement,
            configs: BTreeMap::from([
                ("cleanup.policy".to_owned(), "compact".to_owned()),
                ("segment.bytes".to_owned(), (100 * 1024 * 1024).to_string()),
            ]),
        };
        match self.catalog.create_internal_topic(&owner.id, &topic).await {
            // Made meanwhile by another broker's request: the same topic.
            Ok(_) | Err(CatalogError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        tracing::info!(%tenant, topic = name, replication, "created one of the tenant's internal topics");
        self.describe(tenant, name).await
    }

    /// Checks an operator's replica assignments as Kafka does: every partition has replicas,
    /// all as many (`replication` when the topic has one already), none named twice, each
    /// one of `live` (the live brokers that serve the tenant, [`Self::live_ids`]). Answers the
    /// replication factor.
    fn check_assignment(
        live: &BTreeSet<i32>,
        assigned: &[Vec<i32>],
        replication: Option<i32>,
    ) -> Result<i32, TopicOpError> {
        let invalid = |reason: String| Err(TopicOpError::InvalidReplicaAssignment(reason));
        let Some(first) = assigned.first() else {
            return invalid("the assignment names no partition".to_owned());
        };
        let expected = replication.unwrap_or(i32::try_from(first.len()).unwrap_or(i32::MAX));
        for (index, replicas) in assigned.iter().enumerate() {
            if replicas.is_empty() {
                return invalid(format!("partition {index} is assigned no replica"));
            }
            if i32::try_from(replicas.len()).ok() != Some(expected) {
                return invalid(format!(
                    "partition {index} is assigned {} replicas; the topic's replication factor is {expected}",
                    replicas.len()
                ));
            }
            let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
            if distinct.len() != replicas.len() {
                return invalid(format!(
                    "partition {index} names a broker twice: {replicas:?}"
                ));
            }
            if let Some(unknown) = replicas.iter().find(|id| !live.contains(id)) {
                return invalid(format!(
                    "partition {index} names broker {unknown}, which is not a live broker of the tenant"
                ));
            }
        }
        Ok(expected)
    }

    /// Grows a topic to `count` partitions.
    pub async fn grow(
        &self,
        tenant: &str,
        name: &str,
        count: i32,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.grow_with(tenant, name, count, None).await
    }

    /// Grows a topic to `count` partitions whose replicas an operator chose: `assigned[i]`
    /// for each new partition in order (CreatePartitions with assignments).
    pub async fn grow_assigned(
        &self,
        tenant: &str,
        name: &str,
        count: i32,
        assigned: Vec<Vec<i32>>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.grow_with(tenant, name, count, Some(assigned)).await
    }

    async fn grow_with(
        &self,
        tenant: &str,
        name: &str,
        count: i32,
        assigned: Option<Vec<Vec<i32>>>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.require_active()?;
        skein_catalog::refuse_internal_topic(name)?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let topic = self.catalog.topic(&owner.id, name).await?;
        if count > MAX_PARTITIONS {
            return Err(TopicOpError::InvalidPartitions(format!(
                "a topic has at most {MAX_PARTITIONS} partitions, not {count}"
            )));
        }
        if count <= topic.partitions {
            return Err(TopicOpError::InvalidPartitions(format!(
                "topic {name:?} has {} partitions; the new count must be larger, not {count}",
                topic.partitions
            )));
        }
        let placement = match assigned {
            Some(assigned) => {
                let adding = count - topic.partitions;
                if i64::try_from(assigned.len()).ok() != Some(i64::from(adding)) {
                    return Err(TopicOpError::InvalidReplicaAssignment(format!(
                        "growing {name:?} by {adding} partition(s) needs as many assignments, not {}",
                        assigned.len()
                    )));
                }
                let live = self.live_ids(tenant).await?;
                Self::check_assignment(&live, &assigned, Some(topic.replication_factor))?;
                assigned
            }
            None => {
                let first_leader = self
                    .catalog
                    .partitions(&topic.id)
                    .await?
                    .first()
                    .and_then(|p| p.replicas.first().copied());
                self.place(
                    tenant,
                    topic.partitions,
                    count - topic.partitions,
                    topic.replication_factor,
                    first_leader,
                )
                .await?
            }
        };
        self.catalog
            .add_partitions(&topic.id, topic.partitions, &placement)
            .await?;
        tracing::info!(%tenant, topic = %name, count, "grew topic");
        self.describe(tenant, name).await
    }

    /// Replaces a topic's config overrides (checked by the broker that forwards them).
    pub async fn set_configs(
        &self,
        tenant: &str,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.require_active()?;
        skein_catalog::refuse_internal_topic(name)?;
        Self::check_configs(&configs)?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let topic = self.catalog.topic(&owner.id, name).await?;
        self.catalog.set_topic_configs(&topic.id, &configs).await?;
        tracing::info!(%tenant, topic = %name, "set topic configs");
        self.describe(tenant, name).await
    }

    /// A leader's ISR change for one partition (AlterPartition), fenced by its epochs.
    #[allow(clippy::too_many_arguments)]
    pub async fn alter_isr(
        &self,
        tenant: &str,
        name: &str,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> Result<Partition, TopicOpError> {
        self.require_active()?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let topic = self.catalog.topic(&owner.id, name).await?;
        let current = self
            .catalog
            .partitions(&topic.id)
            .await?
            .into_iter()
            .find(|p| p.partition == partition);
        let joining: Vec<i32> = isr
            .iter()
            .copied()
            .filter(|id| current.as_ref().is_some_and(|p| !p.isr.contains(id)))
            .collect();
        if !joining.is_empty() {
            let live = self.eligible_brokers().await?;
            if let Some(dead) = joining.iter().find(|id| !live.contains(id)) {
                return Err(TopicOpError::IneligibleReplica(*dead));
            }
        }
        let altered = self
            .catalog
            .alter_isr(
                &topic.id,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                isr,
            )
            .await?;
        tracing::info!(%tenant, topic = %name, partition, leader, isr = ?isr, "ISR changed");
        Ok(altered)
    }

    /// The brokers whose session is live and that are not shutting down: those that may
    /// join an ISR or lead.
    async fn eligible_brokers(&self) -> Result<BTreeSet<i32>, TopicOpError> {
        let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
        let stopping = self.leadership.stopping_brokers();
        Ok(self
            .catalog
            .live_brokers(now_ms() - session)
            .await?
            .into_iter()
            .map(|b| b.node_id)
            .filter(|id| !stopping.contains(id))
            .collect())
    }

    /// Elects leaders on request (ElectLeaders) for `asked` (topic, partitions) of `tenant`,
    /// every partition of its topics when `None`; answers each partition's outcome (with
    /// `None` asked, only partitions where it was needed).
    pub async fn elect_leaders(
        &self,
        tenant: &str,
        requested: Requested,
        asked: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, i32, Result<(), NoElection>)>, TopicOpError> {
        self.require_active()?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let live = self.eligible_brokers().await?;
        let every = asked.is_none();
        let asked = match asked {
            Some(asked) => asked,
            None => self
                .catalog
                .topics(&owner.id)
                .await?
                .into_iter()
                .map(|t| (t.name, (0..t.partitions).collect()))
                .collect(),
        };
        let mut results = Vec::new();
        for (name, partitions) in asked {
            let Some(topic) = self.tenant_topic(&owner.id, &name).await? else {
                results.extend(
                    partitions
                        .into_iter()
                        .map(|p| (name.clone(), p, Err(NoElection::UnknownTopicOrPartition))),
                );
                continue;
            };
            for index in partitions {
                let outcome = self.elect_one(&topic, index, &live, requested).await?;
                if !(every && outcome == Err(NoElection::NotNeeded)) {
                    results.push((name.clone(), index, outcome));
                }
            }
        }
        Ok(results)
    }

    /// A tenant's own topic of that name; `None` for an internal name or no such topic.
    async fn tenant_topic(&self, owner: &str, name: &str) -> Result<Option<Topic>, TopicOpError> {
        if skein_catalog::is_internal_topic(name) {
            return Ok(None);
        }
        match self.catalog.topic(owner, name).await {
            Ok(topic) => Ok(Some(topic)),
            Err(CatalogError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Reassigns partitions of `tenant` (AlterPartitionReassignments): each `(topic,
    /// partition, target)` begins (or replaces) a move to `target`, or with `None` cancels the
    /// one in progress. Answers each one's outcome in order; a move completes later, in the
    /// election pass, once the target replicas are in sync.
    pub async fn alter_reassignments(
        &self,
        tenant: &str,
        asked: Vec<(String, i32, Option<Vec<i32>>)>,
    ) -> Result<Vec<Result<(), NoReassignment>>, TopicOpError> {
        self.require_active()?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        // Read once for the whole request: it may name thousands of partitions.
        let live = self.live_ids(tenant).await?;
        let mut topics: BTreeMap<String, Option<Topic>> = BTreeMap::new();
        let mut results = Vec::with_capacity(asked.len());
        for (name, index, target) in asked {
            if !topics.contains_key(&name) {
                let topic = self.tenant_topic(&owner.id, &name).await?;
                topics.insert(name.clone(), topic);
            }
            let Some(topic) = topics.get(&name).cloned().flatten() else {
                results.push(Err(NoReassignment::UnknownTopicOrPartition));
                continue;
            };
            if !(0..topic.partitions).contains(&index) {
                results.push(Err(NoReassignment::UnknownTopicOrPartition));
                continue;
            }
            if let Some(target) = &target {
                match Self::check_assignment(&live, std::slice::from_ref(target), None) {
                    Ok(_) => {}
                    Err(TopicOpError::InvalidReplicaAssignment(reason)) => {
                        results.push(Err(NoReassignment::InvalidAssignment(reason)));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            self.require_active()?;
            let changed = self
                .catalog
                .change_partition(&topic.id, index, |current| match &target {
                    // The target may already be in sync (a shrink): done at once.
                    Some(target) => current
                        .reassign(target)
                        .map(|moving| moving.complete_reassignment().unwrap_or(moving)),
                    None => current.cancel_reassignment().ok_or(CatalogError::NotFound {
                        what: "reassignment",
                        name: format!("{name}-{index}"),
                    }),
                })
                .await;
            results.push(match changed {
                Ok(stored) => {
                    tracing::info!(%tenant, topic = %name, partition = index,
                        replicas = ?stored.replicas, adding = ?stored.adding,
                        removing = ?stored.removing, "reassignment changed");
                    Ok(())
                }
                Err(CatalogError::NotFound {
                    what: "reassignment",
                    ..
                }) => Err(NoReassignment::NotInProgress),
                Err(CatalogError::Invalid { reason, .. }) => {
                    Err(NoReassignment::InvalidAssignment(reason))
                }
                Err(e) => return Err(e.into()),
            });
        }
        Ok(results)
    }

    /// The reassignments in progress among `asked` (topic, partitions) of `tenant`, every
    /// partition of its topics when `None`: each partition as stored.
    pub async fn list_reassignments(
        &self,
        tenant: &str,
        asked: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, Partition)>, TopicOpError> {
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let topics = match &asked {
            Some(asked) => {
                let mut topics = Vec::new();
                for (name, _) in asked {
                    topics.extend(self.tenant_topic(&owner.id, name).await?);
                }
                topics
            }
            None => self.catalog.topics(&owner.id).await?,
        };
        let mut ongoing = Vec::new();
        for topic in topics {
            let wanted: Option<&Vec<i32>> = asked.as_ref().and_then(|asked| {
                asked
                    .iter()
                    .find(|(name, _)| *name == topic.name)
                    .map(|(_, p)| p)
            });
            for partition in self.catalog.partitions(&topic.id).await? {
                if partition.is_reassigning()
                    && wanted.is_none_or(|w| w.contains(&partition.partition))
                {
                    ongoing.push((topic.name.clone(), partition));
                }
            }
        }
        Ok(ongoing)
    }

    /// One partition's asked-for election, as a compare-and-set on its partition epoch
    /// (read again when an ISR change came first).
    async fn elect_one(
        &self,
        topic: &Topic,
        index: i32,
        live: &BTreeSet<i32>,
        requested: Requested,
    ) -> Result<Result<(), NoElection>, TopicOpError> {
        let mut expected = 0;
        for _ in 0..3 {
            let partition = match self.catalog.partition(&topic.id, index).await {
                Ok(partition) => partition,
                Err(CatalogError::NotFound { .. }) => {
                    return Ok(Err(NoElection::UnknownTopicOrPartition))
                }
                Err(e) => return Err(e.into()),
            };
            expected = i64::from(partition.partition_epoch);
            let update = match election::on_request(&partition, live, requested) {
                Ok(update) => update,
                Err(no) => return Ok(Err(no)),
            };
            self.require_active()?;
            match self
                .catalog
                .update_partition(&topic.id, index, &update)
                .await
            {
                Ok(stored) => {
                    tracing::info!(topic = %topic.name, partition = index, leader = stored.leader,
                        leader_epoch = stored.leader_epoch, ?requested, "elected a leader on request");
                    return Ok(Ok(()));
                }
                Err(CatalogError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // Changing under every attempt (ISR changes racing): the caller may ask again.
        Err(TopicOpError::Catalog(CatalogError::Conflict {
            what: "partition epoch",
            expected,
        }))
    }

    /// Deletes a topic.
    pub async fn delete(&self, tenant: &str, name: &str) -> Result<(), TopicOpError> {
        self.require_active()?;
        skein_catalog::refuse_internal_topic(name)?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        self.catalog.delete_topic(&owner.id, name).await?;
        tracing::info!(%tenant, topic = %name, "deleted topic");
        Ok(())
    }
}
