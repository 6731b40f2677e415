//! Writing a decided transaction's markers to each of its partitions: on this broker when it
//! leads the partition, otherwise by WriteTxnMarkers to the broker that does, over the
//! inter-broker listener. A tenant's offsets partition gets its marker through its offset
//! store, which then applies or drops the offsets committed in the transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_log::batch::{build_marker, MarkerKind, TxnMarker};

use crate::replica::{PartitionError, Replicated};
use crate::Broker;

/// How long one partition's marker waits for its in-sync replicas.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a WriteTxnMarkers to another broker may take.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a marker was not written; the coordinator tries again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MarkerWriteError {
    #[error("partition {partition} of {topic:?}: {reason}")]
    Partition {
        topic: String,
        partition: i32,
        reason: String,
    },
    #[error("broker {broker} is not reachable: {reason}")]
    Remote { broker: i32, reason: String },
}

/// Writes the marker of `producer`'s transaction to each of `partitions` (names as the
/// broker keeps them). A partition whose topic is gone is left out.
pub(crate) async fn write(
    broker: &Broker,
    partitions: &BTreeSet<(String, i32)>,
    producer: (i64, i16),
    kind: MarkerKind,
    coordinator_epoch: i32,
) -> Result<(), MarkerWriteError> {
    let marker = TxnMarker {
        kind,
        coordinator_epoch,
    };
    let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, partition) in partitions {
        match write_local(broker, topic, *partition, producer, marker).await {
            Ok(()) => {}
            Err(Local::Elsewhere(leader)) => remote
                .entry(leader)
                .or_default()
                .push((topic.clone(), *partition)),
            Err(Local::Gone) => {
                tracing::info!(%topic, partition, "no marker for a partition that is gone");
            }
            Err(Local::Failed(reason)) => {
                return Err(MarkerWriteError::Partition {
                    topic: topic.clone(),
                    partition: *partition,
                    reason,
                })
            }
        }
    }
    for (leader, partitions) in remote {
        write_remote(broker, leader, &partitions, producer, marker).await?;
    }
    Ok(())
}

/// Why a marker was not written here.
pub(crate) enum Local {
    /// Another broker leads the partition.
    Elsewhere(i32),
    /// The topic or partition no longer exists.
    Gone,
    Failed(String),
}

impl Local {
    /// The error code a WriteTxnMarkers answer gives for it.
    pub(crate) fn code(&self) -> ResponseError {
        match self {
            Self::Elsewhere(_) => ResponseError::NotLeaderOrFollower,
            Self::Gone => ResponseError::UnknownTopicOrPartition,
            Self::Failed(_) => ResponseError::NotEnoughReplicas,
        }
    }
}

/// Writes one partition's marker on this broker, which must lead it, and waits for its
/// in-sync replicas.
pub(crate) async fn write_local(
    broker: &Broker,
    topic: &str,
    partition: i32,
    producer: (i64, i16),
    marker: TxnMarker,
) -> Result<(), Local> {
    let now = crate::group::now_ms();
    if crate::group::is_offsets_topic(broker.topics.tenancy(), topic) {
        let groups = broker.groups_by_offsets_topic(topic);
        return match groups.take_up(&broker.replicas) {
            Ok(()) => groups
                .offsets
                .write_marker(&broker.replicas, producer, marker, now)
                .await
                .map_err(|e| Local::Failed(e.to_string())),
            Err(crate::group::OffsetStoreError::NotCoordinator) => {
                match leader_of(broker, topic, partition) {
                    Some(leader) => Err(Local::Elsewhere(leader)),
                    None => Err(Local::Failed("the offsets partition has no leader".into())),
                }
            }
            Err(e) => Err(Local::Failed(e.to_string())),
        };
    }
    let found = broker.replicas.leader_of_any(topic, partition, -1);
    let partition_ref = match found {
        Ok(p) => p,
        Err(PartitionError::NotLeader {
            leader: Some((leader, _)),
            ..
        }) => return Err(Local::Elsewhere(leader)),
        // Gone only if the metadata says so: a restarted leader answers this too until it
        // has loaded the partition, and its marker must still be written.
        Err(PartitionError::UnknownTopicOrPartition { .. })
            if !exists(broker, topic, partition) =>
        {
            return Err(Local::Gone)
        }
        Err(e) => return Err(Local::Failed(e.to_string())),
    };
    let batch = build_marker(marker, producer.0, producer.1, now)
        .map_err(|e| Local::Failed(e.to_string()))?;
    let appended = partition_ref
        .append_markers(&batch)
        .map_err(|e| Local::Failed(e.to_string()))?;
    let deadline = tokio::time::Instant::now() + REPLICATION_TIMEOUT;
    match partition_ref
        .replicated(appended.end_offset, deadline)
        .await
    {
        // A marker is written whatever min.insync.replicas says, as Kafka writes them.
        Replicated::Done | Replicated::BelowMinInsync => Ok(()),
        Replicated::TimedOut => Err(Local::Failed(
            "the in-sync replicas did not confirm the marker in time".into(),
        )),
        // Written, but whether the new leader has it is not known: write it again there.
        Replicated::NotLeader { leader } => match leader {
            Some((leader, _)) => Err(Local::Elsewhere(leader)),
            None => Err(Local::Failed("the partition has no leader".into())),
        },
    }
}

fn leader_of(broker: &Broker, topic: &str, partition: i32) -> Option<i32> {
    broker
        .topics
        .get(topic)
        .and_then(|info| info.placement_of(partition, broker.config.node_id))
        .map(|p| p.leader)
        .filter(|leader| *leader >= 0)
}

async fn write_remote(
    broker: &Broker,
    leader: i32,
    partitions: &[(String, i32)],
    producer: (i64, i16),
    marker: TxnMarker,
) -> Result<(), MarkerWriteError> {
    let failed = |reason: String| MarkerWriteError::Remote {
        broker: leader,
        reason,
    };
    let address = broker
        .topics
        .brokers()
        .into_iter()
        .find(|b| b.node_id == leader)
        .map(|b| format!("{}:{}", b.host, b.port))
        .ok_or_else(|| failed("not live".into()))?;
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_transaction_result(marker.kind == MarkerKind::Commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                            .with_partition_indexes(partitions)
                    })
                    .collect(),
            )]);
    let config = crate::replica_fetcher::inter_broker_client(
        broker,
        &address,
        format!("skein-txn-markers-{}", broker.config.node_id),
    );
    let connection = skein_client::Connection::connect(&address, &config)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let response = connection
        .send_with_timeout(&request, REMOTE_TIMEOUT)
        .await
        .map_err(|e| failed(e.to_string()))?;
    for result in &response.markers {
        for topic in &result.topics {
            for p in &topic.partitions {
                let gone = p.error_code == ResponseError::UnknownTopicOrPartition.code()
                    && !exists(broker, topic.name.0.as_str(), p.partition_index);
                if p.error_code != 0 && !gone {
                    return Err(MarkerWriteError::Partition {
                        topic: topic.name.0.to_string(),
                        partition: p.partition_index,
                        reason: format!("broker {leader} answered error {}", p.error_code),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Whether the broker's metadata still has the partition.
fn exists(broker: &Broker, topic: &str, partition: i32) -> bool {
    broker
        .topics
        .get(topic)
        .is_some_and(|info| partition >= 0 && partition < info.partitions)
}
