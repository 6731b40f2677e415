//! Kafka's authorization on the native path: what a request's principal may do, decided by
//! the tenant's ACL bindings with the same [`skein_auth::authorize`] the gateway uses. A
//! listener without authentication has no principal: its clients act as the tenant and
//! every check passes (development listeners, and the inter-broker listener).

use skein_auth::{authorize, Operation, Principal, Resource, ResourceType, CLUSTER_NAME};

use crate::scope::Scope;
use crate::tenants::Tenant;
use crate::Broker;

/// One request's view of what it may do.
pub(crate) struct Access<'a> {
    broker: &'a Broker,
    /// The tenant whose bindings decide.
    tenant: &'a Tenant,
    /// Whose names the request speaks.
    scope: &'a Scope,
    /// `None` on a listener without authentication.
    principal: Option<Principal>,
    /// The client's address, as ACL hosts name it.
    host: &'a str,
}

impl<'a> Access<'a> {
    pub(crate) fn new(
        broker: &'a Broker,
        tenant: &'a Tenant,
        scope: &'a Scope,
        principal: Option<Principal>,
        peer: &'a str,
    ) -> Self {
        Self {
            broker,
            tenant,
            scope,
            principal,
            host: peer.trim_start_matches('/'),
        }
    }

    /// Whether the request's principal may do `operation` on the named resource.
    pub(crate) fn allows(&self, operation: Operation, kind: ResourceType, name: &str) -> bool {
        let Some(principal) = &self.principal else {
            return true;
        };
        let acls = self.tenant.acls.read();
        authorize(
            acls.iter(),
            principal,
            self.host,
            operation,
            &Resource::new(kind, name),
        )
        .is_allowed()
    }

    pub(crate) fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    pub(crate) fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    pub(crate) fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub(crate) fn transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// CreateTopics' rule: CREATE on the cluster, or on the topic.
    pub(crate) fn may_create_topic(&self, name: &str) -> bool {
        self.cluster(Operation::Create) || self.topic(Operation::Create, name)
    }

    /// InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE
    /// on some topic of the tenant (KIP-679).
    pub(crate) fn may_write_idempotently(&self) -> bool {
        let Some(principal) = &self.principal else {
            return true;
        };
        if self.cluster(Operation::IdempotentWrite) {
            return true;
        }
        // Only a principal some binding lets write a topic can; the others are answered
        // without going through every topic.
        let may_write_some = self.tenant.acls.read().iter().any(|b| {
            b.resource_type == ResourceType::Topic
                && b.permission == skein_auth::Permission::Allow
                && b.operation.allow_grants(Operation::Write)
                && (b.principal == *principal || b.principal.is_wildcard())
        });
        may_write_some
            && self
                .broker
                .topics
                .list_in(self.scope)
                .iter()
                .filter_map(|topic| self.scope.strip(&topic.name))
                .any(|name| self.topic(Operation::Write, name))
    }

    /// Whether a principal is named at all (an authenticated listener).
    pub(crate) fn is_authenticated(&self) -> bool {
        self.principal.is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use skein_auth::{AclBinding, PatternType, Permission};

    use super::*;

    fn binding(operation: Operation, kind: ResourceType, name: &str) -> AclBinding {
        AclBinding {
            principal: "User:alice".parse().unwrap(),
            host: "*".to_owned(),
            resource_type: kind,
            resource_name: name.to_owned(),
            pattern_type: PatternType::Literal,
            operation,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn an_authenticated_principal_meets_the_tenants_acls_and_an_anonymous_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(crate::BrokerConfig::new(dir.path())).unwrap();
        let tenant = Tenant::default();
        *tenant.acls.write() = vec![
            binding(Operation::Write, ResourceType::Topic, "orders"),
            binding(Operation::Read, ResourceType::Group, "billing"),
        ];
        let alice = Access::new(
            &broker,
            &tenant,
            &Scope::Plain,
            Some(Principal::user("alice")),
            "/10.0.0.7",
        );
        assert!(alice.topic(Operation::Write, "orders"));
        // DESCRIBE is implied by WRITE, as in Kafka.
        assert!(alice.topic(Operation::Describe, "orders"));
        assert!(!alice.topic(Operation::Read, "orders"));
        assert!(!alice.topic(Operation::Write, "payments"));
        assert!(alice.group(Operation::Read, "billing"));
        assert!(!alice.cluster(Operation::Alter));
        assert!(!alice.may_create_topic("orders"));
        let bob = Access::new(
            &broker,
            &tenant,
            &Scope::Plain,
            Some(Principal::user("bob")),
            "/10.0.0.8",
        );
        assert!(!bob.topic(Operation::Write, "orders"));
        let anonymous = Access::new(&broker, &tenant, &Scope::Plain, None, "/10.0.0.9");
        // Another tenant's bindings say nothing of this one's principals.
        let other = Tenant::default();
        let elsewhere = Access::new(
            &broker,
            &other,
            &Scope::Plain,
            Some(Principal::user("alice")),
            "/10.0.0.7",
        );
        assert!(!elsewhere.topic(Operation::Write, "orders"));
        assert!(anonymous.topic(Operation::Read, "orders"));
        assert!(anonymous.cluster(Operation::Alter));
    }
}
