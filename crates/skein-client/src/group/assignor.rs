//! The "consumer" embedded protocol: subscriptions and assignments in the format of Kafka's
//! `ConsumerProtocol`, and the "range" assignor as the Java client computes it, so members
//! of other clients can share a group with this one.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use crate::error::BoxError;

/// The protocol type of consumer groups.
pub(crate) const PROTOCOL_TYPE: &str = "consumer";
/// The name of the range assignor.
pub(crate) const RANGE: &str = "range";

/// Partitions by topic.
pub type Assignment = BTreeMap<String, Vec<i32>>;

/// The version this client writes. Version 0 holds all that an eager range assignment
/// needs, and every client reads it.
const WRITE_VERSION: i16 = 0;

/// Encodes a subscription to `topics` as JoinGroup member metadata.
pub(crate) fn encode_subscription(topics: &[String]) -> Result<Bytes, BoxError> {
    let subscription = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.clone()))
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(WRITE_VERSION);
    subscription.encode(&mut buf, WRITE_VERSION)?;
    Ok(buf.freeze())
}

/// The topics of a member's subscription. Newer versions only add fields at the end, so a
/// version above what kafka-protocol knows is read as the highest it knows.
pub(crate) fn decode_subscription(mut metadata: Bytes) -> Result<Vec<String>, BoxError> {
    let version = read_version(&mut metadata)?;
    let version = version.min(ConsumerProtocolSubscription::VERSIONS.max);
    let subscription = ConsumerProtocolSubscription::decode(&mut metadata, version)?;
    Ok(subscription
        .topics
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect())
}

/// Encodes an assignment for SyncGroup.
pub(crate) fn encode_assignment(assignment: &Assignment) -> Result<Bytes, BoxError> {
    let encoded = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assignment
            .iter()
            .map(|(topic, partitions)| {
                AssignedPartitions::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(partitions.clone())
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(WRITE_VERSION);
    encoded.encode(&mut buf, WRITE_VERSION)?;
    Ok(buf.freeze())
}

/// Decodes the assignment SyncGroup handed out; empty bytes are an empty assignment.
pub(crate) fn decode_assignment(mut bytes: Bytes) -> Result<Assignment, BoxError> {
    if bytes.is_empty() {
        return Ok(Assignment::new());
    }
    let version = read_version(&mut bytes)?;
    let version = version.min(ConsumerProtocolAssignment::VERSIONS.max);
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version)?;
    let mut assignment = Assignment::new();
    for topic in decoded.assigned_partitions {
        assignment
            .entry(topic.topic.0.as_str().to_owned())
            .or_default()
            .extend(topic.partitions);
    }
    Ok(assignment)
}

fn read_version(bytes: &mut Bytes) -> Result<i16, BoxError> {
    if bytes.len() < 2 {
        return Err("consumer protocol data shorter than its version".into());
    }
    let version = bytes.get_i16();
    if version < 0 {
        return Err(format!("negative consumer protocol version {version}").into());
    }
    Ok(version)
}

/// The range assignment (Kafka's `RangeAssignor`): for each topic, its subscribers sorted
/// by member id each get a contiguous range of partitions, and the first
/// `partitions % subscribers` of them one extra. Topics missing from `partitions` are not
/// assigned. Every member gets an entry, empty if it gets nothing.
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut assignments: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|member| (member.clone(), Assignment::new()))
        .collect();
    for (topic, count) in partitions {
        // BTreeMap keys are already in member id order.
        let subscribers: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        if subscribers.is_empty() || *count <= 0 {
            continue;
        }
        let n = subscribers.len() as i32;
        let per_member = count / n;
        let extra = count % n;
        for (i, member) in subscribers.into_iter().enumerate() {
            let i = i as i32;
            let start = per_member * i + i.min(extra);
            let length = per_member + i32::from(i < extra);
            if length == 0 {
                continue;
            }
            if let Some(assignment) = assignments.get_mut(member) {
                assignment.insert(topic.clone(), (start..start + length).collect());
            }
        }
    }
    assignments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscriptions(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(m, topics)| {
                (
                    (*m).to_owned(),
                    topics.iter().map(|t| (*t).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn range_matches_the_java_assignor() {
        // RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions: 3 partitions each of
        // t1 and t2; consumer1 gets [t1-0, t1-1, t2-0, t2-1], consumer2 [t1-2, t2-2].
        let subs = subscriptions(&[("consumer1", &["t1", "t2"]), ("consumer2", &["t1", "t2"])]);
        let partitions = BTreeMap::from([("t1".to_owned(), 3), ("t2".to_owned(), 3)]);
        let result = range_assign(&subs, &partitions);
        assert_eq!(result["consumer1"]["t1"], [0, 1]);
        assert_eq!(result["consumer1"]["t2"], [0, 1]);
        assert_eq!(result["consumer2"]["t1"], [2]);
        assert_eq!(result["consumer2"]["t2"], [2]);
    }

    #[test]
    fn only_subscribers_get_a_topic_and_extra_members_get_nothing() {
        let subs = subscriptions(&[("a", &["t"]), ("b", &["t", "u"]), ("c", &["t"])]);
        let partitions = BTreeMap::from([("t".to_owned(), 2), ("u".to_owned(), 4)]);
        let result = range_assign(&subs, &partitions);
        assert_eq!(result["a"]["t"], [0]);
        assert_eq!(result["b"]["t"], [1]);
        assert!(!result["c"].contains_key("t"));
        assert_eq!(result["b"]["u"], [0, 1, 2, 3]);
        assert!(result["c"].is_empty());
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["orders".to_owned(), "payments".to_owned()];
        let encoded = encode_subscription(&topics).unwrap();
        assert_eq!(&encoded[..2], &[0, 0]);
        assert_eq!(decode_subscription(encoded).unwrap(), topics);

        let assignment = Assignment::from([("orders".to_owned(), vec![0, 2])]);
        let encoded = encode_assignment(&assignment).unwrap();
        assert_eq!(decode_assignment(encoded).unwrap(), assignment);
        assert!(decode_assignment(Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn reads_a_java_v3_subscription() {
        // What the Java client (3.x) sends for topics ["t"]: version 3, topics, null user
        // data, no owned partitions, generation -1, null rack.
        let mut java = BytesMut::new();
        java.put_i16(3);
        java.put_i32(1);
        java.put_i16(1);
        java.put_slice(b"t");
        java.put_i32(-1);
        java.put_i32(0);
        java.put_i32(-1);
        java.put_i16(-1);
        assert_eq!(decode_subscription(java.freeze()).unwrap(), ["t"]);
    }

    #[test]
    fn short_metadata_is_an_error() {
        assert!(decode_subscription(Bytes::from_static(&[0])).is_err());
    }
}
