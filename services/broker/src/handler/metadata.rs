//! Metadata: brokers, topics and partition leaders; creates unknown topics when
//! `auto.create.topics.enable` and the client allow it.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::authz::Access;
use crate::controller_link::TopicShape;
use crate::listeners::ListenerInfo;
use crate::router::{Api, Call};
use crate::topics::{BrokerEndpoint, TopicError, TopicInfo};
use crate::Broker;
use skein_auth::Operation;

pub(crate) async fn handle(
    broker: &Broker,
    access: &Access<'_>,
    listener: &ListenerInfo,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let node = broker.config.node_id;
    let brokers = cluster_brokers(broker, listener);
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
    let describe = |info: &TopicInfo| describe(info, node, &brokers, version);
    let topics = match requested {
        // Every topic the principal may describe; the others are left out, as in Kafka.
        None => broker
            .topics
            .list()
            .iter()
            .filter(|info| access.topic(Operation::Describe, &info.name))
            .map(describe)
            .collect(),
        Some(names) => {
            let mut topics = Vec::with_capacity(names.len());
            for name in &names {
                if !access.topic(Operation::Describe, name) {
                    topics.push(unknown(name, ResponseError::TopicAuthorizationFailed));
                    continue;
                }
                topics.push(match broker.topics.lookup(name).await {
                    Some(info) => describe(&info),
                    None if allow_create && !access.may_create_topic(name) => {
                        unknown(name, ResponseError::TopicAuthorizationFailed)
                    }
                    None if allow_create => {
                        let created = broker
                            .topics
                            .create_checked(
                                name,
                                &TopicShape::Placed {
                                    partitions: broker.config.default_partitions,
                                    replication_factor: broker.default_replication_factor(),
                                },
                                Default::default(),
                                false,
                            )
                            .await;
                        match created {
                            Ok(info) => describe(&info),
                            Err(TopicError::AlreadyExists { .. }) => {
                                match broker.topics.get(name) {
                                    Some(info) => describe(&info),
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
        .with_brokers(
            brokers
                .iter()
                .map(|b| {
                    let answer = MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.node_id))
                        .with_host(StrBytes::from_string(b.host.clone()))
                        .with_port(b.port);
                    if version >= 1 {
                        answer.with_rack(b.rack.clone().map(StrBytes::from_string))
                    } else {
                        answer
                    }
                })
                .collect(),
        )
        .with_cluster_id((version >= 2).then(|| StrBytes::from_static_str("skein")))
        // Every broker forwards cluster changes to the controller, so each may be asked.
        .with_controller_id(BrokerId(node))
        .with_topics(topics)
}

/// The brokers clients may reach: the controller's live brokers serving this tenant, with
/// this one always among them (a snapshot may predate its registration), each at the
/// address of the listener the client came in on ([`BrokerEndpoint::on`]; a broker without
/// that listener is left out, as Kafka leaves it out); a broker on its own is the whole
/// cluster.
pub(crate) fn cluster_brokers(broker: &Broker, listener: &ListenerInfo) -> Vec<BrokerEndpoint> {
    let mut brokers: Vec<BrokerEndpoint> = broker
        .topics
        .brokers()
        .into_iter()
        .filter(|b| b.node_id != broker.config.node_id)
        .filter_map(|b| b.on(&listener.name))
        .collect();
    brokers.push(BrokerEndpoint {
        node_id: broker.config.node_id,
        host: listener.advertised_host.clone(),
        port: i32::from(listener.advertised_port),
        rack: broker.config.rack.clone(),
        listeners: Vec::new(),
        tenant: None,
    });
    brokers.sort_by_key(|b| b.node_id);
    brokers
}

/// Fields a version does not have must stay at their defaults, or encoding fails.
fn describe(
    topic: &TopicInfo,
    node: i32,
    brokers: &[BrokerEndpoint],
    version: i16,
) -> MetadataResponseTopic {
    let live = |id: &i32| brokers.iter().any(|b| b.node_id == *id);
    let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let described = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_partitions(
            (0..topic.partitions)
                .filter_map(|p| topic.placement_of(p, node).map(|placement| (p, placement)))
                .map(|(p, placement)| {
                    let answer = MetadataResponsePartition::default().with_partition_index(p);
                    // A leader that is not live cannot be reached: clients wait for the
                    // controller to elect another.
                    let answer = if live(&placement.leader) {
                        answer.with_leader_id(BrokerId(placement.leader))
                    } else {
                        answer
                            .with_error_code(ResponseError::LeaderNotAvailable.code())
                            .with_leader_id(BrokerId(-1))
                    };
                    let answer = answer
                        .with_leader_epoch(if version >= 7 {
                            placement.leader_epoch
                        } else {
                            -1
                        })
                        .with_replica_nodes(ids(&placement.replicas))
                        .with_isr_nodes(ids(&placement.isr));
                    if version >= 5 {
                        let offline: Vec<i32> = placement
                            .replicas
                            .iter()
                            .copied()
                            .filter(|id| !live(id))
                            .collect();
                        answer.with_offline_replicas(ids(&offline))
                    } else {
                        answer
                    }
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
        Some(
            handle(
                call.broker,
                &call.access(),
                &call.session.listener,
                request,
                call.version,
            )
            .await,
        )
    }
}
