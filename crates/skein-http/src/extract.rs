//! Request extractors whose rejections are problem details: malformed or unknown-field JSON,
//! oversized bodies and bad query strings all say what is wrong.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;

use crate::Problem;

/// A JSON body (`Content-Type: application/json`), refused as a problem when it does not fit.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_problem(&rejection)),
        }
    }
}

fn json_problem(rejection: &JsonRejection) -> Problem {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "send the body as application/json",
        ),
        JsonRejection::BytesRejection(_) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                "the body is over this endpoint's size limit",
            )
        }
        other => Problem::bad_request(format!("the body is not valid here: {}", other.body_text())),
    }
}

/// Query parameters, refused as a problem when they do not parse.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_problem(&rejection)),
        }
    }
}

fn query_problem(rejection: &QueryRejection) -> Problem {
    Problem::bad_request(format!(
        "the query string is not valid here: {}",
        rejection.body_text()
    ))
}

/// Path parameters, refused as a problem when they do not parse (a partition number out
/// of range, say).
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(Problem::bad_request(format!(
                "the path is not valid here: {}",
                rejection.body_text()
            ))),
        }
    }
}
