//! What a broker keeps of each tenant it serves, as the controller's snapshots say: the
//! tenant's ACL bindings, its quota and its principals' own quotas. A broker serving one
//! tenant keeps one; a broker serving every tenant keeps one per tenant, so a request is
//! only ever checked and charged against its own tenant's. Buckets outlive a snapshot that
//! leaves their limit as it was.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::controller_link::TenantsSnapshot;
use crate::quota::{PrincipalQuotas, TenantQuotas};

/// One tenant's bindings and quotas.
#[derive(Debug, Default)]
pub(crate) struct Tenant {
    pub acls: RwLock<Vec<skein_auth::AclBinding>>,
    /// The tenant-wide quota.
    pub quotas: TenantQuotas,
    /// Each principal's own quota.
    pub principal_quotas: PrincipalQuotas,
}

/// Every tenant served, by name.
#[derive(Debug, Default)]
pub(crate) struct Tenants {
    by_name: RwLock<HashMap<String, Arc<Tenant>>>,
}

impl Tenants {
    /// The tenant of that name; one with no bindings and no quota if the controller said
    /// nothing of it (an authenticated principal of it may then do nothing).
    pub(crate) fn of(&self, name: &str) -> Arc<Tenant> {
        self.by_name
            .read()
            .get(name)
            .map_or_else(Arc::default, Arc::clone)
    }

    /// Replaces what is known of every tenant with a snapshot's view: a tenant it does not
    /// mention keeps no bindings and no limits (and is forgotten once no request holds it).
    pub(crate) fn apply(&self, mut snapshot: TenantsSnapshot) {
        let mut held = self.by_name.write();
        held.retain(|name, tenant| snapshot.contains_key(name) || Arc::strong_count(tenant) > 1);
        for (name, tenant) in held.iter() {
            let latest = snapshot.remove(name).unwrap_or_default();
            tenant.set(latest);
        }
        for (name, latest) in snapshot {
            let tenant = Tenant::default();
            tenant.set(latest);
            held.insert(name, Arc::new(tenant));
        }
    }
}

impl Tenant {
    fn set(&self, latest: crate::controller_link::TenantSnapshot) {
        *self.acls.write() = latest.acls;
        self.quotas.set(latest.quota);
        self.principal_quotas.set(latest.principal_quotas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller_link::TenantSnapshot;
    use skein_proto::controller as pb;

    fn quota(tenant: &str, produce: i64) -> pb::Quota {
        pb::Quota {
            tenant: tenant.to_owned(),
            produce_bytes_per_sec: Some(produce),
            ..Default::default()
        }
    }

    #[test]
    fn each_tenant_has_its_own_limits_and_a_snapshot_replaces_them() {
        let tenants = Tenants::default();
        let mut first = TenantsSnapshot::new();
        first.insert(
            "acme".to_owned(),
            TenantSnapshot {
                quota: Some(quota("acme", 1000)),
                ..Default::default()
            },
        );
        first.insert("globex".to_owned(), TenantSnapshot::default());
        tenants.apply(first);
        let acme = tenants.of("acme");
        let globex = tenants.of("globex");
        // acme's debt is acme's alone.
        let metered = crate::quota::Metered::ProduceBytes;
        assert!(!acme.quotas.charge(metered, 1 << 20).is_zero());
        assert!(globex.quotas.charge(metered, 1 << 20).is_zero());
        assert!(tenants.of("initech").quotas.debt(metered).is_zero());
        // A snapshot without acme's quota lifts it, on the handle already held too.
        tenants.apply(TenantsSnapshot::new());
        assert!(acme.quotas.debt(metered).is_zero());
        assert!(Arc::ptr_eq(&acme, &tenants.of("acme")));
    }
}
