//! `GET /v1/topics` and `GET /v1/topics/{topic}`: the caller's tenant's topics. The list
//! holds the topics the caller may DESCRIBE, as Kafka's metadata does; describing one the
//! caller may not is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use skein_auth::Operation;
use skein_http::{ApiPath, Problem};
use utoipa::ToSchema;

use crate::call::Call;
use crate::Gateway;

/// A topic.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicOut {
    pub name: String,
    pub topic_id: String,
    pub partitions: i32,
    /// Topic configs set on it (Kafka names).
    pub configs: BTreeMap<String, String>,
}

/// The topics the caller may describe.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicList {
    pub topics: Vec<TopicOut>,
}

/// Lists the tenant's topics the caller may describe.
#[utoipa::path(
    get,
    path = "/v1/topics",
    tag = "topics",
    responses(
        (status = 200, description = "The topics", body = TopicList),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list(State(_gateway): State<Arc<Gateway>>, call: Call) -> Json<TopicList> {
    let topics = call
        .describable_topics()
        .into_iter()
        .map(|(name, t)| TopicOut {
            name,
            topic_id: t.id,
            partitions: t.partitions,
            configs: t.configs,
        })
        .collect();
    Json(TopicList { topics })
}

/// Describes one topic.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(("topic" = String, Path, description = "A topic of the caller's tenant")),
    responses(
        (status = 200, description = "The topic", body = TopicOut),
        (status = 401, description = "No valid credential", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No DESCRIBE on the topic", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such topic", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn describe(
    State(gateway): State<Arc<Gateway>>,
    call: Call,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<TopicOut>, Problem> {
    let summary = call
        .topic_known(&gateway, &topic, Operation::Describe)
        .await?;
    Ok(Json(TopicOut {
        name: topic,
        topic_id: summary.id,
        partitions: summary.partitions,
        configs: summary.configs,
    }))
}
