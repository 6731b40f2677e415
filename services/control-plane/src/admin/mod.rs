//! The admin REST API: tenants, principals, API keys, SCRAM credentials, ACLs, quotas,
//! topics and sinks, under `/v1/tenants`,
//! in the shape of Confluent's v3 API (`kind`, `metadata.self`, lists with `data` and
//! `metadata.next`). Every call but `GET /openapi.json` needs an admin token (`auth.rs`);
//! every error is a problem details body (`problem.rs`); request bodies refuse unknown fields
//! and are capped at [`MAX_BODY_BYTES`]. The OpenAPI document is generated from this code
//! ([`AdminApi`]) and committed as `openapi/admin.json`.

pub mod acls;
mod auth;
pub mod principals;
pub mod quotas;
pub mod scram;
pub mod sinks;
pub mod tenants;
pub mod topics;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Serialize;
use skein_catalog::Catalog;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

pub use auth::{Admin, AdminAuth, JwtConfig, ADMIN_AUDIENCE};
pub use skein_http::Problem;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What every admin handler reaches.
#[derive(Debug)]
pub struct AdminState {
    pub catalog: Catalog,
    pub auth: AdminAuth,
    /// Topic changes (placement on live brokers); `None` where no controller runs.
    pub topics: Option<crate::TopicOps>,
    /// Seals sinks' database URLs; without it, sinks cannot be created.
    pub sink_key: Option<Arc<crate::sinks::SinkKey>>,
    /// Where sinks may connect.
    pub sink_targets: skein_sink::TargetPolicy,
}

/// Where a resource lives.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceMetadata {
    /// This resource's URL path.
    #[serde(rename = "self")]
    pub self_path: String,
}

/// A list page's links.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListMetadata {
    /// This page's URL path.
    #[serde(rename = "self")]
    pub self_path: String,
    /// The next page's URL path, when there is one.
    pub next: Option<String>,
}

/// The admin API's OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Skein admin API", description = "Tenants, principals, API keys, SCRAM credentials, ACLs, quotas, topics and sinks."),
    paths(
        tenants::list,
        tenants::create,
        tenants::get,
        tenants::delete,
        principals::list,
        principals::create,
        principals::delete,
        principals::list_keys,
        principals::create_key,
        principals::revoke_key,
        scram::list,
        scram::set,
        scram::delete,
        acls::list,
        acls::create,
        acls::delete,
        quotas::list,
        quotas::set_tenant,
        quotas::delete_tenant,
        quotas::set_principal,
        quotas::delete_principal,
        topics::list,
        topics::create,
        topics::get,
        topics::update,
        topics::delete,
        sinks::list,
        sinks::create,
        sinks::get,
        sinks::update,
        sinks::skip,
        sinks::pause,
        sinks::resume,
        sinks::delete,
    ),
    components(schemas(Problem, ResourceMetadata, ListMetadata)),
    modifiers(&BearerAuth, &ProblemResponses),
    security(("admin_token" = []))
)]
pub struct AdminApi;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A JWT with the admin role, or the bootstrap token from configuration",
                    ))
                    .build(),
            ),
        );
    }
}

/// Completes every operation's error responses as the API sends them: problem details as
/// `application/problem+json`, each status described, 401 and 403 on every operation (all
/// take an admin credential), 400 on those with a query or a body, and 415 on those with a
/// JSON body.
struct ProblemResponses;

impl ProblemResponses {
    fn describe(status: &str) -> &'static str {
        match status {
            "400" => "The request is malformed: a path, query or body that does not parse",
            "401" => "No admin credential, or one that is not valid",
            "403" => "The token lacks the admin role",
            "404" => "No such tenant, principal, key, topic or sink",
            "409" => "It exists already, it changed concurrently, or it would exceed a quota",
            "415" => "The body is not sent as application/json",
            "422" => "The request parses but is not valid",
            "503" => {
                "No controller to change topics: this replica is not the active one (try \
                 another), or this admin API runs without one"
            }
            _ => "",
        }
    }

    fn problem(status: &str) -> utoipa::openapi::Response {
        utoipa::openapi::ResponseBuilder::new()
            .description(Self::describe(status))
            .content(
                "application/problem+json",
                utoipa::openapi::ContentBuilder::new()
                    .schema(Some(utoipa::openapi::Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build()
    }
}

impl Modify for ProblemResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                let responses = &mut operation.responses.responses;
                for (status, response) in responses.iter_mut() {
                    let utoipa::openapi::RefOr::T(response) = response else {
                        continue;
                    };
                    let is_problem = response.content.get("application/json").is_some_and(|c| {
                        matches!(&c.schema, Some(utoipa::openapi::RefOr::Ref(r))
                            if r.ref_location.ends_with("/Problem"))
                    });
                    if is_problem {
                        *response = Self::problem(status);
                    }
                }
                let mut statuses = vec!["401", "403"];
                let queried =
                    operation.parameters.iter().flatten().any(|p| {
                        matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Query)
                    });
                if queried || operation.request_body.is_some() {
                    statuses.push("400");
                }
                if operation.request_body.is_some() {
                    statuses.push("415");
                }
                for status in statuses {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| Self::problem(status).into());
                }
            }
        }
    }
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(AdminApi::openapi())
}

async fn no_such_endpoint() -> Problem {
    Problem::not_found("there is no such endpoint; see /openapi.json")
}

async fn wrong_method() -> Problem {
    Problem::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this endpoint does not take that method; see /openapi.json",
    )
}

/// The admin API's routes.
pub fn admin_router(state: AdminState) -> Router {
    let tenant = "/v1/tenants/{tenant}";
    Router::new()
        .route("/openapi.json", get(openapi))
        .route("/v1/tenants", get(tenants::list).post(tenants::create))
        .route(tenant, get(tenants::get).delete(tenants::delete))
        .route(
            &format!("{tenant}/principals"),
            get(principals::list).post(principals::create),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}"),
            delete(principals::delete),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}/api-keys"),
            get(principals::list_keys).post(principals::create_key),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}/api-keys/{{key}}"),
            delete(principals::revoke_key),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}/scram-credentials"),
            get(scram::list),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}/scram-credentials/{{mechanism}}"),
            put(scram::set).delete(scram::delete),
        )
        .route(
            &format!("{tenant}/acls"),
            get(acls::list).post(acls::create).delete(acls::delete),
        )
        .route(&format!("{tenant}/quotas"), get(quotas::list))
        .route(
            &format!("{tenant}/topics"),
            get(topics::list).post(topics::create),
        )
        .route(
            &format!("{tenant}/topics/{{topic}}"),
            get(topics::get)
                .patch(topics::update)
                .delete(topics::delete),
        )
        .route(
            &format!("{tenant}/sinks"),
            get(sinks::list).post(sinks::create),
        )
        .route(
            &format!("{tenant}/sinks/{{sink}}"),
            get(sinks::get).patch(sinks::update).delete(sinks::delete),
        )
        .route(
            &format!("{tenant}/sinks/{{sink}}/pause"),
            post(sinks::pause),
        )
        .route(&format!("{tenant}/sinks/{{sink}}/skip"), post(sinks::skip))
        .route(
            &format!("{tenant}/sinks/{{sink}}/resume"),
            post(sinks::resume),
        )
        .route(
            &format!("{tenant}/quota"),
            put(quotas::set_tenant).delete(quotas::delete_tenant),
        )
        .route(
            &format!("{tenant}/principals/{{principal}}/quota"),
            put(quotas::set_principal).delete(quotas::delete_principal),
        )
        .fallback(no_such_endpoint)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(state))
}
