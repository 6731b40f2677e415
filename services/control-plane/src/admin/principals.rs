//! `/v1/tenants/{tenant}/principals`: users and service accounts, and their API keys (the
//! secret is in the creation response only).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_catalog::{ApiKey, Principal, PrincipalKind};
use utoipa::ToSchema;

use super::tenants::{find, Page};
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::{ApiJson, ApiQuery};

/// A principal to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePrincipal {
    /// 1-255 characters, no control characters and no `:`.
    pub name: String,
    /// `user` or `service_account`.
    pub kind: String,
}

/// A principal.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalBody {
    /// Always `Principal`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub id: String,
    pub name: String,
    /// `user` or `service_account`.
    pub principal_kind: String,
    /// How ACLs name it: `User:<name>`.
    pub acl_principal: String,
    pub created_at: i64,
}

/// A page of principals.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalList {
    /// Always `PrincipalList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<PrincipalBody>,
}

/// A new API key: the secret is shown here once and never again.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewApiKeyBody {
    /// Always `ApiKey`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub id: String,
    pub secret: String,
    pub principal: String,
}

/// An API key, without its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyBody {
    /// Always `ApiKey`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub id: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// A principal's API keys.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList {
    /// Always `ApiKeyList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<ApiKeyBody>,
}

fn path(tenant: &str, principal: &str) -> String {
    format!("/v1/tenants/{tenant}/principals/{principal}")
}

fn body(tenant: &str, principal: Principal) -> PrincipalBody {
    PrincipalBody {
        kind: "Principal".to_owned(),
        metadata: ResourceMetadata {
            self_path: path(tenant, &principal.name),
        },
        acl_principal: format!("User:{}", principal.name),
        id: principal.id,
        principal_kind: principal.kind.to_string(),
        name: principal.name,
        created_at: principal.created_at,
    }
}

fn key_body(tenant: &str, principal: &str, key: ApiKey) -> ApiKeyBody {
    ApiKeyBody {
        kind: "ApiKey".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("{}/api-keys/{}", path(tenant, principal), key.id),
        },
        id: key.id,
        created_at: key.created_at,
        revoked_at: key.revoked_at,
        last_used_at: key.last_used_at,
    }
}

/// List a tenant's principals in name order.
#[utoipa::path(get, operation_id = "list_principals", path = "/v1/tenants/{tenant}/principals", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), Page),
    responses((status = 200, body = PrincipalList), (status = 400, body = Problem), (status = 404, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
    ApiQuery(page): ApiQuery<Page>,
) -> Result<Json<PrincipalList>, Problem> {
    let size = page.size()? as usize;
    let owner = find(&state, &tenant).await?;
    let mut principals = state
        .catalog
        .principals_page(&owner.id, page.page_token.as_deref(), size as u32 + 1)
        .await?;
    let more = principals.len() > size;
    principals.truncate(size);
    let next = more.then(|| principals.last()).flatten().map(|last| {
        format!(
            "/v1/tenants/{tenant}/principals?page_size={size}&page_token={}",
            last.name
        )
    });
    Ok(Json(PrincipalList {
        kind: "PrincipalList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("/v1/tenants/{tenant}/principals"),
            next,
        },
        data: principals.into_iter().map(|p| body(&tenant, p)).collect(),
    }))
}

/// Create a principal.
#[utoipa::path(post, operation_id = "create_principal", path = "/v1/tenants/{tenant}/principals", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name")), request_body = CreatePrincipal,
    responses((status = 201, body = PrincipalBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn create(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiJson(request): ApiJson<CreatePrincipal>,
) -> Result<(StatusCode, Json<PrincipalBody>), Problem> {
    let kind: PrincipalKind = request.kind.parse()?;
    let owner = find(&state, &tenant).await?;
    let principal = state
        .catalog
        .create_principal(&owner.id, kind, &request.name)
        .await?;
    tracing::info!(%tenant, principal = %principal.name, by = %admin.subject, "created principal");
    Ok((StatusCode::CREATED, Json(body(&tenant, principal))))
}

/// Delete a principal and its API keys.
#[utoipa::path(delete, operation_id = "delete_principal", path = "/v1/tenants/{tenant}/principals/{principal}", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    let owner = find(&state, &tenant).await?;
    state
        .catalog
        .delete_principal(&owner.id, &principal)
        .await?;
    tracing::info!(%tenant, %principal, by = %admin.subject, "deleted principal");
    Ok(StatusCode::NO_CONTENT)
}

/// List a principal's API keys (never their secrets).
#[utoipa::path(get, operation_id = "list_api_keys", path = "/v1/tenants/{tenant}/principals/{principal}/api-keys", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    responses((status = 200, body = ApiKeyList), (status = 404, body = Problem)))]
pub async fn list_keys(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
) -> Result<Json<ApiKeyList>, Problem> {
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let keys = state.catalog.api_keys(&holder.id).await?;
    Ok(Json(ApiKeyList {
        kind: "ApiKeyList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("{}/api-keys", path(&tenant, &principal)),
            next: None,
        },
        data: keys
            .into_iter()
            .map(|k| key_body(&tenant, &principal, k))
            .collect(),
    }))
}

/// Issue an API key; its secret is in this response only.
#[utoipa::path(post, operation_id = "create_api_key", path = "/v1/tenants/{tenant}/principals/{principal}/api-keys", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    responses((status = 201, body = NewApiKeyBody), (status = 404, body = Problem)))]
pub async fn create_key(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
) -> Result<(StatusCode, Json<NewApiKeyBody>), Problem> {
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let key = state.catalog.create_api_key(&holder.id).await?;
    tracing::info!(%tenant, %principal, key = %key.id, by = %admin.subject, "issued API key");
    Ok((
        StatusCode::CREATED,
        Json(NewApiKeyBody {
            kind: "ApiKey".to_owned(),
            metadata: ResourceMetadata {
                self_path: format!("{}/api-keys/{}", path(&tenant, &principal), key.id),
            },
            id: key.id,
            secret: key.secret,
            principal,
        }),
    ))
}

/// Revoke an API key.
#[utoipa::path(delete, operation_id = "revoke_api_key", path = "/v1/tenants/{tenant}/principals/{principal}/api-keys/{key}", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name"), ("key" = String, Path, description = "API key id")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn revoke_key(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal, key)): Path<(String, String, String)>,
) -> Result<StatusCode, Problem> {
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let owned = state
        .catalog
        .api_keys(&holder.id)
        .await?
        .iter()
        .any(|k| k.id == key);
    if !owned {
        return Err(Problem::not_found(format!(
            "principal {principal:?} has no API key {key:?}"
        )));
    }
    state.catalog.revoke_api_key(&key).await?;
    tracing::info!(%tenant, %principal, %key, by = %admin.subject, "revoked API key");
    Ok(StatusCode::NO_CONTENT)
}
