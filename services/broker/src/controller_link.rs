//! The broker's connection to the cluster's controller: registration under a new
//! incarnation, heartbeats, forwarded topic changes, and the metadata stream that feeds the
//! topic registry. The broker serves one tenant's topics, under their plain names.

// tonic's `Status` is the error type of every gRPC call; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::time::Duration;

use skein_proto::controller as pb;
use skein_proto::controller::controller_client::ControllerClient;
use tonic::transport::Channel;
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

/// A registered broker's channel to the controller.
#[derive(Debug, Clone)]
pub struct ControllerLink {
    client: ControllerClient<Channel>,
    identity: BrokerIdentity,
    incarnation: String,
}

/// A topic change the controller refused, or could not be asked.
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
    /// Connects to the controller at `url` and registers under a new incarnation.
    pub async fn connect(url: &str, identity: BrokerIdentity) -> anyhow::Result<Self> {
        let client = ControllerClient::connect(url.to_owned()).await?;
        let link = Self {
            client,
            identity,
            incarnation: Uuid::new_v4().to_string(),
        };
        link.register().await?;
        Ok(link)
    }

    pub fn identity(&self) -> &BrokerIdentity {
        &self.identity
    }

    async fn register(&self) -> Result<(), ControllerError> {
        self.client
            .clone()
            .register_broker(pb::RegisterBrokerRequest {
                broker: Some(pb::BrokerEndpoint {
                    node_id: self.identity.node_id,
                    host: self.identity.host.clone(),
                    port: self.identity.port,
                    rack: None,
                }),
                incarnation: self.incarnation.clone(),
            })
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
                let beat = link
                    .client
                    .clone()
                    .heartbeat(pb::HeartbeatRequest {
                        node_id: link.identity.node_id,
                        incarnation: link.incarnation.clone(),
                    })
                    .await;
                match beat {
                    Ok(r) if r.get_ref().registered => {}
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

    /// The stream of metadata snapshots.
    pub async fn watch(&self) -> Result<Snapshots, ControllerError> {
        Ok(self
            .client
            .clone()
            .watch_metadata(pb::WatchMetadataRequest {})
            .await?
            .into_inner())
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

    pub async fn create_acl(
        &self,
        binding: &skein_auth::AclBinding,
    ) -> Result<(), ControllerError> {
        self.client
            .clone()
            .create_acl(pb::CreateAclRequest {
                acl: Some(skein_proto::acl::to_wire(&self.identity.tenant, binding)),
            })
            .await?;
        Ok(())
    }

    /// Deletes this tenant's bindings that `filter` selects; answers them.
    pub async fn delete_acls(
        &self,
        filter: &skein_auth::AclBindingFilter,
    ) -> Result<Vec<skein_auth::AclBinding>, ControllerError> {
        let response = self
            .client
            .clone()
            .delete_acls(pb::DeleteAclsRequest {
                filter: Some(skein_proto::acl::filter_to_wire(
                    &self.identity.tenant,
                    filter,
                )),
            })
            .await?;
        Ok(response
            .into_inner()
            .deleted
            .iter()
            .filter_map(|a| skein_proto::acl::from_wire(a).ok())
            .collect())
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

    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, ControllerError> {
        let response = self
            .client
            .clone()
            .create_topic(pb::CreateTopicRequest {
                tenant: self.identity.tenant.clone(),
                name: name.to_owned(),
                partitions,
                replication_factor,
                configs: configs.into_iter().collect(),
            })
            .await?;
        answered(response.into_inner())
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), ControllerError> {
        self.client
            .clone()
            .delete_topic(pb::DeleteTopicRequest {
                tenant: self.identity.tenant.clone(),
                name: name.to_owned(),
            })
            .await?;
        Ok(())
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
    ) -> Result<TopicInfo, ControllerError> {
        let response = self
            .client
            .clone()
            .create_partitions(pb::CreatePartitionsRequest {
                tenant: self.identity.tenant.clone(),
                name: name.to_owned(),
                count,
            })
            .await?;
        answered(response.into_inner())
    }

    pub async fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicInfo, ControllerError> {
        let response = self
            .client
            .clone()
            .alter_topic_configs(pb::AlterTopicConfigsRequest {
                tenant: self.identity.tenant.clone(),
                name: name.to_owned(),
                configs: configs.into_iter().collect(),
            })
            .await?;
        answered(response.into_inner())
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
