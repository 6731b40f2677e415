//! Kafka's ACL model and the one authorization decision Skein makes with it.
//!
//! The broker, the gateway and the control plane all decide access with [`authorize`], over
//! the same [`AclBinding`]s, so a principal gets the same answer on every path. The rules are
//! Kafka's: `LITERAL` and `PREFIXED` resource patterns, the `*` resource and `User:*`
//! principal wildcards, host matching, `DENY` winning over `ALLOW`, `ALL`, the `DESCRIBE` and
//! `DESCRIBE_CONFIGS` implications, and deny when nothing allows.
//!
//! This crate does no I/O and knows no protocol: it converts Kafka's ACL wire codes and
//! upper-case names, and leaves request decoding to the broker and JSON to the services.
//!
//! # Organization
//!
//! - [`Principal`]: who is asking, `User:alice`.
//! - [`ResourceType`], [`PatternType`], [`Resource`]: what is protected and what is accessed.
//! - [`Operation`], [`Permission`]: what is done, and whether a binding allows or denies it.
//! - [`AclBinding`]: one ACL entry, with [`AclBinding::validate`] for what CreateAcls refuses.
//! - [`authorize`] and [`Decision`]: the decision.
//! - [`AclBindingFilter`] and [`PatternTypeFilter`]: selection for DescribeAcls and DeleteAcls.
//! - [`AclError`]: unknown wire codes and names, and invalid bindings.
//!
//! Every enum converts to and from its Kafka wire code (`code`, `from_code`) and Kafka's
//! upper-case name (`Display`, case-insensitive `FromStr`). A filter's `ANY` is `None`; the
//! `filter_code`, `filter_from_code` and `filter_from_str` functions convert it.
//!
//! # Example
//!
//! ```
//! use skein_auth::{authorize, AclBinding, Decision, DenyReason, Operation, Permission};
//! use skein_auth::{PatternType, Principal, Resource, ResourceType};
//!
//! let binding = |principal: &str, operation, permission| AclBinding {
//!     principal: principal.parse().unwrap(),
//!     host: "*".to_owned(),
//!     resource_type: ResourceType::Topic,
//!     resource_name: "orders".to_owned(),
//!     pattern_type: PatternType::Literal,
//!     operation,
//!     permission,
//! };
//! let acls = vec![
//!     binding("User:*", Operation::Read, Permission::Allow),
//!     binding("User:mallory", Operation::All, Permission::Deny),
//! ];
//! let orders = Resource::new(ResourceType::Topic, "orders");
//!
//! let alice = Principal::user("alice");
//! assert_eq!(authorize(&acls, &alice, "10.0.0.7", Operation::Read, &orders), Decision::Allowed);
//!
//! let mallory = Principal::user("mallory");
//! assert_eq!(
//!     authorize(&acls, &mallory, "10.0.0.8", Operation::Read, &orders),
//!     Decision::Denied(DenyReason::DenyBinding(&acls[1])),
//! );
//! ```
#![warn(missing_docs)]

#[macro_use]
mod kafka_enum;

mod authorize;
mod binding;
mod error;
mod filter;
mod operation;
mod principal;
mod resource;

pub use authorize::{authorize, Decision, DenyReason};
pub use binding::{
    AclBinding, ANY_HOST, MAX_HOST_BYTES, MAX_PRINCIPAL_BYTES, MAX_RESOURCE_NAME_BYTES,
};
pub use error::AclError;
pub use filter::AclBindingFilter;
pub use operation::{Operation, Permission};
pub use principal::{is_tenant_name, Principal};
pub use resource::{PatternType, PatternTypeFilter, Resource, ResourceType, CLUSTER_NAME};
