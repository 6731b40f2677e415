//! Group consumption over REST with no gateway state: the group's membership and offsets
//! live in the brokers' group coordinator, and the client carries its member identity and
//! read positions in a cursor. Any gateway replica continues any member.
//!
//! - `POST /v1/groups/{group}/members` joins (waiting while the group rebalances) and answers
//!   the member's assignment and its first cursor;
//! - `GET /v1/groups/{group}/records?cursor=` heartbeats for the member, rejoins when the
//!   group rebalances (the answer names the new generation and assignment), and reads from
//!   the cursor's positions; the answer's cursor continues after the records it carries;
//! - `POST /v1/groups/{group}/offsets` commits a cursor's positions for its generation
//!   (409 when the group has moved on: read again to rejoin);
//! - `DELETE /v1/groups/{group}/members/{member}` leaves at once.
//!
//! A member that stops reading for its session timeout is expired by the coordinator, and
//! its partitions move to the others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::client_state::{ClientStateKeys, Kind};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_auth::{Operation, ResourceType};
use skein_client::{Assignment, ClientError, GroupSession, ResponseError};
use skein_http::{ApiJson, ApiPath, ApiQuery, Problem};
use utoipa::{IntoParams, ToSchema};

use super::body::{Formats, RecordOut};
use super::format::{Format, IsolationLevel};
use crate::brokers::TenantClient;
use crate::call::Call;
use crate::error::GatewayError;
use crate::quota::Metered;
use crate::read::{read, reader, resolve, ReadLimits, Start};
use crate::Gateway;

/// The most records one read returns.
const MAX_RECORDS: usize = 10_000;

/// The topics a group cursor the client handed back names, once it opens and is consistent
/// (its group, its positions only in subscribed topics): what the REST group calls
/// authorize before they use it.
pub fn cursor_topics(
    text: &str,
    group: &str,
    keys: &ClientStateKeys,
    tenant: &str,
) -> Result<Vec<String>, GatewayError> {
    let cursor = Cursor::decode(text, group, keys, tenant)?;
    Ok(cursor
        .named_topics()
        .into_iter()
        .map(str::to_owned)
        .collect())
}

/// What a cursor holds: who the member is and where it reads. Opaque to clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    group: String,
    member: String,
    generation: i32,
    topics: Vec<String>,
    session_ms: u64,
    latest: bool,
    /// topic → partition → next offset.
    positions: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl Cursor {
    /// The cursor as the client holds it: sealed for the caller's tenant, so that it cannot
    /// be edited or forged (see [`crate::client_state`]).
    fn encode(&self, keys: &ClientStateKeys, tenant: &str) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        keys.seal(Kind::GroupCursor, tenant, &json)
    }

    fn decode(
        text: &str,
        group: &str,
        keys: &ClientStateKeys,
        tenant: &str,
    ) -> Result<Self, GatewayError> {
        let invalid =
            || GatewayError::Invalid("the cursor is not one this gateway issued".to_owned());
        let bytes = keys
            .open(Kind::GroupCursor, tenant, text)
            .ok_or_else(invalid)?;
        let cursor: Self = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if cursor.group != group {
            return Err(GatewayError::Invalid(format!(
                "the cursor is for group {}, not {group}",
                cursor.group
            )));
        }
        // Positions only for the topics the member subscribed to, which are the ones
        // authorized on every use.
        if let Some(stray) = cursor.positions.keys().find(|t| !cursor.topics.contains(t)) {
            return Err(GatewayError::Invalid(format!(
                "the cursor holds positions in {stray}, which it is not subscribed to"
            )));
        }
        Ok(cursor)
    }

    /// Every topic the cursor names: its subscription and the topics of its positions.
    fn named_topics(&self) -> BTreeSet<&str> {
        self.topics
            .iter()
            .chain(self.positions.keys())
            .map(String::as_str)
            .collect()
    }

    fn session(&self) -> Duration {
        Duration::from_millis(self.session_ms)
    }
}

/// A member to add.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// The topics to consume (each needs READ, as does the group).
    #[schema(min_items = 1)]
    pub topics: Vec<String>,
    /// How long the member may go without reading before the group drops it (default
    /// 30000, between 6000 and 300000).
    #[schema(minimum = 6000, maximum = 300000)]
    pub session_timeout_ms: Option<u64>,
    /// Where partitions without a committed offset start: `earliest` (default) or `latest`.
    #[schema(pattern = "^(earliest|latest)$")]
    pub start: Option<String>,
}

/// A partition assigned to the member, and where it reads next.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssignedPartition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The member's standing, returned by every group call.
#[derive(Debug, Serialize, ToSchema)]
pub struct Membership {
    pub member_id: String,
    /// The group generation; commits are fenced by it.
    pub generation: i32,
    pub assignment: Vec<AssignedPartition>,
    /// Send this with the next read or commit.
    pub cursor: String,
}

/// Records for a member.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupRecords {
    #[serde(flatten)]
    pub membership: Membership,
    pub records: Vec<RecordOut>,
}

/// How to read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GroupReadQuery {
    /// The cursor from the previous call.
    pub cursor: String,
    /// At most this many records (default 500, at most 10000).
    #[param(minimum = 1, maximum = 10000)]
    pub max_records: Option<usize>,
    /// How long to wait for records when there are none yet (default 0, at most 30000).
    pub max_wait_ms: Option<u64>,
    /// `read_committed` (the default: never a record of an aborted transaction) or
    /// `read_uncommitted`.
    pub isolation: Option<IsolationLevel>,
    /// Default `string`.
    pub key_format: Option<Format>,
    /// Default `json`.
    pub value_format: Option<Format>,
    /// Default `string`.
    pub header_format: Option<Format>,
}

/// What to commit.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    /// Commits this cursor's positions: everything before them is done.
    pub cursor: String,
}

/// What was committed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Committed {
    pub generation: i32,
    pub offsets: Vec<AssignedPartition>,
}

fn assignment_of(cursor: &Cursor) -> Vec<AssignedPartition> {
    cursor
        .positions
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(partition, offset)| AssignedPartition {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                })
        })
        .collect()
}

fn membership(cursor: &Cursor, keys: &ClientStateKeys, tenant: &str) -> Membership {
    Membership {
        member_id: cursor.member.clone(),
        generation: cursor.generation,
        assignment: assignment_of(cursor),
        cursor: cursor.encode(keys, tenant),
    }
}

/// Checks READ on the group and on each topic.
fn check<'a>(
    call: &Call,
    group: &str,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<(), GatewayError> {
    call.check(Operation::Read, ResourceType::Group, group)?;
    for topic in topics {
        call.topic(topic, Operation::Read)?;
    }
    Ok(())
}

fn session(tenant: &TenantClient, cursor: &Cursor) -> GroupSession {
    GroupSession::new(
        &tenant.client,
        cursor.group.clone(),
        cursor.member.clone(),
        cursor.generation,
        cursor.session(),
        cursor.session(),
    )
}

/// Joins (or rejoins) and sets the cursor's positions for the new assignment: the later of
/// the committed offset and the cursor's own position (progress this member made and has
/// not committed yet), else the start policy.
async fn join(
    tenant: &TenantClient,
    session: &mut GroupSession,
    cursor: &mut Cursor,
) -> Result<(), GatewayError> {
    let assignment: Assignment = session.join(&cursor.topics).await?;
    let committed = session.committed(&assignment).await?;
    let mut positions: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
    for (topic, partitions) in &assignment {
        for partition in partitions {
            let own = cursor
                .positions
                .get(topic)
                .and_then(|p| p.get(partition))
                .copied();
            let stored = committed.get(&(topic.clone(), *partition)).copied();
            let offset = match own.max(stored) {
                Some(offset) => offset,
                None => {
                    let start = if cursor.latest {
                        Start::Latest
                    } else {
                        Start::Earliest
                    };
                    resolve(tenant, topic, *partition, start).await?
                }
            };
            positions
                .entry(topic.clone())
                .or_default()
                .insert(*partition, offset);
        }
    }
    cursor.member = session.member_id().to_owned();
    cursor.generation = session.generation();
    cursor.positions = positions;
    Ok(())
}

/// Joins a group.
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/members",
    tag = "groups",
    params(("group" = String, Path, description = "A consumer group of the caller's tenant")),
    request_body = JoinBody,
    responses(
        (status = 200, description = "Joined; the assignment and the first cursor", body = Membership),
        (status = 400, description = "The body is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the group or a topic", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not application/json", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn join_group(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<JoinBody>,
) -> Result<Json<Membership>, Problem> {
    if body.topics.is_empty() || group.is_empty() {
        return Err(Problem::bad_request("name a group and at least one topic"));
    }
    let session_ms = body.session_timeout_ms.unwrap_or(30_000);
    if !(6_000..=300_000).contains(&session_ms) {
        return Err(Problem::bad_request(
            "session_timeout_ms must be between 6000 and 300000",
        ));
    }
    let latest = match body.start.as_deref() {
        None | Some("earliest") => false,
        Some("latest") => true,
        Some(other) => {
            return Err(Problem::bad_request(format!(
                "start {other:?} is neither earliest nor latest"
            )))
        }
    };
    check(&call, &group, body.topics.iter().map(String::as_str))?;
    let tenant = call.client(&gateway).await?;
    let mut topics = body.topics.clone();
    topics.sort();
    topics.dedup();
    let mut cursor = Cursor {
        group,
        member: String::new(),
        generation: -1,
        topics,
        session_ms,
        latest,
        positions: BTreeMap::new(),
    };
    let mut session = session(&tenant, &cursor);
    join(&tenant, &mut session, &mut cursor).await?;
    Ok(Json(membership(
        &cursor,
        &gateway.client_state,
        &call.caller.tenant,
    )))
}

/// Reads the member's partitions.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/records",
    tag = "groups",
    params(("group" = String, Path, description = "A consumer group of the caller's tenant"), GroupReadQuery),
    responses(
        (status = 200, description = "Records from the cursor's positions, and the cursor after them", body = GroupRecords),
        (status = 400, description = "The cursor or a parameter is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the group or a topic", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "A quota is used up; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "Stored records cannot be decoded; the problem names the partition", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn read_group(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(group): ApiPath<String>,
    ApiQuery(query): ApiQuery<GroupReadQuery>,
) -> Result<Json<GroupRecords>, Problem> {
    let mut cursor = Cursor::decode(
        &query.cursor,
        &group,
        &gateway.client_state,
        &call.caller.tenant,
    )?;
    check(&call, &group, cursor.named_topics())?;
    let max_records = query.max_records.unwrap_or(500);
    if max_records == 0 || max_records > MAX_RECORDS {
        return Err(Problem::bad_request(format!(
            "max_records must be between 1 and {MAX_RECORDS}"
        )));
    }
    let max_wait = Duration::from_millis(query.max_wait_ms.unwrap_or(0).min(30_000));
    gateway
        .quotas
        .take(&call.view, &call.caller, Metered::FetchBytes, 0)?;
    let tenant = call.client(&gateway).await?;
    let mut session = session(&tenant, &cursor);
    match session.heartbeat().await {
        Ok(()) => {}
        Err(e) if must_rejoin(&e) => join(&tenant, &mut session, &mut cursor).await?,
        Err(e) => return Err(GatewayError::from(e).into()),
    }
    let targets: Vec<(String, i32, i64)> = cursor
        .positions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| (t.clone(), *p, *o)))
        .collect();
    let client = reader(&tenant, max_wait);
    let reads = targets.iter().map(|(topic, partition, offset)| {
        read(
            &client,
            topic,
            *partition,
            *offset,
            ReadLimits {
                max_records,
                max_bytes: 1024 * 1024,
                max_wait,
                isolation: IsolationLevel::of(query.isolation),
            },
        )
    });
    let batches = futures::future::join_all(reads).await;
    let formats = Formats {
        key_format: query.key_format,
        value_format: query.value_format,
        header_format: query.header_format,
    };
    let mut records = Vec::new();
    let mut bytes = 0;
    for ((topic, partition, _), batch) in targets.iter().zip(batches) {
        let batch = match batch {
            Ok(batch) => batch,
            Err(GatewayError::OffsetOutOfRange(_)) => {
                // Retention removed the position: go on from the log's start.
                let start = resolve(&tenant, topic, *partition, Start::Earliest).await?;
                set_position(&mut cursor, topic, *partition, start);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let room = max_records.saturating_sub(records.len());
        let taken = batch.records.len().min(room);
        for record in &batch.records[..taken] {
            records.push(RecordOut::encode(record, &formats));
        }
        bytes += batch.bytes;
        let next = if taken < batch.records.len() {
            batch.records[taken].offset
        } else {
            batch.next_offset
        };
        set_position(&mut cursor, topic, *partition, next);
    }
    gateway
        .quotas
        .charge(&call.view, &call.caller, Metered::FetchBytes, bytes as u64);
    Ok(Json(GroupRecords {
        membership: membership(&cursor, &gateway.client_state, &call.caller.tenant),
        records,
    }))
}

fn set_position(cursor: &mut Cursor, topic: &str, partition: i32, offset: i64) {
    cursor
        .positions
        .entry(topic.to_owned())
        .or_default()
        .insert(partition, offset);
}

/// Whether an error means the member has to join again.
fn must_rejoin(e: &ClientError) -> bool {
    matches!(
        e.kafka_error(),
        Some(
            ResponseError::RebalanceInProgress
                | ResponseError::IllegalGeneration
                | ResponseError::UnknownMemberId
        )
    )
}

/// Commits a cursor's positions.
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/offsets",
    tag = "groups",
    params(("group" = String, Path, description = "A consumer group of the caller's tenant")),
    request_body = CommitBody,
    responses(
        (status = 200, description = "Committed", body = Committed),
        (status = 400, description = "The cursor is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the group", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The group moved to another generation; read again to rejoin", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not application/json", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn commit(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<CommitBody>,
) -> Result<Json<Committed>, Problem> {
    let cursor = Cursor::decode(
        &body.cursor,
        &group,
        &gateway.client_state,
        &call.caller.tenant,
    )?;
    check(&call, &group, cursor.named_topics())?;
    let tenant = call.client(&gateway).await?;
    let mut session = session(&tenant, &cursor);
    let offsets: BTreeMap<(String, i32), i64> = cursor
        .positions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| ((t.clone(), *p), *o)))
        .collect();
    session.commit(&offsets).await.map_err(GatewayError::from)?;
    Ok(Json(Committed {
        generation: cursor.generation,
        offsets: assignment_of(&cursor),
    }))
}

/// Leaves the group.
#[utoipa::path(
    delete,
    path = "/v1/groups/{group}/members/{member}",
    tag = "groups",
    params(
        ("group" = String, Path, description = "A consumer group of the caller's tenant"),
        ("member" = String, Path, description = "The member id"),
    ),
    responses(
        (status = 204, description = "Left; its partitions move to the others"),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No READ on the group", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn leave(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath((group, member)): ApiPath<(String, String)>,
) -> Result<StatusCode, Problem> {
    call.check(Operation::Read, ResourceType::Group, &group)?;
    let tenant = call.client(&gateway).await?;
    let mut session = GroupSession::new(
        &tenant.client,
        group,
        member,
        -1,
        Duration::from_secs(30),
        Duration::from_secs(30),
    );
    match session.leave().await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(e) if e.kafka_error() == Some(ResponseError::UnknownMemberId) => {
            Ok(StatusCode::NO_CONTENT)
        }
        Err(e) => Err(GatewayError::from(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_name_their_group() {
        let cursor = Cursor {
            group: "g".into(),
            member: "m-1".into(),
            generation: 3,
            topics: vec!["orders".into()],
            session_ms: 30_000,
            latest: false,
            positions: BTreeMap::from([("orders".into(), BTreeMap::from([(0, 5), (2, 9)]))]),
        };
        let keys = ClientStateKeys::random();
        let sealed = cursor.encode(&keys, "acme");
        assert_eq!(Cursor::decode(&sealed, "g", &keys, "acme").unwrap(), cursor);
        assert!(Cursor::decode(&sealed, "other", &keys, "acme").is_err());
        assert!(Cursor::decode(&sealed, "g", &keys, "globex").is_err());
        assert!(Cursor::decode(&sealed, "g", &ClientStateKeys::random(), "acme").is_err());
        assert!(Cursor::decode("not a cursor", "g", &keys, "acme").is_err());
    }
}
