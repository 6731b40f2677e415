//! Topic changes shared by the gRPC controller and the admin API: placement of replicas on
//! live brokers and the catalog writes, accepted only on the active controller. Each caller
//! maps [`TopicOpError`] once, to a gRPC status or a problem.

use std::collections::BTreeMap;
use std::sync::Arc;

use skein_catalog::{Catalog, CatalogError, NewTopic, Partition, Topic};

use crate::controller::{now_ms, ControllerConfig, Leadership};
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
        let base = skein_log::topic_config::TopicSettings {
            log: skein_log::LogConfig::default(),
            min_insync_replicas: 1,
            unclean_leader_election: false,
        };
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
        let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
        let live: Vec<Candidate> = self
            .catalog
            .live_brokers(now_ms() - session)
            .await?
            .into_iter()
            .filter(|b| b.tenant.as_deref().is_none_or(|t| t == tenant))
            .map(|b| Candidate {
                node_id: b.node_id,
                rack: b.rack,
            })
            .collect();
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
        self.require_active()?;
        if partitions <= 0 || partitions > MAX_PARTITIONS {
            return Err(TopicOpError::InvalidPartitions(format!(
                "partition count {partitions} must be between 1 and {MAX_PARTITIONS}"
            )));
        }
        Self::check_configs(&configs)?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        let placement = self.place(tenant, 0, partitions, replication, None).await?;
        let topic = NewTopic {
            name: name.to_owned(),
            placement,
            configs,
        };
        self.catalog.create_topic(&owner.id, &topic).await?;
        tracing::info!(%tenant, topic = %name, partitions, replication, "created topic");
        self.describe(tenant, name).await
    }

    /// Grows a topic to `count` partitions.
    pub async fn grow(
        &self,
        tenant: &str,
        name: &str,
        count: i32,
    ) -> Result<TopicWithPartitions, TopicOpError> {
        self.require_active()?;
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
        let first_leader = self
            .catalog
            .partitions(&topic.id)
            .await?
            .first()
            .and_then(|p| p.replicas.first().copied());
        let placement = self
            .place(
                tenant,
                topic.partitions,
                count - topic.partitions,
                topic.replication_factor,
                first_leader,
            )
            .await?;
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
            let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
            let stopping = self.leadership.stopping_brokers();
            let live: Vec<i32> = self
                .catalog
                .live_brokers(now_ms() - session)
                .await?
                .into_iter()
                .map(|b| b.node_id)
                .filter(|id| !stopping.contains(id))
                .collect();
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

    /// Deletes a topic.
    pub async fn delete(&self, tenant: &str, name: &str) -> Result<(), TopicOpError> {
        self.require_active()?;
        let owner = self.catalog.tenant_by_name(tenant).await?;
        self.catalog.delete_topic(&owner.id, name).await?;
        tracing::info!(%tenant, topic = %name, "deleted topic");
        Ok(())
    }
}
