//! [`Client`]: bootstrap, the metadata cache and a connection pool keyed by node id.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::RwLock;

use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::metadata::{ClusterMetadata, TopicMetadata};
use crate::ClientConfig;

/// A handle on a Kafka cluster; cheap to clone, and clones share connections and metadata.
///
/// The produce, fetch and admin calls are methods of this type (see [`crate::Producer`] for
/// partitioning and batching). Consumers open connections of their own with
/// [`Client::detached`], since their long-polling fetches would hold up other requests on a
/// shared connection.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ClientConfig,
    metadata: RwLock<Arc<ClusterMetadata>>,
    /// Open connections by node id.
    connections: tokio::sync::Mutex<HashMap<i32, Arc<Connection>>>,
}

impl Client {
    /// Connects to the first reachable bootstrap broker and loads the cluster metadata.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        if config.bootstrap_servers.is_empty() {
            return Err(ClientError::InvalidArgument {
                reason: "no bootstrap servers".to_owned(),
            });
        }
        let client = Self::with_metadata(config, ClusterMetadata::default());
        let mut last = None;
        for addr in &client.inner.config.bootstrap_servers {
            match client.bootstrap_from(addr).await {
                Ok(()) => return Ok(client),
                Err(e) => {
                    tracing::warn!(broker = %addr, error = %e, "bootstrap broker failed");
                    last = Some(e);
                }
            }
        }
        Err(ClientError::BootstrapFailed {
            bootstrap: client.inner.config.bootstrap_servers.clone(),
            source: Box::new(last.unwrap_or(ClientError::InvalidArgument {
                reason: "no bootstrap servers".to_owned(),
            })),
        })
    }

    fn with_metadata(config: ClientConfig, metadata: ClusterMetadata) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                metadata: RwLock::new(Arc::new(metadata)),
                connections: tokio::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    async fn bootstrap_from(&self, addr: &str) -> Result<()> {
        let connection = Arc::new(Connection::connect(addr, &self.inner.config).await?);
        self.refresh_with(&connection, None).await?;
        // Keep the bootstrap connection when it reached a broker of the metadata.
        let metadata = self.metadata();
        if let Some(broker) = metadata.brokers().values().find(|b| b.addr() == addr) {
            self.inner
                .connections
                .lock()
                .await
                .insert(broker.node_id, connection);
        }
        Ok(())
    }

    /// A client with the same configuration and a copy of the current metadata, but
    /// connections of its own.
    pub fn detached(&self) -> Self {
        Self::with_metadata(self.inner.config.clone(), (*self.metadata()).clone())
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        Arc::clone(&self.inner.metadata.read())
    }

    /// A connection to a broker by node id, opened on first use and reopened when closed.
    pub async fn connection(&self, node_id: i32) -> Result<Arc<Connection>> {
        let mut connections = self.inner.connections.lock().await;
        if let Some(connection) = connections.get(&node_id) {
            if !connection.is_closed() {
                return Ok(Arc::clone(connection));
            }
        }
        let addr = self
            .metadata()
            .broker(node_id)
            .map(|b| b.addr())
            .ok_or(ClientError::UnknownBroker { node_id })?;
        let connection = Arc::new(Connection::connect(&addr, &self.inner.config).await?);
        connections.insert(node_id, Arc::clone(&connection));
        Ok(connection)
    }

    /// A connection to any broker: an open one if there is one, else the first broker of
    /// the metadata (or of the bootstrap list) that accepts.
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        {
            let connections = self.inner.connections.lock().await;
            if let Some(connection) = connections.values().find(|c| !c.is_closed()) {
                return Ok(Arc::clone(connection));
            }
        }
        let mut last = None;
        let nodes: Vec<i32> = self.metadata().brokers().keys().copied().collect();
        for node_id in nodes {
            match self.connection(node_id).await {
                Ok(connection) => return Ok(connection),
                Err(e) => last = Some(e),
            }
        }
        for addr in &self.inner.config.bootstrap_servers {
            match Connection::connect(addr, &self.inner.config).await {
                Ok(connection) => return Ok(Arc::new(connection)),
                Err(e) => last = Some(e),
            }
        }
        Err(ClientError::BootstrapFailed {
            bootstrap: self.inner.config.bootstrap_servers.clone(),
            source: Box::new(last.unwrap_or(ClientError::InvalidArgument {
                reason: "no bootstrap servers".to_owned(),
            })),
        })
    }

    /// Reloads the metadata of every topic.
    pub async fn refresh_metadata(&self) -> Result<Arc<ClusterMetadata>> {
        let connection = self.any_connection().await?;
        self.refresh_with(&connection, None).await?;
        Ok(self.metadata())
    }

    /// Reloads the metadata of some topics. Topics that failed keep their error in the
    /// answer; see [`Client::topic`] for a single topic with its error.
    pub async fn refresh_topics(&self, topics: &[&str]) -> Result<Vec<(String, ClientError)>> {
        let connection = self.any_connection().await?;
        self.refresh_with(&connection, Some(topics)).await
    }

    async fn refresh_with(
        &self,
        connection: &Connection,
        topics: Option<&[&str]>,
    ) -> Result<Vec<(String, ClientError)>> {
        let version = connection.version(ApiKey::Metadata)?;
        let mut request = MetadataRequest::default().with_topics(topics.map(|names| {
            names
                .iter()
                .map(|name| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string((*name).to_owned()))))
                })
                .collect()
        }));
        if version >= 4 {
            request =
                request.with_allow_auto_topic_creation(self.inner.config.allow_auto_topic_creation);
        }
        let response = connection.send(&request).await?;
        let mut cached = self.inner.metadata.write();
        let mut metadata = (**cached).clone();
        let errors = metadata.apply(response, topics.is_none());
        *cached = Arc::new(metadata);
        Ok(errors)
    }

    /// Drops topics from the metadata cache.
    pub(crate) fn forget_topics(&self, topics: &[&str]) {
        let mut cached = self.inner.metadata.write();
        let mut metadata = (**cached).clone();
        for topic in topics {
            metadata.remove_topic(topic);
        }
        *cached = Arc::new(metadata);
    }

    /// A topic's metadata: from the cache, or loaded when missing. A topic the broker
    /// answers with an error (UNKNOWN_TOPIC_OR_PARTITION for a missing topic) is `Err`;
    /// LEADER_NOT_AVAILABLE, which a just-created topic may answer, is retried.
    pub async fn topic(&self, name: &str) -> Result<TopicMetadata> {
        if let Some(topic) = self.metadata().topic(name) {
            return Ok(topic.clone());
        }
        self.reload_topic(name).await
    }

    /// A topic's metadata, always loaded from the broker.
    pub async fn reload_topic(&self, name: &str) -> Result<TopicMetadata> {
        let mut attempt = 0;
        loop {
            let errors = self.refresh_topics(&[name]).await?;
            let error = errors.into_iter().find(|(topic, _)| topic == name);
            match error {
                None => {
                    if let Some(topic) = self.metadata().topic(name) {
                        return Ok(topic.clone());
                    }
                    return Err(ClientError::Kafka {
                        api: ApiKey::Metadata,
                        resource: name.to_owned(),
                        error: ResponseError::UnknownTopicOrPartition,
                        code: ResponseError::UnknownTopicOrPartition.code(),
                        message: Some("topic missing from the metadata answer".to_owned()),
                    });
                }
                Some((_, e))
                    if e.kafka_error() == Some(ResponseError::LeaderNotAvailable)
                        && attempt < self.inner.config.retries =>
                {
                    attempt += 1;
                    tokio::time::sleep(self.inner.config.retry_backoff).await;
                }
                Some((_, e)) => return Err(e),
            }
        }
    }

    /// The node id of a partition's leader, from the cache or after a refresh.
    pub async fn leader(&self, topic: &str, partition: i32) -> Result<i32> {
        let metadata = self.topic(topic).await?;
        if let Some(leader) = metadata.leader(partition) {
            return Ok(leader);
        }
        let metadata = self.reload_topic(topic).await?;
        if metadata.partition(partition).is_none() {
            return Err(ClientError::UnknownPartition {
                topic: topic.to_owned(),
                partition,
                partitions: metadata.partitions.len(),
            });
        }
        metadata
            .leader(partition)
            .ok_or_else(|| ClientError::Kafka {
                api: ApiKey::Metadata,
                resource: format!("{topic}-{partition}"),
                error: ResponseError::LeaderNotAvailable,
                code: ResponseError::LeaderNotAvailable.code(),
                message: None,
            })
    }

    /// Waits the retry backoff and refreshes what `error` says is stale. Returns whether
    /// another attempt is worthwhile (the error is retriable and attempts remain).
    pub(crate) async fn prepare_retry(
        &self,
        error: &ClientError,
        attempt: u32,
        topics: &[&str],
    ) -> bool {
        if !error.is_retriable() || attempt >= self.inner.config.retries {
            return false;
        }
        tracing::debug!(attempt, error = %error, "retrying");
        tokio::time::sleep(self.inner.config.retry_backoff).await;
        if error.needs_metadata_refresh() {
            if let Err(e) = self.refresh_topics(topics).await {
                tracing::debug!(error = %e, "metadata refresh before retry failed");
            }
        }
        true
    }
}
