//! `Idempotency-Key`: a retried produce request writes nothing twice.
//!
//! The control plane remembers each key (per tenant and principal, for a day) with a
//! producer id of its own and a hash of the request. Every attempt of the request writes
//! its records as that idempotent producer, each partition's batch from sequence 0, with
//! unkeyed records placed by the key rather than at random, so every attempt sends the same
//! batches and the brokers keep only the first (answering repeats with its offsets). Once an
//! attempt has an outcome that a retry could not change, it is recorded and replayed to
//! later attempts. The same key with a different request is refused.

use skein_client::ProduceRecord;
use skein_proto::controller as pb;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use crate::brokers::TenantClient;
use crate::call::Call;
use crate::error::GatewayError;
use crate::produce::{write, Mode, Produced, Written};
use crate::Gateway;

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// A hash of what a request writes: the topic and each record as given.
pub fn request_hash(topic: &str, records: &[Result<ProduceRecord, GatewayError>]) -> String {
    let mut bytes = Vec::new();
    let mut field = |data: Option<&[u8]>| match data {
        None => bytes.extend_from_slice(&u64::MAX.to_le_bytes()),
        Some(data) => {
            bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
            bytes.extend_from_slice(data);
        }
    };
    field(Some(topic.as_bytes()));
    for record in records {
        match record {
            Ok(r) => {
                field(Some(b"ok"));
                field(r.key.as_deref());
                field(r.value.as_deref());
                for header in &r.headers {
                    field(Some(header.key.as_bytes()));
                    field(header.value.as_deref());
                }
                field(r.partition.map(i32::to_le_bytes).as_ref().map(|b| &b[..]));
                field(r.timestamp.map(i64::to_le_bytes).as_ref().map(|b| &b[..]));
            }
            Err(e) => {
                field(Some(b"refused"));
                field(Some(e.to_string().as_bytes()));
            }
        }
    }
    format!("{:032x}", xxh3_128(&bytes))
}

/// Whether a retry could change this outcome (then it is not recorded).
fn may_change(outcome: &Result<Written, GatewayError>) -> bool {
    matches!(
        outcome,
        Err(GatewayError::Unavailable(_)
            | GatewayError::Internal(_)
            | GatewayError::QuotaExceeded { .. })
    )
}

fn unavailable(status: &tonic::Status) -> GatewayError {
    GatewayError::Unavailable(format!(
        "the control plane cannot keep idempotency keys now: {}",
        status.message()
    ))
}

/// Writes `records` once for `key`: see the module's description.
pub async fn produce_once(
    gateway: &Gateway,
    call: &Call,
    tenant: &TenantClient,
    topic: &str,
    (partitions, max_message_bytes): (i32, usize),
    records: Vec<Result<ProduceRecord, GatewayError>>,
    key: &str,
) -> Result<Produced, GatewayError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(GatewayError::Invalid(format!(
            "an idempotency key has 1 to {MAX_KEY_LEN} characters"
        )));
    }
    let Some(controller) = &gateway.controller else {
        return Err(GatewayError::Unavailable(
            "idempotency keys need the control plane, which this gateway has no link to".to_owned(),
        ));
    };
    let hash = request_hash(topic, &records);
    let request = pb::ClaimIdempotencyKeyRequest {
        tenant: call.caller.tenant.clone(),
        principal: call.caller.name.clone(),
        key: key.to_owned(),
        request_hash: hash.clone(),
    };
    let claim = controller
        .call(request, |mut c, r| async move {
            c.claim_idempotency_key(r).await
        })
        .await
        .map_err(|status| unavailable(&status))?;
    if claim.request_hash != hash {
        return Err(GatewayError::Unprocessable(format!(
            "the idempotency key {key:?} was used for a different request"
        )));
    }
    if let Some(outcome) = &claim.outcome {
        let outcomes: Vec<Result<Written, GatewayError>> =
            serde_json::from_str(outcome).map_err(|e| {
                GatewayError::Internal(format!("a recorded outcome does not parse: {e}"))
            })?;
        return Ok(Produced {
            outcomes,
            replayed: true,
        });
    }
    let mode = Mode::Once {
        producer_id: claim.producer_id,
        seed: xxh3_64(key.as_bytes()),
        timestamp: claim.created_at,
    };
    let outcomes = write(tenant, topic, partitions, max_message_bytes, records, mode).await;
    if !outcomes.iter().any(may_change) {
        let recorded = serde_json::to_string(&outcomes).unwrap_or_default();
        let request = pb::CompleteIdempotencyKeyRequest {
            tenant: call.caller.tenant.clone(),
            principal: call.caller.name.clone(),
            key: key.to_owned(),
            outcome: recorded,
        };
        // The records are written either way; without the record a retry rewrites the same
        // batches, which the brokers answer with these offsets.
        if let Err(status) = controller
            .call(request, |mut c, r| async move {
                c.complete_idempotency_key(r).await
            })
            .await
        {
            tracing::warn!(%status, key, "could not record an idempotent request's outcome");
        }
    }
    Ok(Produced {
        outcomes,
        replayed: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_changes_with_any_part_of_the_request() {
        let base = vec![Ok(ProduceRecord::new("v").with_key("k"))];
        let hash = request_hash("t", &base);
        assert_eq!(hash, request_hash("t", &base.clone()));
        assert_ne!(hash, request_hash("u", &base));
        assert_ne!(
            hash,
            request_hash("t", &[Ok(ProduceRecord::new("v").with_key("j"))])
        );
        assert_ne!(hash, request_hash("t", &[Ok(ProduceRecord::new("v"))]));
        assert_ne!(
            hash,
            request_hash(
                "t",
                &[Ok(ProduceRecord::new("v").with_key("k").with_partition(0))]
            )
        );
    }
}
