//! The ACL decision: Kafka's `StandardAuthorizer` rules over a list of bindings.

use std::fmt;

use crate::binding::ANY_HOST;
use crate::{AclBinding, Operation, Permission, Principal, Resource};

/// The outcome of [`authorize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision<'a> {
    /// An `ALLOW` binding matched and no `DENY` binding did.
    Allowed,
    /// The request must be refused.
    Denied(DenyReason<'a>),
}

impl Decision<'_> {
    /// Whether the request may go ahead.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed)
    }
}

/// Why [`authorize`] denied a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason<'a> {
    /// This `DENY` binding matched; it wins over any `ALLOW`.
    DenyBinding(&'a AclBinding),
    /// No `ALLOW` binding matched (Kafka's default deny).
    NoAllowBinding,
}

impl fmt::Display for Decision<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Allowed => f.write_str("allowed"),
            Decision::Denied(DenyReason::DenyBinding(binding)) => {
                write!(f, "denied by binding {binding}")
            }
            Decision::Denied(DenyReason::NoAllowBinding) => {
                f.write_str("denied: no ALLOW binding matched")
            }
        }
    }
}

/// Decides whether `principal`, connected from `host`, may perform `operation` on `resource`.
///
/// This is the one ACL evaluation in Skein; the broker, the gateway and the control plane all
/// call it, so the same bindings give the same answer everywhere. The rules are those of
/// Kafka's `StandardAuthorizer`. A binding applies when all of these hold:
///
/// - its principal equals `principal`, or is `User:*` (which covers principals of every type);
/// - its host equals `host`, or is `*`;
/// - its resource type equals the resource's, and its pattern covers the resource's name: a
///   `LITERAL` name equal to it or `*`, or a `PREFIXED` name the resource's name starts with;
/// - its operation covers `operation`. `ALL` covers everything. Otherwise an `ALLOW` binding
///   covers its own operation plus what that implies (`READ`, `WRITE`, `DELETE` and `ALTER`
///   imply `DESCRIBE`; `ALTER_CONFIGS` implies `DESCRIBE_CONFIGS`), while a `DENY` binding
///   covers only its own operation: denying `READ` does not deny `DESCRIBE`.
///
/// Any applicable `DENY` binding denies, whatever the `ALLOW` bindings say; the first one in
/// iteration order is reported. Otherwise an applicable `ALLOW` binding allows, and with none
/// the request is denied.
///
/// `host` is the client's IP address printed by [`std::net::IpAddr`]'s `Display`, the form
/// bindings store. Super users and an allow-if-no-ACL policy are the caller's concern: they are
/// decided before, not inside, this function. Bindings are expected to have passed
/// [`AclBinding::validate`]; a `PREFIXED` binding with an empty name matches nothing.
///
/// # Example
///
/// ```
/// use skein_auth::{authorize, AclBinding, Decision, Operation, PatternType, Permission};
/// use skein_auth::{Principal, Resource, ResourceType};
///
/// let acls = [AclBinding {
///     principal: Principal::user("alice"),
///     host: "*".to_owned(),
///     resource_type: ResourceType::Topic,
///     resource_name: "orders.".to_owned(),
///     pattern_type: PatternType::Prefixed,
///     operation: Operation::Read,
///     permission: Permission::Allow,
/// }];
/// let alice = Principal::user("alice");
/// let topic = Resource::new(ResourceType::Topic, "orders.eu");
///
/// let decision = authorize(&acls, &alice, "10.0.0.7", Operation::Describe, &topic);
/// assert_eq!(decision, Decision::Allowed);
/// assert!(!authorize(&acls, &alice, "10.0.0.7", Operation::Write, &topic).is_allowed());
/// ```
pub fn authorize<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding>,
    principal: &Principal,
    host: &str,
    operation: Operation,
    resource: &Resource<'_>,
) -> Decision<'a> {
    let mut allowed = false;
    for binding in acls {
        if !applies_to(binding, principal, host, resource) {
            continue;
        }
        match binding.permission {
            Permission::Deny => {
                if binding.operation == Operation::All || binding.operation == operation {
                    return Decision::Denied(DenyReason::DenyBinding(binding));
                }
            }
            Permission::Allow => allowed |= binding.operation.allow_grants(operation),
        }
    }
    if allowed {
        Decision::Allowed
    } else {
        Decision::Denied(DenyReason::NoAllowBinding)
    }
}

/// Whether `binding` is about this principal, host and resource, whatever its operation.
fn applies_to(
    binding: &AclBinding,
    principal: &Principal,
    host: &str,
    resource: &Resource<'_>,
) -> bool {
    (binding.principal == *principal || binding.principal.is_wildcard())
        && (binding.host == host || binding.host == ANY_HOST)
        && binding.resource_type == resource.resource_type
        && binding
            .pattern_type
            .matches(&binding.resource_name, resource.name)
}
