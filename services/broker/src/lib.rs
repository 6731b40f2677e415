//! The Skein broker: Kafka's wire protocol over the log engine.
//!
//! Organization, in the order a request travels:
//! - [`Node`] runs a broker: its listener (`listener.rs`, which accepts connections) and its
//!   background tasks (`node.rs`); `connection.rs` reads length-prefixed
//!   frames (capped at `socket.request.max.bytes`), answers them in order, and closes the
//!   connection with a logged reason on a frame it cannot parse;
//! - `router.rs` holds one table of (API key, versions, handler), from which the ApiVersions
//!   answer is derived, and wraps metered handlers in the quota throttle;
//! - `handler/<api>.rs`, one file per Kafka API, reads topics through [`TopicRegistry`] and
//!   partitions through the [`ReplicaManager`] (`replica/`), never a log directly.

mod authz;
pub mod config;
mod connection;
pub mod controller_link;
mod fetch_session;
mod frame;
pub mod group;
mod handler;
mod isr;
pub mod limits;
mod listener;
pub mod listeners;
mod low_water;
pub mod metrics;
mod node;
mod producer;
mod quota;
pub mod replica;
mod replica_fetcher;
mod replication_throttle;
mod router;
pub mod sasl;
pub mod scope;
pub mod ssl_principal;
pub mod storage;
mod tenants;
pub mod tls;
pub mod topics;
pub mod txn;
pub mod unauthenticated;

use std::sync::Arc;

use skein_log::topic_config;
use skein_log::LogManager;

pub use config::{BrokerConfig, InterBrokerTls, OAuthBearer};

/// Broker-wide topic defaults from settings under Kafka's names (`retention.ms`, ...),
/// checked as topic configs are.
/// Returns the settings a topic without overrides has.
pub fn topic_defaults(
    settings: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<topic_config::TopicSettings> {
    Ok(topic_config::settings(
        &topic_config::TopicSettings::default(),
        settings,
    )?)
}
use listener::serve;
pub use node::{Node, NodeSettings};
pub use replica::ReplicaManager;
pub use topics::{BrokerEndpoint, PartitionPlacement, Placement, TopicInfo, TopicRegistry};

/// How long a topic must stay out of the controller's snapshots before its logs go.
///
/// This is for ordering, not for stale data: a topic's logs are told apart from those of any
/// other topic of the same name by its id (every partition directory names it, and
/// `ReplicaManager::leader` never serves one of another id), so a name reused by a new
/// topic never finds the old records, grace or not. The grace is there because a snapshot
/// may lack a live topic: one computed before the topic's creation was committed. Deleting
/// the logs at once would cost that topic its records when the next snapshot brings it back
/// under the same id; after the grace, the logs go only if no topic of that id is back.
pub const LOG_DELETION_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything a handler can reach.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    pub topics: Arc<TopicRegistry>,
    /// The partitions this broker hosts: every read and write of their logs.
    pub replicas: ReplicaManager,
    /// Each tenant's groups: memberships and committed offsets.
    groups: group::Groups,
    /// Each tenant's transaction coordinator.
    transactions: txn::Transactions,
    producer_ids: producer::ProducerIds,
    fetch_sessions: fetch_session::FetchSessions,
    /// Connections on SASL listeners that have not authenticated yet.
    unauthenticated: Arc<unauthenticated::Unauthenticated>,
    /// The controller, when this broker joined one.
    controller: Option<controller_link::ControllerLink>,
    /// Each tenant's ACL bindings and quotas, as the controller last sent them.
    tenants: tenants::Tenants,
    /// What each tenant's logs take on this broker's volume.
    storage: storage::Storage,
    /// Topics gone from the controller's snapshots, with when; their logs wait out
    /// [`LOG_DELETION_GRACE`]. Kept in memory only: a deletion lost with it costs disk space
    /// until a topic of that name comes (its id check deletes the old logs), never records.
    doomed: parking_lot::Mutex<Vec<(TopicInfo, std::time::Instant)>>,
    /// `leader.replication.throttled.rate`, shared by every throttled follower's fetch.
    leader_throttle: replication_throttle::ReplicationThrottle,
    /// `follower.replication.throttled.rate`, shared by this broker's throttled fetches.
    follower_throttle: replication_throttle::ReplicationThrottle,
    /// API keys presented over SASL/PLAIN, as the controller checked them.
    keys: sasl::KeyChecker,
    /// This broker, for work that outlives the request that starts it.
    me: std::sync::Weak<Broker>,
    /// What operators scrape (`metrics.rs`).
    pub(crate) metrics: metrics::BrokerMetrics,
}

impl Broker {
    /// Whether the broker can serve its share: every partition it holds a replica of has a
    /// leader, it leads those the controller named it leader of, and it is in the ISR of
    /// those it follows, that is, has caught up. The reason names the first that is not so.
    pub fn readiness(&self) -> Result<(), String> {
        let node = self.config.node_id;
        let controlled = self.topics.is_controlled();
        for topic in self.topics.list_all() {
            for index in 0..topic.partitions {
                let Some(placement) = topic.placement_of(index, node) else {
                    continue;
                };
                if !placement.replicas.contains(&node) {
                    continue;
                }
                if placement.leader < 0 {
                    return Err(format!(
                        "partition {index} of {} has no leader yet",
                        topic.name
                    ));
                }
                if controlled
                    && placement.leader == node
                    && self.replicas.leader_of_any(&topic.name, index, -1).is_err()
                {
                    return Err(format!(
                        "partition {index} of {} is not led here yet",
                        topic.name
                    ));
                }
                let follows = placement.leader != node;
                if follows && !placement.isr.contains(&node) {
                    return Err(format!(
                        "partition {index} of {} has not caught up with its leader {}",
                        topic.name, placement.leader
                    ));
                }
            }
        }
        Ok(())
    }

    /// The broker's metrics, to register with a service's registry.
    pub fn metrics(&self) -> &metrics::BrokerMetrics {
        &self.metrics
    }

    /// This broker, shared, for a task that outlives the request starting it; `None` once
    /// the broker is being dropped.
    pub(crate) fn shared(&self) -> Option<Arc<Broker>> {
        self.me.upgrade()
    }

    /// The principal an API key presented over SASL/PLAIN authenticates.
    pub(crate) async fn authenticate(
        &self,
        credentials: &sasl::PlainCredentials<'_>,
    ) -> Result<sasl::Authenticated, sasl::SaslError> {
        self.keys
            .authenticate(self.controller.as_ref(), self.own_tenant(), credentials)
            .await
    }

    /// The replication factor of a topic created without one: `default.replication.factor`
    /// in a cluster; a broker on its own holds every partition's one replica.
    pub(crate) fn default_replication_factor(&self) -> i32 {
        if self.topics.is_controlled() {
            self.config.default_replication_factor
        } else {
            1
        }
    }

    /// A broker on its own: topics from `<data>/topics`.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let topics = TopicRegistry::open(&config.data_dir)?;
        Self::open_with(config, topics, None)
    }

    /// A broker whose topics come from the controller: its first metadata snapshot fills the
    /// registry, and [`Broker::follow_controller`] applies the ones after it.
    pub async fn open_controlled(
        config: BrokerConfig,
        link: controller_link::ControllerLink,
    ) -> anyhow::Result<(Arc<Self>, controller_link::Snapshots)> {
        let mut snapshots = link.watch().await?;
        let first = snapshots
            .message()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the controller closed the metadata stream"))?;
        let topics = TopicRegistry::controlled(link.clone(), link.topics_of(&first));
        topics.set_brokers(link.brokers_of(&first));
        let tenants = link.tenants_of(&first);
        let keys = link.keys_of(&first);
        let controller = Some(link);
        let broker =
            tokio::task::spawn_blocking(move || Self::open_with(config, topics, controller))
                .await??;
        broker.tenants.apply(tenants);
        broker.keys.set_in_force(keys);
        Ok((broker, snapshots))
    }

    /// Applies metadata snapshots until the task is aborted. A topic missing from a
    /// snapshot leaves the registry at once, but its logs are deleted only after
    /// [`LOG_DELETION_GRACE`], and only if no topic of its id is back by then (see there
    /// why). A topic of the same name under a new id needs no such care: its partitions
    /// never open the old id's logs. A broken stream is reopened.
    pub fn follow_controller(
        self: &Arc<Self>,
        link: controller_link::ControllerLink,
        mut snapshots: controller_link::Snapshots,
    ) -> tokio::task::JoinHandle<()> {
        let broker = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(std::time::Duration::from_millis(500));
            loop {
                tokio::select! {
                    message = snapshots.message() => match message {
                        Ok(Some(snapshot)) => {
                            let replaced = broker.topics.replace_all(link.topics_of(&snapshot));
                            broker.topics.set_brokers(link.brokers_of(&snapshot));
                            broker.replicas.leadership_changed();
                            let now = std::time::Instant::now();
                            broker
                                .doomed
                                .lock()
                                .extend(replaced.removed.into_iter().map(|t| (t, now)));
                            for changed in &replaced.changed {
                                broker.replicas.apply_settings(changed);
                            }
                            // Partitions reassigned away from this broker (or placed
                            // elsewhere while it was down) leave its disk.
                            for topic in broker.topics.list_all() {
                                broker.replicas.drop_unplaced(&topic);
                            }
                            broker.tenants.apply(link.tenants_of(&snapshot));
                            broker.keys.set_in_force(link.keys_of(&snapshot));
                        }
                        Ok(None) | Err(_) => {
                            tracing::warn!("metadata stream ended; reopening");
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                            match link.watch().await {
                                Ok(reopened) => snapshots = reopened,
                                Err(e) => tracing::warn!(error = %e, "metadata stream unavailable"),
                            }
                        }
                    },
                    _ = ticks.tick() => {}
                }
                for topic in broker.expired_deletions() {
                    if broker.topics.get(&topic.name).map(|t| t.id) != Some(topic.id) {
                        tracing::info!(topic = %topic.name, id = %topic.id, "topic deleted by the controller");
                        broker.replicas.drop_partitions(&topic);
                    }
                }
            }
        })
    }

    /// Takes the topics whose [`LOG_DELETION_GRACE`] is over out of `doomed`.
    fn expired_deletions(&self) -> Vec<TopicInfo> {
        let mut doomed = self.doomed.lock();
        let (expired, waiting) = std::mem::take(&mut *doomed)
            .into_iter()
            .partition(|(_, since)| since.elapsed() >= LOG_DELETION_GRACE);
        *doomed = waiting;
        expired.into_iter().map(|(topic, _)| topic).collect()
    }

    fn open_with(
        config: BrokerConfig,
        topics: TopicRegistry,
        controller: Option<controller_link::ControllerLink>,
    ) -> anyhow::Result<Arc<Self>> {
        let topics = Arc::new(topics);
        let replicas = ReplicaManager::open(&config, Arc::clone(&topics))?;
        let rebalance_delay =
            std::time::Duration::from_millis(config.group_initial_rebalance_delay_ms);
        let transactions = match topics.tenancy() {
            scope::Tenancy::Every => txn::Transactions::every(),
            scope::Tenancy::One => {
                let coordinator = if topics.is_controlled() {
                    txn::TxnCoordinator::replicated(scope::Scope::Plain)
                } else {
                    txn::TxnCoordinator::open(replicas.logs())?
                };
                let tenant = controller
                    .as_ref()
                    .and_then(|link| link.identity().tenant.clone())
                    .unwrap_or_default();
                txn::Transactions::one(&tenant, coordinator)
            }
        };
        let groups = match topics.tenancy() {
            scope::Tenancy::Every => group::Groups::every(rebalance_delay),
            scope::Tenancy::One => {
                let offsets = if topics.is_controlled() {
                    group::OffsetStore::replicated(group::OFFSETS_TOPIC.to_owned())
                } else {
                    group::OffsetStore::open(replicas.logs())?
                };
                let tenant = controller
                    .as_ref()
                    .and_then(|link| link.identity().tenant.clone())
                    .unwrap_or_default();
                group::Groups::one(&tenant, offsets, rebalance_delay)
            }
        };
        let producer_ids = match &controller {
            Some(link) => producer::ProducerIds::controlled(link.clone()),
            None => producer::ProducerIds::open(&config.data_dir),
        };
        let leader_throttle = replication_throttle::ReplicationThrottle::new(
            config.leader_replication_throttled_rate,
        );
        let follower_throttle = replication_throttle::ReplicationThrottle::new(
            config.follower_replication_throttled_rate,
        );
        let storage = storage::Storage::new(topics.tenancy());
        Ok(Arc::new_cyclic(|me| Self {
            me: me.clone(),
            metrics: metrics::BrokerMetrics::default(),
            config,
            topics,
            replicas,
            groups,
            transactions,
            producer_ids,
            fetch_sessions: fetch_session::FetchSessions::default(),
            unauthenticated: Arc::default(),
            controller,
            tenants: tenants::Tenants::default(),
            storage,
            doomed: parking_lot::Mutex::new(Vec::new()),
            leader_throttle,
            follower_throttle,
            keys: sasl::KeyChecker::default(),
        }))
    }

    /// The one tenant this broker serves by name; `None` serving every tenant, and for a
    /// broker on its own, which knows no tenant.
    pub(crate) fn own_tenant(&self) -> Option<&str> {
        self.controller
            .as_ref()
            .and_then(|link| link.identity().tenant.as_deref())
    }

    /// The tenant a scope's requests act for: a tenant's own on a broker serving every
    /// tenant; on a broker serving one, that one (`""` for a broker on its own, which
    /// knows no tenant); `None` for the cluster's own traffic.
    pub(crate) fn tenant_of<'a>(&'a self, scope: &'a scope::Scope) -> Option<&'a str> {
        match scope {
            scope::Scope::Tenant(tenant) => Some(tenant),
            scope::Scope::Plain => Some(self.own_tenant().unwrap_or("")),
            scope::Scope::Cluster => None,
        }
    }

    /// The groups of the tenant a scope's requests act for.
    pub(crate) fn groups_of(&self, scope: &scope::Scope) -> Arc<group::TenantGroups> {
        self.groups
            .of(scope, self.tenant_of(scope).unwrap_or_default())
    }

    /// The transaction coordinator of the tenant a scope's requests act for.
    pub(crate) fn transactions_of(&self, scope: &scope::Scope) -> Arc<txn::TxnCoordinator> {
        self.transactions
            .of(scope, self.tenant_of(scope).unwrap_or_default())
    }

    /// The groups whose offsets topic is `kept` (a name as the broker keeps it).
    pub(crate) fn groups_by_offsets_topic(&self, kept: &str) -> Arc<group::TenantGroups> {
        match self.topics.tenancy().split(kept) {
            (Some(tenant), _) => {
                let scope = scope::Scope::Tenant(Arc::from(tenant));
                self.groups.of(&scope, tenant)
            }
            (None, _) => self.groups_of(&scope::Scope::Plain),
        }
    }

    /// Every tenant's transaction coordinator: aborts transactions past their timeout and
    /// finishes those decided but not yet marked.
    pub(crate) async fn tick_transactions(&self) {
        for coordinator in self.transactions.all() {
            if let Err(error) = coordinator.tick(self).await {
                tracing::debug!(%error, "transaction timeouts not checked");
            }
        }
    }

    /// Makes sure this broker coordinates a scope's groups before it answers a group
    /// request: a broker on its own always does; in a cluster the leader of the tenant's
    /// `__consumer_offsets` does (the controller makes the topic when a group first needs
    /// it), and others answer NOT_COORDINATOR so the client asks FindCoordinator again.
    pub(crate) async fn coordinate(
        &self,
        scope: &scope::Scope,
        groups: &group::TenantGroups,
    ) -> Result<(), group::OffsetStoreError> {
        if self.topics.is_controlled() && self.topics.offsets_topic(scope).await.is_none() {
            return Err(group::OffsetStoreError::NotAvailable(
                "the offsets topic does not exist yet".to_owned(),
            ));
        }
        groups.take_up(&self.replicas)
    }

    /// Sums what each tenant's logs take on this broker's volume again.
    pub(crate) fn refresh_storage(&self) {
        self.storage.refresh(self.replicas.logs());
    }

    /// Every tenant's groups: expires lapsed members and completes stalled rebalances.
    pub(crate) fn expire_members(&self) {
        for groups in self.groups.all() {
            groups.coordinator().expire();
        }
    }

    /// The log engine underneath, for maintenance and recovery reports.
    pub fn logs(&self) -> &LogManager {
        self.replicas.logs()
    }

    /// Forgets state nobody has used for its retention, as Kafka does: committed offsets of
    /// groups without members after `offsets.retention.minutes` since their last commit
    /// (tombstones in `__consumer_offsets`, then the group itself), and idempotent producers
    /// idle for `producer.id.expiration.ms`.
    pub(crate) async fn expire_idle_state(&self) {
        let now = skein_log::Clock::now_ms(&skein_log::SystemClock);
        let retention =
            i64::try_from(self.config.offsets_retention.as_millis()).unwrap_or(i64::MAX);
        for tenant in self.groups.all() {
            // Only the coordinator expires offsets (in a cluster, while it leads the tenant's
            // offsets partition).
            let coordinating = tenant.take_up(&self.replicas).is_ok();
            let groups = tenant.coordinator();
            let expired = if coordinating {
                tenant.offsets.committed_before(now, retention)
            } else {
                Vec::new()
            };
            for group in expired {
                if groups.has_members(&group) {
                    continue;
                }
                let keys: Vec<(String, i32)> = tenant
                    .offsets
                    .all(&group)
                    .into_iter()
                    .map(|(t, p, _)| (t, p))
                    .collect();
                match tenant
                    .offsets
                    .delete(&self.replicas, &group, &keys, now)
                    .await
                {
                    Ok(()) => {
                        groups.remove_if_empty(&group);
                        tracing::info!(%group, offsets = keys.len(), "expired the offsets of an empty group");
                    }
                    Err(e) => tracing::warn!(%group, error = %e, "failed to expire group offsets"),
                }
            }
        }
        let expiration =
            i64::try_from(self.config.producer_id_expiration.as_millis()).unwrap_or(i64::MAX);
        let forgotten = self.replicas.expire_producers(expiration);
        if forgotten > 0 {
            tracing::info!(producers = forgotten, "expired idle producer states");
        }
    }

    /// Closes every log cleanly.
    pub fn shutdown(self: Arc<Self>) -> anyhow::Result<()> {
        match Arc::try_unwrap(self) {
            Ok(broker) => {
                let Broker {
                    replicas, groups, ..
                } = broker;
                // The offset store shares its log; let go of it so the log closes cleanly.
                drop(groups);
                Ok(replicas.close()?)
            }
            Err(_) => anyhow::bail!("the broker is still in use"),
        }
    }
}
