//! ACL bindings: who may (or may not) do what, from where, to which resources.

use std::fmt;

use crate::resource::{CLUSTER_NAME, WILDCARD_NAME};
use crate::{AclError, Operation, PatternType, Permission, Principal, ResourceType};

/// The host that matches every client address.
pub const ANY_HOST: &str = "*";

/// One ACL entry, Kafka's `AclBinding`: a resource pattern plus an access control entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBinding {
    /// Who the binding is for; [`Principal::wildcard`] (`User:*`) is everyone.
    pub principal: Principal,
    /// The client address the binding is for, as text (`10.0.0.7`); [`ANY_HOST`] is every host.
    pub host: String,
    /// The kind of resource the binding protects.
    pub resource_type: ResourceType,
    /// The resource name, or the prefix for a [`PatternType::Prefixed`] binding; a literal `*`
    /// is every name.
    pub resource_name: String,
    /// How [`resource_name`](Self::resource_name) is compared.
    pub pattern_type: PatternType,
    /// The operation allowed or denied; [`Operation::All`] is every operation.
    pub operation: Operation,
    /// Whether the binding allows or denies.
    pub permission: Permission,
}

impl AclBinding {
    /// Checks what Kafka's CreateAcls checks before a binding is stored.
    ///
    /// # Errors
    ///
    /// - [`AclError::InvalidPrincipal`] when the principal's type or name is empty;
    /// - [`AclError::EmptyHost`] when the host is empty;
    /// - [`AclError::EmptyResourceName`] when the resource name is empty;
    /// - [`AclError::PrefixedWildcard`] for a `PREFIXED` pattern `*`;
    /// - [`AclError::InvalidClusterName`] for a `CLUSTER` binding not named `kafka-cluster`.
    pub fn validate(&self) -> Result<(), AclError> {
        let principal = self.principal.to_string();
        for (field, len, max) in [
            ("principal", principal.len(), MAX_PRINCIPAL_BYTES),
            ("host", self.host.len(), MAX_HOST_BYTES),
            (
                "resource name",
                self.resource_name.len(),
                MAX_RESOURCE_NAME_BYTES,
            ),
        ] {
            if len > max {
                return Err(AclError::TooLong { field, len, max });
            }
        }
        if !self.principal.is_well_formed() {
            return Err(AclError::InvalidPrincipal {
                principal: self.principal.to_string(),
            });
        }
        if self.host.is_empty() {
            return Err(AclError::EmptyHost);
        }
        if self.resource_name.is_empty() {
            return Err(AclError::EmptyResourceName);
        }
        if self.pattern_type == PatternType::Prefixed && self.resource_name == WILDCARD_NAME {
            return Err(AclError::PrefixedWildcard);
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(AclError::InvalidClusterName {
                name: self.resource_name.clone(),
            });
        }
        Ok(())
    }
}

/// The longest principal a binding names, in bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 256;
/// The longest host a binding names, in bytes.
pub const MAX_HOST_BYTES: usize = 256;
/// The longest resource name or prefix a binding names, in bytes (Kafka's topic names are at
/// most 249).
pub const MAX_RESOURCE_NAME_BYTES: usize = 1024;

/// Prints the binding the way the audit log shows it:
/// `User:alice ALLOW READ on TOPIC:LITERAL:orders from host *`.
impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} on {}:{}:{} from host {}",
            self.principal,
            self.permission,
            self.operation,
            self.resource_type,
            self.pattern_type,
            self.resource_name,
            self.host
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(resource_type: ResourceType, name: &str, pattern_type: PatternType) -> AclBinding {
        AclBinding {
            principal: Principal::user("alice"),
            host: ANY_HOST.to_owned(),
            resource_type,
            resource_name: name.to_owned(),
            pattern_type,
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn names_longer_than_a_binding_may_hold_are_refused() {
        let long = "n".repeat(900 * 1024);
        let too_long = binding(ResourceType::Topic, &long, PatternType::Literal);
        assert!(matches!(
            too_long.validate(),
            Err(AclError::TooLong {
                field: "resource name",
                ..
            })
        ));
        let mut principal = binding(ResourceType::Topic, "orders", PatternType::Literal);
        principal.principal = Principal::user("p".repeat(300));
        assert!(matches!(
            principal.validate(),
            Err(AclError::TooLong {
                field: "principal",
                ..
            })
        ));
        let mut host = binding(ResourceType::Topic, "orders", PatternType::Literal);
        host.host = "h".repeat(257);
        assert!(matches!(
            host.validate(),
            Err(AclError::TooLong { field: "host", .. })
        ));
        let fits = binding(
            ResourceType::Group,
            &"g".repeat(MAX_RESOURCE_NAME_BYTES),
            PatternType::Literal,
        );
        assert!(fits.validate().is_ok());
    }

    #[test]
    fn validate_accepts_well_formed_bindings() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Cluster, Group, Topic, TransactionalId};
        let table = [
            (Topic, "orders", Literal),
            (Topic, "*", Literal),
            (Topic, "orders.", Prefixed),
            (Group, "billing", Prefixed),
            (TransactionalId, "tx-1", Literal),
            (Cluster, "kafka-cluster", Literal),
        ];
        for (resource_type, name, pattern_type) in table {
            let binding = binding(resource_type, name, pattern_type);
            assert_eq!(binding.validate(), Ok(()), "{binding}");
        }
    }

    #[test]
    fn validate_says_what_is_wrong() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Cluster, Group, Topic};
        let table = [
            (binding(Topic, "", Literal), AclError::EmptyResourceName),
            (binding(Group, "", Prefixed), AclError::EmptyResourceName),
            (binding(Topic, "*", Prefixed), AclError::PrefixedWildcard),
            (
                binding(Cluster, "my-cluster", Literal),
                AclError::InvalidClusterName {
                    name: "my-cluster".into(),
                },
            ),
            (
                binding(Cluster, "*", Literal),
                AclError::InvalidClusterName { name: "*".into() },
            ),
            (
                AclBinding {
                    host: String::new(),
                    ..binding(Topic, "orders", Literal)
                },
                AclError::EmptyHost,
            ),
            (
                AclBinding {
                    principal: Principal {
                        principal_type: "User".into(),
                        name: String::new(),
                    },
                    ..binding(Topic, "orders", Literal)
                },
                AclError::InvalidPrincipal {
                    principal: "User:".into(),
                },
            ),
        ];
        for (binding, expected) in table {
            assert_eq!(binding.validate(), Err(expected), "{binding}");
        }
    }

    #[test]
    fn error_messages_name_the_problem() {
        let table = [
            (AclError::EmptyResourceName, "resource name is empty"),
            (
                AclError::PrefixedWildcard,
                "PREFIXED pattern \"*\" is not allowed; use LITERAL \"*\" to match every name",
            ),
            (
                AclError::InvalidClusterName { name: "c1".into() },
                "cluster resource name must be \"kafka-cluster\", not \"c1\"",
            ),
            (AclError::EmptyHost, "host is empty; use \"*\" for any host"),
            (
                AclError::UnknownCode {
                    kind: "operation",
                    code: 13,
                },
                "unknown operation code 13",
            ),
            (
                AclError::UnknownName {
                    kind: "resource type",
                    name: "TABLE".into(),
                },
                "unknown resource type \"TABLE\"",
            ),
            (
                AclError::FilterOnly {
                    kind: "pattern type",
                    name: "MATCH",
                },
                "pattern type MATCH is only valid in a filter",
            ),
            (
                AclError::InvalidPrincipal {
                    principal: "alice".into(),
                },
                "principal \"alice\" is not of the form <type>:<name>",
            ),
        ];
        for (error, message) in table {
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn display_reads_like_an_audit_line() {
        let binding = AclBinding {
            host: "10.0.0.7".into(),
            permission: Permission::Deny,
            ..binding(ResourceType::Topic, "orders.", PatternType::Prefixed)
        };
        assert_eq!(
            binding.to_string(),
            "User:alice DENY READ on TOPIC:PREFIXED:orders. from host 10.0.0.7"
        );
    }
}
