//! RFC 9457 problem details: every error an HTTP API returns, as
//! `application/problem+json`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// A problem details body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong with this request, and what to change.
    pub detail: String,
    /// Seconds after which a refused request may be retried (the `Retry-After` header).
    #[serde(skip)]
    pub retry_after_secs: Option<u64>,
}

impl Problem {
    pub fn new(status: StatusCode, slug: &str, detail: impl Into<String>) -> Self {
        Self {
            kind: format!("https://skein.dev/problems/{slug}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            retry_after_secs: None,
        }
    }

    /// 429: a quota was used up; retry after `secs`.
    pub fn too_many_requests(detail: impl Into<String>, secs: u64) -> Self {
        let mut problem = Self::new(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded", detail);
        problem.retry_after_secs = Some(secs.max(1));
        problem
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", detail)
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let unauthorized = status == StatusCode::UNAUTHORIZED;
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if unauthorized {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(feature = "catalog")]
impl From<skein_catalog::CatalogError> for Problem {
    fn from(e: skein_catalog::CatalogError) -> Self {
        use skein_catalog::CatalogError;
        match &e {
            CatalogError::AlreadyExists { .. } => {
                Self::new(StatusCode::CONFLICT, "already-exists", e.to_string())
            }
            CatalogError::NotFound { .. } => Self::not_found(e.to_string()),
            CatalogError::Invalid { .. } => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", e.to_string())
            }
            CatalogError::Conflict { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            CatalogError::QuotaExceeded { .. } => {
                Self::new(StatusCode::CONFLICT, "quota-exceeded", e.to_string())
            }
            CatalogError::Corrupt { .. } | CatalogError::Database(_) | CatalogError::Migrate(_) => {
                tracing::error!(error = %e, "catalog failure");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the catalog could not complete the request; it has been logged",
                )
            }
        }
    }
}
