//! The one authorization check of every gateway call: the caller's tenant's ACL bindings,
//! evaluated by `skein_auth` exactly as the brokers do.

use skein_auth::{authorize, Operation, Resource, ResourceType};

use crate::auth::Caller;
use crate::cluster::View;
use crate::error::GatewayError;

/// Whether `caller` may perform `operation` on the resource; Forbidden when not.
pub fn check(
    view: &View,
    caller: &Caller,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> Result<(), GatewayError> {
    if allowed(view, caller, host, operation, resource_type, name) {
        Ok(())
    } else {
        let kind = match resource_type {
            ResourceType::Topic => "topic",
            ResourceType::Group => "group",
            _ => "resource",
        };
        Err(GatewayError::forbidden(
            &caller.principal().to_string(),
            &operation.to_string(),
            &format!("{kind} {name}"),
        ))
    }
}

/// Whether the ACLs allow it.
pub fn allowed(
    view: &View,
    caller: &Caller,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    let Some(tenant) = view.tenant(&caller.tenant) else {
        return false;
    };
    let decision = authorize(
        &tenant.acls,
        &caller.principal(),
        host,
        operation,
        &Resource::new(resource_type, name),
    );
    decision.is_allowed()
}
