//! The broker's connection to the cluster's controller: registration under a new
//! incarnation, heartbeats, forwarded topic and ACL changes, and the metadata stream that
//! feeds the topic registry. A broker serving one tenant keeps that tenant's topics under
//! their plain names; one serving every tenant keeps each topic as `<tenant>.<name>`
//! (`crate::scope`). The controller knows topics by (tenant, name): the link splits a kept
//! name on the way out and qualifies the controller's answers on the way back.
//!
//! Calls fail over between the control-plane replicas (`skein_proto::replicas`).

// tonic's `Status` is the error type of every gRPC call; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use skein_proto::controller as pb;
use skein_proto::refusal;
pub use skein_proto::refusal::Reason;
pub use skein_proto::replicas::Snapshots;
use skein_proto::replicas::{Client, ControllerReplicas, ControllerTls, Credential};
use uuid::Uuid;

use crate::scope::Tenancy;
use crate::topics::{BrokerEndpoint, PartitionPlacement, Placement, TopicInfo};

/// What a metadata snapshot says of one tenant.
#[derive(Debug, Default, Clone)]
pub struct TenantSnapshot {
    pub acls: Vec<skein_auth::AclBinding>,
    /// The tenant-wide quota.
    pub quota: Option<pb::Quota>,
    /// Principals' own quotas, by principal name.
    pub principal_quotas: std::collections::HashMap<String, pb::Quota>,
}

/// [`TenantSnapshot`]s by tenant name.
pub type TenantsSnapshot = std::collections::HashMap<String, TenantSnapshot>;

/// Who this broker is to the controller.
#[derive(Debug, Clone)]
pub struct BrokerIdentity {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    /// The tenant whose topics this broker serves; `None`: every tenant.
    pub tenant: Option<String>,
    /// `broker.rack`: replicas of a partition are spread over racks.
    pub rack: Option<String>,
    /// Every listener's advertised address, `NAME://host:port,...`.
    pub advertised_listeners: String,
}

/// A registered broker's channels to the control-plane replicas.
#[derive(Debug, Clone)]
pub struct ControllerLink {
    replicas: ControllerReplicas,
    /// This broker's controller credential, which it also presents to other brokers'
    /// inter-broker listeners.
    credential: Credential,
    identity: BrokerIdentity,
    incarnation: String,
}

/// A change the controller refused, or could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("controller: {message}")]
pub struct ControllerError {
    pub code: tonic::Code,
    /// Why the controller refused; `Unspecified` when it could not be asked (or said not).
    pub reason: Reason,
    pub message: String,
}

impl From<tonic::Status> for ControllerError {
    fn from(status: tonic::Status) -> Self {
        Self {
            code: status.code(),
            reason: refusal::reason(&status),
            message: status.message().to_owned(),
        }
    }
}

impl ControllerLink {
    /// Connects (lazily) to each replica in `urls` and registers under a new incarnation
    /// with whichever answers; `https://` addresses are reached in TLS as `tls` says.
    pub async fn connect(
        urls: &[String],
        identity: BrokerIdentity,
        credential: Credential,
        tls: Option<ControllerTls>,
    ) -> anyhow::Result<Self> {
        let link = Self {
            replicas: ControllerReplicas::connect_lazy_with(urls, credential.clone(), tls)?,
            credential,
            identity,
            incarnation: Uuid::new_v4().to_string(),
        };
        link.register().await?;
        Ok(link)
    }

    pub fn identity(&self) -> &BrokerIdentity {
        &self.identity
    }

    /// This broker's controller credential, as a token to present to other brokers.
    pub fn credential_token(&self) -> Option<&str> {
        self.credential.token()
    }

    /// Whose a controller credential another broker presented is, if it is a broker's:
    /// its name, the tenants it covers and when it expires (seconds since the epoch).
    pub async fn authenticate_peer(
        &self,
        credential: &str,
    ) -> Result<pb::AuthenticatePeerResponse, ControllerError> {
        let request = pb::AuthenticatePeerRequest {
            credential: credential.to_owned(),
        };
        self.call(
            request,
            |mut c, r| async move { c.authenticate_peer(r).await },
        )
        .await
    }

    /// Whether this broker serves one tenant or every tenant.
    pub fn tenancy(&self) -> Tenancy {
        match self.identity.tenant {
            Some(_) => Tenancy::One,
            None => Tenancy::Every,
        }
    }

    /// Whether this broker serves `tenant`.
    fn serves(&self, tenant: &str) -> bool {
        self.identity
            .tenant
            .as_deref()
            .is_none_or(|own| own == tenant)
    }

    /// The tenant a kept topic name belongs to, and the name the controller knows it by.
    fn owner<'a>(&'a self, kept: &'a str) -> Result<(&'a str, &'a str), ControllerError> {
        match &self.identity.tenant {
            Some(own) => Ok((own, kept)),
            None => kept.split_once('.').ok_or_else(|| ControllerError {
                code: tonic::Code::NotFound,
                reason: Reason::NotFound,
                message: format!("topic {kept:?} names no tenant"),
            }),
        }
    }

    /// The name this broker keeps for `tenant`'s topic `name`.
    fn kept(&self, tenant: &str, name: &str) -> String {
        match self.tenancy() {
            Tenancy::One => name.to_owned(),
            Tenancy::Every => format!("{tenant}.{name}"),
        }
    }

    /// A topic the controller answered, under the name this broker keeps for it.
    fn answered(
        &self,
        tenant: &str,
        response: pb::TopicResponse,
    ) -> Result<TopicInfo, ControllerError> {
        let mut info = answered(response)?;
        info.name = self.kept(tenant, &info.name);
        Ok(info)
    }

    async fn call<Req, T, F, Fut>(&self, request: Req, call: F) -> Result<T, ControllerError>
    where
        Req: Clone,
        F: Fn(Client, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        Ok(self.replicas.call(request, call).await?)
    }

    async fn register(&self) -> Result<(), ControllerError> {
        let request = pb::RegisterBrokerRequest {
            broker: Some(pb::BrokerEndpoint {
                node_id: self.identity.node_id,
                host: self.identity.host.clone(),
                port: self.identity.port,
                rack: self.identity.rack.clone(),
                tenant: self.identity.tenant.clone(),
                advertised_listeners: self.identity.advertised_listeners.clone(),
            }),
            incarnation: self.incarnation.clone(),
        };
        self.call(
            request,
            |mut c, r| async move { c.register_broker(r).await },
        )
        .await?;
        Ok(())
    }

    /// Heartbeats every `interval` until the task is aborted, registering again when the
    /// controller no longer knows this incarnation.
    pub fn spawn_heartbeats(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let link = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let request = pb::HeartbeatRequest {
                    node_id: link.identity.node_id,
                    incarnation: link.incarnation.clone(),
                };
                let beat = link
                    .call(request, |mut c, r| async move { c.heartbeat(r).await })
                    .await;
                match beat {
                    Ok(answer) if answer.registered => {}
                    Ok(_) => {
                        if let Err(e) = link.register().await {
                            tracing::warn!(error = %e, "re-registration failed");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
                }
            }
        })
    }

    /// The stream of metadata snapshots, from whichever replica answers.
    pub async fn watch(&self) -> Result<Snapshots, ControllerError> {
        Ok(self.replicas.watch().await?)
    }

    /// What a snapshot says of each tenant this broker serves: ACL bindings (one that does
    /// not parse is skipped), the tenant's quota and its principals' own.
    pub fn tenants_of(&self, snapshot: &pb::MetadataSnapshot) -> TenantsSnapshot {
        let mut tenants = TenantsSnapshot::new();
        for acl in snapshot.acls.iter().filter(|a| self.serves(&a.tenant)) {
            if let Ok(binding) = skein_proto::acl::from_wire(acl) {
                tenants
                    .entry(acl.tenant.clone())
                    .or_default()
                    .acls
                    .push(binding);
            }
        }
        for quota in snapshot.quotas.iter().filter(|q| self.serves(&q.tenant)) {
            let tenant = tenants.entry(quota.tenant.clone()).or_default();
            match &quota.principal {
                Some(principal) => {
                    tenant
                        .principal_quotas
                        .insert(principal.clone(), quota.clone());
                }
                None => tenant.quota = Some(quota.clone()),
            }
        }
        tenants
    }

    /// The (tenant, id) of the API keys and SCRAM credentials in force of every tenant this
    /// broker serves, in a snapshot.
    pub fn keys_of(
        &self,
        snapshot: &pb::MetadataSnapshot,
    ) -> std::collections::HashSet<(String, String)> {
        snapshot
            .keys_in_force
            .iter()
            .filter(|k| self.serves(&k.tenant))
            .map(|k| (k.tenant.clone(), k.id.clone()))
            .collect()
    }

    /// The tenant and principal an API key authenticates (SASL/PLAIN); a refused key, and
    /// one of a tenant this broker does not serve, is `Unauthenticated`.
    pub async fn authenticate_api_key(
        &self,
        key_id: &str,
        secret: &str,
    ) -> Result<(String, String), ControllerError> {
        let request = pb::AuthenticateApiKeyRequest {
            key_id: key_id.to_owned(),
            secret: secret.to_owned(),
        };
        let answer = self
            .call(request, |mut c, r| async move {
                c.authenticate_api_key(r).await
            })
            .await?;
        if !self.serves(&answer.tenant) {
            return Err(ControllerError {
                code: tonic::Code::Unauthenticated,
                reason: Reason::Unspecified,
                message: "the API key belongs to another tenant".to_owned(),
            });
        }
        Ok((answer.tenant, answer.principal))
    }

    /// The SCRAM credential `user` of `tenant` authenticates with over `mechanism`, if any.
    pub async fn scram_credential(
        &self,
        tenant: &str,
        user: &str,
        mechanism: &str,
    ) -> Result<Option<pb::ScramCredential>, ControllerError> {
        let request = pb::GetScramCredentialRequest {
            tenant: tenant.to_owned(),
            user: user.to_owned(),
            mechanism: mechanism.to_owned(),
        };
        let answer = self
            .call(request, |mut c, r| async move {
                c.get_scram_credential(r).await
            })
            .await?;
        Ok(answer.credential)
    }

    /// The SCRAM credentials of `tenant`'s `users` (all, when empty).
    pub async fn describe_scram_credentials(
        &self,
        tenant: &str,
        users: Vec<String>,
    ) -> Result<Vec<pb::UserScramCredentials>, ControllerError> {
        let request = pb::DescribeScramCredentialsRequest {
            tenant: tenant.to_owned(),
            users,
        };
        let answer = self
            .call(request, |mut c, r| async move {
                c.describe_scram_credentials(r).await
            })
            .await?;
        Ok(answer.users)
    }

    /// Sets and deletes one of `tenant`'s users' SCRAM credentials.
    pub async fn alter_scram_credentials(
        &self,
        tenant: &str,
        user: &str,
        upsertions: Vec<pb::ScramCredential>,
        deletions: Vec<String>,
    ) -> Result<(), ControllerError> {
        let request = pb::AlterScramCredentialsRequest {
            tenant: tenant.to_owned(),
            user: user.to_owned(),
            upsertions,
            deletions,
        };
        self.call(request, |mut c, r| async move {
            c.alter_scram_credentials(r).await
        })
        .await?;
        Ok(())
    }

    /// The brokers in a snapshot that serve a tenant this broker serves.
    pub fn brokers_of(&self, snapshot: &pb::MetadataSnapshot) -> Vec<BrokerEndpoint> {
        snapshot
            .brokers
            .iter()
            .filter(
                |b| match (b.tenant.as_deref(), self.identity.tenant.as_deref()) {
                    (None, _) | (_, None) => true,
                    (Some(theirs), Some(own)) => theirs == own,
                },
            )
            .map(|b| BrokerEndpoint {
                tenant: b.tenant.clone(),
                node_id: b.node_id,
                host: b.host.clone(),
                port: b.port,
                rack: b.rack.clone(),
                // A list that does not parse tells nothing: the broker is then known by
                // its inter-broker address alone.
                listeners: crate::listeners::parse_endpoints(&b.advertised_listeners)
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The topics in a snapshot of every tenant this broker serves, under the names it
    /// keeps for them.
    pub fn topics_of(&self, snapshot: &pb::MetadataSnapshot) -> Vec<TopicInfo> {
        snapshot
            .topics
            .iter()
            .filter(|t| self.serves(&t.tenant))
            .filter_map(|t| {
                let mut info = topic_info(t)?;
                info.name = self.kept(&t.tenant, &info.name);
                Some(info)
            })
            .collect()
    }

    /// A block of producer ids for this broker: (first id, size).
    pub async fn allocate_producer_ids(&self) -> Result<(i64, i32), ControllerError> {
        let request = pb::AllocateProducerIdsRequest {
            node_id: self.identity.node_id,
        };
        let block = self
            .call(request, |mut c, r| async move {
                c.allocate_producer_ids(r).await
            })
            .await?;
        Ok((block.first_id, block.size))
    }

    pub async fn create_acl(
        &self,
        tenant: &str,
        binding: &skein_auth::AclBinding,
    ) -> Result<(), ControllerError> {
        let request = pb::CreateAclRequest {
            acl: Some(skein_proto::acl::to_wire(tenant, binding)),
        };
        self.call(request, |mut c, r| async move { c.create_acl(r).await })
            .await?;
        Ok(())
    }

    /// Deletes `tenant`'s bindings that `filter` selects; answers them.
    pub async fn delete_acls(
        &self,
        tenant: &str,
        filter: &skein_auth::AclBindingFilter,
    ) -> Result<Vec<skein_auth::AclBinding>, ControllerError> {
        let request = pb::DeleteAclsRequest {
            filter: Some(skein_proto::acl::filter_to_wire(tenant, filter)),
        };
        let response = self
            .call(request, |mut c, r| async move { c.delete_acls(r).await })
            .await?;
        Ok(response
            .deleted
            .iter()
            .filter_map(|a| skein_proto::acl::from_wire(a).ok())
            .collect())
    }

    pub async fn create_topic(
        &self,
        name: &str,
        shape: &TopicShape,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, ControllerError> {
        let (partitions, replication_factor, assignments) = match shape {
            TopicShape::Placed {
                partitions,
                replication_factor,
            } => (*partitions, *replication_factor, Vec::new()),
            TopicShape::Assigned(assigned) => (
                i32::try_from(assigned.len()).unwrap_or(i32::MAX),
                -1,
                assignments(assigned),
            ),
        };
        let (tenant, name) = self.owner(name)?;
        let request = pb::CreateTopicRequest {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            partitions,
            replication_factor,
            configs: configs.into_iter().collect(),
            assignments,
        };
        self.answered(
            tenant,
            self.call(request, |mut c, r| async move { c.create_topic(r).await })
                .await?,
        )
    }

    /// AlterPartition: this broker, leading `partition` of `topic` in `leader_epoch` at
    /// `partition_epoch`, asks for `isr`; answers the partition as stored. A fenced or stale
    /// request is refused with [`Reason::Conflict`].
    pub async fn alter_partition(
        &self,
        topic: &str,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    ) -> Result<PartitionPlacement, ControllerError> {
        let (tenant, topic) = self.owner(topic)?;
        let request = pb::AlterPartitionRequest {
            tenant: tenant.to_owned(),
            topic: topic.to_owned(),
            partition,
            leader: self.identity.node_id,
            leader_epoch,
            partition_epoch,
            isr,
        };
        let answer = self
            .call(
                request,
                |mut c, r| async move { c.alter_partition(r).await },
            )
            .await?;
        let stored = answer.partition.ok_or_else(|| ControllerError {
            code: tonic::Code::Internal,
            reason: Reason::Unspecified,
            message: "the controller answered without the partition".to_owned(),
        })?;
        Ok(placement(&stored))
    }

    /// Controlled shutdown: asks the controller to move this broker's leaderships away;
    /// answers how many it still holds.
    pub async fn controlled_shutdown(&self) -> Result<i32, ControllerError> {
        let request = pb::ControlledShutdownRequest {
            node_id: self.identity.node_id,
            incarnation: self.incarnation.clone(),
        };
        let answer = self
            .call(
                request,
                |mut c, r| async move { c.controlled_shutdown(r).await },
            )
            .await?;
        Ok(answer.remaining_leaderships)
    }

    /// ElectLeaders: asks the controller for preferred (or `unclean`) elections of `tenant`'s
    /// `topics`' partitions (plain names), every partition when empty; answers each
    /// partition's outcome.
    pub async fn elect_leaders(
        &self,
        tenant: &str,
        unclean: bool,
        topics: Vec<(String, Vec<i32>)>,
    ) -> Result<Vec<pb::ElectionResult>, ControllerError> {
        let request = pb::ElectLeadersRequest {
            tenant: tenant.to_owned(),
            unclean,
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| pb::ElectionTopic { topic, partitions })
                .collect(),
        };
        let answer = self
            .call(request, |mut c, r| async move { c.elect_leaders(r).await })
            .await?;
        Ok(answer.results)
    }

    /// AlterPartitionReassignments: each of `tenant`'s (topic, partition, target) moves to
    /// `target`, or with `None` cancels the move in progress; answers each outcome in order.
    pub async fn alter_reassignments(
        &self,
        tenant: &str,
        asked: Vec<(String, i32, Option<Vec<i32>>)>,
    ) -> Result<Vec<pb::ReassignmentResult>, ControllerError> {
        let request = pb::AlterReassignmentsRequest {
            tenant: tenant.to_owned(),
            reassignments: asked
                .into_iter()
                .map(|(topic, partition, target)| pb::Reassignment {
                    topic,
                    partition,
                    target: target.map(|replicas| pb::ReplicaAssignment { replicas }),
                })
                .collect(),
        };
        let answer = self
            .call(request, |mut c, r| async move {
                c.alter_partition_reassignments(r).await
            })
            .await?;
        Ok(answer.results)
    }

    /// ListPartitionReassignments: the moves in progress among `tenant`'s `topics` (every
    /// topic of the tenant when empty).
    pub async fn list_reassignments(
        &self,
        tenant: &str,
        topics: Vec<(String, Vec<i32>)>,
    ) -> Result<Vec<pb::OngoingReassignment>, ControllerError> {
        let request = pb::ListReassignmentsRequest {
            tenant: tenant.to_owned(),
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| pb::ElectionTopic { topic, partitions })
                .collect(),
        };
        let answer = self
            .call(request, |mut c, r| async move {
                c.list_partition_reassignments(r).await
            })
            .await?;
        Ok(answer.reassignments)
    }

    /// The topic this broker keeps as `name`, as the catalog has it now.
    pub async fn describe_topic(&self, name: &str) -> Result<TopicInfo, ControllerError> {
        let (tenant, name) = self.owner(name)?;
        let request = pb::DescribeTopicRequest {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
        };
        self.answered(
            tenant,
            self.call(request, |mut c, r| async move { c.describe_topic(r).await })
                .await?,
        )
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), ControllerError> {
        let (tenant, name) = self.owner(name)?;
        let request = pb::DeleteTopicRequest {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
        };
        self.call(request, |mut c, r| async move { c.delete_topic(r).await })
            .await?;
        Ok(())
    }

    /// Grows a topic to `count` partitions; `assigned`, when not empty, names each new
    /// partition's replicas.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assigned: &[Vec<i32>],
    ) -> Result<TopicInfo, ControllerError> {
        let (tenant, name) = self.owner(name)?;
        let request = pb::CreatePartitionsRequest {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            count,
            assignments: assignments(assigned),
        };
        self.answered(
            tenant,
            self.call(
                request,
                |mut c, r| async move { c.create_partitions(r).await },
            )
            .await?,
        )
    }

    pub async fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, ControllerError> {
        let (tenant, name) = self.owner(name)?;
        let request = pb::AlterTopicConfigsRequest {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            configs: configs.into_iter().collect(),
        };
        self.answered(
            tenant,
            self.call(
                request,
                |mut c, r| async move { c.alter_topic_configs(r).await },
            )
            .await?,
        )
    }
}

/// A new topic's partitions: placed by the controller, or chosen by an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicShape {
    Placed {
        partitions: i32,
        replication_factor: i32,
    },
    /// Each partition's replicas by index, preferred leader first.
    Assigned(Vec<Vec<i32>>),
}

fn assignments(assigned: &[Vec<i32>]) -> Vec<pb::ReplicaAssignment> {
    assigned
        .iter()
        .map(|replicas| pb::ReplicaAssignment {
            replicas: replicas.clone(),
        })
        .collect()
}

fn answered(response: pb::TopicResponse) -> Result<TopicInfo, ControllerError> {
    response
        .topic
        .as_ref()
        .and_then(topic_info)
        .ok_or_else(|| ControllerError {
            code: tonic::Code::Internal,
            reason: Reason::Unspecified,
            message: "the controller answered without a valid topic".to_owned(),
        })
}

fn placement(p: &pb::Partition) -> PartitionPlacement {
    PartitionPlacement {
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
    }
}

/// A topic of the controller's; `None` when its id does not parse or its partitions are not
/// exactly 0..n.
fn topic_info(topic: &pb::Topic) -> Option<TopicInfo> {
    let mut partitions: Vec<&pb::Partition> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.index);
    let contiguous = partitions
        .iter()
        .enumerate()
        .all(|(i, p)| usize::try_from(p.index).is_ok_and(|index| index == i));
    if !contiguous {
        return None;
    }
    let placements: Vec<PartitionPlacement> = partitions.into_iter().map(placement).collect();
    Some(TopicInfo {
        name: topic.name.clone(),
        id: Uuid::parse_str(&topic.id).ok()?,
        partitions: i32::try_from(placements.len()).ok()?,
        configs: topic.configs.clone().into_iter().collect(),
        placement: Placement::Assigned(placements.into()),
    })
}
