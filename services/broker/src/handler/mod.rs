//! One module per Kafka API, named after its API key.

pub(crate) mod acls;
pub(crate) mod admin;
pub(crate) mod api_versions;
pub(crate) mod configs;
pub(crate) mod describe_topic_partitions;
pub(crate) mod elect_leaders;
pub(crate) mod fetch;
pub(crate) mod group;
pub(crate) mod init_producer_id;
pub(crate) mod list_offsets;
pub(crate) mod log_dirs;
pub(crate) mod metadata;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod produce;
pub(crate) mod reassignments;
pub(crate) mod sasl;
pub(crate) mod scram_credentials;
pub(crate) mod transactions;

use kafka_protocol::ResponseError;
use skein_log::LogError;

use crate::replica::PartitionError;

/// The leader a NOT_LEADER_OR_FOLLOWER answer names (KIP-951), -1 and -1 when none.
pub(crate) fn leader_and_epoch<T: LeaderAndEpoch>(leader: Option<(i32, i32)>) -> T {
    let (id, epoch) = leader.unwrap_or((-1, -1));
    T::of(id, epoch)
}

/// Produce's and Fetch's `current_leader` fields, which are two types of one shape.
pub(crate) trait LeaderAndEpoch {
    fn of(id: i32, epoch: i32) -> Self;
}

impl LeaderAndEpoch for kafka_protocol::messages::produce_response::LeaderIdAndEpoch {
    fn of(id: i32, epoch: i32) -> Self {
        Self::default()
            .with_leader_id(kafka_protocol::messages::BrokerId(id))
            .with_leader_epoch(epoch)
    }
}

impl LeaderAndEpoch for kafka_protocol::messages::fetch_response::LeaderIdAndEpoch {
    fn of(id: i32, epoch: i32) -> Self {
        Self::default()
            .with_leader_id(kafka_protocol::messages::BrokerId(id))
            .with_leader_epoch(epoch)
    }
}

/// The Kafka error code for a failed partition operation, decided once here.
/// The Kafka error for an operator's call (ElectLeaders, reassignments) the controller did
/// not answer.
pub(crate) fn controller_error(e: &crate::controller_link::ControllerError) -> ResponseError {
    use crate::controller_link::Reason;
    match (e.reason, e.code) {
        (Reason::NotActive, _) | (_, tonic::Code::Unavailable) => ResponseError::NotController,
        (Reason::Conflict, _) => ResponseError::RequestTimedOut,
        (Reason::NotFound, _) => ResponseError::UnknownTopicOrPartition,
        _ => ResponseError::UnknownServerError,
    }
}

pub(crate) fn partition_error_code(err: &PartitionError) -> i16 {
    match err {
        PartitionError::UnknownTopicOrPartition { .. } => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        PartitionError::NotLeader { .. }
        | PartitionError::NotAReplica { .. }
        | PartitionError::LeaderMoved { .. } => ResponseError::NotLeaderOrFollower.code(),
        PartitionError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch.code(),
        PartitionError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch.code(),
        PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas.code(),
        PartitionError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        PartitionError::Producer(error) => error.code(),
        PartitionError::Log(e) => log_error_code(e),
        PartitionError::Read(_) => ResponseError::KafkaStorageError.code(),
        PartitionError::InvalidRecords { .. } => ResponseError::InvalidRecord.code(),
    }
}

/// The Kafka error code for a log failure, decided once here.
pub(crate) fn log_error_code(err: &LogError) -> i16 {
    let error = match err {
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::InvalidBatch { source, .. } => match source {
            skein_log::batch::BatchError::UnsupportedMagic { .. } => {
                ResponseError::UnsupportedForMessageFormat
            }
            source if source.is_invalid_records() => ResponseError::InvalidRecord,
            _ => ResponseError::CorruptMessage,
        },
        LogError::BatchTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::EmptyAppend | LogError::InconsistentRecordCount { .. } => {
            ResponseError::InvalidRecord
        }
        LogError::NonMonotonicOffset { .. } | LogError::OffsetOverflow { .. } => {
            ResponseError::InvalidRecord
        }
        LogError::CorruptSegment { .. }
        | LogError::Io { .. }
        | LogError::Fenced { .. }
        | LogError::IndexTruncated { .. } => ResponseError::KafkaStorageError,
        LogError::InvalidPartitionDir { .. } | LogError::InvalidConfig { .. } => {
            ResponseError::UnknownServerError
        }
        _ => ResponseError::UnknownServerError,
    };
    error.code()
}
