//! `/v1/tenants/{tenant}/acls`: Kafka-model ACL bindings, listed and deleted by the same
//! filters as Kafka's DescribeAcls / DeleteAcls (query parameters in Confluent v3's names).

use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use skein_auth::{
    AclBinding, AclBindingFilter, Operation, PatternType, PatternTypeFilter, Permission, Principal,
    ResourceType,
};
use skein_catalog::AclRecord;
use utoipa::{IntoParams, ToSchema};

use super::tenants::find;
use super::{Admin, AdminState, ListMetadata, Problem, ResourceMetadata};
use skein_http::{ApiJson, ApiQuery};

/// An ACL binding to create. Names are Kafka's, case-insensitive.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAcl {
    /// `User:<name>`, or `User:*` for everyone.
    pub principal: String,
    /// A client address, or `*` (the default) for any.
    pub host: Option<String>,
    /// `TOPIC`, `GROUP`, `CLUSTER` or `TRANSACTIONAL_ID`.
    pub resource_type: String,
    /// A name, a prefix (with `PREFIXED`) or `*`.
    pub resource_name: String,
    /// `LITERAL` or `PREFIXED`.
    pub pattern_type: String,
    /// `ALL`, `READ`, `WRITE`, `CREATE`, `DELETE`, `ALTER`, `DESCRIBE`, `CLUSTER_ACTION`,
    /// `DESCRIBE_CONFIGS`, `ALTER_CONFIGS` or `IDEMPOTENT_WRITE`.
    pub operation: String,
    /// `ALLOW` or `DENY`.
    pub permission: String,
}

/// Selects bindings; an absent parameter (or `ANY`) selects every value.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AclQuery {
    pub principal: Option<String>,
    pub host: Option<String>,
    pub resource_type: Option<String>,
    pub resource_name: Option<String>,
    /// `ANY` (default), `MATCH`, `LITERAL` or `PREFIXED`.
    pub pattern_type: Option<String>,
    pub operation: Option<String>,
    pub permission: Option<String>,
    /// Items per page when listing, 1 to 1000 (default 100).
    pub page_size: Option<u32>,
    /// The `next` link's token from the previous page.
    pub page_token: Option<String>,
}

/// A stored binding.
#[derive(Debug, Serialize, ToSchema)]
pub struct AclBody {
    /// Always `Acl`.
    pub kind: String,
    pub metadata: ResourceMetadata,
    pub id: String,
    pub principal: String,
    pub host: String,
    pub resource_type: String,
    pub resource_name: String,
    pub pattern_type: String,
    pub operation: String,
    pub permission: String,
}

/// Bindings.
#[derive(Debug, Serialize, ToSchema)]
pub struct AclList {
    /// Always `AclList`.
    pub kind: String,
    pub metadata: ListMetadata,
    pub data: Vec<AclBody>,
}

fn invalid(field: &str, e: impl std::fmt::Display) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid",
        format!("{field}: {e}"),
    )
}

fn parse<T: FromStr>(field: &str, value: &str) -> Result<T, Problem>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| invalid(field, e))
}

/// A filter field: absent or `ANY` selects everything.
fn any_or<T: FromStr>(field: &str, value: Option<&str>) -> Result<Option<T>, Problem>
where
    T::Err: std::fmt::Display,
{
    match value {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("ANY") => Ok(None),
        Some(v) => parse(field, v).map(Some),
    }
}

impl AclQuery {
    fn filter(&self) -> Result<AclBindingFilter, Problem> {
        Ok(AclBindingFilter {
            principal: any_or::<Principal>("principal", self.principal.as_deref())?,
            host: self.host.clone(),
            resource_type: any_or::<ResourceType>("resource_type", self.resource_type.as_deref())?,
            resource_name: self.resource_name.clone(),
            pattern_type: match &self.pattern_type {
                None => PatternTypeFilter::Any,
                Some(v) => parse("pattern_type", v)?,
            },
            operation: any_or::<Operation>("operation", self.operation.as_deref())?,
            permission: any_or::<Permission>("permission", self.permission.as_deref())?,
        })
    }
}

fn body(tenant: &str, record: AclRecord) -> AclBody {
    let b = record.binding;
    AclBody {
        kind: "Acl".to_owned(),
        metadata: ResourceMetadata {
            self_path: format!("/v1/tenants/{tenant}/acls?principal={}&host={}&resource_type={}&resource_name={}&pattern_type={}&operation={}&permission={}",
                b.principal, b.host, b.resource_type, b.resource_name, b.pattern_type, b.operation, b.permission),
        },
        id: record.id,
        principal: b.principal.to_string(),
        host: b.host,
        resource_type: b.resource_type.to_string(),
        resource_name: b.resource_name,
        pattern_type: b.pattern_type.to_string(),
        operation: b.operation.to_string(),
        permission: b.permission.to_string(),
    }
}

fn list_body(tenant: &str, records: Vec<AclRecord>) -> AclList {
    AclList {
        kind: "AclList".to_owned(),
        metadata: ListMetadata {
            self_path: format!("/v1/tenants/{tenant}/acls"),
            next: None,
        },
        data: records.into_iter().map(|r| body(tenant, r)).collect(),
    }
}

/// List the tenant's bindings that the query selects.
#[utoipa::path(get, operation_id = "list_acls", path = "/v1/tenants/{tenant}/acls", tag = "acls",
    params(("tenant" = String, Path, description = "Tenant name"), AclQuery),
    responses((status = 200, body = AclList), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    _admin: Admin,
    Path(tenant): Path<String>,
    ApiQuery(query): ApiQuery<AclQuery>,
) -> Result<Json<AclList>, Problem> {
    let size = super::tenants::Page {
        page_size: query.page_size,
        page_token: None,
    }
    .size()? as usize;
    let filter = query.filter()?;
    let owner = find(&state, &tenant).await?;
    let mut records = state.catalog.acls(&owner.id, &filter).await?;
    // Pages follow binding ids, which never change.
    records.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(after) = &query.page_token {
        records.retain(|r| r.id.as_str() > after.as_str());
    }
    let more = records.len() > size;
    records.truncate(size);
    let next = more.then(|| records.last()).flatten().map(|last| {
        format!(
            "/v1/tenants/{tenant}/acls?page_size={size}&page_token={}",
            last.id
        )
    });
    let mut list = list_body(&tenant, records);
    list.metadata.next = next;
    Ok(Json(list))
}

/// Create a binding (creating one that exists changes nothing).
#[utoipa::path(post, operation_id = "create_acl", path = "/v1/tenants/{tenant}/acls", tag = "acls",
    params(("tenant" = String, Path, description = "Tenant name")), request_body = CreateAcl,
    responses((status = 201, body = AclBody), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn create(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiJson(request): ApiJson<CreateAcl>,
) -> Result<(StatusCode, Json<AclBody>), Problem> {
    let binding = AclBinding {
        principal: parse("principal", &request.principal)?,
        host: request.host.unwrap_or_else(|| "*".to_owned()),
        resource_type: parse("resource_type", &request.resource_type)?,
        resource_name: request.resource_name,
        pattern_type: parse::<PatternType>("pattern_type", &request.pattern_type)?,
        operation: parse("operation", &request.operation)?,
        permission: parse("permission", &request.permission)?,
    };
    binding.validate().map_err(|e| invalid("binding", e))?;
    let owner = find(&state, &tenant).await?;
    let record = state.catalog.create_acl(&owner.id, &binding).await?;
    tracing::info!(%tenant, %binding, by = %admin.subject, "created ACL");
    Ok((StatusCode::CREATED, Json(body(&tenant, record))))
}

/// Delete the tenant's bindings that the query selects; answers them. `resource_type` is
/// required (it may be `ANY`), so that an empty query cannot delete everything by accident.
#[utoipa::path(delete, operation_id = "delete_acls", path = "/v1/tenants/{tenant}/acls", tag = "acls",
    params(("tenant" = String, Path, description = "Tenant name"), AclQuery),
    responses((status = 200, body = AclList), (status = 400, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
pub async fn delete(
    State(state): State<Arc<AdminState>>,
    admin: Admin,
    Path(tenant): Path<String>,
    ApiQuery(query): ApiQuery<AclQuery>,
) -> Result<Json<AclList>, Problem> {
    if query.resource_type.is_none() {
        return Err(Problem::bad_request(
            "name resource_type (ANY to select every type) to delete ACLs",
        ));
    }
    let filter = query.filter()?;
    let owner = find(&state, &tenant).await?;
    let deleted = state.catalog.delete_acls(&owner.id, &filter).await?;
    tracing::info!(%tenant, count = deleted.len(), by = %admin.subject, "deleted ACLs");
    Ok(Json(list_body(&tenant, deleted)))
}
