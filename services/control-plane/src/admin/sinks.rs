//! `/v1/tenants/{tenant}/sinks`: sinks that apply a tenant's topics to a PostgreSQL table
//! exactly once. A sink is checked against its target before it is stored (the database
//! reachable, the table there, every mapped column there and able to take the values), its
//! database URL is stored sealed and never returned, and the control plane's sink runners
//! pick it up within a second or two.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_catalog::SinkRecord;
use skein_sink::{
    connect_target, prepare, ColumnMapping, Mode, RecordAt, SinkError, SinkSpec, MAX_SKIPPED,
};
use utoipa::ToSchema;

use super::tenants::find;
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::ApiJson;

/// How records become rows.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkMode {
    /// One row per record in the columns `topic text, partition integer, "offset" bigint,
    /// "timestamp" timestamptz, key bytea, value bytea, headers jsonb`.
    Envelope,
    /// The value, a JSON object, field by field into columns; with `key_column`, upserted
    /// by the record key (a unique column), and a tombstone deletes the row.
    Columns {
        columns: Vec<ColumnBody>,
        #[serde(default)]
        key_column: Option<String>,
    },
}

/// A top-level field of the JSON value and the column it fills.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ColumnBody {
    pub field: String,
    pub column: String,
}

/// A sink to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSink {
    /// 1-63 letters, digits or underscores; unique in the tenant.
    pub name: String,
    /// The tenant's topics to consume.
    pub topics: Vec<String>,
    /// `postgres://user:password@host:port/database` of the target; stored encrypted and
    /// never returned.
    pub database_url: String,
    /// `table` or `schema.table`; it must exist.
    pub table: String,
    pub mode: SinkMode,
    /// A topic of the tenant for records that do not fit (not JSON, a value a column
    /// cannot take), with the reason in the `skein.sink.error` header. Without one, such
    /// a record stops the sink.
    pub dead_letter_topic: Option<String>,
}

/// A partition of a sink's topic, as its worker last reported it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SinkPartitionBody {
    pub topic: String,
    pub partition: i64,
    /// The control-plane replica running it.
    pub worker: String,
    /// The offset the sink applies next (stored in the target database).
    pub next_offset: Option<i64>,
    pub log_end_offset: Option<i64>,
    /// Records not yet applied.
    pub lag: Option<i64>,
    /// Milliseconds since the epoch.
    pub reported_at: i64,
}

/// How a sink is doing.
#[derive(Debug, Serialize, ToSchema)]
pub struct SinkStatus {
    /// `running`; `failing` while a worker has stopped on the error in `last_error` (it
    /// is started again every few seconds); or `paused`.
    pub state: String,
    /// Rows its current workers applied since they started.
    pub rows_applied: i64,
    pub rows_per_sec: f64,
    pub dead_lettered: i64,
    pub last_error: Option<String>,
    pub partitions: Vec<SinkPartitionBody>,
}

/// A sink.
#[derive(Debug, Serialize, ToSchema)]
pub struct SinkBody {
    /// Always `Sink`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub name: String,
    pub topics: Vec<String>,
    pub table: String,
    pub mode: SinkMode,
    pub dead_letter_topic: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    pub status: SinkStatus,
}

/// A tenant's sinks.
#[derive(Debug, Serialize, ToSchema)]
pub struct SinkList {
    /// Always `SinkList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<SinkBody>,
}

fn spec_of(request: &CreateSink) -> SinkSpec {
    SinkSpec {
        name: request.name.clone(),
        topics: request.topics.clone(),
        table: request.table.clone(),
        mode: mode_from(&request.mode),
        dead_letter_topic: request.dead_letter_topic.clone(),
        skip: Vec::new(),
    }
}

fn mode_from(mode: &SinkMode) -> Mode {
    match mode {
        SinkMode::Envelope => Mode::Envelope,
        SinkMode::Columns {
            columns,
            key_column,
        } => Mode::Columns {
            columns: columns
                .iter()
                .map(|c| ColumnMapping {
                    field: c.field.clone(),
                    column: c.column.clone(),
                })
                .collect(),
            key_column: key_column.clone(),
        },
    }
}

fn mode_of(spec: &SinkSpec) -> SinkMode {
    match &spec.mode {
        Mode::Envelope => SinkMode::Envelope,
        Mode::Columns {
            columns,
            key_column,
        } => SinkMode::Columns {
            columns: columns
                .iter()
                .map(|c| ColumnBody {
                    field: c.field.clone(),
                    column: c.column.clone(),
                })
                .collect(),
            key_column: key_column.clone(),
        },
    }
}

fn unprocessable(detail: impl Into<String>) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-sink", detail)
}

/// A sink error met while checking a definition, as the problem the caller sees.
fn refused(error: SinkError) -> Problem {
    match error {
        SinkError::Database(e) => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-sink",
            format!("the target database refused the checks: {e}"),
        ),
        other => unprocessable(other.to_string()),
    }
}

/// Checks a sink's definition and target as a sink is made or changed: its topics are the
/// tenant's, the dead-letter topic is none of them, the URL is a PostgreSQL one the sink may
/// reach, the target table takes the rows; then makes a missing dead-letter topic.
async fn check(
    state: &AdminState,
    admin: &Admin,
    tenant: &str,
    tenant_id: &str,
    spec: &SinkSpec,
    url: &str,
) -> Result<(), Problem> {
    spec.validate().map_err(refused)?;
    for topic in &spec.topics {
        if state.catalog.topic(tenant_id, topic).await.is_err() {
            return Err(unprocessable(format!(
                "tenant {tenant} has no topic {topic}"
            )));
        }
    }
    if spec
        .dead_letter_topic
        .as_ref()
        .is_some_and(|dlq| spec.topics.contains(dlq))
    {
        return Err(unprocessable(
            "the dead-letter topic cannot be one the sink consumes",
        ));
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) || url.len() > 4096 {
        return Err(unprocessable(
            "database_url must be a postgres:// or postgresql:// URL",
        ));
    }
    let pool = connect_target(url, 1, &state.sink_targets)
        .await
        .map_err(refused)?;
    let checked = prepare(&pool, spec).await;
    pool.close().await;
    checked.map_err(refused)?;
    // A dead-letter topic that does not exist yet is made, with one partition, once the
    // rest of the definition holds.
    if let Some(dlq) = &spec.dead_letter_topic {
        if state.catalog.topic(tenant_id, dlq).await.is_err() {
            create_dead_letter_topic(state, tenant, dlq).await?;
            tracing::info!(%tenant, topic = %dlq, by = %admin.subject, "created a sink's dead-letter topic");
        }
    }
    Ok(())
}

/// The sink key, without which no sink is made or changed.
fn sink_key(state: &AdminState) -> Result<&Arc<crate::sinks::SinkKey>, Problem> {
    state.sink_key.as_ref().ok_or_else(|| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "sinks-unavailable",
            "this control plane has no sink key (--sink-secret-file), so it cannot keep a \
             sink's database URL",
        )
    })
}

fn internal(e: impl std::fmt::Display) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

/// Changes to a sink: each field given replaces the sink's own, and the rest stay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSink {
    pub topics: Option<Vec<String>>,
    /// A new target; stored encrypted and never returned.
    pub database_url: Option<String>,
    pub table: Option<String>,
    pub mode: Option<SinkMode>,
    /// A topic for records that do not fit (made if it does not exist); an empty string
    /// removes the sink's.
    pub dead_letter_topic: Option<String>,
}

/// Change a sink: checked against its target as when it was made, then its workers start
/// over on the new definition, from the positions stored in the target database.
#[utoipa::path(patch, operation_id = "update_sink", path = "/v1/tenants/{tenant}/sinks/{sink}", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    request_body = UpdateSink,
    responses((status = 200, body = SinkBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn update(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateSink>,
) -> Result<Json<SinkBody>, Problem> {
    let owner = find(&state, &tenant).await?;
    let key = sink_key(&state)?;
    let record = state.catalog.sink(&owner.id, &sink).await?;
    let mut spec: SinkSpec = serde_json::from_str(&record.spec).map_err(internal)?;
    if let Some(topics) = request.topics {
        spec.topics = topics;
    }
    if let Some(table) = request.table {
        spec.table = table;
    }
    if let Some(mode) = &request.mode {
        spec.mode = mode_from(mode);
    }
    if let Some(dlq) = request.dead_letter_topic {
        spec.dead_letter_topic = Some(dlq).filter(|t| !t.is_empty());
    }
    let url = match request.database_url {
        Some(url) => url,
        None => key
            .open(&record.id, &record.target_sealed)
            .map_err(internal)?,
    };
    check(&state, &admin, &tenant, &owner.id, &spec, &url).await?;
    let sealed = key.seal(&record.id, &url).map_err(internal)?;
    let stored_spec = serde_json::to_string(&spec).map_err(internal)?;
    let updated = state
        .catalog
        .update_sink(&owner.id, &sink, &stored_spec, &sealed)
        .await?;
    tracing::info!(%tenant, %sink, by = %admin.subject, "changed sink");
    Ok(Json(body(&state, &tenant, updated).await?))
}

/// A record for a sink to pass over.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SkipRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// Skip one record: the sink passes it over (to its dead-letter topic if it has one, else
/// nowhere) and goes on; for a record it cannot apply, which `last_error` names while the
/// sink is `failing`. Its workers start over with the record skipped.
#[utoipa::path(post, operation_id = "skip_sink_record", path = "/v1/tenants/{tenant}/sinks/{sink}/skip", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    request_body = SkipRecord,
    responses((status = 200, body = SinkBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn skip(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
    ApiJson(request): ApiJson<SkipRecord>,
) -> Result<Json<SinkBody>, Problem> {
    let owner = find(&state, &tenant).await?;
    let record = state.catalog.sink(&owner.id, &sink).await?;
    let mut spec: SinkSpec = serde_json::from_str(&record.spec).map_err(internal)?;
    if !spec.topics.contains(&request.topic) || request.partition < 0 || request.offset < 0 {
        return Err(unprocessable(format!(
            "sink {sink} reads no record {}-{}@{}",
            request.topic, request.partition, request.offset
        )));
    }
    let at = RecordAt {
        topic: request.topic,
        partition: request.partition,
        offset: request.offset,
    };
    if !spec.skip.contains(&at) {
        if spec.skip.len() >= MAX_SKIPPED {
            spec.skip.remove(0);
        }
        spec.skip.push(at.clone());
    }
    let stored_spec = serde_json::to_string(&spec).map_err(internal)?;
    let updated = state
        .catalog
        .update_sink(&owner.id, &sink, &stored_spec, &record.target_sealed)
        .await?;
    tracing::info!(%tenant, %sink, topic = %at.topic, partition = at.partition,
        offset = at.offset, by = %admin.subject, "a sink skips a record");
    Ok(Json(body(&state, &tenant, updated).await?))
}

/// Makes a sink's dead-letter topic: one partition, the cluster's default replication.
async fn create_dead_letter_topic(
    state: &AdminState,
    tenant: &str,
    topic: &str,
) -> Result<(), Problem> {
    let Some(topics) = &state.topics else {
        return Err(unprocessable(format!(
            "tenant {tenant} has no topic {topic} to take dead letters, and this control \
             plane cannot make one; create it first"
        )));
    };
    match topics
        .create(tenant, topic, 1, 1, std::collections::BTreeMap::new())
        .await
    {
        Ok(_)
        | Err(crate::topic_ops::TopicOpError::Catalog(
            skein_catalog::CatalogError::AlreadyExists { .. },
        )) => Ok(()),
        Err(e) => Err(unprocessable(format!(
            "the dead-letter topic {topic} does not exist and could not be made: {e}"
        ))),
    }
}

async fn body(state: &AdminState, tenant: &str, record: SinkRecord) -> Result<SinkBody, Problem> {
    let spec: SinkSpec = serde_json::from_str(&record.spec).map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the stored sink does not parse: {e}"),
        )
    })?;
    let reports = state.catalog.sink_partitions(&record.id).await?;
    let last_error = reports
        .iter()
        .filter(|r| r.last_error.is_some())
        .max_by_key(|r| r.reported_at)
        .and_then(|r| r.last_error.clone());
    let status = SinkStatus {
        state: if record.paused {
            "paused"
        } else if last_error.is_some() {
            "failing"
        } else {
            "running"
        }
        .to_owned(),
        rows_applied: reports.iter().map(|r| r.rows_applied).sum(),
        rows_per_sec: reports.iter().map(|r| r.rows_per_sec).sum(),
        dead_lettered: reports.iter().map(|r| r.dead_lettered).sum(),
        last_error,
        partitions: reports
            .into_iter()
            .map(|r| SinkPartitionBody {
                lag: r
                    .log_end_offset
                    .zip(r.next_offset)
                    .map(|(end, next)| (end - next).max(0)),
                topic: r.topic,
                partition: r.partition,
                worker: r.worker,
                next_offset: r.next_offset,
                log_end_offset: r.log_end_offset,
                reported_at: r.reported_at,
            })
            .collect(),
    };
    Ok(SinkBody {
        kind: "Sink".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("/v1/tenants/{tenant}/sinks/{}", record.name),
        },
        name: record.name,
        topics: spec.topics.clone(),
        table: spec.table.clone(),
        mode: mode_of(&spec),
        dead_letter_topic: spec.dead_letter_topic.clone(),
        created_at: record.created_at,
        status,
    })
}

/// List a tenant's sinks with their status.
#[utoipa::path(get, operation_id = "list_sinks", path = "/v1/tenants/{tenant}/sinks", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name")),
    responses((status = 200, body = SinkList), (status = 404, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
) -> Result<Json<SinkList>, Problem> {
    let owner = find(&state, &tenant).await?;
    let mut data = Vec::new();
    for record in state.catalog.sinks(&owner.id).await? {
        data.push(body(&state, &tenant, record).await?);
    }
    Ok(Json(SinkList {
        kind: "SinkList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("/v1/tenants/{tenant}/sinks"),
            next: None,
        },
        data,
    }))
}

/// Create a sink: checked against its target database first, then run by the control
/// plane until paused or deleted.
#[utoipa::path(post, operation_id = "create_sink", path = "/v1/tenants/{tenant}/sinks", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name")), request_body = CreateSink,
    responses((status = 201, body = SinkBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn create(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiJson(request): ApiJson<CreateSink>,
) -> Result<(StatusCode, Json<SinkBody>), Problem> {
    let owner = find(&state, &tenant).await?;
    let key = sink_key(&state)?;
    let spec = spec_of(&request);
    check(
        &state,
        &admin,
        &tenant,
        &owner.id,
        &spec,
        &request.database_url,
    )
    .await?;
    let id = skein_catalog::Catalog::new_sink_id();
    let sealed = key.seal(&id, &request.database_url).map_err(internal)?;
    let stored_spec = serde_json::to_string(&spec).map_err(internal)?;
    let record = state
        .catalog
        .create_sink(&id, &owner.id, &spec.name, &stored_spec, &sealed)
        .await?;
    tracing::info!(%tenant, sink = %record.name, by = %admin.subject, "created sink");
    Ok((
        StatusCode::CREATED,
        Json(body(&state, &tenant, record).await?),
    ))
}

/// Get a sink with its status: state, each partition's position and lag, rows per
/// second, the last error.
#[utoipa::path(get, operation_id = "get_sink", path = "/v1/tenants/{tenant}/sinks/{sink}", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    responses((status = 200, body = SinkBody), (status = 404, body = Problem)))]
pub async fn get(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
) -> Result<Json<SinkBody>, Problem> {
    let owner = find(&state, &tenant).await?;
    let record = state.catalog.sink(&owner.id, &sink).await?;
    Ok(Json(body(&state, &tenant, record).await?))
}

async fn set_paused(
    state: &AdminState,
    tenant: &str,
    sink: &str,
    paused: bool,
) -> Result<Json<SinkBody>, Problem> {
    let owner = find(state, tenant).await?;
    state
        .catalog
        .set_sink_paused(&owner.id, sink, paused)
        .await?;
    let record = state.catalog.sink(&owner.id, sink).await?;
    Ok(Json(body(state, tenant, record).await?))
}

/// Pause a sink: its workers stop after the batch in hand, positions kept.
#[utoipa::path(post, operation_id = "pause_sink", path = "/v1/tenants/{tenant}/sinks/{sink}/pause", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    responses((status = 200, body = SinkBody), (status = 404, body = Problem)))]
pub async fn pause(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
) -> Result<Json<SinkBody>, Problem> {
    tracing::info!(%tenant, %sink, by = %admin.subject, "paused sink");
    set_paused(&state, &tenant, &sink, true).await
}

/// Resume a paused sink from its stored positions.
#[utoipa::path(post, operation_id = "resume_sink", path = "/v1/tenants/{tenant}/sinks/{sink}/resume", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    responses((status = 200, body = SinkBody), (status = 404, body = Problem)))]
pub async fn resume(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
) -> Result<Json<SinkBody>, Problem> {
    tracing::info!(%tenant, %sink, by = %admin.subject, "resumed sink");
    set_paused(&state, &tenant, &sink, false).await
}

/// Delete a sink. Its rows and the positions in the target database stay.
#[utoipa::path(delete, operation_id = "delete_sink", path = "/v1/tenants/{tenant}/sinks/{sink}", tag = "sinks",
    params(("tenant" = String, Path, description = "Tenant name"), ("sink" = String, Path, description = "Sink name")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, sink)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    let owner = find(&state, &tenant).await?;
    state.catalog.delete_sink(&owner.id, &sink).await?;
    tracing::info!(%tenant, %sink, by = %admin.subject, "deleted sink");
    Ok(StatusCode::NO_CONTENT)
}
