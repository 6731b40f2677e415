//! Quotas of a tenant (`/quota`) and of its principals (`/principals/{principal}/quota`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_catalog::{Quota, QuotaRecord};
use utoipa::ToSchema;

use super::tenants::find;
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::ApiJson;

/// Limits; an absent one is unlimited. Every given limit must be positive.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimits {
    /// Bytes produced per second. A principal's is enforced by the gateway and by the
    /// brokers on the principal's authenticated Kafka connections; the tenant's by the
    /// gateway and by the brokers, which throttle Kafka clients and the gateways alike.
    pub produce_bytes_per_sec: Option<i64>,
    /// Bytes fetched per second, enforced as the produce rate is.
    pub fetch_bytes_per_sec: Option<i64>,
    /// Calls to the gateway per second (REST requests and gRPC calls).
    pub requests_per_sec: Option<i64>,
    /// The most partitions the tenant's topics may have in all: creating or growing a topic
    /// past it is refused (409 here, POLICY_VIOLATION to Kafka clients). Tenant-wide only.
    pub partitions: Option<i64>,
    /// Kafka's request-time quota, enforced by the brokers: the share of one
    /// request-handling thread's time the tenant's (or the principal's) Kafka requests may
    /// take, in percent (100 is one thread's whole time; 250 two and a half). Over it,
    /// requests wait and answers carry `throttle_time_ms`.
    pub request_percentage: Option<i64>,
    /// The most bytes the tenant's logs may take on one broker's volume, replicas
    /// included, each segment file charged 4096 bytes beyond its bytes. At it, produce to
    /// the tenant's partitions led by that broker is refused (POLICY_VIOLATION to Kafka
    /// clients, 422 from the gateway) until retention or record deletion gives bytes back.
    /// Checked every second, so a tenant may overshoot it by a second's writes.
    /// Tenant-wide only.
    pub storage_bytes: Option<i64>,
}

/// A quota and whom it limits.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaBody {
    /// Always `Quota`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    /// The principal's name; absent for the tenant-wide quota.
    pub principal: Option<String>,
    pub limits: QuotaLimits,
}

/// A tenant's quotas.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaList {
    /// Always `QuotaList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<QuotaBody>,
}

fn quota(limits: &QuotaLimits) -> Quota {
    Quota {
        produce_bytes_per_sec: limits.produce_bytes_per_sec,
        fetch_bytes_per_sec: limits.fetch_bytes_per_sec,
        requests_per_sec: limits.requests_per_sec,
        partitions: limits.partitions,
        request_percentage: limits.request_percentage,
        storage_bytes: limits.storage_bytes,
    }
}

fn limits(quota: &Quota) -> QuotaLimits {
    QuotaLimits {
        produce_bytes_per_sec: quota.produce_bytes_per_sec,
        fetch_bytes_per_sec: quota.fetch_bytes_per_sec,
        requests_per_sec: quota.requests_per_sec,
        partitions: quota.partitions,
        request_percentage: quota.request_percentage,
        storage_bytes: quota.storage_bytes,
    }
}

fn body(tenant: &str, principal: Option<String>, quota: &Quota) -> QuotaBody {
    let self_path = match &principal {
        Some(p) => format!("/v1/tenants/{tenant}/principals/{p}/quota"),
        None => format!("/v1/tenants/{tenant}/quota"),
    };
    QuotaBody {
        kind: "Quota".to_owned(),
        metadata: ResourceMetadata { self_path },
        principal,
        limits: limits(quota),
    }
}

/// List a tenant's quotas: the tenant-wide one and each principal's.
#[utoipa::path(get, operation_id = "list_quotas", path = "/v1/tenants/{tenant}/quotas", tag = "quotas",
    params(("tenant" = String, Path, description = "Tenant name")),
    responses((status = 200, body = QuotaList), (status = 404, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
) -> Result<Json<QuotaList>, Problem> {
    let owner = find(&state, &tenant).await?;
    let principals = state.catalog.principals(&owner.id).await?;
    let records: Vec<QuotaRecord> = state.catalog.quotas(&owner.id).await?;
    let data = records
        .into_iter()
        .map(|r| {
            let name = r.principal_id.as_ref().map(|id| {
                principals
                    .iter()
                    .find(|p| &p.id == id)
                    .map_or_else(|| id.clone(), |p| p.name.clone())
            });
            body(&tenant, name, &r.quota)
        })
        .collect();
    Ok(Json(QuotaList {
        kind: "QuotaList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("/v1/tenants/{tenant}/quotas"),
            next: None,
        },
        data,
    }))
}

/// Set (replace) the tenant-wide quota.
#[utoipa::path(put, operation_id = "set_tenant_quota", path = "/v1/tenants/{tenant}/quota", tag = "quotas",
    params(("tenant" = String, Path, description = "Tenant name")), request_body = QuotaLimits,
    responses((status = 200, body = QuotaBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn set_tenant(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiJson(request): ApiJson<QuotaLimits>,
) -> Result<Json<QuotaBody>, Problem> {
    let owner = find(&state, &tenant).await?;
    let quota = quota(&request);
    state.catalog.set_quota(&owner.id, None, &quota).await?;
    tracing::info!(%tenant, by = %admin.subject, "set tenant quota");
    Ok(Json(body(&tenant, None, &quota)))
}

/// Remove the tenant-wide quota.
#[utoipa::path(delete, operation_id = "delete_tenant_quota", path = "/v1/tenants/{tenant}/quota", tag = "quotas",
    params(("tenant" = String, Path, description = "Tenant name")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete_tenant(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
) -> Result<StatusCode, Problem> {
    let owner = find(&state, &tenant).await?;
    state.catalog.delete_quota(&owner.id, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Set (replace) a principal's quota.
#[utoipa::path(put, operation_id = "set_principal_quota", path = "/v1/tenants/{tenant}/principals/{principal}/quota", tag = "quotas",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    request_body = QuotaLimits,
    responses((status = 200, body = QuotaBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn set_principal(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
    ApiJson(request): ApiJson<QuotaLimits>,
) -> Result<Json<QuotaBody>, Problem> {
    for (name, given) in [
        ("partitions", request.partitions.is_some()),
        ("storage_bytes", request.storage_bytes.is_some()),
    ] {
        if given {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!(
                    "{name} limits the tenant's topics, which belong to no principal; set it \
                     with PUT /v1/tenants/{tenant}/quota"
                ),
            ));
        }
    }
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let quota = quota(&request);
    state
        .catalog
        .set_quota(&owner.id, Some(&holder.id), &quota)
        .await?;
    tracing::info!(%tenant, %principal, by = %admin.subject, "set principal quota");
    Ok(Json(body(&tenant, Some(principal), &quota)))
}

/// Remove a principal's quota.
#[utoipa::path(delete, operation_id = "delete_principal_quota", path = "/v1/tenants/{tenant}/principals/{principal}/quota", tag = "quotas",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete_principal(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    state
        .catalog
        .delete_quota(&owner.id, Some(&holder.id))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
