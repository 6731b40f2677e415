//! The admin API as tests call it: with the test token, every answer 2xx.

use crate::common::processes::TOKEN;

/// Calls the admin API at `addr`; panics unless it answers 2xx; the JSON body (null when
/// there is none).
pub fn admin(addr: &str, method: &str, path: &str, body: &str) -> serde_json::Value {
    let (status, body) = crate::common::http(addr, method, path, Some(TOKEN), body);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {body}"
    );
    serde_json::from_str(&body).unwrap_or(serde_json::Value::Null)
}

/// Every topic and group of the tenant, every operation.
pub const TOPICS_AND_GROUPS: &[(&str, &str, &str)] =
    &[("TOPIC", "*", "ALL"), ("GROUP", "*", "ALL")];

/// A new service account of `tenant`, allowed each (resource type, literal name, operation).
pub fn new_principal(addr: &str, tenant: &str, name: &str, allowed: &[(&str, &str, &str)]) {
    admin(
        addr,
        "POST",
        &format!("/v1/tenants/{tenant}/principals"),
        &format!(r#"{{"name":"{name}","kind":"service_account"}}"#),
    );
    for (resource_type, resource, operation) in allowed {
        let body = serde_json::json!({
            "principal": format!("User:{name}"),
            "resource_type": resource_type,
            "resource_name": resource,
            "pattern_type": "LITERAL",
            "operation": operation,
            "permission": "ALLOW",
        });
        admin(
            addr,
            "POST",
            &format!("/v1/tenants/{tenant}/acls"),
            &body.to_string(),
        );
    }
}

/// A new API key of `tenant`'s principal `name`: (id, secret).
pub fn issue_api_key(addr: &str, tenant: &str, name: &str) -> (String, String) {
    let key = admin(
        addr,
        "POST",
        &format!("/v1/tenants/{tenant}/principals/{name}/api-keys"),
        "",
    );
    (
        key["id"].as_str().unwrap().to_owned(),
        key["secret"].as_str().unwrap().to_owned(),
    )
}
