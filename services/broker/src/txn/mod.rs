//! Transactions (KIP-98): each tenant's transaction coordinator, the records of its
//! `__transaction_state` topic, and the markers that end a transaction in its partitions.

mod coordinator;
pub(crate) mod markers;
pub mod state_record;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

pub(crate) use coordinator::TxnCoordinator;

use crate::scope::{Scope, Tenancy};

pub(crate) const TOPIC: &str = "__transaction_state";

/// The transaction coordinators of every tenant served.
#[derive(Debug)]
pub(crate) struct Transactions {
    tenancy: Tenancy,
    by_tenant: RwLock<HashMap<String, Arc<TxnCoordinator>>>,
}

impl Transactions {
    /// A broker serving one tenant (named `tenant`, `""` on its own).
    pub(crate) fn one(tenant: &str, coordinator: TxnCoordinator) -> Self {
        Self {
            tenancy: Tenancy::One,
            by_tenant: RwLock::new(HashMap::from([(tenant.to_owned(), Arc::new(coordinator))])),
        }
    }

    /// A broker serving every tenant: each tenant's coordinator comes with its first
    /// transactional request, its state in the tenant's own replicated topic.
    pub(crate) fn every() -> Self {
        Self {
            tenancy: Tenancy::Every,
            by_tenant: RwLock::default(),
        }
    }

    /// The coordinator of the tenant a request of `scope` acts for (`tenant`, by name).
    pub(crate) fn of(&self, scope: &Scope, tenant: &str) -> Arc<TxnCoordinator> {
        if let Some(found) = self.by_tenant.read().get(tenant) {
            return Arc::clone(found);
        }
        if self.tenancy == Tenancy::One {
            if let Some(found) = self.by_tenant.read().values().next() {
                return Arc::clone(found);
            }
        }
        let mut by_tenant = self.by_tenant.write();
        Arc::clone(
            by_tenant
                .entry(tenant.to_owned())
                .or_insert_with(|| Arc::new(TxnCoordinator::replicated(scope.clone()))),
        )
    }

    /// Every tenant's coordinator, for timeouts.
    pub(crate) fn all(&self) -> Vec<Arc<TxnCoordinator>> {
        self.by_tenant.read().values().cloned().collect()
    }
}
