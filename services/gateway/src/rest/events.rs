//! `GET /v1/topics/{topic}/events`: a live tail of a topic as Server-Sent Events. Each
//! record is one `record` event whose id is the position of every partition after it
//! (`0:15,1:7`); a client that reconnects with `Last-Event-ID` (browsers' EventSource does
//! this by itself) continues from there, losing nothing and repeating nothing.
//!
//! EventSource cannot send an Authorization header, so this endpoint also takes the token
//! as the `access_token` query parameter (RFC 6750). The stream ends when the token expires.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{ConnectInfo, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::Deserialize;
use skein_auth::{Operation, ResourceType};
use skein_http::{ApiPath, ApiQuery, Problem};
use tokio_stream::wrappers::ReceiverStream;
use utoipa::IntoParams;

use super::body::{Formats, RecordOut};
use crate::call::Call;
use crate::client_state::{ClientStateKeys, Kind};
use crate::error::GatewayError;
use crate::quota::Metered;
use crate::read::{read, resolve, ReadLimits, Reader, Start};
use crate::streams::Backoff;
use crate::Gateway;

/// Where the tail starts.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Where partitions without a position start: `latest` (default), `earliest` or an
    /// offset.
    #[param(pattern = "^([0-9]+|earliest|latest)$")]
    pub offset: Option<String>,
    /// Positions to resume from, as in an event id (`0:15,1:7`); the `Last-Event-ID` header
    /// takes precedence.
    pub last_event_id: Option<String>,
    /// The token, for clients that cannot send an Authorization header (EventSource).
    pub access_token: Option<String>,
    /// `read_committed` (the default: never a record of an aborted transaction) or
    /// `read_uncommitted`.
    pub isolation: Option<super::format::IsolationLevel>,
    /// Default `string`.
    pub key_format: Option<super::format::Format>,
    /// Default `json`.
    pub value_format: Option<super::format::Format>,
    /// Default `string`.
    pub header_format: Option<super::format::Format>,
}

/// One Server-Sent Event of the tail, as the stream carries it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct RecordEvent {
    /// Always `record` (an `expired`, `revoked` or `forbidden` event with a text message
    /// ends the stream when the token expires, the API key is revoked or READ on the topic
    /// is no longer allowed; a `corrupt-records` event with a text message says that a partition's
    /// stored records cannot be decoded, and that partition is no longer tailed).
    pub event: String,
    /// The position after this record in every partition, sealed so that it cannot be
    /// edited: send it back as `Last-Event-ID` to resume after it.
    pub id: String,
    /// The record, as JSON (`RecordOut`).
    #[schema(content_media_type = "application/json")]
    pub data: String,
}

/// Positions as an event id: the topic and `partition:next_offset` pairs, comma-separated,
/// sealed for the caller's tenant (see [`crate::client_state`]).
pub fn event_id(
    keys: &ClientStateKeys,
    tenant: &str,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
) -> String {
    let pairs = positions
        .iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",");
    keys.seal(
        Kind::EventId,
        tenant,
        format!("{topic}\n{pairs}").as_bytes(),
    )
}

/// The positions an event id this deployment issued for `tenant` and `topic` names.
pub fn parse_event_id(
    keys: &ClientStateKeys,
    tenant: &str,
    topic: &str,
    id: &str,
) -> Result<BTreeMap<i32, i64>, GatewayError> {
    let invalid = || GatewayError::Invalid(format!("{id:?} is not an event id of this tail"));
    let opened = keys.open(Kind::EventId, tenant, id).ok_or_else(invalid)?;
    let text = String::from_utf8(opened).map_err(|_| invalid())?;
    let (issued_for, pairs) = text.split_once('\n').ok_or_else(invalid)?;
    if issued_for != topic {
        return Err(invalid());
    }
    parse_positions(pairs)
}

/// `partition:offset` pairs separated by commas.
fn parse_positions(id: &str) -> Result<BTreeMap<i32, i64>, GatewayError> {
    let mut positions = BTreeMap::new();
    for part in id.split(',').filter(|p| !p.trim().is_empty()) {
        let parsed = part
            .split_once(':')
            .and_then(|(p, o)| Some((p.trim().parse::<i32>().ok()?, o.trim().parse::<i64>().ok()?)))
            .filter(|(p, o)| *p >= 0 && *o >= 0);
        let (partition, offset) = parsed.ok_or_else(|| {
            GatewayError::Invalid(format!(
                "event id {id:?} is not partition:offset pairs separated by commas"
            ))
        })?;
        positions.insert(partition, offset);
    }
    Ok(positions)
}

/// Tails a topic as Server-Sent Events.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/events",
    tag = "records",
    params(
        ("topic" = String, Path, description = "A topic of the caller's tenant"),
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event received"),
        EventsQuery,
    ),
    responses(
        (status = 200, description = "`record` events, each with the partitions' positions as its id \
            and a `RecordOut` as its data", content_type = "text/event-stream", body = RecordEvent),
        (status = 400, description = "A parameter or the event id is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the topic", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn events(
    State(gateway): State<Arc<Gateway>>,
    ApiPath(topic): ApiPath<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    parts: Parts,
) -> Result<impl IntoResponse, Problem> {
    let headers = &parts.headers;
    let authorization = match (&query.access_token, headers.get(AUTHORIZATION)) {
        (_, Some(value)) => value.to_str().ok().map(str::to_owned),
        (Some(token), None) => Some(format!("Bearer {token}")),
        (None, None) => None,
    };
    let caller = gateway.auth.authenticate(authorization.as_deref()).await?;
    let host = parts
        .extensions
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_default();
    let call = Call::new(&gateway, caller, host)?;
    let summary = call.topic_known(&gateway, &topic, Operation::Read).await?;
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(query.last_event_id.clone());
    let mut positions = match &resume {
        Some(id) => parse_event_id(&gateway.client_state, &call.caller.tenant, &topic, id)?,
        None => BTreeMap::new(),
    };
    positions.retain(|p, _| *p < summary.partitions);
    let start: Start = query.offset.as_deref().unwrap_or("latest").parse()?;
    // A place among the tenant's streams, held while the tail runs.
    let slot = gateway.streams.open(&call.caller.tenant)?;
    let tenant = call.client(&gateway).await?;
    for partition in 0..summary.partitions {
        if let std::collections::btree_map::Entry::Vacant(entry) = positions.entry(partition) {
            entry.insert(resolve(&tenant, &topic, partition, start).await?);
        }
    }
    let formats = Formats {
        key_format: query.key_format,
        value_format: query.value_format,
        header_format: query.header_format,
    };
    let isolation = super::format::IsolationLevel::of(query.isolation);
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    let expires_at = call.caller.expires_at;
    let client = Reader::Waiting(Arc::clone(&tenant.long_polls));
    tokio::spawn(async move {
        let _slot = slot;
        let mut backoff = Backoff::default();
        loop {
            // Before every read: the credential still holds, and READ on the topic is still
            // allowed by the ACLs as they are now.
            let allowed = call
                .current(&gateway)
                // The ACL only: the topic was found when the tail opened (asking the
                // controller if need be), and a metadata stream that has not brought a
                // just-created topic yet must not end the tail as forbidden.
                .map(|now| {
                    let allowed = now
                        .check(Operation::Read, ResourceType::Topic, &topic)
                        .is_ok();
                    (allowed, now)
                });
            let ended = match &allowed {
                Err(e) if expires_at.is_some_and(|at| at <= SystemTime::now()) => {
                    Some(("expired", e.to_string()))
                }
                Err(e) => Some(("revoked", e.to_string())),
                Ok((false, _)) => {
                    Some(("forbidden", format!("READ on {topic} is no longer allowed")))
                }
                Ok((true, _)) => None,
            };
            if let Some((event, message)) = ended {
                let _ = sender
                    .send(Ok(Event::default().event(event).data(message)))
                    .await;
                return;
            }
            let debt = gateway.quotas.debt(&call.caller, Metered::FetchBytes);
            if !debt.is_zero() {
                tokio::time::sleep(debt).await;
            }
            let reads = positions.iter().map(|(partition, offset)| {
                read(
                    &client,
                    &topic,
                    *partition,
                    *offset,
                    ReadLimits {
                        max_records: 500,
                        max_bytes: 1024 * 1024,
                        max_wait: Duration::from_secs(1),
                        isolation,
                    },
                )
            });
            // A client that went away ends the tail at once, records or not.
            // The tail ends when the gateway shuts down too: EventSource reconnects (to
            // another replica) and resumes from the last event id.
            let batches = tokio::select! {
                batches = futures::future::join_all(reads) => batches,
                () = sender.closed() => return,
                () = gateway.stopping() => return,
            };
            let partitions: Vec<i32> = positions.keys().copied().collect();
            for (partition, batch) in partitions.into_iter().zip(batches) {
                let batch = match batch {
                    Ok(batch) => batch,
                    Err(GatewayError::OffsetOutOfRange(_)) => {
                        // Retention removed what was next: go on from the log's start.
                        if let Ok(start) =
                            resolve(&tenant, &topic, partition, Start::Earliest).await
                        {
                            positions.insert(partition, start);
                        }
                        continue;
                    }
                    Err(GatewayError::CorruptRecords(detail)) => {
                        // Say so once and stop tailing that partition; the others go on.
                        positions.remove(&partition);
                        let event = Event::default().event("corrupt-records").data(detail);
                        if sender.send(Ok(event)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "tail read failed; retrying");
                        tokio::time::sleep(backoff.after_failure()).await;
                        continue;
                    }
                };
                backoff.reset();
                gateway.quotas.charge(
                    &call.view,
                    &call.caller,
                    Metered::FetchBytes,
                    batch.bytes as u64,
                );
                for record in &batch.records {
                    positions.insert(partition, record.offset + 1);
                    let data = serde_json::to_string(&RecordOut::encode(record, &formats))
                        .unwrap_or_default();
                    let event = Event::default()
                        .event("record")
                        .id(event_id(
                            &gateway.client_state,
                            &call.caller.tenant,
                            &topic,
                            &positions,
                        ))
                        .data(data);
                    if sender.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                positions.insert(partition, batch.next_offset);
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(receiver)).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_refuse_nonsense() {
        let keys = ClientStateKeys::random();
        let positions = BTreeMap::from([(0, 15), (2, 0), (1, 7)]);
        let id = event_id(&keys, "acme", "orders", &positions);
        assert_eq!(
            parse_event_id(&keys, "acme", "orders", &id).unwrap(),
            positions
        );
        assert!(parse_event_id(&keys, "acme", "payments", &id).is_err());
        assert!(parse_event_id(&keys, "globex", "orders", &id).is_err());
        // The plain positions, unsealed, are not an id.
        assert!(parse_event_id(&keys, "acme", "orders", "0:15,1:7,2:0").is_err());
        assert_eq!(parse_positions("0:15,1:7,2:0").unwrap(), positions);
        assert_eq!(parse_positions("").unwrap(), BTreeMap::new());
        for bad in ["x", "0:", "-1:3", "0:-3", "0:1;1:2"] {
            assert!(parse_positions(bad).is_err(), "{bad}");
            let sealed = keys.seal(Kind::EventId, "acme", format!("orders\n{bad}").as_bytes());
            assert!(
                parse_event_id(&keys, "acme", "orders", &sealed).is_err(),
                "{bad}"
            );
        }
    }
}
