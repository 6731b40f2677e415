//! `POST /v1/topics/{topic}/records`: a batch, answered once the brokers have every record
//! (acks=all) with one outcome per record; and `POST /v1/topics/{topic}/records/stream`:
//! NDJSON in, one NDJSON outcome per record out, in order, as records are written.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use skein_auth::Operation;
use skein_client::ProduceRecord;
use skein_http::{ApiJson, ApiPath, ApiQuery, Problem};

use super::body::{Formats, ProduceBody, ProduceResults, RecordIn, RecordResult};
use crate::call::Call;
use crate::error::GatewayError;
use crate::Gateway;

/// The most records one batch request may carry.
pub const MAX_RECORDS: usize = 10_000;

/// Writes a batch of records.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/records",
    tag = "records",
    params(
        ("topic" = String, Path, description = "A topic of the caller's tenant"),
        ("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key (and body) write nothing twice and get the first answer (with `Idempotent-Replayed: true`); for a day"),
    ),
    request_body = ProduceBody,
    responses(
        (status = 200, description = "Every record was written", body = ProduceResults),
        (status = 207, description = "Some records were not written; each says why", body = ProduceResults),
        (status = 400, description = "The body is not a batch of records", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No WRITE on the topic; nothing was written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The Idempotency-Key was used for a different request", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "A quota is used up; see Retry-After", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn produce(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(topic): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ProduceBody>,
) -> Result<Response, Problem> {
    let idempotency_key = headers
        .get("idempotency-key")
        .map(|v| {
            v.to_str()
                .map_err(|_| Problem::bad_request("the Idempotency-Key header is not text"))
        })
        .transpose()?;
    if body.records.is_empty() || body.records.len() > MAX_RECORDS {
        return Err(Problem::bad_request(format!(
            "send between 1 and {MAX_RECORDS} records"
        )));
    }
    let formats = body.formats();
    let records: Vec<Result<ProduceRecord, GatewayError>> =
        body.records.iter().map(|r| r.decode(&formats)).collect();
    let produced =
        crate::produce::produce(&gateway, &call, &topic, records, idempotency_key).await?;
    let all_written = produced.outcomes.iter().all(Result::is_ok);
    let results = ProduceResults {
        results: produced
            .outcomes
            .into_iter()
            .map(RecordResult::from)
            .collect(),
    };
    let status = if all_written {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    let mut response = (status, Json(results)).into_response();
    if produced.replayed {
        response.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    Ok(response)
}

/// Writes records sent as NDJSON, one JSON record per line, answering each as NDJSON.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/records/stream",
    tag = "records",
    params(("topic" = String, Path, description = "A topic of the caller's tenant"), Formats),
    request_body(content = RecordIn, content_type = "application/x-ndjson",
        description = "One record per line"),
    responses(
        (status = 200, description = "One outcome per line, in order, as each is written",
            body = RecordResult, content_type = "application/x-ndjson"),
        (status = 400, description = "A query parameter is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No WRITE on the topic; nothing was written", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not NDJSON", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn produce_stream(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(topic): ApiPath<String>,
    ApiQuery(formats): ApiQuery<Formats>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("application/x-ndjson") {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "send the records as application/x-ndjson, one JSON record per line",
        ));
    }
    // Refuse before reading anything when the caller may not write.
    call.topic_known(&gateway, &topic, Operation::Write).await?;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        let mut chunks = body.into_data_stream();
        let mut pending = Vec::new();
        let mut done = false;
        while !done {
            match chunks.next().await {
                Some(Ok(chunk)) => pending.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "NDJSON body broke off");
                    done = true;
                }
                None => done = true,
            }
            let cut = if done {
                pending.len()
            } else {
                pending
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1)
            };
            if cut == 0 {
                if pending.len() > gateway.http.max_body_bytes {
                    let refusal = RecordResult::from(Err(GatewayError::Invalid(format!(
                        "a line is over {} bytes; the stream ends here",
                        gateway.http.max_body_bytes
                    ))));
                    if let Ok(mut out) = serde_json::to_vec(&refusal) {
                        out.push(b'\n');
                        let _ = sender.send(Ok(out.into())).await;
                    }
                    return;
                }
                continue;
            }
            let lines: Vec<u8> = pending.drain(..cut).collect();
            let records: Vec<Result<ProduceRecord, GatewayError>> = lines
                .split(|b| *b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .map(|line| {
                    serde_json::from_slice::<RecordIn>(line)
                        .map_err(|e| GatewayError::Invalid(format!("not a record: {e}")))
                        .and_then(|r| r.decode(&formats))
                })
                .collect();
            if records.is_empty() {
                continue;
            }
            let count = records.len();
            // Each run of lines is written as the caller is now: a credential that expired
            // or was revoked ends the stream, and WRITE is checked on the current ACLs.
            let now = match call.current(&gateway) {
                Ok(now) => now,
                Err(e) => {
                    let refusal = RecordResult::from(Err(e));
                    if let Ok(mut out) = serde_json::to_vec(&refusal) {
                        out.push(b'\n');
                        let _ = sender.send(Ok(out.into())).await;
                    }
                    return;
                }
            };
            let outcomes =
                match crate::produce::produce(&gateway, &now, &topic, records, None).await {
                    Ok(produced) => produced.outcomes,
                    Err(e) => vec![Err(e); count],
                };
            let mut out = Vec::new();
            for outcome in outcomes {
                if serde_json::to_writer(&mut out, &RecordResult::from(outcome)).is_ok() {
                    out.push(b'\n');
                }
            }
            if sender.send(Ok(out.into())).await.is_err() {
                return;
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}
