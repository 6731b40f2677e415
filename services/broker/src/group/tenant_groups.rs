//! Each tenant's consumer groups on a broker: its coordinator's memberships and its
//! committed offsets, kept apart from every other tenant's. A broker serving one tenant has
//! one set; a broker serving every tenant has one per tenant, each with its own offsets
//! topic (`<tenant>.__consumer_offsets`), so a tenant's groups move between brokers with
//! the leadership of its own offsets partition, and two tenants' group `billing` never meet.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use super::{Coordinator, OffsetStore, OffsetStoreError, OFFSETS_TOPIC};
use crate::replica::ReplicaManager;
use crate::scope::{Scope, Tenancy};

/// One tenant's groups.
#[derive(Debug)]
pub(crate) struct TenantGroups {
    /// The memberships; replaced with an empty one each time this broker takes up the
    /// coordination (memberships from an earlier term are stale).
    coordinator: RwLock<Arc<Coordinator>>,
    pub(crate) offsets: OffsetStore,
    rebalance_delay: Duration,
}

impl TenantGroups {
    fn new(offsets: OffsetStore, rebalance_delay: Duration) -> Self {
        Self {
            coordinator: RwLock::new(Arc::new(Coordinator::new(rebalance_delay))),
            offsets,
            rebalance_delay,
        }
    }

    /// The memberships as this broker coordinates them.
    pub(crate) fn coordinator(&self) -> Arc<Coordinator> {
        Arc::clone(&self.coordinator.read())
    }

    /// Loads the offsets if this broker just took the lead of their partition, and then
    /// starts the memberships afresh.
    pub(crate) fn take_up(&self, replicas: &ReplicaManager) -> Result<(), OffsetStoreError> {
        if self.offsets.take_up(replicas)? {
            *self.coordinator.write() = Arc::new(Coordinator::new(self.rebalance_delay));
        }
        Ok(())
    }
}

/// The groups of every tenant served.
#[derive(Debug)]
pub(crate) struct Groups {
    tenancy: Tenancy,
    rebalance_delay: Duration,
    by_tenant: RwLock<HashMap<String, Arc<TenantGroups>>>,
}

impl Groups {
    /// A broker serving one tenant (named `tenant`, `""` on its own): its groups' offsets
    /// in `offsets`.
    pub(crate) fn one(tenant: &str, offsets: OffsetStore, rebalance_delay: Duration) -> Self {
        let groups = Arc::new(TenantGroups::new(offsets, rebalance_delay));
        Self {
            tenancy: Tenancy::One,
            rebalance_delay,
            by_tenant: RwLock::new(HashMap::from([(tenant.to_owned(), groups)])),
        }
    }

    /// A broker serving every tenant: each tenant's groups come with its first group
    /// request, their offsets in the tenant's own replicated offsets topic.
    pub(crate) fn every(rebalance_delay: Duration) -> Self {
        Self {
            tenancy: Tenancy::Every,
            rebalance_delay,
            by_tenant: RwLock::default(),
        }
    }

    /// The groups of the tenant a request of `scope` acts for (`tenant`, by name).
    pub(crate) fn of(&self, scope: &Scope, tenant: &str) -> Arc<TenantGroups> {
        if let Some(groups) = self.by_tenant.read().get(tenant) {
            return Arc::clone(groups);
        }
        if self.tenancy == Tenancy::One {
            // One set serves the one tenant, whatever it is called.
            if let Some(groups) = self.by_tenant.read().values().next() {
                return Arc::clone(groups);
            }
        }
        let topic = scope.qualify(OFFSETS_TOPIC).into_owned();
        let mut by_tenant = self.by_tenant.write();
        Arc::clone(by_tenant.entry(tenant.to_owned()).or_insert_with(|| {
            Arc::new(TenantGroups::new(
                OffsetStore::replicated(topic),
                self.rebalance_delay,
            ))
        }))
    }

    /// Every tenant's groups, for expiry.
    pub(crate) fn all(&self) -> Vec<Arc<TenantGroups>> {
        self.by_tenant.read().values().cloned().collect()
    }
}
