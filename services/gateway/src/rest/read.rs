//! `GET /v1/topics/{topic}/partitions/{partition}/records`: a partition read by offset,
//! long-polling up to `max_wait_ms` for records to arrive. Nothing is remembered between
//! calls: the answer's `next_offset` is the next call's `offset`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_auth::Operation;
use skein_http::{ApiPath, ApiQuery, Problem};
use utoipa::{IntoParams, ToSchema};

use super::body::{Formats, RecordOut};
use crate::call::Call;
use crate::error::GatewayError;
use crate::quota::Metered;
use crate::read::{read, reader, resolve, ReadLimits, Start};
use crate::Gateway;

/// The most bytes one partition read asks the brokers for.
const MAX_READ_BYTES: i32 = 8 * 1024 * 1024;

/// The most records one read returns.
pub const MAX_RECORDS: usize = 10_000;

/// Where to read and how much.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// An offset, `earliest` (the default) or `latest`.
    #[param(pattern = "^([0-9]+|earliest|latest)$")]
    pub offset: Option<String>,
    /// At most this many records (default 500, at most 10000).
    #[param(minimum = 1, maximum = 10000)]
    pub max_records: Option<usize>,
    /// About this many bytes at most (default 1 MiB, at most 8 MiB); the first batch comes
    /// whole.
    #[param(minimum = 1, maximum = 8388608)]
    pub max_bytes: Option<i32>,
    /// How long to wait for records when there are none yet (default 0, at most 30000).
    pub max_wait_ms: Option<u64>,
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

/// Records of one partition.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadResults {
    pub records: Vec<RecordOut>,
    /// The offset to read from next.
    pub next_offset: i64,
    /// The offset after the last committed record.
    pub high_watermark: i64,
}

/// Reads a partition from an offset.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/partitions/{partition}/records",
    tag = "records",
    params(
        ("topic" = String, Path, description = "A topic of the caller's tenant"),
        ("partition" = i32, Path, description = "The partition"),
        ReadQuery,
    ),
    responses(
        (status = 200, description = "Records from the offset on (none when nothing arrived in time)", body = ReadResults),
        (status = 400, description = "A parameter is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the topic", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic or partition", body = Problem, content_type = "application/problem+json"),
        (status = 416, description = "The offset is outside the partition's log", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "A quota is used up; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "Stored records cannot be decoded; the problem names the partition", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn read_partition(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath((topic, partition)): ApiPath<(String, i32)>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<ReadResults>, Problem> {
    let summary = call.topic_known(&gateway, &topic, Operation::Read).await?;
    if partition < 0 || partition >= summary.partitions {
        return Err(GatewayError::NotFound(format!(
            "{topic} has no partition {partition} (it has {})",
            summary.partitions
        ))
        .into());
    }
    let start: Start = query.offset.as_deref().unwrap_or("earliest").parse()?;
    let max_records = query.max_records.unwrap_or(500);
    if max_records == 0 || max_records > MAX_RECORDS {
        return Err(Problem::bad_request(format!(
            "max_records must be between 1 and {MAX_RECORDS}"
        )));
    }
    let max_bytes = query.max_bytes.unwrap_or(1024 * 1024);
    if max_bytes <= 0 || max_bytes > MAX_READ_BYTES {
        return Err(Problem::bad_request(format!(
            "max_bytes must be between 1 and {MAX_READ_BYTES}"
        )));
    }
    let max_wait = Duration::from_millis(query.max_wait_ms.unwrap_or(0).min(30_000));
    gateway
        .quotas
        .take(&call.view, &call.caller, Metered::FetchBytes, 0)?;
    let tenant = call.client(&gateway).await?;
    let offset = resolve(&tenant, &topic, partition, start).await?;
    let batch = read(
        &reader(&tenant, max_wait),
        &topic,
        partition,
        offset,
        ReadLimits {
            max_records,
            max_bytes,
            max_wait,
            isolation: super::format::IsolationLevel::of(query.isolation),
        },
    )
    .await?;
    gateway.quotas.charge(
        &call.view,
        &call.caller,
        Metered::FetchBytes,
        batch.bytes as u64,
    );
    let formats = Formats {
        key_format: query.key_format,
        value_format: query.value_format,
        header_format: query.header_format,
    };
    Ok(Json(ReadResults {
        records: batch
            .records
            .iter()
            .map(|r| RecordOut::encode(r, &formats))
            .collect(),
        next_offset: batch.next_offset,
        high_watermark: batch.high_watermark,
    }))
}
