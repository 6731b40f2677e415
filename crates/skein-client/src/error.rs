//! [`ClientError`]: everything a client call can fail with.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

/// A boxed source error, for failures reported by kafka-protocol's encoders and decoders.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a client call failed.
///
/// Errors a broker reports come back as [`ClientError::Kafka`] (or, for a fetch position
/// outside the log, [`ClientError::OffsetOutOfRange`]); [`ClientError::kafka_error`] gives the
/// Kafka error of either. [`ClientError::is_retriable`] says whether trying again may help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A broker answered with a Kafka error code.
    #[error("{api:?} for {resource} failed with {error} (code {code}){}", detail(.message))]
    Kafka {
        /// The API whose answer carried the error.
        api: ApiKey,
        /// What the error is about: a topic, `topic-partition`, group or member.
        resource: String,
        /// The error, by name.
        error: ResponseError,
        /// The raw error code, as sent.
        code: i16,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// A fetch asked for an offset outside `[log_start_offset, high_watermark]`.
    #[error(
        "offset {offset} is out of range for {topic}-{partition} \
         (log start {log_start_offset}, high watermark {high_watermark})"
    )]
    OffsetOutOfRange {
        /// The topic fetched.
        topic: String,
        /// The partition fetched.
        partition: i32,
        /// The offset asked for.
        offset: i64,
        /// The first offset of the log, or -1 when the broker did not say.
        log_start_offset: i64,
        /// The high watermark, or -1 when the broker did not say.
        high_watermark: i64,
    },
    /// Connecting to, reading from or writing to a broker failed.
    #[error("i/o error with broker {addr}")]
    Io {
        /// The broker's `host:port`.
        addr: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The connection closed while a request was waiting for its response.
    #[error("connection to {addr} closed")]
    ConnectionClosed {
        /// The broker's `host:port`.
        addr: String,
    },
    /// No response arrived in time.
    #[error("{operation} to {addr} timed out after {after:?}")]
    Timeout {
        /// What was waited for: an API name or `connect`.
        operation: String,
        /// The broker's `host:port`.
        addr: String,
        /// How long the client waited.
        after: Duration,
    },
    /// A request could not be encoded at the negotiated version.
    #[error("cannot encode {api:?} v{version}")]
    Encode {
        /// The API of the request.
        api: ApiKey,
        /// The version it was encoded at.
        version: i16,
        /// Why encoding failed.
        #[source]
        source: BoxError,
    },
    /// A response could not be decoded.
    #[error("cannot decode {api:?} v{version} response from {addr}")]
    Decode {
        /// The API of the response.
        api: ApiKey,
        /// The version it was decoded at.
        version: i16,
        /// The broker's `host:port`.
        addr: String,
        /// Why decoding failed.
        #[source]
        source: BoxError,
    },
    /// Record batches could not be built or read.
    #[error("invalid record batch for {topic}-{partition}")]
    RecordBatch {
        /// The topic of the batch.
        topic: String,
        /// The partition of the batch.
        partition: i32,
        /// Why the batch could not be built or read.
        #[source]
        source: BoxError,
    },
    /// The broker and this client share no version of an API.
    #[error(
        "broker {addr} supports {api:?} versions {broker:?}, this client {client_min}..={client_max}"
    )]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The broker's `host:port`.
        addr: String,
        /// The broker's range, or `None` if it does not offer the API at all.
        broker: Option<(i16, i16)>,
        /// The lowest version this client implements.
        client_min: i16,
        /// The highest version this client implements.
        client_max: i16,
    },
    /// A response named a correlation id that no request is waiting for.
    #[error("broker {addr} answered unknown correlation id {correlation_id}")]
    UnexpectedCorrelationId {
        /// The broker's `host:port`.
        addr: String,
        /// The id in the response header.
        correlation_id: i32,
    },
    /// None of the bootstrap brokers could be reached.
    #[error("no bootstrap broker of {bootstrap:?} is reachable")]
    BootstrapFailed {
        /// The addresses tried.
        bootstrap: Vec<String>,
        /// The error of the last attempt.
        #[source]
        source: Box<ClientError>,
    },
    /// The metadata names no broker with this node id.
    #[error("broker {node_id} is not in the cluster metadata")]
    UnknownBroker {
        /// The node id.
        node_id: i32,
    },
    /// A topic has fewer partitions than the one asked for.
    #[error("partition {partition} does not exist in {topic} ({partitions} partitions)")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many partitions the topic has.
        partitions: usize,
    },
    /// An argument cannot be used as given.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong with it.
        reason: String,
    },
}

fn detail(message: &Option<String>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    }
}

impl ClientError {
    /// The Kafka error a broker answered with, if this is one.
    pub fn kafka_error(&self) -> Option<ResponseError> {
        match self {
            Self::Kafka { error, .. } => Some(*error),
            Self::OffsetOutOfRange { .. } => Some(ResponseError::OffsetOutOfRange),
            _ => None,
        }
    }

    /// Whether the same call may succeed if tried again (after a metadata refresh or a
    /// reconnect). Agrees with Kafka's list of retriable error codes.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Kafka { error, .. } => error.is_retriable(),
            Self::Io { .. }
            | Self::ConnectionClosed { .. }
            | Self::Timeout { .. }
            | Self::UnknownBroker { .. } => true,
            Self::OffsetOutOfRange { .. }
            | Self::Encode { .. }
            | Self::Decode { .. }
            | Self::RecordBatch { .. }
            | Self::UnsupportedVersion { .. }
            | Self::UnexpectedCorrelationId { .. }
            | Self::BootstrapFailed { .. }
            | Self::UnknownPartition { .. }
            | Self::InvalidArgument { .. } => false,
        }
    }

    /// Whether the error means the client's view of partition leadership is stale, so the
    /// metadata should be refreshed before retrying.
    pub fn needs_metadata_refresh(&self) -> bool {
        matches!(
            self.kafka_error(),
            Some(
                ResponseError::NotLeaderOrFollower
                    | ResponseError::UnknownTopicOrPartition
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::UnknownLeaderEpoch
                    | ResponseError::NotCoordinator
                    | ResponseError::CoordinatorNotAvailable
            )
        ) || matches!(
            self,
            Self::Io { .. } | Self::ConnectionClosed { .. } | Self::UnknownBroker { .. }
        )
    }

    /// The error for a non-zero Kafka error code, or `None` for 0.
    pub(crate) fn from_code(
        api: ApiKey,
        resource: impl Into<String>,
        code: i16,
        message: Option<&str>,
    ) -> Option<Self> {
        let error = ResponseError::try_from_code(code)?;
        Some(Self::Kafka {
            api,
            resource: resource.into(),
            error,
            code,
            message: message.map(str::to_owned),
        })
    }

    /// `Err` for a non-zero Kafka error code.
    pub(crate) fn check(
        api: ApiKey,
        resource: impl Into<String>,
        code: i16,
        message: Option<&str>,
    ) -> Result<(), Self> {
        match Self::from_code(api, resource, code, message) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_error_display_names_the_error_and_code() {
        let err = ClientError::from_code(ApiKey::Produce, "orders-3", 3, None).unwrap();
        assert_eq!(
            err.to_string(),
            "Produce for orders-3 failed with UnknownTopicOrPartition (code 3)"
        );
        assert_eq!(
            err.kafka_error(),
            Some(ResponseError::UnknownTopicOrPartition)
        );
        assert!(err.is_retriable());
        assert!(err.needs_metadata_refresh());
    }

    #[test]
    fn code_zero_is_not_an_error() {
        assert!(ClientError::from_code(ApiKey::Fetch, "t-0", 0, None).is_none());
        assert!(ClientError::check(ApiKey::Fetch, "t-0", 0, None).is_ok());
    }
}
