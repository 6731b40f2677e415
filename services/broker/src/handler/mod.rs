//! One module per Kafka API, named after its API key.

pub(crate) mod acls;
pub(crate) mod admin;
pub(crate) mod api_versions;
pub(crate) mod configs;
pub(crate) mod fetch;
pub(crate) mod group;
pub(crate) mod init_producer_id;
pub(crate) mod list_offsets;
pub(crate) mod metadata;
pub(crate) mod produce;

use kafka_protocol::ResponseError;
use skein_log::LogError;

use crate::replica::PartitionError;

/// The Kafka error code for a failed partition operation, decided once here.
pub(crate) fn partition_error_code(err: &PartitionError) -> i16 {
    match err {
        PartitionError::UnknownTopicOrPartition { .. } => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas.code(),
        PartitionError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        PartitionError::Producer(error) => error.code(),
        PartitionError::Log(e) => log_error_code(e),
        PartitionError::Read(_) => ResponseError::KafkaStorageError.code(),
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
