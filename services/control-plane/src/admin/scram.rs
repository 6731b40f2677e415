//! `/v1/tenants/{tenant}/principals/{principal}/scram-credentials`: the SCRAM-SHA-256 and
//! SCRAM-SHA-512 passwords (KIP-84) a principal's native Kafka clients authenticate with.
//! A password is taken once, salted and turned into the stored and server keys; it is
//! never stored or shown. Setting a credential again replaces it, and a replaced or deleted
//! credential ends the Kafka sessions that authenticated with it.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use skein_scram::{Credential, Mechanism, DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS};
use utoipa::ToSchema;

use super::tenants::find;
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::ApiJson;

/// The longest password taken: a SCRAM password is hashed, so no length is needed beyond
/// what a person or a secret manager produces.
const MAX_PASSWORD_BYTES: usize = 1024;

/// The salt made for each credential.
const SALT_BYTES: usize = 32;

/// A password to set.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetScramCredential {
    /// 1 to 1024 bytes; used as is (not normalized), as Kafka does.
    pub password: String,
    /// PBKDF2 iterations, 4096 to 16384; 8192 when absent.
    pub iterations: Option<u32>,
}

/// A principal's credential for one mechanism, without anything derived from the password.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScramCredentialBody {
    /// Always `ScramCredential`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub iterations: u32,
    /// When the credential was last set (ms since the epoch).
    pub updated_at: i64,
}

/// A principal's credentials.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScramCredentialList {
    /// Always `ScramCredentialList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<ScramCredentialBody>,
}

fn path(tenant: &str, principal: &str) -> String {
    format!("/v1/tenants/{tenant}/principals/{principal}/scram-credentials")
}

fn mechanism(name: &str) -> Result<Mechanism, Problem> {
    Mechanism::from_name(name).ok_or_else(|| {
        Problem::not_found(format!(
            "{name:?} is not a SCRAM mechanism: SCRAM-SHA-256 or SCRAM-SHA-512"
        ))
    })
}

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", detail)
}

/// List a principal's SCRAM credentials: their mechanisms and iterations.
#[utoipa::path(get, operation_id = "list_scram_credentials", path = "/v1/tenants/{tenant}/principals/{principal}/scram-credentials", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name")),
    responses((status = 200, body = ScramCredentialList), (status = 404, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path((tenant, principal)): Path<(String, String)>,
) -> Result<Json<ScramCredentialList>, Problem> {
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let credentials = state.catalog.scram_credentials(&holder.id).await?;
    let base = path(&tenant, &principal);
    Ok(Json(ScramCredentialList {
        kind: "ScramCredentialList".to_owned(),
        metadata: ListMetadata {
            self_path: base.clone(),
            next: None,
        },
        data: credentials
            .into_iter()
            .map(|c| ScramCredentialBody {
                kind: "ScramCredential".to_owned(),
                metadata: ResourceMetadata {
                    self_path: format!("{base}/{}", c.mechanism),
                },
                mechanism: c.mechanism.name().to_owned(),
                iterations: c.iterations,
                updated_at: c.updated_at,
            })
            .collect(),
    }))
}

/// Set a principal's password for one SCRAM mechanism, replacing the one it had.
#[utoipa::path(put, operation_id = "set_scram_credential", path = "/v1/tenants/{tenant}/principals/{principal}/scram-credentials/{mechanism}", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name"),
        ("mechanism" = String, Path, description = "SCRAM-SHA-256 or SCRAM-SHA-512")),
    request_body = SetScramCredential,
    responses((status = 200, body = ScramCredentialBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn set(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal, mechanism_name)): Path<(String, String, String)>,
    ApiJson(request): ApiJson<SetScramCredential>,
) -> Result<Json<ScramCredentialBody>, Problem> {
    let mechanism = mechanism(&mechanism_name)?;
    if request.password.is_empty() || request.password.len() > MAX_PASSWORD_BYTES {
        return Err(invalid(format!(
            "a password must be 1 to {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    let iterations = request.iterations.unwrap_or(DEFAULT_ITERATIONS);
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(invalid(format!(
            "iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )));
    }
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    let mut salt = [0u8; SALT_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    // PBKDF2 is slow by design; it runs on the blocking pool.
    let password = request.password;
    let credential = tokio::task::spawn_blocking(move || {
        Credential::from_password(mechanism, &password, &salt, iterations)
    })
    .await
    .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
    .map_err(|e| invalid(e.to_string()))?;
    state
        .catalog
        .put_scram_credential(&holder.id, &credential)
        .await?;
    tracing::info!(%tenant, %principal, %mechanism, by = %admin.subject, "set SCRAM credential");
    let set = state
        .catalog
        .scram_credentials(&holder.id)
        .await?
        .into_iter()
        .find(|c| c.mechanism == mechanism)
        .ok_or_else(|| Problem::not_found(format!("principal {principal:?} is gone")))?;
    Ok(Json(ScramCredentialBody {
        kind: "ScramCredential".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("{}/{mechanism}", path(&tenant, &principal)),
        },
        mechanism: mechanism.name().to_owned(),
        iterations: set.iterations,
        updated_at: set.updated_at,
    }))
}

/// Delete a principal's credential for one SCRAM mechanism; its open sessions end.
#[utoipa::path(delete, operation_id = "delete_scram_credential", path = "/v1/tenants/{tenant}/principals/{principal}/scram-credentials/{mechanism}", tag = "principals",
    params(("tenant" = String, Path, description = "Tenant name"), ("principal" = String, Path, description = "Principal name"),
        ("mechanism" = String, Path, description = "SCRAM-SHA-256 or SCRAM-SHA-512")),
    responses((status = 204), (status = 404, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path((tenant, principal, mechanism_name)): Path<(String, String, String)>,
) -> Result<StatusCode, Problem> {
    let mechanism = mechanism(&mechanism_name)?;
    let owner = find(&state, &tenant).await?;
    let holder = state.catalog.principal(&owner.id, &principal).await?;
    state
        .catalog
        .delete_scram_credential(&holder.id, mechanism)
        .await?;
    tracing::info!(%tenant, %principal, %mechanism, by = %admin.subject, "deleted SCRAM credential");
    Ok(StatusCode::NO_CONTENT)
}
