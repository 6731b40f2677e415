//! The broker's connection to the cluster's controller: registration under a new
//! incarnation, heartbeats, forwarded topic and ACL changes, and the metadata stream that
//! feeds the topic registry. The broker serves one tenant's topics, under their plain names.
//!
//! Calls go to the control-plane replica that last answered; one that is unreachable or not
//! the active controller (UNAVAILABLE) passes the call to the next, so a broker rides
//! through a controller failover.

// tonic's `Status` is the error type of every gRPC call; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skein_proto::controller as pb;
use skein_proto::controller::controller_client::ControllerClient;
use tonic::transport::{Channel, Endpoint};
use uuid::Uuid;

use crate::topics::TopicInfo;

/// The controller's metadata snapshots, as they come.
pub type Snapshots = tonic::Streaming<pb::MetadataSnapshot>;

/// Who this broker is to the controller.
#[derive(Debug, Clone)]
pub struct BrokerIdentity {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    /// The tenant whose topics this broker's Kafka listener serves.
    pub tenant: String,
}

/// A registered broker's channels to the control-plane replicas.
#[derive(Debug, Clone)]
pub struct ControllerLink {
    replicas: Arc<[(String, ControllerClient<Channel>)]>,
    preferred: Arc<AtomicUsize>,
    identity: BrokerIdentity,
    incarnation: String,
}

/// A change the controller refused, or could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("controller: {message}")]
pub struct ControllerError {
    pub code: tonic::Code,
    pub message: String,
}

impl From<tonic::Status> for ControllerError {
    fn from(status: tonic::Status) -> Self {
        Self {
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}

impl ControllerLink {
    /// Connects (lazily) to each replica in `urls` and registers under a new incarnation
    /// with whichever answers.
    pub async fn connect(urls: &[String], identity: BrokerIdentity) -> anyhow::Result<Self> {
        anyhow::ensure!(!urls.is_empty(), "no control-plane address given");
        let mut replicas = Vec::with_capacity(urls.len());
        for url in urls {
            let channel = Endpoint::from_shared(url.clone())
                .map_err(|e| anyhow::anyhow!("{url}: {e}"))?
                .connect_timeout(Duration::from_secs(2))
                .connect_lazy();
            replicas.push((url.clone(), ControllerClient::new(channel)));
        }
        let link = Self {
            replicas: replicas.into(),
            preferred: Arc::new(AtomicUsize::new(0)),
            identity,
            incarnation: Uuid::new_v4().to_string(),
        };
        link.register().await?;
        Ok(link)
    }

    pub fn identity(&self) -> &BrokerIdentity {
        &self.identity
    }

    /// Sends `request` with `call` to the preferred replica, then to the others while they
    /// answer UNAVAILABLE.
    async fn call<Req, T, F, Fut>(&self, request: Req, call: F) -> Result<T, ControllerError>
    where
        Req: Clone,
        F: Fn(ControllerClient<Channel>, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let count = self.replicas.len();
        let first = self.preferred.load(Ordering::Relaxed) % count;
        let mut last = None;
        for step in 0..count {
            let index = (first + step) % count;
            let (url, client) = &self.replicas[index];
            match call(client.clone(), request.clone()).await {
                Ok(response) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(response.into_inner());
                }
                Err(status) if status.code() == tonic::Code::Unavailable => {
                    tracing::debug!(replica = %url, message = status.message(), "trying another control-plane replica");
                    last = Some(status);
                }
                Err(status) => return Err(status.into()),
            }
        }
        Err(last
            .unwrap_or_else(|| tonic::Status::unavailable("no control-plane replica"))
            .into())
    }

    async fn register(&self) -> Result<(), ControllerError> {
        let request = pb::RegisterBrokerRequest {
            broker: Some(pb::BrokerEndpoint {
                node_id: self.identity.node_id,
                host: self.identity.host.clone(),
                port: self.identity.port,
                rack: None,
                tenant: Some(self.identity.tenant.clone()),
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
        self.call(pb::WatchMetadataRequest {}, |mut c, r| async move {
            c.watch_metadata(r).await
        })
        .await
    }

    /// This tenant's ACL bindings in a snapshot (a binding that does not parse is skipped).
    pub fn acls_of(&self, snapshot: &pb::MetadataSnapshot) -> Vec<skein_auth::AclBinding> {
        snapshot
            .acls
            .iter()
            .filter(|a| a.tenant == self.identity.tenant)
            .filter_map(|a| skein_proto::acl::from_wire(a).ok())
            .collect()
    }

    /// This tenant's topics in a snapshot.
    pub fn topics_of(&self, snapshot: &pb::MetadataSnapshot) -> Vec<TopicInfo> {
        snapshot
            .topics
            .iter()
            .filter(|t| t.tenant == self.identity.tenant)
            .filter_map(topic_info)
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
        binding: &skein_auth::AclBinding,
    ) -> Result<(), ControllerError> {
        let request = pb::CreateAclRequest {
            acl: Some(skein_proto::acl::to_wire(&self.identity.tenant, binding)),
        };
        self.call(request, |mut c, r| async move { c.create_acl(r).await })
            .await?;
        Ok(())
    }

    /// Deletes this tenant's bindings that `filter` selects; answers them.
    pub async fn delete_acls(
        &self,
        filter: &skein_auth::AclBindingFilter,
    ) -> Result<Vec<skein_auth::AclBinding>, ControllerError> {
        let request = pb::DeleteAclsRequest {
            filter: Some(skein_proto::acl::filter_to_wire(
                &self.identity.tenant,
                filter,
            )),
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
        partitions: i32,
        replication_factor: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, ControllerError> {
        let request = pb::CreateTopicRequest {
            tenant: self.identity.tenant.clone(),
            name: name.to_owned(),
            partitions,
            replication_factor,
            configs: configs.into_iter().collect(),
        };
        answered(
            self.call(request, |mut c, r| async move { c.create_topic(r).await })
                .await?,
        )
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), ControllerError> {
        let request = pb::DeleteTopicRequest {
            tenant: self.identity.tenant.clone(),
            name: name.to_owned(),
        };
        self.call(request, |mut c, r| async move { c.delete_topic(r).await })
            .await?;
        Ok(())
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
    ) -> Result<TopicInfo, ControllerError> {
        let request = pb::CreatePartitionsRequest {
            tenant: self.identity.tenant.clone(),
            name: name.to_owned(),
            count,
        };
        answered(
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
        let request = pb::AlterTopicConfigsRequest {
            tenant: self.identity.tenant.clone(),
            name: name.to_owned(),
            configs: configs.into_iter().collect(),
        };
        answered(
            self.call(
                request,
                |mut c, r| async move { c.alter_topic_configs(r).await },
            )
            .await?,
        )
    }
}

fn answered(response: pb::TopicResponse) -> Result<TopicInfo, ControllerError> {
    response
        .topic
        .as_ref()
        .and_then(topic_info)
        .ok_or_else(|| ControllerError {
            code: tonic::Code::Internal,
            message: "the controller answered without a valid topic".to_owned(),
        })
}

fn topic_info(topic: &pb::Topic) -> Option<TopicInfo> {
    Some(TopicInfo {
        name: topic.name.clone(),
        id: Uuid::parse_str(&topic.id).ok()?,
        partitions: i32::try_from(topic.partitions.len()).ok()?,
        configs: topic.configs.clone().into_iter().collect(),
    })
}
