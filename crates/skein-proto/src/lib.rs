//! Skein's gRPC definitions, generated from `proto/` at build time.

/// `skein.controller.v1`: brokers and the cluster's controller.
#[allow(
    missing_debug_implementations,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used
)]
pub mod controller {
    tonic::include_proto!("skein.controller.v1");
}

/// `skein.v1`: the gateway's API for services.
#[allow(
    missing_debug_implementations,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used
)]
pub mod gateway {
    tonic::include_proto!("skein.v1");
}

/// The encoded descriptors of every Skein proto file, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/skein_descriptors.bin"));

pub mod refusal;

/// The id under which the metadata lists a SCRAM credential as in force, among the API keys:
/// a session authenticated with the credential ends when the id leaves the list, when the
/// credential is deleted or replaced. API key ids are UUIDs, so the two never meet.
/// The SASL/PLAIN user name a broker logs in to another broker's inter-broker listener
/// with, its controller credential as the password.
pub const BROKER_SASL_USER: &str = "skein-broker";

/// The SASL/PLAIN user name a gateway logs in to a broker with, its controller credential
/// as the password and the tenant it acts for as the authorization id.
pub const GATEWAY_SASL_USER: &str = "skein-gateway";

pub fn scram_session_id(mechanism: &str, user: &str, updated_at: i64) -> String {
    format!("scram:{mechanism}:{updated_at}:{user}")
}
pub mod replicas;
pub mod snapshot;

/// ACL bindings and filters between their wire form (Kafka's names) and `skein_auth`'s types.
pub mod acl {
    use skein_auth::{AclBinding, AclBindingFilter, AclError, PatternTypeFilter};

    use crate::controller as pb;

    /// A stored binding for the wire.
    pub fn to_wire(tenant: &str, binding: &AclBinding) -> pb::Acl {
        pb::Acl {
            tenant: tenant.to_owned(),
            principal: binding.principal.to_string(),
            host: binding.host.clone(),
            resource_type: binding.resource_type.to_string(),
            resource_name: binding.resource_name.clone(),
            pattern_type: binding.pattern_type.to_string(),
            operation: binding.operation.to_string(),
            permission: binding.permission.to_string(),
        }
    }

    /// A binding from the wire, refused when a name is unknown.
    pub fn from_wire(acl: &pb::Acl) -> Result<AclBinding, AclError> {
        Ok(AclBinding {
            principal: acl.principal.parse()?,
            host: acl.host.clone(),
            resource_type: acl.resource_type.parse()?,
            resource_name: acl.resource_name.clone(),
            pattern_type: acl.pattern_type.parse()?,
            operation: acl.operation.parse()?,
            permission: acl.permission.parse()?,
        })
    }

    /// A filter for the wire.
    pub fn filter_to_wire(tenant: &str, filter: &AclBindingFilter) -> pb::AclFilter {
        pb::AclFilter {
            tenant: tenant.to_owned(),
            principal: filter.principal.as_ref().map(ToString::to_string),
            host: filter.host.clone(),
            resource_type: filter.resource_type.map(|t| t.to_string()),
            resource_name: filter.resource_name.clone(),
            pattern_type: filter.pattern_type.to_string(),
            operation: filter.operation.map(|o| o.to_string()),
            permission: filter.permission.map(|p| p.to_string()),
        }
    }

    /// A filter from the wire.
    pub fn filter_from_wire(filter: &pb::AclFilter) -> Result<AclBindingFilter, AclError> {
        fn any_or<T: std::str::FromStr<Err = AclError>>(
            value: Option<&String>,
        ) -> Result<Option<T>, AclError> {
            match value {
                None => Ok(None),
                Some(v) if v.eq_ignore_ascii_case("ANY") => Ok(None),
                Some(v) => v.parse().map(Some),
            }
        }
        Ok(AclBindingFilter {
            principal: any_or(filter.principal.as_ref())?,
            host: filter.host.clone(),
            resource_type: any_or(filter.resource_type.as_ref())?,
            resource_name: filter.resource_name.clone(),
            pattern_type: if filter.pattern_type.is_empty() {
                PatternTypeFilter::Any
            } else {
                filter.pattern_type.parse()?
            },
            operation: any_or(filter.operation.as_ref())?,
            permission: any_or(filter.permission.as_ref())?,
        })
    }
}
