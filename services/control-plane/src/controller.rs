//! The cluster's controller over gRPC (`proto/skein/controller/v1`). Every replica serves it;
//! the one holding the `controller` lease in the catalog ([`LeaseKeeper`]) accepts topic
//! changes, the others answer UNAVAILABLE so brokers try another replica. Registrations,
//! heartbeats and producer-id blocks are safe from any replica (each is one conditional
//! statement in the catalog). Metadata watchers get a full snapshot (brokers, topics with
//! their partitions, ACLs, quotas), then another whenever what it holds changes, from
//! whichever replica they reach.

// tonic's `Status` is the error type gRPC handlers must return; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skein_catalog::{Catalog, CatalogError, NewBroker};

use crate::credentials::{self, ControllerCaller, CredentialError, CredentialVerifier, Role};
use crate::scram_credentials;
use crate::topic_ops::{TopicOpError, TopicOps};
use skein_proto::controller as pb;
use skein_proto::controller::controller_server::Controller;
use skein_proto::refusal::{self, Reason};
use skein_proto::snapshot::CHUNK_BYTES;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

/// The name of the lease the active controller holds.
pub const CONTROLLER_LEASE: &str = "controller";

/// How the controller behaves.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// This replica's name in the lease table.
    pub replica_id: String,
    /// How long a lease lasts without renewal; standbys take over after it.
    pub lease_ttl: Duration,
    /// A broker whose last heartbeat is older than this is gone: not placed on, out of
    /// every ISR, its partitions led by others (Kafka's `broker.session.timeout.ms`, 6 s
    /// here rather than Kafka's 9 s: three heartbeats of a broker's default interval, and
    /// what keeps failover under 10 s).
    pub broker_session: Duration,
    /// How often watchers' snapshots are recomputed.
    pub watch_interval: Duration,
    /// Producer ids handed out per block.
    pub producer_id_block: i32,
    /// `auto.leader.rebalance.enable`: leadership returns to each partition's preferred
    /// replica once it is back in the ISR.
    pub auto_leader_rebalance: bool,
}

impl ControllerConfig {
    pub fn new(replica_id: impl Into<String>) -> Self {
        Self {
            replica_id: replica_id.into(),
            lease_ttl: Duration::from_secs(10),
            broker_session: Duration::from_secs(6),
            watch_interval: Duration::from_millis(250),
            producer_id_block: 1000,
            auto_leader_rebalance: true,
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Whether this replica is the active controller, and until when it may act on its lease.
#[derive(Debug, Default)]
pub struct Leadership {
    epoch: AtomicI64,
    /// Local milliseconds after which the lease may have lapsed: acting stops then even if a
    /// renewal is still in flight.
    valid_until: AtomicI64,
    /// Brokers in a controlled shutdown, with when they asked: not elected, not let into an
    /// ISR, until they register again (or [`SHUTDOWN_REMEMBERED`] passes).
    shutting_down: parking_lot::Mutex<std::collections::BTreeMap<i32, std::time::Instant>>,
}

/// How long a controlled shutdown is remembered without the broker registering again.
/// The longest `advertised_listeners` a broker may register: it goes into every snapshot.
const MAX_ADVERTISED_LISTENERS_BYTES: usize = 4096;

const SHUTDOWN_REMEMBERED: Duration = Duration::from_secs(120);

impl Leadership {
    /// Notes that `node` is shutting down.
    pub fn shutting_down(&self, node: i32) {
        self.shutting_down
            .lock()
            .insert(node, std::time::Instant::now());
    }

    /// `node` registered again: it may lead and be in sync.
    pub fn started(&self, node: i32) {
        self.shutting_down.lock().remove(&node);
    }

    /// The brokers in a controlled shutdown now.
    pub fn stopping_brokers(&self) -> std::collections::BTreeSet<i32> {
        let mut stopping = self.shutting_down.lock();
        stopping.retain(|_, since| since.elapsed() < SHUTDOWN_REMEMBERED);
        stopping.keys().copied().collect()
    }

    /// The lease epoch while this replica is active.
    pub fn active_epoch(&self) -> Option<i64> {
        let epoch = self.epoch.load(Ordering::Acquire);
        (epoch > 0 && now_ms() < self.valid_until.load(Ordering::Acquire)).then_some(epoch)
    }
}

/// Takes and renews the controller lease, every third of its lifetime.
#[derive(Debug)]
pub struct LeaseKeeper;

impl LeaseKeeper {
    /// Runs until aborted (dropping the handle does not stop it).
    pub fn spawn(
        catalog: Catalog,
        config: ControllerConfig,
        leadership: Arc<Leadership>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let ttl = i64::try_from(config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
            loop {
                let asked = now_ms();
                match catalog
                    .acquire_lease(CONTROLLER_LEASE, &config.replica_id, ttl)
                    .await
                {
                    Ok(Some(lease)) => {
                        if leadership.epoch.swap(lease.epoch, Ordering::AcqRel) != lease.epoch {
                            tracing::info!(epoch = lease.epoch, replica = %config.replica_id, "active controller");
                        }
                        leadership.valid_until.store(asked + ttl, Ordering::Release);
                    }
                    Ok(None) => leadership.epoch.store(0, Ordering::Release),
                    Err(e) => {
                        // Keep acting only until the lease we hold may have lapsed.
                        tracing::warn!(error = %e, "controller lease renewal failed");
                    }
                }
                tokio::time::sleep(config.lease_ttl / 3).await;
            }
        })
    }
}

/// Producer ids for idempotency keys, taken from blocks this replica allocates (node id
/// -1); ids of a block left unused when the replica stops are never reused.
#[derive(Debug, Default)]
struct IdempotentIds {
    range: tokio::sync::Mutex<(i64, i64)>,
}

impl IdempotentIds {
    const BLOCK: i32 = 1024;

    async fn next(&self, catalog: &Catalog) -> Result<i64, CatalogError> {
        let mut range = self.range.lock().await;
        if range.0 >= range.1 {
            let first = catalog.allocate_producer_ids(-1, Self::BLOCK).await?;
            *range = (first, first + i64::from(Self::BLOCK));
        }
        let id = range.0;
        range.0 += 1;
        Ok(id)
    }
}

/// The gRPC controller service.
#[derive(Debug, Clone)]
pub struct ControllerService {
    catalog: Catalog,
    config: ControllerConfig,
    leadership: Arc<Leadership>,
    topics: TopicOps,
    idempotent_ids: Arc<IdempotentIds>,
    /// Checks the credentials brokers present to each other (AuthenticatePeer): the
    /// verifier callers are checked with, set by [`controller_server`].
    peers: Option<CredentialVerifier>,
    /// The metadata streams open, per credential.
    watchers: Arc<crate::watchers::Watchers>,
}

impl ControllerService {
    pub fn new(catalog: Catalog, config: ControllerConfig, leadership: Arc<Leadership>) -> Self {
        Self {
            topics: TopicOps::new(catalog.clone(), config.clone(), Arc::clone(&leadership)),
            catalog,
            config,
            leadership,
            idempotent_ids: Arc::default(),
            peers: None,
            watchers: Arc::default(),
        }
    }

    /// The metadata now; `None` when the catalog changed while it was read.
    /// Holds a broker's call about node `node` to its credential: the credential's node, if
    /// it names one, and the tenants of the node's registration. False when the node is not
    /// registered.
    async fn require_own_node(&self, caller: &ControllerCaller, node: i32) -> Result<bool, Status> {
        caller.require_node(node)?;
        let Some(registration) = self.catalog.registered_broker(node).await.map_err(status)? else {
            return Ok(false);
        };
        caller.require_tenant(
            registration
                .tenant
                .as_deref()
                .unwrap_or(credentials::ANY_TENANT),
        )?;
        Ok(true)
    }

    fn require_active(&self) -> Result<i64, Status> {
        self.leadership.active_epoch().ok_or_else(|| {
            refusal::status(
                Code::Unavailable,
                "this replica is not the active controller; try another",
                Reason::NotActive,
            )
        })
    }

    async fn snapshot(&self) -> Result<Option<pb::MetadataSnapshot>, CatalogError> {
        let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
        let brokers = self
            .catalog
            .live_brokers(now_ms() - session)
            .await?
            .into_iter()
            .map(|b| pb::BrokerEndpoint {
                node_id: b.node_id,
                host: b.host,
                port: b.port,
                rack: b.rack,
                tenant: b.tenant,
                advertised_listeners: b.advertised_listeners.unwrap_or_default(),
            })
            .collect();
        let mut partitions: BTreeMap<String, Vec<skein_catalog::Partition>> = BTreeMap::new();
        for p in self.catalog.all_partitions().await? {
            partitions.entry(p.topic_id.clone()).or_default().push(p);
        }
        let mut topics = Vec::new();
        for (tenant, topic) in self.catalog.all_topics().await? {
            let parts = partitions.remove(&topic.id).unwrap_or_default();
            // The reads are not one transaction: a topic created or grown between them shows
            // fewer partitions than its count. Such a snapshot is not sent; the next one is.
            if parts.len() != usize::try_from(topic.partitions).unwrap_or(0) {
                return Ok(None);
            }
            topics.push(topic_message(&tenant, topic, parts));
        }
        let acls = self
            .catalog
            .all_acls()
            .await?
            .iter()
            .map(|(tenant, record)| skein_proto::acl::to_wire(tenant, &record.binding))
            .collect();
        let quotas = self
            .catalog
            .all_quotas()
            .await?
            .into_iter()
            .map(|(tenant, principal, quota)| pb::Quota {
                tenant,
                principal,
                produce_bytes_per_sec: quota.produce_bytes_per_sec,
                fetch_bytes_per_sec: quota.fetch_bytes_per_sec,
                requests_per_sec: quota.requests_per_sec,
                partitions: quota.partitions,
                request_percentage: quota.request_percentage,
                storage_bytes: quota.storage_bytes,
            })
            .collect();
        let mut keys_in_force: Vec<_> = self
            .catalog
            .active_api_keys_with_tenants()
            .await?
            .into_iter()
            .map(|(id, tenant)| pb::ApiKeyInForce { id, tenant })
            .collect();
        // Gateways take API keys only; brokers also end SCRAM sessions by this list.
        let api_keys = keys_in_force.iter().map(|k| k.id.clone()).collect();
        keys_in_force.extend(self.catalog.all_scram_credentials().await?.into_iter().map(
            |(tenant, user, info)| pb::ApiKeyInForce {
                id: skein_proto::scram_session_id(info.mechanism.name(), &user, info.updated_at),
                tenant,
            },
        ));
        Ok(Some(pb::MetadataSnapshot {
            version: 0,
            brokers,
            topics,
            acls,
            quotas,
            api_keys,
            more: false,
            keys_in_force,
        }))
    }
}

fn topic_message(
    tenant: &str,
    topic: skein_catalog::Topic,
    partitions: Vec<skein_catalog::Partition>,
) -> pb::Topic {
    pb::Topic {
        id: topic.id,
        tenant: tenant.to_owned(),
        name: topic.name,
        configs: topic.configs.into_iter().collect(),
        partitions: partitions.into_iter().map(partition_message).collect(),
    }
}

fn partition_message(p: skein_catalog::Partition) -> pb::Partition {
    pb::Partition {
        index: p.partition,
        replicas: p.replicas,
        isr: p.isr,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
    }
}

/// Refused topic changes as gRPC statuses, each with its typed reason.
fn op_status(e: TopicOpError) -> Status {
    let message = e.to_string();
    let (code, reason) = match e {
        TopicOpError::Catalog(e) => return status(e),
        TopicOpError::NotActive => (Code::Unavailable, Reason::NotActive),
        TopicOpError::InvalidPartitions(_) => (Code::InvalidArgument, Reason::InvalidPartitions),
        TopicOpError::InvalidReplicationFactor(_) | TopicOpError::NotEnoughBrokers { .. } => {
            (Code::FailedPrecondition, Reason::InvalidReplicationFactor)
        }
        TopicOpError::InvalidConfig(_) => (Code::InvalidArgument, Reason::InvalidConfig),
        TopicOpError::InvalidReplicaAssignment(_) => {
            (Code::InvalidArgument, Reason::InvalidReplicaAssignment)
        }
        // The leader waits for newer metadata, as after any lost compare-and-set.
        TopicOpError::IneligibleReplica(_) => (Code::FailedPrecondition, Reason::Conflict),
    };
    refusal::status(code, message, reason)
}

fn scram_status(e: scram_credentials::CatalogOrStatus) -> Status {
    match e {
        scram_credentials::CatalogOrStatus::Catalog(e) => status(e),
        scram_credentials::CatalogOrStatus::Status(s) => s,
    }
}

/// Catalog errors as gRPC statuses with their typed reasons, in one place.
fn status(e: CatalogError) -> Status {
    let (code, reason) = match &e {
        CatalogError::AlreadyExists { .. } => (Code::AlreadyExists, Reason::AlreadyExists),
        CatalogError::NotFound { .. } => (Code::NotFound, Reason::NotFound),
        CatalogError::Invalid { what, .. } => {
            let reason = match *what {
                "topic name" | "tenant name" | "principal name" => Reason::InvalidName,
                "partition count" | "partition placement" => Reason::InvalidPartitions,
                "ACL binding" => Reason::InvalidAcl,
                _ => Reason::InvalidRequest,
            };
            (Code::InvalidArgument, reason)
        }
        CatalogError::Conflict { .. } => (Code::Aborted, Reason::Conflict),
        CatalogError::QuotaExceeded { .. } => (Code::ResourceExhausted, Reason::QuotaExceeded),
        CatalogError::Corrupt { .. } | CatalogError::Database(_) | CatalogError::Migrate(_) => {
            tracing::error!(error = %e, "catalog failure");
            return Status::internal("the catalog could not complete the request");
        }
    };
    refusal::status(code, e.to_string(), reason)
}

/// What of a snapshot `caller` may see: everything for a gateway; for a broker, its own
/// tenants' brokers, topics, ACLs and quotas, and no API key ids.
fn visible_to(
    caller: &ControllerCaller,
    mut snapshot: pb::MetadataSnapshot,
) -> pb::MetadataSnapshot {
    if caller.role == Role::Gateway {
        return snapshot;
    }
    snapshot
        .brokers
        .retain(|b| b.tenant.as_deref().is_none_or(|t| caller.serves(t)));
    snapshot.topics.retain(|t| caller.serves(&t.tenant));
    snapshot.acls.retain(|a| caller.serves(&a.tenant));
    snapshot.quotas.retain(|q| caller.serves(&q.tenant));
    snapshot.api_keys.clear();
    snapshot.keys_in_force.retain(|k| caller.serves(&k.tenant));
    snapshot
}

/// The controller's gRPC service, every call of which must carry a credential
/// [`CredentialVerifier`] accepts.
pub fn controller_server(
    mut service: ControllerService,
    credentials: CredentialVerifier,
) -> tonic::service::interceptor::InterceptedService<
    skein_proto::controller::controller_server::ControllerServer<ControllerService>,
    CredentialVerifier,
> {
    service.peers = Some(credentials.clone());
    let server = skein_proto::controller::controller_server::ControllerServer::new(service)
        .max_decoding_message_size(skein_proto::replicas::MAX_CONTROLLER_REQUEST_BYTES)
        .max_encoding_message_size(skein_proto::replicas::MAX_CONTROLLER_MESSAGE_BYTES);
    tonic::service::interceptor::InterceptedService::new(server, credentials)
}

type SnapshotStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::MetadataSnapshot, Status>> + Send>>;

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn register_broker(
        &self,
        request: Request<pb::RegisterBrokerRequest>,
    ) -> Result<Response<pb::RegisterBrokerResponse>, Status> {
        let caller = credentials::caller(&request)?;
        caller.require(Role::Broker)?;
        let request = request.into_inner();
        let broker = request
            .broker
            .ok_or_else(|| Status::invalid_argument("broker is required"))?;
        caller.require_node(broker.node_id)?;
        // A broker registers only for a tenant its credential covers; one serving every
        // tenant needs a credential for every tenant.
        match broker.tenant.as_deref() {
            Some(tenant) => caller.require_tenant(tenant)?,
            None => caller.require_tenant(credentials::ANY_TENANT)?,
        }
        if request.incarnation.is_empty() || broker.host.is_empty() || broker.port <= 0 {
            return Err(Status::invalid_argument(
                "a registration needs an incarnation, a host and a port",
            ));
        }
        if broker.advertised_listeners.len() > MAX_ADVERTISED_LISTENERS_BYTES {
            return Err(Status::invalid_argument(format!(
                "advertised listeners are limited to {MAX_ADVERTISED_LISTENERS_BYTES} bytes"
            )));
        }
        // Brokers serving one tenant keep its topics under their plain names, brokers
        // serving every tenant under qualified ones: they cannot replicate each other's
        // partitions, so a cluster has one kind or the other.
        let session = i64::try_from(self.config.broker_session.as_millis()).unwrap_or(i64::MAX);
        let live = self
            .catalog
            .live_brokers(now_ms() - session)
            .await
            .map_err(status)?;
        if let Some(other) = live
            .iter()
            .find(|b| b.node_id != broker.node_id && b.tenant.is_none() != broker.tenant.is_none())
        {
            let serves = |tenant: Option<&str>| {
                tenant.map_or_else(|| "every tenant".to_owned(), |t| format!("tenant {t:?}"))
            };
            return Err(Status::failed_precondition(format!(
                "broker {} serves {}, and this one {}: a cluster's brokers serve one tenant each \
                 or every tenant, not both",
                other.node_id,
                serves(other.tenant.as_deref()),
                serves(broker.tenant.as_deref()),
            )));
        }
        self.leadership.started(broker.node_id);
        self.catalog
            .register_broker(
                &NewBroker {
                    node_id: broker.node_id,
                    host: &broker.host,
                    port: broker.port,
                    rack: broker.rack.as_deref(),
                    tenant: broker.tenant.as_deref(),
                    advertised_listeners: Some(broker.advertised_listeners.as_str())
                        .filter(|listeners| !listeners.is_empty()),
                },
                &request.incarnation,
            )
            .await
            .map_err(status)?;
        tracing::info!(node = broker.node_id, host = %broker.host, port = broker.port, "broker registered");
        Ok(Response::new(pb::RegisterBrokerResponse {
            controller_epoch: self.leadership.active_epoch().unwrap_or(0),
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        if !self.require_own_node(&caller, request.node_id).await? {
            // Not registered (any more): the broker registers again.
            return Ok(Response::new(pb::HeartbeatResponse { registered: false }));
        }
        let registered = self
            .catalog
            .broker_heartbeat(request.node_id, &request.incarnation)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::HeartbeatResponse { registered }))
    }

    async fn create_topic(
        &self,
        request: Request<pb::CreateTopicRequest>,
    ) -> Result<Response<pb::TopicResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        // A broker asks for its tenant's offsets or transaction topic when a group or a
        // transactional producer first needs it; the controller decides its shape. Every
        // other caller and name goes through the checks of a tenant's own topic, which
        // refuse internal names.
        let created = if caller.role == Role::Broker
            && skein_catalog::INTERNAL_TOPICS.contains(&request.name.as_str())
        {
            self.topics
                .ensure_internal(&request.tenant, &request.name)
                .await
        } else if request.assignments.is_empty() {
            self.topics
                .create(
                    &request.tenant,
                    &request.name,
                    request.partitions,
                    request.replication_factor,
                    request.configs.into_iter().collect(),
                )
                .await
        } else {
            let assigned = request
                .assignments
                .into_iter()
                .map(|a| a.replicas)
                .collect();
            self.topics
                .create_assigned(
                    &request.tenant,
                    &request.name,
                    assigned,
                    request.configs.into_iter().collect(),
                )
                .await
        };
        let (topic, partitions) = created.map_err(op_status)?;
        Ok(Response::new(pb::TopicResponse {
            topic: Some(topic_message(&request.tenant, topic, partitions)),
        }))
    }

    async fn describe_topic(
        &self,
        request: Request<pb::DescribeTopicRequest>,
    ) -> Result<Response<pb::TopicResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        // A gateway serves every tenant; a broker only its own.
        if caller.role != Role::Gateway {
            caller.require_tenant(&request.tenant)?;
        }
        let (topic, partitions) = self
            .topics
            .describe(&request.tenant, &request.name)
            .await
            .map_err(op_status)?;
        Ok(Response::new(pb::TopicResponse {
            topic: Some(topic_message(&request.tenant, topic, partitions)),
        }))
    }

    async fn delete_topic(
        &self,
        request: Request<pb::DeleteTopicRequest>,
    ) -> Result<Response<pb::DeleteTopicResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        self.topics
            .delete(&request.tenant, &request.name)
            .await
            .map_err(op_status)?;
        Ok(Response::new(pb::DeleteTopicResponse {}))
    }

    async fn create_partitions(
        &self,
        request: Request<pb::CreatePartitionsRequest>,
    ) -> Result<Response<pb::TopicResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        let grown = if request.assignments.is_empty() {
            self.topics
                .grow(&request.tenant, &request.name, request.count)
                .await
        } else {
            let assigned = request
                .assignments
                .into_iter()
                .map(|a| a.replicas)
                .collect();
            self.topics
                .grow_assigned(&request.tenant, &request.name, request.count, assigned)
                .await
        };
        let (topic, partitions) = grown.map_err(op_status)?;
        Ok(Response::new(pb::TopicResponse {
            topic: Some(topic_message(&request.tenant, topic, partitions)),
        }))
    }

    async fn alter_topic_configs(
        &self,
        request: Request<pb::AlterTopicConfigsRequest>,
    ) -> Result<Response<pb::TopicResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        let (topic, partitions) = self
            .topics
            .set_configs(
                &request.tenant,
                &request.name,
                request.configs.into_iter().collect(),
            )
            .await
            .map_err(op_status)?;
        Ok(Response::new(pb::TopicResponse {
            topic: Some(topic_message(&request.tenant, topic, partitions)),
        }))
    }

    async fn create_acl(
        &self,
        request: Request<pb::CreateAclRequest>,
    ) -> Result<Response<pb::CreateAclResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let acl = request
            .into_inner()
            .acl
            .ok_or_else(|| Status::invalid_argument("acl is required"))?;
        caller.require_acl_changes(&acl.tenant)?;
        self.require_active()?;
        let binding = skein_proto::acl::from_wire(&acl).map_err(|e| {
            refusal::status(Code::InvalidArgument, e.to_string(), Reason::InvalidAcl)
        })?;
        let tenant = self
            .catalog
            .tenant_by_name(&acl.tenant)
            .await
            .map_err(status)?;
        self.catalog
            .create_acl(&tenant.id, &binding)
            .await
            .map_err(status)?;
        tracing::info!(tenant = %acl.tenant, %binding, "created ACL");
        Ok(Response::new(pb::CreateAclResponse {}))
    }

    async fn delete_acls(
        &self,
        request: Request<pb::DeleteAclsRequest>,
    ) -> Result<Response<pb::DeleteAclsResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let filter = request
            .into_inner()
            .filter
            .ok_or_else(|| Status::invalid_argument("filter is required"))?;
        caller.require_acl_changes(&filter.tenant)?;
        self.require_active()?;
        let selector = skein_proto::acl::filter_from_wire(&filter).map_err(|e| {
            refusal::status(Code::InvalidArgument, e.to_string(), Reason::InvalidAcl)
        })?;
        let tenant = self
            .catalog
            .tenant_by_name(&filter.tenant)
            .await
            .map_err(status)?;
        let deleted = self
            .catalog
            .delete_acls(&tenant.id, &selector)
            .await
            .map_err(status)?;
        tracing::info!(tenant = %filter.tenant, count = deleted.len(), "deleted ACLs");
        Ok(Response::new(pb::DeleteAclsResponse {
            deleted: deleted
                .iter()
                .map(|r| skein_proto::acl::to_wire(&filter.tenant, &r.binding))
                .collect(),
        }))
    }

    async fn allocate_producer_ids(
        &self,
        request: Request<pb::AllocateProducerIdsRequest>,
    ) -> Result<Response<pb::AllocateProducerIdsResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let node = request.into_inner().node_id;
        if !self.require_own_node(&caller, node).await? {
            return Err(CredentialError::Unregistered(node).into());
        }
        let size = self.config.producer_id_block;
        let first_id = self
            .catalog
            .allocate_producer_ids(node, size)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::AllocateProducerIdsResponse {
            first_id,
            size,
        }))
    }

    async fn controlled_shutdown(
        &self,
        request: Request<pb::ControlledShutdownRequest>,
    ) -> Result<Response<pb::ControlledShutdownResponse>, Status> {
        let caller = credentials::caller(&request)?;
        let node = request.into_inner().node_id;
        if !self.require_own_node(&caller, node).await? {
            return Err(CredentialError::Unregistered(node).into());
        }
        self.require_active()?;
        self.leadership.shutting_down(node);
        let remaining = crate::election::elect_once(&self.catalog, &self.config, &self.leadership)
            .await
            .map_err(status)?
            .led_by(node);
        tracing::info!(node, remaining, "controlled shutdown");
        Ok(Response::new(pb::ControlledShutdownResponse {
            remaining_leaderships: remaining,
        }))
    }

    async fn elect_leaders(
        &self,
        request: Request<pb::ElectLeadersRequest>,
    ) -> Result<Response<pb::ElectLeadersResponse>, Status> {
        use crate::election::{NoElection, Requested};
        use pb::election_result::Outcome;
        let caller = credentials::caller(&request)?;
        caller.require(Role::Broker)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        let requested = if request.unclean {
            Requested::Unclean
        } else {
            Requested::Preferred
        };
        let asked = (!request.topics.is_empty()).then(|| {
            request
                .topics
                .into_iter()
                .map(|t| (t.topic, t.partitions))
                .collect()
        });
        let results = self
            .topics
            .elect_leaders(&request.tenant, requested, asked)
            .await
            .map_err(op_status)?
            .into_iter()
            .map(|(topic, partition, outcome)| {
                let outcome = match outcome {
                    Ok(()) => Outcome::Elected,
                    Err(NoElection::NotNeeded) => Outcome::ElectionNotNeeded,
                    Err(NoElection::PreferredLeaderNotAvailable) => {
                        Outcome::PreferredLeaderNotAvailable
                    }
                    Err(NoElection::EligibleLeadersNotAvailable) => {
                        Outcome::EligibleLeadersNotAvailable
                    }
                    Err(NoElection::UnknownTopicOrPartition) => Outcome::UnknownTopicOrPartition,
                };
                pb::ElectionResult {
                    topic,
                    partition,
                    outcome: outcome.into(),
                }
            })
            .collect();
        Ok(Response::new(pb::ElectLeadersResponse { results }))
    }

    async fn alter_partition_reassignments(
        &self,
        request: Request<pb::AlterReassignmentsRequest>,
    ) -> Result<Response<pb::AlterReassignmentsResponse>, Status> {
        use crate::topic_ops::NoReassignment;
        use pb::reassignment_result::Outcome;
        let caller = credentials::caller(&request)?;
        caller.require(Role::Broker)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        let asked: Vec<(String, i32, Option<Vec<i32>>)> = request
            .reassignments
            .into_iter()
            .map(|r| (r.topic, r.partition, r.target.map(|t| t.replicas)))
            .collect();
        let named: Vec<(String, i32)> = asked.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let results = self
            .topics
            .alter_reassignments(&request.tenant, asked)
            .await
            .map_err(op_status)?
            .into_iter()
            .zip(named)
            .map(|(outcome, (topic, partition))| {
                let (outcome, message) = match outcome {
                    Ok(()) => (Outcome::Accepted, String::new()),
                    Err(NoReassignment::UnknownTopicOrPartition) => {
                        (Outcome::UnknownTopicOrPartition, String::new())
                    }
                    Err(NoReassignment::NotInProgress) => {
                        (Outcome::NoReassignmentInProgress, String::new())
                    }
                    Err(NoReassignment::InvalidAssignment(reason)) => {
                        (Outcome::InvalidReplicaAssignment, reason)
                    }
                };
                pb::ReassignmentResult {
                    topic,
                    partition,
                    outcome: outcome.into(),
                    message,
                }
            })
            .collect();
        Ok(Response::new(pb::AlterReassignmentsResponse { results }))
    }

    async fn list_partition_reassignments(
        &self,
        request: Request<pb::ListReassignmentsRequest>,
    ) -> Result<Response<pb::ListReassignmentsResponse>, Status> {
        let caller = credentials::caller(&request)?;
        caller.require(Role::Broker)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        let asked = (!request.topics.is_empty()).then(|| {
            request
                .topics
                .into_iter()
                .map(|t| (t.topic, t.partitions))
                .collect()
        });
        let reassignments = self
            .topics
            .list_reassignments(&request.tenant, asked)
            .await
            .map_err(op_status)?
            .into_iter()
            .map(|(topic, p)| pb::OngoingReassignment {
                topic,
                partition: p.partition,
                replicas: p.replicas,
                adding: p.adding,
                removing: p.removing,
            })
            .collect();
        Ok(Response::new(pb::ListReassignmentsResponse {
            reassignments,
        }))
    }

    async fn alter_partition(
        &self,
        request: Request<pb::AlterPartitionRequest>,
    ) -> Result<Response<pb::AlterPartitionResponse>, Status> {
        let caller = credentials::caller(&request)?;
        caller.require(Role::Broker)?;
        let request = request.into_inner();
        caller.require_tenant(&request.tenant)?;
        // Only the leader changes its partition's ISR, and a broker speaks for its own node.
        caller.require_node(request.leader)?;
        let altered = self
            .topics
            .alter_isr(
                &request.tenant,
                &request.topic,
                request.partition,
                request.leader,
                request.leader_epoch,
                request.partition_epoch,
                &request.isr,
            )
            .await
            .map_err(op_status)?;
        Ok(Response::new(pb::AlterPartitionResponse {
            partition: Some(partition_message(altered)),
        }))
    }

    type WatchMetadataStream = SnapshotStream;

    async fn claim_idempotency_key(
        &self,
        request: Request<pb::ClaimIdempotencyKeyRequest>,
    ) -> Result<Response<pb::ClaimIdempotencyKeyResponse>, Status> {
        credentials::caller(&request)?.require(Role::Gateway)?;
        let request = request.into_inner();
        if request.key.is_empty() || request.key.len() > 255 {
            return Err(Status::invalid_argument(
                "an idempotency key has 1 to 255 characters",
            ));
        }
        let producer_id = self
            .idempotent_ids
            .next(&self.catalog)
            .await
            .map_err(status)?;
        let claim = self
            .catalog
            .claim_idempotency_key(
                &request.tenant,
                &request.principal,
                &request.key,
                &request.request_hash,
                producer_id,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ClaimIdempotencyKeyResponse {
            producer_id: claim.producer_id,
            request_hash: claim.request_hash,
            outcome: claim.outcome,
            created_at: claim.created_at,
        }))
    }

    async fn complete_idempotency_key(
        &self,
        request: Request<pb::CompleteIdempotencyKeyRequest>,
    ) -> Result<Response<pb::CompleteIdempotencyKeyResponse>, Status> {
        credentials::caller(&request)?.require(Role::Gateway)?;
        let request = request.into_inner();
        self.catalog
            .complete_idempotency_key(
                &request.tenant,
                &request.principal,
                &request.key,
                &request.outcome,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(pb::CompleteIdempotencyKeyResponse {}))
    }

    async fn authenticate_api_key(
        &self,
        request: Request<pb::AuthenticateApiKeyRequest>,
    ) -> Result<Response<pb::AuthenticateApiKeyResponse>, Status> {
        // Gateways check keys of every tenant, brokers (SASL/PLAIN) those of their own.
        let caller = credentials::caller(&request)?;
        if caller.role != Role::Gateway {
            caller.require(Role::Broker)?;
        }
        let request = request.into_inner();
        match self
            .catalog
            .authenticate_api_key(&request.key_id, &request.secret)
            .await
            .map_err(status)?
        {
            Ok((tenant, _)) if caller.role == Role::Broker && !caller.serves(&tenant) => {
                tracing::info!(key = %request.key_id, "API key of another tenant refused");
                Err(Status::unauthenticated("the API key is not valid"))
            }
            Ok((tenant, principal)) => Ok(Response::new(pb::AuthenticateApiKeyResponse {
                tenant,
                principal,
            })),
            Err(refusal) => {
                tracing::info!(key = %request.key_id, ?refusal, "API key refused");
                Err(Status::unauthenticated("the API key is not valid"))
            }
        }
    }

    async fn authenticate_peer(
        &self,
        request: Request<pb::AuthenticatePeerRequest>,
    ) -> Result<Response<pb::AuthenticatePeerResponse>, Status> {
        // A broker checks who connects to its inter-broker listener.
        credentials::caller(&request)?.require(Role::Broker)?;
        let presented = request.into_inner().credential;
        let refused = || Status::unauthenticated("the credential is not valid");
        let verifier = self.peers.as_ref().ok_or_else(refused)?;
        let peer = verifier.verify_presented(presented.trim()).map_err(|e| {
            tracing::info!(error = %e, "a credential presented to a broker was refused");
            refused()
        })?;
        Ok(Response::new(pb::AuthenticatePeerResponse {
            name: peer.caller.name,
            tenants: peer.caller.tenants,
            expires_at: peer.expires_at,
            role: peer.caller.role.name().to_owned(),
            node: peer.caller.node,
        }))
    }

    async fn get_scram_credential(
        &self,
        request: Request<pb::GetScramCredentialRequest>,
    ) -> Result<Response<pb::GetScramCredentialResponse>, Status> {
        let caller = credentials::caller(&request)?;
        scram_credentials::get(&self.catalog, &caller, request.into_inner())
            .await
            .map(Response::new)
            .map_err(scram_status)
    }

    async fn describe_scram_credentials(
        &self,
        request: Request<pb::DescribeScramCredentialsRequest>,
    ) -> Result<Response<pb::DescribeScramCredentialsResponse>, Status> {
        let caller = credentials::caller(&request)?;
        scram_credentials::describe(&self.catalog, &caller, request.into_inner())
            .await
            .map(Response::new)
            .map_err(scram_status)
    }

    async fn alter_scram_credentials(
        &self,
        request: Request<pb::AlterScramCredentialsRequest>,
    ) -> Result<Response<pb::AlterScramCredentialsResponse>, Status> {
        let caller = credentials::caller(&request)?;
        self.require_active()?;
        let request = request.into_inner();
        let (tenant, user) = (request.tenant.clone(), request.user.clone());
        scram_credentials::alter(&self.catalog, &caller, request)
            .await
            .map_err(scram_status)?;
        tracing::info!(%tenant, %user, by = %caller.name, "altered SCRAM credentials");
        Ok(Response::new(pb::AlterScramCredentialsResponse {}))
    }

    async fn watch_metadata(
        &self,
        request: Request<pb::WatchMetadataRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        // A gateway sees every tenant; a broker only the tenants its credential covers.
        let caller = credentials::caller(&request)?;
        let credential = format!("{}:{}:{:?}", caller.role.name(), caller.name, caller.node);
        let Some(watching) = self.watchers.open(&credential) else {
            return Err(Status::resource_exhausted(format!(
                "the credential {:?} has {} metadata streams open already",
                caller.name,
                crate::watchers::MAX_STREAMS_PER_CREDENTIAL
            )));
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let service = self.clone();
        tokio::spawn(async move {
            let _watching = watching;
            let mut last: Option<pb::MetadataSnapshot> = None;
            let mut version = 0i64;
            loop {
                let snapshot = service
                    .snapshot()
                    .await
                    .map(|s| s.map(|s| visible_to(&caller, s)));
                match snapshot {
                    Ok(Some(snapshot)) if last.as_ref() != Some(&snapshot) => {
                        version += 1;
                        let sent = pb::MetadataSnapshot {
                            version,
                            ..snapshot.clone()
                        };
                        for chunk in skein_proto::snapshot::into_chunks(sent, CHUNK_BYTES) {
                            if tx.send(Ok(chunk)).await.is_err() {
                                return; // the watcher went away
                            }
                        }
                        last = Some(snapshot);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Err(status(e))).await;
                        return;
                    }
                }
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep(service.config.watch_interval) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
