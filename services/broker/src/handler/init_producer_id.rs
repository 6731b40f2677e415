//! InitProducerId: a producer id and epoch for an idempotent producer, or, with a
//! transactional id, from the tenant's transaction coordinator (which fences the id's
//! older producers).

use kafka_protocol::messages::ApiKey;

use crate::router::{Api, Call};

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use skein_auth::Operation;

use crate::authz::Access;

pub(crate) async fn handle(
    call: &Call<'_>,
    access: &Access<'_>,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let broker = call.broker;
    let refused = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    match &request.transactional_id {
        Some(id) if !access.transactional_id(Operation::Write, id.as_str()) => {
            return refused(ResponseError::TransactionalIdAuthorizationFailed);
        }
        None if !access.may_write_idempotently() => {
            return refused(ResponseError::ClusterAuthorizationFailed);
        }
        Some(id) if id.is_empty() || id.len() > crate::limits::MAX_TRANSACTIONAL_ID_BYTES => {
            return refused(ResponseError::InvalidRequest);
        }
        _ => {}
    }
    if let Some(id) = &request.transactional_id {
        let expected = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
            .then_some((request.producer_id.0, request.producer_epoch));
        return match broker
            .transactions_of(&call.scope)
            .init_producer(
                broker,
                id.as_str(),
                request.transaction_timeout_ms,
                expected,
            )
            .await
        {
            Ok((producer_id, epoch)) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(e) => {
                tracing::debug!(transactional_id = %id.as_str(), error = %e, "InitProducerId refused");
                refused(e.code(call.version, 4))
            }
        };
    }
    // A producer that already has an id may ask for the next epoch (KIP-360).
    if request.producer_id.0 >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX
    {
        return InitProducerIdResponse::default()
            .with_producer_id(request.producer_id)
            .with_producer_epoch(request.producer_epoch + 1);
    }
    match broker.producer_ids.allocate().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "failed to allocate a producer id");
            InitProducerIdResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}

/// InitProducerId versions 0 to 5.
pub(crate) struct InitProducerId;

impl Api for InitProducerId {
    type Request = kafka_protocol::messages::InitProducerIdRequest;
    type Response = kafka_protocol::messages::InitProducerIdResponse;
    const KEY: ApiKey = ApiKey::InitProducerId;
    const VERSIONS: (i16, i16) = (0, 5);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        Some(handle(call, &call.access(), request).await)
    }
}
