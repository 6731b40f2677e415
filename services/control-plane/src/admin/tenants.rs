//! `/v1/tenants`: create, list (paginated by name), get and delete tenants.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_catalog::Tenant;
use utoipa::{IntoParams, ToSchema};

use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::{ApiJson, ApiQuery};

/// A tenant to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// 1-63 of `a-z`, `0-9` and `-`, starting with a letter.
    pub name: String,
}

/// A tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantBody {
    /// Always `Tenant`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub id: String,
    pub name: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
}

/// A page of tenants.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantList {
    /// Always `TenantList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<TenantBody>,
}

/// Which page of a list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// Items per page, 1 to 1000 (default 100).
    pub page_size: Option<u32>,
    /// The `next` link's token from the previous page.
    pub page_token: Option<String>,
}

impl Page {
    pub(crate) fn size(&self) -> Result<u32, Problem> {
        match self.page_size {
            None => Ok(100),
            Some(n @ 1..=1000) => Ok(n),
            Some(n) => Err(Problem::bad_request(format!(
                "page_size {n} is out of range; use 1 to 1000"
            ))),
        }
    }
}

pub(crate) fn body(tenant: Tenant) -> TenantBody {
    TenantBody {
        kind: "Tenant".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("/v1/tenants/{}", tenant.name),
        },
        id: tenant.id,
        name: tenant.name,
        created_at: tenant.created_at,
    }
}

/// Looks a tenant up by name, as a 404 problem when it does not exist.
pub(crate) async fn find(state: &AdminState, name: &str) -> Result<Tenant, Problem> {
    Ok(state.catalog.tenant_by_name(name).await?)
}

/// List tenants in name order.
#[utoipa::path(get, operation_id = "list_tenants", path = "/v1/tenants", params(Page), tag = "tenants",
    responses((status = 200, body = TenantList), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    ApiQuery(page): ApiQuery<Page>,
) -> Result<Json<TenantList>, Problem> {
    let size = page.size()?;
    let mut tenants = state
        .catalog
        .tenants(page.page_token.as_deref(), size + 1)
        .await?;
    let more = tenants.len() > size as usize;
    tenants.truncate(size as usize);
    let next = more
        .then(|| tenants.last())
        .flatten()
        .map(|last| format!("/v1/tenants?page_size={size}&page_token={}", last.name));
    Ok(Json(TenantList {
        kind: "TenantList".to_owned(),
        metadata: ListMetadata {
            self_path: "/v1/tenants".to_owned(),
            next,
        },
        data: tenants.into_iter().map(body).collect(),
    }))
}

/// Create a tenant.
#[utoipa::path(post, operation_id = "create_tenant", path = "/v1/tenants", request_body = CreateTenant, tag = "tenants",
    responses((status = 201, body = TenantBody), (status = 400, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn create(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    ApiJson(request): ApiJson<CreateTenant>,
) -> Result<(StatusCode, Json<TenantBody>), Problem> {
    let tenant = state.catalog.create_tenant(&request.name).await?;
    tracing::info!(tenant = %tenant.name, by = %admin.subject, "created tenant");
    Ok((StatusCode::CREATED, Json(body(tenant))))
}

/// Get a tenant.
#[utoipa::path(get, operation_id = "get_tenant", path = "/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant name")),
    responses((status = 200, body = TenantBody), (status = 404, body = Problem)))]
pub async fn get(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
) -> Result<Json<TenantBody>, Problem> {
    Ok(Json(body(find(&state, &tenant).await?)))
}

/// Delete a tenant and everything it owns.
#[utoipa::path(delete, operation_id = "delete_tenant", path = "/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant name")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
) -> Result<StatusCode, Problem> {
    state.catalog.delete_tenant(&tenant).await?;
    tracing::info!(%tenant, by = %admin.subject, "deleted tenant");
    Ok(StatusCode::NO_CONTENT)
}
