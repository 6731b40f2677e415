//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions, ListOffsets and
//! DescribeConfigs.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::Client;

/// A topic to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic name.
    pub name: String,
    /// How many partitions it has.
    pub partitions: i32,
    /// How many replicas each partition has.
    pub replication_factor: i16,
    /// Topic configs (`retention.ms`, `cleanup.policy`, ...).
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// A topic with `partitions` partitions, one replica each, and default configs.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }
    }

    /// Sets a topic config.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(key.into(), value.into());
        self
    }
}

/// Which offset [`Client::list_offset`] looks up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset of the log.
    Earliest,
    /// The offset the next record will get (the high watermark).
    Latest,
    /// The first record with a timestamp at or after this one (milliseconds).
    Timestamp(i64),
}

impl OffsetSpec {
    fn code(self) -> i64 {
        match self {
            Self::Earliest => -2,
            Self::Latest => -1,
            Self::Timestamp(ts) => ts,
        }
    }
}

/// An offset [`Client::list_offset`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset.
    pub offset: i64,
    /// The record's timestamp for [`OffsetSpec::Timestamp`] lookups; else `None`.
    pub timestamp: Option<i64>,
}

/// One config of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The value; `None` for sensitive configs.
    pub value: Option<String>,
    /// Whether the value is the broker default rather than set on the topic.
    pub is_default: bool,
    /// Whether the config cannot be changed.
    pub read_only: bool,
    /// Whether the value is sensitive (and so not returned).
    pub is_sensitive: bool,
}

/// `config_source` of a value that nothing overrides (DEFAULT_CONFIG).
const DEFAULT_CONFIG_SOURCE: i8 = 5;
/// DescribeConfigs resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

impl Client {
    /// The controller, where topic changes go; any broker when it is unknown.
    async fn controller(&self) -> Result<Arc<Connection>> {
        match self.metadata().controller_id() {
            Some(id) => match self.connection(id).await {
                Ok(connection) => Ok(connection),
                Err(_) => self.any_connection().await,
            },
            None => self.any_connection().await,
        }
    }

    /// Creates topics. Returns the first topic's error if any failed (TOPIC_ALREADY_EXISTS,
    /// INVALID_CONFIG, ...); the other topics may have been created.
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<()> {
        let connection = self.controller().await?;
        let timeout = self.config().request_timeout;
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(topic_name(&t.name))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = connection.send_with_timeout(&request, timeout * 2).await?;
        for result in &response.topics {
            ClientError::check(
                ApiKey::CreateTopics,
                result.name.0.as_str(),
                result.error_code,
                result.error_message.as_ref().map(|m| m.as_str()),
            )?;
        }
        Ok(())
    }

    /// Deletes topics by name. Returns the first topic's error if any failed
    /// (UNKNOWN_TOPIC_OR_PARTITION for a missing one); the others may have been deleted.
    pub async fn delete_topics(&self, topics: &[&str]) -> Result<()> {
        let connection = self.controller().await?;
        let version = connection.version(ApiKey::DeleteTopics)?;
        let timeout = self.config().request_timeout;
        let mut request = DeleteTopicsRequest::default()
            .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX));
        // v6 names topics in `topics` (by name or id); earlier versions in `topic_names`.
        if version >= 6 {
            request = request.with_topics(
                topics
                    .iter()
                    .map(|t| DeleteTopicState::default().with_name(Some(topic_name(t))))
                    .collect(),
            );
        } else {
            request = request.with_topic_names(topics.iter().map(|t| topic_name(t)).collect());
        }
        let response = connection.send_with_timeout(&request, timeout * 2).await?;
        for result in &response.responses {
            let name = result
                .name
                .as_ref()
                .map_or_else(|| result.topic_id.to_string(), |n| n.0.as_str().to_owned());
            ClientError::check(
                ApiKey::DeleteTopics,
                name,
                result.error_code,
                result.error_message.as_ref().map(|m| m.as_str()),
            )?;
        }
        self.forget_topics(topics);
        Ok(())
    }

    /// Grows a topic to `total` partitions, then reloads its metadata.
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<()> {
        let connection = self.controller().await?;
        let timeout = self.config().request_timeout;
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name(topic))
                .with_count(total)
                // Null asks the broker to place the new partitions; kafka-protocol's default
                // is an empty list, which means a manual (and here incomplete) placement.
                .with_assignments(None)]);
        let response = connection.send_with_timeout(&request, timeout * 2).await?;
        for result in &response.results {
            ClientError::check(
                ApiKey::CreatePartitions,
                result.name.0.as_str(),
                result.error_code,
                result.error_message.as_ref().map(|m| m.as_str()),
            )?;
        }
        self.reload_topic(topic).await?;
        Ok(())
    }

    /// Looks up an offset of a partition. `None` when no record has a timestamp at or
    /// after the one asked for.
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>> {
        let mut attempt = 0;
        loop {
            match self.list_offset_once(topic, partition, spec).await {
                Ok(found) => return Ok(found),
                Err(e) => {
                    if !self.prepare_retry(&e, attempt, &[topic]).await {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        }
    }

    async fn list_offset_once(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>> {
        let leader = self.leader(topic, partition).await?;
        let connection = self.connection(leader).await?;
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(spec.code())])]);
        let response = connection.send(&request).await?;
        let answer = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::UnknownPartition {
                topic: topic.to_owned(),
                partition,
                partitions: 0,
            })?;
        ClientError::check(
            ApiKey::ListOffsets,
            format!("{topic}-{partition}"),
            answer.error_code,
            None,
        )?;
        if answer.offset < 0 {
            return Ok(None);
        }
        Ok(Some(ListedOffset {
            offset: answer.offset,
            timestamp: match spec {
                OffsetSpec::Timestamp(_) => Some(answer.timestamp).filter(|t| *t >= 0),
                OffsetSpec::Earliest | OffsetSpec::Latest => None,
            },
        }))
    }

    /// Every config of a topic, by name.
    pub async fn describe_topic_configs(
        &self,
        topic: &str,
    ) -> Result<BTreeMap<String, ConfigEntry>> {
        let connection = self.any_connection().await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(StrBytes::from_string(topic.to_owned()))
                .with_configuration_keys(None),
        ]);
        let response = connection.send(&request).await?;
        let mut configs = BTreeMap::new();
        for result in response.results {
            ClientError::check(
                ApiKey::DescribeConfigs,
                result.resource_name.as_str(),
                result.error_code,
                result.error_message.as_ref().map(|m| m.as_str()),
            )?;
            for config in result.configs {
                configs.insert(
                    config.name.as_str().to_owned(),
                    ConfigEntry {
                        value: config.value.map(|v| v.as_str().to_owned()),
                        is_default: config.config_source == DEFAULT_CONFIG_SOURCE,
                        read_only: config.read_only,
                        is_sensitive: config.is_sensitive,
                    },
                );
            }
        }
        Ok(configs)
    }
}
