//! Metadata: brokers, topics and partition leaders; creates unknown topics when
//! `auto.create.topics.enable` and the client allow it.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::controller_link::TopicShape;
use crate::listeners::ListenerInfo;
use crate::router::{Api, Call};
use crate::scope::Scope;
use crate::topics::{BrokerEndpoint, TopicError, TopicInfo};
use crate::Broker;
use skein_auth::Operation;

pub(crate) async fn handle(call: &Call<'_>, request: MetadataRequest) -> MetadataResponse {
    let (broker, access, version, scope) = (call.broker, call.access(), call.version, &call.scope);
    let node = broker.config.node_id;
    let brokers = cluster_brokers(broker, scope, &call.session.listener);
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
    // Topics as the client knows them: the broker keeps the names it gives in its scope.
    let describe = |info: &TopicInfo| {
        let shown = scope.strip(&info.name).unwrap_or(&info.name);
        describe(info, shown, node, &brokers, version)
    };
    let topics = match requested {
        // Every topic the principal may describe; the others are left out, as in Kafka.
        None => broker
            .topics
            .list_in(scope)
            .iter()
            .filter(|info| {
                scope
                    .strip(&info.name)
                    .is_some_and(|name| access.topic(Operation::Describe, name))
            })
            .map(describe)
            .collect(),
        Some(names) => {
            let mut topics = Vec::with_capacity(names.len());
            for name in &names {
                if !access.topic(Operation::Describe, name) {
                    topics.push(unknown(name, ResponseError::TopicAuthorizationFailed));
                    continue;
                }
                let kept = scope.qualify(name);
                topics.push(match broker.topics.lookup(&kept).await {
                    Some(info) => describe(&info),
                    None if allow_create && !access.may_create_topic(name) => {
                        unknown(name, ResponseError::TopicAuthorizationFailed)
                    }
                    None if allow_create => {
                        let created = match crate::topics::validate_client_name(scope, name) {
                            Ok(()) => {
                                broker
                                    .topics
                                    .create_checked(
                                        &kept,
                                        &TopicShape::Placed {
                                            partitions: broker.config.default_partitions,
                                            replication_factor: broker.default_replication_factor(),
                                        },
                                        Default::default(),
                                        false,
                                    )
                                    .await
                            }
                            Err(e) => Err(e),
                        };
                        match created {
                            Ok(info) => describe(&info),
                            Err(TopicError::AlreadyExists { .. }) => {
                                match broker.topics.get(&kept) {
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
pub(crate) fn cluster_brokers(
    broker: &Broker,
    scope: &Scope,
    listener: &ListenerInfo,
) -> Vec<BrokerEndpoint> {
    let mut brokers: Vec<BrokerEndpoint> = broker
        .topics
        .brokers_for(scope)
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
    shown: &str,
    node: i32,
    brokers: &[BrokerEndpoint],
    version: i16,
) -> MetadataResponseTopic {
    let live = |id: &i32| brokers.iter().any(|b| b.node_id == *id);
    let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let described = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(shown.to_owned()))))
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
        Some(handle(call, request).await)
    }
}
