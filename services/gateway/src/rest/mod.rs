//! The REST API, under `/v1`: produce (a batch, or an NDJSON stream), read a partition by
//! offset, tail a topic as Server-Sent Events, consume in a group with the member's state in
//! a cursor the client carries (`groups.rs`), and list and describe topics; `/healthz`, `/readyz` and `/openapi.json` need no
//! credential. Errors are problem details; bodies are capped; browsers from the configured
//! origins may call (CORS). The OpenAPI document is generated from this code
//! ([`GatewayApi`]) and committed as `openapi/gateway.json`.

pub mod body;
pub mod events;
pub mod format;
pub mod groups;
pub mod produce;
pub mod read;
pub mod topics;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use skein_http::Problem;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::Gateway;

/// The gateway's REST OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Skein gateway",
        description = "Produce and consume a tenant's topics over HTTP. Authenticate with a \
            bearer JWT naming tenant and principal, or an API key as Basic credentials \
            (key id and secret). The tenant's ACLs decide what each principal may do."
    ),
    paths(
        produce::produce,
        produce::produce_stream,
        read::read_partition,
        events::events,
        groups::join_group,
        groups::read_group,
        groups::commit,
        groups::leave,
        topics::list,
        topics::describe,
        healthz,
        readyz,
    ),
    components(schemas(Problem, body::RecordOut, format::IsolationLevel)),
    modifiers(&Credentials),
    security(("bearer" = []), ("api_key" = []))
)]
pub struct GatewayApi;

struct Credentials;

impl Modify for Credentials {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("A JWT naming the tenant and principal (sub)"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Basic)
                    .description(Some(
                        "An API key: its id as user name, its secret as password",
                    ))
                    .build(),
            ),
        );
    }
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(GatewayApi::openapi())
}

/// Liveness: the process serves HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health", security(),
    responses((status = 200, description = "Serving", body = String)))]
pub async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: the gateway has the cluster's metadata.
#[utoipa::path(get, path = "/readyz", tag = "health", security(),
    responses(
        (status = 200, description = "Ready", body = String),
        (status = 503, description = "No metadata from the control plane yet", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(gateway): State<Arc<Gateway>>) -> Result<&'static str, Problem> {
    if gateway.view.now().received {
        Ok("ready")
    } else {
        Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the gateway has not heard from the control plane yet",
        ))
    }
}

async fn no_such_endpoint() -> Problem {
    Problem::not_found("there is no such endpoint; see /openapi.json")
}

async fn wrong_method() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this endpoint does not take that method; see /openapi.json",
    )
}

fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok())
                .collect::<Vec<_>>(),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::HeaderName::from_static("idempotency-key"),
                header::HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([header::RETRY_AFTER]),
    )
}

/// The REST routes.
pub fn router(gateway: Arc<Gateway>) -> Router {
    let router = Router::new()
        .route("/openapi.json", get(openapi))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/topics", get(topics::list))
        .route("/v1/topics/{topic}", get(topics::describe))
        .route("/v1/topics/{topic}/records", post(produce::produce))
        .route(
            "/v1/topics/{topic}/records/stream",
            post(produce::produce_stream),
        )
        .route(
            "/v1/topics/{topic}/partitions/{partition}/records",
            get(read::read_partition),
        )
        .route("/v1/topics/{topic}/events", get(events::events))
        .route("/v1/groups/{group}/members", post(groups::join_group))
        .route(
            "/v1/groups/{group}/members/{member}",
            axum::routing::delete(groups::leave),
        )
        .route("/v1/groups/{group}/records", get(groups::read_group))
        .route("/v1/groups/{group}/offsets", post(groups::commit))
        .fallback(no_such_endpoint)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(gateway.http.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gateway),
            crate::metrics::track,
        ));
    let router = match cors(&gateway.http.cors_origins) {
        Some(layer) => router.layer(layer),
        None => router,
    };
    router.with_state(gateway)
}
