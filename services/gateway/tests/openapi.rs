//! The committed OpenAPI document is the one the code generates.

#![allow(clippy::unwrap_used)]

use skein_gateway::rest::GatewayApi;
use utoipa::OpenApi;

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = GatewayApi::openapi().to_pretty_json().unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/gateway.json");
    if std::env::var_os("SKEIN_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/gateway.json is stale; regenerate it with \
         SKEIN_UPDATE_OPENAPI=1 cargo test -p skein-gateway --test openapi"
    );
}
