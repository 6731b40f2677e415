//! Whose names a request speaks, and how they map to the names the broker keeps.
//!
//! A broker serves either one tenant or every tenant ([`Tenancy`]). Serving one tenant
//! (`skein broker --tenant acme`), it keeps the tenant's names as they are: topic `orders`
//! is `orders` in its registry, its log directories and its calls to the controller.
//! Serving every tenant, it keeps each tenant's names inside its own namespace,
//! `<tenant>.<name>`: two tenants' `orders` are `acme.orders` and `globex.orders`, and a
//! client is shown only the names of its own tenant, stripped of the prefix, as if the
//! cluster were its own.
//!
//! Tenant names are `[a-z][a-z0-9-]{0,62}` (the catalog's rule), so the first `.` of a
//! qualified name always ends the tenant. Internal topics (`__consumer_offsets`) are
//! internal by their plain part: `acme.__consumer_offsets` is acme's group offsets.

use std::borrow::Cow;
use std::sync::Arc;

/// The longest name a topic may have inside the cluster: Kafka's 249, which keeps every
/// partition directory (`<name>-<partition>`, and its deletion rename) within a file name.
pub const MAX_QUALIFIED_TOPIC: usize = 249;

/// Whether a broker serves one tenant or every tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenancy {
    /// One tenant, under its plain names.
    One,
    /// Every tenant, each under `<tenant>.<name>`.
    Every,
}

impl Tenancy {
    /// The tenant of a name the broker keeps (`None` serving one tenant, or for a name
    /// outside every namespace) and its plain part.
    pub fn split(self, name: &str) -> (Option<&str>, &str) {
        match self {
            Tenancy::One => (None, name),
            Tenancy::Every => match name.split_once('.') {
                Some((tenant, plain)) => (Some(tenant), plain),
                None => (None, name),
            },
        }
    }

    /// Whether a name the broker keeps belongs to the cluster's machinery rather than to
    /// what a client may touch: `__consumer_offsets`, `__transaction_state` and every other
    /// plain name starting with `__`.
    pub fn is_internal(self, name: &str) -> bool {
        self.split(name).1.starts_with("__")
    }
}

/// Whose names one request speaks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A client of a broker serving one tenant: names are the broker's own.
    Plain,
    /// A client of one tenant on a broker serving every tenant: `orders` is
    /// `<tenant>.orders` inside.
    Tenant(Arc<str>),
    /// The cluster's own traffic (another broker replicating): names as the broker keeps
    /// them, every tenant's.
    Cluster,
}

impl Scope {
    /// The name the broker keeps for a name this scope's client sent.
    pub fn qualify<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match self {
            Scope::Plain | Scope::Cluster => Cow::Borrowed(name),
            Scope::Tenant(tenant) => Cow::Owned(format!("{tenant}.{name}")),
        }
    }

    /// The name this scope's client knows a kept name by; `None` for a name outside the
    /// scope (another tenant's).
    pub fn strip<'a>(&self, name: &'a str) -> Option<&'a str> {
        match self {
            Scope::Plain | Scope::Cluster => Some(name),
            Scope::Tenant(tenant) => name
                .strip_prefix(tenant.as_ref())
                .and_then(|rest| rest.strip_prefix('.')),
        }
    }

    /// The tenant whose namespace this is, on a broker serving every tenant.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Scope::Tenant(tenant) => Some(tenant),
            Scope::Plain | Scope::Cluster => None,
        }
    }

    /// Whether the scope is the cluster's own traffic.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Scope::Cluster)
    }

    /// The longest name this scope's client may give a topic: what is left of
    /// [`MAX_QUALIFIED_TOPIC`] after the tenant's prefix.
    pub fn max_topic_name(&self) -> usize {
        match self {
            Scope::Plain | Scope::Cluster => MAX_QUALIFIED_TOPIC,
            Scope::Tenant(tenant) => MAX_QUALIFIED_TOPIC.saturating_sub(tenant.len() + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_names_live_under_its_prefix_and_no_other() {
        let acme = Scope::Tenant("acme".into());
        assert_eq!(acme.qualify("orders"), "acme.orders");
        assert_eq!(acme.qualify("eu.orders"), "acme.eu.orders");
        assert_eq!(acme.strip("acme.eu.orders"), Some("eu.orders"));
        assert_eq!(acme.strip("acme.orders"), Some("orders"));
        // Another tenant's names, and one whose tenant merely starts alike, are not acme's.
        assert_eq!(acme.strip("globex.orders"), None);
        assert_eq!(acme.strip("acme-eu.orders"), None);
        assert_eq!(acme.strip("acmeorders"), None);
        assert_eq!(acme.strip("orders"), None);
        assert_eq!(acme.tenant(), Some("acme"));
        assert_eq!(acme.max_topic_name(), 244);

        for scope in [Scope::Plain, Scope::Cluster] {
            assert_eq!(scope.qualify("acme.orders"), "acme.orders");
            assert_eq!(scope.strip("acme.orders"), Some("acme.orders"));
            assert_eq!(scope.tenant(), None);
            assert_eq!(scope.max_topic_name(), 249);
        }
        assert!(Scope::Cluster.is_cluster() && !acme.is_cluster());
    }

    #[test]
    fn internal_topics_are_internal_by_their_plain_part() {
        assert!(Tenancy::One.is_internal("__consumer_offsets"));
        assert!(!Tenancy::One.is_internal("a.__b"));
        assert!(Tenancy::Every.is_internal("acme.__consumer_offsets"));
        assert!(Tenancy::Every.is_internal("__consumer_offsets"));
        assert!(!Tenancy::Every.is_internal("acme.orders"));
        assert!(!Tenancy::Every.is_internal("acme.orders.__x"));
        assert_eq!(
            Tenancy::Every.split("acme.eu.orders"),
            (Some("acme"), "eu.orders")
        );
        assert_eq!(
            Tenancy::One.split("acme.eu.orders"),
            (None, "acme.eu.orders")
        );
    }
}
