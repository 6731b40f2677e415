//! [`ClusterMetadata`]: the client's snapshot of brokers, topics and partition leaders.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::{ApiKey, MetadataResponse};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::error::ClientError;

/// A broker as the metadata names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAddress {
    /// The broker's node id.
    pub node_id: i32,
    /// The host clients connect to.
    pub host: String,
    /// The port clients connect to.
    pub port: u16,
    /// The broker's rack, if it has one.
    pub rack: Option<String>,
}

impl BrokerAddress {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// The partition index.
    pub partition: i32,
    /// The node id of the leader, or `None` while there is none.
    pub leader: Option<i32>,
    /// The leader epoch, or -1 when the broker does not send it.
    pub leader_epoch: i32,
    /// Node ids of the replicas.
    pub replicas: Vec<i32>,
    /// Node ids of the in-sync replicas.
    pub isr: Vec<i32>,
}

/// One topic with its partitions, ordered by index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    /// The topic name.
    pub name: String,
    /// The topic id (nil from brokers older than Metadata v10).
    pub id: Uuid,
    /// Whether the topic is internal (`__consumer_offsets`).
    pub is_internal: bool,
    /// The partitions, ordered by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// The leader of a partition, if the partition exists and has one.
    pub fn leader(&self, partition: i32) -> Option<i32> {
        self.partition(partition).and_then(|p| p.leader)
    }

    /// A partition by index.
    pub fn partition(&self, partition: i32) -> Option<&PartitionMetadata> {
        usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get(i))
            .filter(|p| p.partition == partition)
            .or_else(|| self.partitions.iter().find(|p| p.partition == partition))
    }
}

/// What the client knows of the cluster: brokers by node id and topics by name.
#[derive(Clone, Debug, Default)]
pub struct ClusterMetadata {
    cluster_id: Option<String>,
    controller_id: Option<i32>,
    brokers: BTreeMap<i32, BrokerAddress>,
    topics: HashMap<String, TopicMetadata>,
}

impl ClusterMetadata {
    /// The cluster id, when the broker sends one.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The node id of the controller, if known.
    pub fn controller_id(&self) -> Option<i32> {
        self.controller_id
    }

    /// Every broker, by node id.
    pub fn brokers(&self) -> &BTreeMap<i32, BrokerAddress> {
        &self.brokers
    }

    /// A broker by node id.
    pub fn broker(&self, node_id: i32) -> Option<&BrokerAddress> {
        self.brokers.get(&node_id)
    }

    /// A topic by name, if it is in the cache.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.get(name)
    }

    /// The name of a topic by id, if it is in the cache.
    pub fn topic_name(&self, id: Uuid) -> Option<&str> {
        self.topics
            .values()
            .find(|t| t.id == id && !id.is_nil())
            .map(|t| t.name.as_str())
    }

    /// Every cached topic.
    pub fn topics(&self) -> impl Iterator<Item = &TopicMetadata> {
        self.topics.values()
    }

    pub(crate) fn remove_topic(&mut self, name: &str) {
        self.topics.remove(name);
    }

    /// Applies a Metadata answer: brokers are replaced, answered topics updated, and topics
    /// the broker no longer knows dropped. When `all_topics`, topics missing from the answer
    /// are dropped too. Returns the error of each topic that answered with one.
    pub(crate) fn apply(
        &mut self,
        response: MetadataResponse,
        all_topics: bool,
    ) -> Vec<(String, ClientError)> {
        self.cluster_id = response.cluster_id.map(|c| c.as_str().to_owned());
        self.controller_id = Some(response.controller_id.0).filter(|id| *id >= 0);
        self.brokers = response
            .brokers
            .into_iter()
            .filter_map(|b| {
                Some((
                    b.node_id.0,
                    BrokerAddress {
                        node_id: b.node_id.0,
                        host: b.host.as_str().to_owned(),
                        port: u16::try_from(b.port).ok()?,
                        rack: b.rack.map(|r| r.as_str().to_owned()),
                    },
                ))
            })
            .collect();
        if all_topics {
            self.topics.clear();
        }
        let mut errors = Vec::new();
        for topic in response.topics {
            let Some(name) = topic.name.map(|n| n.0.as_str().to_owned()) else {
                continue;
            };
            if let Some(error) =
                ClientError::from_code(ApiKey::Metadata, name.as_str(), topic.error_code, None)
            {
                if matches!(
                    error.kafka_error(),
                    Some(
                        ResponseError::UnknownTopicOrPartition
                            | ResponseError::InvalidTopicException
                    )
                ) {
                    self.topics.remove(&name);
                }
                errors.push((name, error));
                continue;
            }
            let mut partitions: Vec<PartitionMetadata> = topic
                .partitions
                .into_iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader: Some(p.leader_id.0).filter(|id| *id >= 0),
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
                    isr: p.isr_nodes.iter().map(|n| n.0).collect(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            self.topics.insert(
                name.clone(),
                TopicMetadata {
                    name,
                    id: topic.topic_id,
                    is_internal: topic.is_internal,
                    partitions,
                },
            );
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn topic(name: &str, partitions: i32, error_code: i16) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
            .with_error_code(error_code)
            .with_partitions(
                (0..partitions)
                    .rev()
                    .map(|p| {
                        MetadataResponsePartition::default()
                            .with_partition_index(p)
                            .with_leader_id(BrokerId(if p == 1 { -1 } else { 7 }))
                    })
                    .collect(),
            )
    }

    #[test]
    fn apply_orders_partitions_and_drops_unknown_topics() {
        let mut metadata = ClusterMetadata::default();
        let response = MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(7))
                .with_host(StrBytes::from_static_str("localhost"))
                .with_port(9092)])
            .with_topics(vec![topic("a", 3, 0), topic("b", 1, 0)]);
        assert!(metadata.apply(response, true).is_empty());
        let a = metadata.topic("a").unwrap();
        assert_eq!(
            a.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(a.leader(0), Some(7));
        assert_eq!(a.leader(1), None);
        assert_eq!(a.leader(3), None);
        assert_eq!(metadata.broker(7).unwrap().addr(), "localhost:9092");

        let gone = ResponseError::UnknownTopicOrPartition.code();
        let errors = metadata.apply(
            MetadataResponse::default().with_topics(vec![topic("b", 0, gone)]),
            false,
        );
        assert_eq!(errors.len(), 1);
        assert!(metadata.topic("b").is_none());
        assert!(metadata.topic("a").is_some());
    }
}
