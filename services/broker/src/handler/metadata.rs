//! Metadata: brokers, topics and partition leaders; creates unknown topics when
//! `auto.create.topics.enable` and the client allow it.

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::topics::{TopicError, TopicInfo};
use crate::Broker;

pub(crate) async fn handle(
    broker: &Broker,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let node = BrokerId(broker.config.node_id);
    let requested: Option<Vec<String>> = match request.topics {
        // v0 asks for every topic with an empty list; later versions with null.
        Some(topics) if !(version == 0 && topics.is_empty()) => Some(
            topics
                .into_iter()
                .filter_map(|t| t.name.map(|n| n.0.as_str().to_owned()))
                .collect(),
        ),
        _ => None,
    };
    let allow_create =
        broker.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let topics = match requested {
        None => broker
            .topics
            .list()
            .iter()
            .map(|t| describe(t, node, version))
            .collect(),
        Some(names) => {
            let mut topics = Vec::with_capacity(names.len());
            for name in &names {
                topics.push(match broker.topics.get(name) {
                    Some(info) => describe(&info, node, version),
                    None if allow_create => {
                        let created = broker
                            .topics
                            .create(name, broker.config.default_partitions)
                            .await;
                        match created {
                            Ok(info) => describe(&info, node, version),
                            Err(TopicError::AlreadyExists { .. }) => {
                                match broker.topics.get(name) {
                                    Some(info) => describe(&info, node, version),
                                    None => unknown(name, ResponseError::UnknownTopicOrPartition),
                                }
                            }
                            Err(TopicError::InvalidName { .. }) => {
                                unknown(name, ResponseError::InvalidTopicException)
                            }
                            Err(e) => {
                                tracing::warn!(topic = %name, error = %e, "auto-create failed");
                                unknown(name, ResponseError::LeaderNotAvailable)
                            }
                        }
                    }
                    None => unknown(name, ResponseError::UnknownTopicOrPartition),
                });
            }
            topics
        }
    };
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(node)
            .with_host(StrBytes::from_string(broker.config.advertised_host.clone()))
            .with_port(broker.config.advertised_port as i32)])
        .with_cluster_id((version >= 2).then(|| StrBytes::from_static_str("skein")))
        .with_controller_id(node)
        .with_topics(topics)
}

/// Fields a version does not have must stay at their defaults, or encoding fails.
fn describe(topic: &TopicInfo, node: BrokerId, version: i16) -> MetadataResponseTopic {
    let described = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_partitions(
            (0..topic.partitions)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(node)
                        .with_leader_epoch(if version >= 7 { 0 } else { -1 })
                        .with_replica_nodes(vec![node])
                        .with_isr_nodes(vec![node])
                })
                .collect(),
        );
    if version >= 10 {
        described.with_topic_id(topic.id)
    } else {
        described
    }
}

fn unknown(name: &str, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
}

/// Metadata versions 0 to 13.
pub(crate) struct Metadata;

impl Api for Metadata {
    type Request = kafka_protocol::messages::MetadataRequest;
    type Response = kafka_protocol::messages::MetadataResponse;
    const KEY: ApiKey = ApiKey::Metadata;
    const VERSIONS: (i16, i16) = (0, 13);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(handle(call.broker, request, call.version).await)
    }
}
