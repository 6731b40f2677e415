//! DescribeTopicPartitions (KIP-966): topics and their partitions (leader, epoch, replicas,
//! ISR, offline replicas) in name and index order, a page at a time. A page holds at most
//! the request's `response_partition_limit` partitions, capped at [`MAX_PAGE`] whatever the
//! request asks; when partitions remain, `next_cursor` names the first of them, and a
//! request carrying it goes on from there. No topics named means every topic of the tenant;
//! a named topic that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION, and a cursor
//! naming a topic the request does not ask for is an INVALID_REQUEST. The cluster's
//! internal topics are never shown.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::metadata::cluster_brokers;
use crate::router::{Api, Call};
use crate::TopicInfo;

/// The most partitions one answer holds (Kafka's `max.request.partition.size.limit`).
pub(crate) const MAX_PAGE: i32 = 2000;

/// Kafka's value for authorized operations that were not computed.
const OPERATIONS_OMITTED: i32 = i32::MIN;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

pub(crate) async fn describe_topic_partitions(
    call: &Call<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let (broker, scope) = (call.broker, &call.scope);
    // (name as the client knows it, the topic if it exists), in name order.
    let mut wanted: Vec<(String, Option<TopicInfo>)> = if request.topics.is_empty() {
        broker
            .topics
            .list_in(scope)
            .into_iter()
            .filter_map(|t| Some((scope.strip(&t.name)?.to_owned(), Some(t))))
            .collect()
    } else {
        let mut names: Vec<String> = request
            .topics
            .iter()
            .map(|t| t.name.0.as_str().to_owned())
            .collect();
        names.sort();
        names.dedup();
        let mut wanted = Vec::with_capacity(names.len());
        for name in names {
            let info = broker.topics.lookup(&scope.qualify(&name)).await;
            wanted.push((name, info));
        }
        wanted
    };
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    let (first_topic, first_partition) = match &request.cursor {
        Some(cursor) => {
            let name = cursor.topic_name.0.as_str();
            if !wanted.iter().any(|(n, _)| n == name) || cursor.partition_index < 0 {
                return DescribeTopicPartitionsResponse::default().with_topics(vec![
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_name(Some(cursor.topic_name.clone()))
                        .with_topic_authorized_operations(OPERATIONS_OMITTED),
                ]);
            }
            (name.to_owned(), cursor.partition_index)
        }
        None => (String::new(), 0),
    };
    let limit = match request.response_partition_limit {
        l if l <= 0 => MAX_PAGE,
        l => l.min(MAX_PAGE),
    };
    let brokers = cluster_brokers(broker, scope, &call.session.listener);
    let live = |id: &i32| brokers.iter().any(|b| b.node_id == *id);
    let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let node = broker.config.node_id;
    let mut left = limit;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for (name, info) in wanted.into_iter().filter(|(n, _)| *n >= first_topic) {
        let Some(info) = info else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(topic_name(&name)))
                    .with_topic_authorized_operations(OPERATIONS_OMITTED),
            );
            continue;
        };
        let start = if name == first_topic {
            first_partition
        } else {
            0
        };
        if left == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(start),
            );
            break;
        }
        let end = info.partitions.min(start.saturating_add(left));
        let partitions: Vec<_> = (start..end)
            .filter_map(|p| info.placement_of(p, node).map(|placement| (p, placement)))
            .map(|(p, placement)| {
                let offline: Vec<i32> = placement
                    .replicas
                    .iter()
                    .copied()
                    .filter(|id| !live(id))
                    .collect();
                let answer = DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_epoch(placement.leader_epoch)
                    .with_replica_nodes(ids(&placement.replicas))
                    .with_isr_nodes(ids(&placement.isr))
                    .with_offline_replicas(ids(&offline));
                if live(&placement.leader) {
                    answer.with_leader_id(BrokerId(placement.leader))
                } else {
                    answer
                        .with_error_code(ResponseError::LeaderNotAvailable.code())
                        .with_leader_id(BrokerId(-1))
                }
            })
            .collect();
        left -= end.saturating_sub(start).max(0);
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(info.id)
                .with_partitions(partitions)
                .with_topic_authorized_operations(OPERATIONS_OMITTED),
        );
        if end < info.partitions {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(end),
            );
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

/// DescribeTopicPartitions version 0.
pub(crate) struct DescribeTopicPartitions;

impl Api for DescribeTopicPartitions {
    type Request = DescribeTopicPartitionsRequest;
    type Response = DescribeTopicPartitionsResponse;
    const KEY: ApiKey = ApiKey::DescribeTopicPartitions;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // Topics the principal may not describe are refused, or left out of a listing.
        let access = call.access();
        let named = !request.topics.is_empty();
        let mut response = describe_topic_partitions(call, request).await;
        if named {
            for topic in &mut response.topics {
                let name = topic.name.as_ref().map_or("", |n| n.as_str());
                if !access.topic(skein_auth::Operation::Describe, name) {
                    topic.partitions.clear();
                    topic.topic_id = uuid::Uuid::nil();
                    topic.error_code =
                        kafka_protocol::ResponseError::TopicAuthorizationFailed.code();
                }
            }
        } else {
            response.topics.retain(|topic| {
                let name = topic.name.as_ref().map_or("", |n| n.as_str());
                access.topic(skein_auth::Operation::Describe, name)
            });
        }
        Some(response)
    }
}
