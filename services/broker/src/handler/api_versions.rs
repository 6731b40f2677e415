//! ApiVersions: the versions of every API this broker implements.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use crate::router::{versions, Api, Call};

fn api_keys() -> Vec<ApiVersion> {
    versions()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

pub(crate) fn handle() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The answer to an ApiVersions version this broker does not speak (sent as v0).
pub(crate) fn unsupported_version() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys())
}

/// ApiVersions versions 0 to 4.
pub(crate) struct ApiVersions;

impl Api for ApiVersions {
    type Request = ApiVersionsRequest;
    type Response = ApiVersionsResponse;
    const KEY: ApiKey = ApiKey::ApiVersions;
    const VERSIONS: (i16, i16) = (0, 4);
    const EXEMPT_FROM_REQUEST_TIME: bool = true;

    async fn handle(_call: &Call<'_>, _request: ApiVersionsRequest) -> Option<ApiVersionsResponse> {
        Some(handle())
    }
}
