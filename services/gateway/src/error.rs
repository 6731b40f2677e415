//! [`GatewayError`]: why a gateway call failed, mapped once to an HTTP problem and once to a
//! gRPC status.

use std::time::Duration;

use axum::http::StatusCode;
use skein_client::{ClientError, ResponseError};
use skein_http::Problem;

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum GatewayError {
    /// No credential, or one that does not verify (the reason is logged, not answered).
    #[error("{0}")]
    Unauthenticated(String),
    /// The ACLs do not allow the operation.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// A quota is used up; the call may be retried after the pause.
    #[error("{what} quota exceeded; retry after {}s", retry_after.as_secs().max(1))]
    QuotaExceeded { what: String, retry_after: Duration },
    /// A request with this idempotency key is still being written, or a member's
    /// generation is stale.
    #[error("{0}")]
    Conflict(String),
    /// The request contradicts an earlier one (an idempotency key reused for another body).
    #[error("{0}")]
    Unprocessable(String),
    /// An offset outside the partition's log.
    #[error("{0}")]
    OffsetOutOfRange(String),
    /// Stored records that cannot be decoded within the gateway's bounds; the offending
    /// partition and position are named, and nothing is served from them.
    #[error("{0}")]
    CorruptRecords(String),
    /// The brokers or the control plane cannot be reached now; retrying may help.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    pub fn forbidden(principal: &str, operation: &str, resource: &str) -> Self {
        Self::Forbidden(format!("{principal} may not {operation} {resource}"))
    }
}

impl From<ClientError> for GatewayError {
    fn from(e: ClientError) -> Self {
        match &e {
            ClientError::OffsetOutOfRange { .. } => Self::OffsetOutOfRange(e.to_string()),
            ClientError::UnknownPartition { .. } => Self::NotFound(e.to_string()),
            ClientError::InvalidArgument { .. } => Self::Invalid(e.to_string()),
            ClientError::RecordBatch { source, .. } => {
                Self::CorruptRecords(format!("{e}: {source}"))
            }
            _ => match e.kafka_error() {
                Some(ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId) => {
                    Self::NotFound(e.to_string())
                }
                Some(
                    ResponseError::TopicAuthorizationFailed
                    | ResponseError::GroupAuthorizationFailed,
                ) => Self::Forbidden(e.to_string()),
                Some(
                    ResponseError::MessageTooLarge
                    | ResponseError::RecordListTooLarge
                    | ResponseError::InvalidRecord
                    | ResponseError::CorruptMessage
                    | ResponseError::InvalidTimestamp,
                ) => Self::Invalid(e.to_string()),
                // A limit of the cluster's (a storage quota used up, a bound on producer
                // states): the call was well formed, and retrying it as it is will not help.
                Some(ResponseError::PolicyViolation) => Self::Unprocessable(e.to_string()),
                Some(
                    ResponseError::IllegalGeneration
                    | ResponseError::UnknownMemberId
                    | ResponseError::RebalanceInProgress
                    | ResponseError::FencedInstanceId,
                ) => Self::Conflict(e.to_string()),
                _ if e.is_retriable() => Self::Unavailable(e.to_string()),
                _ => match e {
                    ClientError::Io { .. }
                    | ClientError::ConnectionClosed { .. }
                    | ClientError::Timeout { .. }
                    | ClientError::BootstrapFailed { .. }
                    | ClientError::UnknownBroker { .. } => Self::Unavailable(e.to_string()),
                    _ => Self::Internal(e.to_string()),
                },
            },
        }
    }
}

impl From<GatewayError> for Problem {
    fn from(e: GatewayError) -> Self {
        let detail = e.to_string();
        match e {
            GatewayError::Unauthenticated(_) => Problem::unauthorized(detail),
            GatewayError::Forbidden(_) => Problem::forbidden(detail),
            GatewayError::NotFound(_) => Problem::not_found(detail),
            GatewayError::Invalid(_) => Problem::bad_request(detail),
            GatewayError::QuotaExceeded { retry_after, .. } => {
                Problem::too_many_requests(detail, retry_after.as_secs_f64().ceil() as u64)
            }
            GatewayError::Conflict(_) => Problem::new(StatusCode::CONFLICT, "conflict", detail),
            GatewayError::Unprocessable(_) => {
                Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", detail)
            }
            GatewayError::OffsetOutOfRange(_) => Problem::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "offset-out-of-range",
                detail,
            ),
            GatewayError::CorruptRecords(_) => {
                tracing::warn!(error = %detail, "stored records cannot be decoded");
                Problem::new(StatusCode::BAD_GATEWAY, "corrupt-records", detail)
            }
            GatewayError::Unavailable(_) => {
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", detail)
            }
            GatewayError::Internal(_) => {
                tracing::error!(error = %detail, "gateway failure");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", detail)
            }
        }
    }
}

impl From<GatewayError> for tonic::Status {
    fn from(e: GatewayError) -> Self {
        let message = e.to_string();
        match e {
            GatewayError::Unauthenticated(_) => tonic::Status::unauthenticated(message),
            GatewayError::Forbidden(_) => tonic::Status::permission_denied(message),
            GatewayError::NotFound(_) => tonic::Status::not_found(message),
            GatewayError::Invalid(_) => tonic::Status::invalid_argument(message),
            GatewayError::QuotaExceeded { retry_after, .. } => {
                let mut status = tonic::Status::resource_exhausted(message);
                let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                if let Ok(value) = secs.to_string().parse() {
                    status.metadata_mut().insert("retry-after", value);
                }
                status
            }
            GatewayError::Conflict(_) => tonic::Status::aborted(message),
            GatewayError::Unprocessable(_) => tonic::Status::failed_precondition(message),
            GatewayError::OffsetOutOfRange(_) => tonic::Status::out_of_range(message),
            GatewayError::CorruptRecords(_) => {
                tracing::warn!(error = %message, "stored records cannot be decoded");
                tonic::Status::data_loss(message)
            }
            GatewayError::Unavailable(_) => tonic::Status::unavailable(message),
            GatewayError::Internal(_) => {
                tracing::error!(error = %message, "gateway failure");
                tonic::Status::internal(message)
            }
        }
    }
}

impl axum::response::IntoResponse for GatewayError {
    fn into_response(self) -> axum::response::Response {
        Problem::from(self).into_response()
    }
}
