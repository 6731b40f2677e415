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

/// How long a partition leader waits for another broker's coordinator to verify a
/// transaction.
const VERIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Asks the tenant's transaction coordinator, on this broker or another, whether
/// `producer`'s transaction of `transactional_id` includes `partition` (kept names).
pub(crate) async fn verify(
    broker: &crate::Broker,
    scope: &Scope,
    transactional_id: &str,
    producer: (i64, i16),
    partition: &(String, i32),
) -> Result<(), kafka_protocol::ResponseError> {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::ResponseError;

    let coordinator = broker.transactions_of(scope);
    let leader = coordinator.leader(broker).await;
    if leader == Some(broker.config.node_id) {
        return coordinator
            .verify(broker, transactional_id, producer, partition)
            .await
            .map_err(|e| e.produce_code());
    }
    let Some(leader) = leader else {
        return Err(ResponseError::CoordinatorNotAvailable);
    };
    let address = broker
        .topics
        .brokers()
        .into_iter()
        .find(|b| b.node_id == leader)
        .map(|b| format!("{}:{}", b.host, b.port))
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    // KIP-890's verification: AddPartitionsToTxn v4 with verify_only, between brokers.
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(kafka_protocol::messages::TransactionalId(
                StrBytes::from_string(transactional_id.to_owned()),
            ))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(partition.0.clone())))
                .with_partitions(vec![partition.1])]),
    ]);
    let config = crate::replica_fetcher::inter_broker_client(
        broker,
        &address,
        format!("skein-txn-verify-{}", broker.config.node_id),
    );
    let connection = skein_client::Connection::connect(&address, &config)
        .await
        .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
    let response = connection
        .send_with_timeout(&request, VERIFY_TIMEOUT)
        .await
        .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
    if response.error_code != 0 {
        return Err(ResponseError::try_from_code(response.error_code)
            .unwrap_or(ResponseError::UnknownServerError));
    }
    let code = response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .find(|code| *code != 0);
    match code {
        None => Ok(()),
        Some(code) => {
            Err(ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError))
        }
    }
}
