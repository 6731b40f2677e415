//! `/v1/tenants/{tenant}/topics`: a tenant's topics, created and grown through the same
//! placement as the controller's (so only on the active controller, on live brokers).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_catalog::{Partition, Topic};
use utoipa::ToSchema;

use super::tenants::{find, Page};
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use crate::topic_ops::TopicOpError;
use skein_http::{ApiJson, ApiQuery};

/// A topic to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    /// Kafka's rules: 1-249 of `a-zA-Z0-9._-`, not `.` or `..`; with the tenant's name and a
    /// `.` before it, at most 249.
    pub topic_name: String,
    /// At least 1.
    pub partitions_count: i32,
    /// At most the number of live brokers (default 1).
    pub replication_factor: Option<i32>,
    /// Topic configs by Kafka name (`retention.ms`, `cleanup.policy`, ...).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// A new partition count.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTopic {
    /// Larger than the current count.
    pub partitions_count: i32,
}

/// A partition of a topic.
#[derive(Debug, Serialize, ToSchema)]
pub struct PartitionBody {
    pub partition_id: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// A topic.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicBody {
    /// Always `Topic`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub topic_id: String,
    pub topic_name: String,
    pub partitions_count: i32,
    pub replication_factor: i32,
    pub configs: BTreeMap<String, String>,
    /// Present when one topic is asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionBody>>,
}

/// A tenant's topics.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicList {
    /// Always `TopicList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<TopicBody>,
}

fn body(tenant: &str, topic: Topic, partitions: Option<Vec<Partition>>) -> TopicBody {
    TopicBody {
        kind: "Topic".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("/v1/tenants/{tenant}/topics/{}", topic.name),
        },
        topic_id: topic.id,
        topic_name: topic.name,
        partitions_count: topic.partitions,
        replication_factor: topic.replication_factor,
        configs: topic.configs,
        partitions: partitions.map(|ps| {
            ps.into_iter()
                .map(|p| PartitionBody {
                    partition_id: p.partition,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas,
                    isr: p.isr,
                })
                .collect()
        }),
    }
}

/// Refused topic changes as problems.
fn problem(e: TopicOpError) -> Problem {
    match e {
        TopicOpError::NotActive => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-active-controller",
            e.to_string(),
        ),
        TopicOpError::InvalidPartitions(_)
        | TopicOpError::InvalidReplicationFactor(_)
        | TopicOpError::InvalidReplicaAssignment(_)
        | TopicOpError::InvalidConfig(_) => {
            Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", e.to_string())
        }
        TopicOpError::NotEnoughBrokers { .. } => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not-enough-brokers",
            e.to_string(),
        ),
        // Only AlterPartition, which the admin API does not offer, refuses so.
        TopicOpError::IneligibleReplica(_) => {
            Problem::new(StatusCode::CONFLICT, "ineligible-replica", e.to_string())
        }
        TopicOpError::Catalog(e) => e.into(),
    }
}

fn ops(state: &AdminState) -> Result<&crate::TopicOps, Problem> {
    state.topics.as_ref().ok_or_else(|| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no-controller",
            "this admin API runs without a controller, so topics cannot be changed here",
        )
    })
}

/// List a tenant's topics.
#[utoipa::path(get, operation_id = "list_topics", path = "/v1/tenants/{tenant}/topics", tag = "topics",
    params(("tenant" = String, Path, description = "Tenant name"), Page),
    responses((status = 200, body = TopicList), (status = 404, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
    ApiQuery(page): ApiQuery<Page>,
) -> Result<Json<TopicList>, Problem> {
    let size = page.size()?;
    let owner = find(&state, &tenant).await?;
    let mut topics = state
        .catalog
        .topics_page(&owner.id, page.page_token.as_deref(), size + 1)
        .await?;
    let more = topics.len() > size as usize;
    topics.truncate(size as usize);
    let next = more.then(|| topics.last()).flatten().map(|last| {
        format!(
            "/v1/tenants/{tenant}/topics?page_size={size}&page_token={}",
            last.name
        )
    });
    Ok(Json(TopicList {
        kind: "TopicList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("/v1/tenants/{tenant}/topics"),
            next,
        },
        data: topics.into_iter().map(|t| body(&tenant, t, None)).collect(),
    }))
}

/// Create a topic, placing its replicas on live brokers.
#[utoipa::path(post, operation_id = "create_topic", path = "/v1/tenants/{tenant}/topics", tag = "topics",
    params(("tenant" = String, Path, description = "Tenant name")), request_body = CreateTopic,
    responses((status = 201, body = TopicBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn create(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiJson(request): ApiJson<CreateTopic>,
) -> Result<(StatusCode, Json<TopicBody>), Problem> {
    let (topic, partitions) = ops(&state)?
        .create(
            &tenant,
            &request.topic_name,
            request.partitions_count,
            request.replication_factor.unwrap_or(1),
            request.configs,
        )
        .await
        .map_err(problem)?;
    tracing::info!(%tenant, topic = %topic.name, by = %admin.subject, "created topic");
    Ok((
        StatusCode::CREATED,
        Json(body(&tenant, topic, Some(partitions))),
    ))
}

/// Get a topic with its partitions.
#[utoipa::path(get, operation_id = "get_topic", path = "/v1/tenants/{tenant}/topics/{topic}", tag = "topics",
    params(("tenant" = String, Path, description = "Tenant name"), ("topic" = String, Path, description = "Topic name")),
    responses((status = 200, body = TopicBody), (status = 404, body = Problem)))]
pub async fn get(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path((tenant, topic)): Path<(String, String)>,
) -> Result<Json<TopicBody>, Problem> {
    let owner = find(&state, &tenant).await?;
    let found = state.catalog.topic(&owner.id, &topic).await?;
    let partitions = state.catalog.partitions(&found.id).await?;
    Ok(Json(body(&tenant, found, Some(partitions))))
}

/// Grow a topic's partition count.
#[utoipa::path(patch, operation_id = "update_topic", path = "/v1/tenants/{tenant}/topics/{topic}", tag = "topics",
    params(("tenant" = String, Path, description = "Tenant name"), ("topic" = String, Path, description = "Topic name")),
    request_body = UpdateTopic,
    responses((status = 200, body = TopicBody), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem), (status = 503, body = Problem)))]
pub async fn update(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, topic)): Path<(String, String)>,
    ApiJson(request): ApiJson<UpdateTopic>,
) -> Result<Json<TopicBody>, Problem> {
    let (grown, partitions) = ops(&state)?
        .grow(&tenant, &topic, request.partitions_count)
        .await
        .map_err(problem)?;
    tracing::info!(%tenant, %topic, count = request.partitions_count, by = %admin.subject, "grew topic");
    Ok(Json(body(&tenant, grown, Some(partitions))))
}

/// Delete a topic.
#[utoipa::path(delete, operation_id = "delete_topic", path = "/v1/tenants/{tenant}/topics/{topic}", tag = "topics",
    params(("tenant" = String, Path, description = "Tenant name"), ("topic" = String, Path, description = "Topic name")),
    responses((status = 204), (status = 404, body = Problem), (status = 503, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, topic)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    ops(&state)?
        .delete(&tenant, &topic)
        .await
        .map_err(problem)?;
    tracing::info!(%tenant, %topic, by = %admin.subject, "deleted topic");
    Ok(StatusCode::NO_CONTENT)
}
