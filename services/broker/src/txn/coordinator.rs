//! One tenant's transaction coordinator (KIP-98): the state of each transactional id, kept
//! in memory and in the tenant's `__transaction_state` log so it survives the loss of its
//! coordinator.
//!
//! A broker on its own keeps the topic in a local log. In a cluster it is a replicated
//! topic (partition 0, made by the controller), and the broker leading that partition
//! coordinates the tenant's transactions: it loads the state when it takes the lead,
//! writes every change with `acks=all` before acting on it, and on taking the lead finishes
//! what its predecessor had decided (a transaction in PrepareCommit or PrepareAbort gets its
//! markers). **Invariant:** what is in memory was read from, or replicated into, the log of
//! the leader epoch it was loaded in; a decision is acted on only once it is replicated.
//!
//! Each transactional id takes its turn: its requests, and the completion of its last
//! decision, run one at a time, while different ids' transactions proceed side by side.
//! EndTxn is answered once the decision (PrepareCommit or PrepareAbort) is replicated, as
//! Kafka does; the markers and the completed state are written after it, still in the id's
//! turn, so the producer's next AddPartitionsToTxn waits for them rather than opening a
//! transaction before the last one's markers.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use skein_log::batch::{BatchWriter, Compression, DecodedRecords, MarkerKind, ProducerFields};
use skein_log::{CleanupPolicy, Log, LogConfig, LogError, LogManager, SharedLog, TopicPartition};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::markers;
use super::state_record::{self, TxnMeta, TxnStatus};
use crate::replica::{PartitionError, Replicated};
use crate::Broker;

/// How long a state change waits for the in-sync replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for its transactional id's turn (the completion of the id's
/// last transaction, usually) before it answers CONCURRENT_TRANSACTIONS.
const TURN_WAIT: Duration = Duration::from_secs(10);

/// Why a transaction request could not be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TxnError {
    #[error("this broker does not coordinate the tenant's transactions")]
    NotCoordinator,
    #[error("the transaction state topic is not available: {0}")]
    NotAvailable(String),
    /// A newer producer with the same transactional id took over.
    #[error("the producer was fenced by a newer epoch")]
    Fenced,
    #[error("the producer id does not belong to this transactional id")]
    ProducerIdMapping,
    /// The transaction is being completed; the client retries.
    #[error("the previous transaction is still being completed")]
    Concurrent,
    #[error("the transaction is {0}, which does not allow this")]
    InvalidState(&'static str),
    #[error("transaction timeout {0} ms is not within 1 and transaction.max.timeout.ms")]
    InvalidTimeout(i32),
    #[error("no producer id could be handed out: {0}")]
    ProducerIds(String),
    /// The tenant holds as many transactional ids as it may (`max_transactional_ids`).
    #[error("the tenant has {0} transactional ids, as many as it may hold")]
    TooManyIds(usize),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("encoding the transaction state: {0}")]
    Batch(#[from] skein_log::batch::BatchError),
}

impl TxnError {
    /// The error code for a request of `version`, where PRODUCER_FENCED exists from
    /// `fenced_since` on (INVALID_PRODUCER_EPOCH before).
    pub(crate) fn code(&self, version: i16, fenced_since: i16) -> ResponseError {
        match self {
            Self::NotCoordinator => ResponseError::NotCoordinator,
            Self::NotAvailable(_) => ResponseError::CoordinatorNotAvailable,
            Self::Fenced if version >= fenced_since => ResponseError::ProducerFenced,
            Self::Fenced => ResponseError::InvalidProducerEpoch,
            Self::ProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            Self::Concurrent => ResponseError::ConcurrentTransactions,
            Self::InvalidState(_) => ResponseError::InvalidTxnState,
            Self::InvalidTimeout(_) => ResponseError::InvalidTransactionTimeout,
            Self::ProducerIds(_) => ResponseError::CoordinatorNotAvailable,
            Self::TooManyIds(_) => ResponseError::PolicyViolation,
            Self::Log(_) | Self::Batch(_) => ResponseError::UnknownServerError,
        }
    }

    /// The error a Produce of a transactional batch gets when its transaction does not
    /// verify: the epoch fenced, or no open transaction with the partition in it.
    pub(crate) fn produce_code(&self) -> ResponseError {
        match self {
            Self::Fenced => ResponseError::InvalidProducerEpoch,
            Self::ProducerIdMapping => ResponseError::InvalidProducerIdMapping,
            Self::InvalidState(_) => ResponseError::InvalidTxnState,
            other => other.code(0, 0),
        }
    }

    fn of_partition(e: PartitionError) -> Self {
        match e {
            PartitionError::NotLeader { .. } | PartitionError::FencedLeaderEpoch { .. } => {
                Self::NotCoordinator
            }
            PartitionError::Log(e) => Self::Log(e),
            e => Self::NotAvailable(e.to_string()),
        }
    }
}

/// The coordinator's state as loaded from the log.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The partition's leader epoch it was loaded in (0 for a local log); `None` until
    /// this broker leads it. Markers carry it as their coordinator epoch.
    loaded_in: Option<i32>,
    txns: HashMap<String, TxnMeta>,
}

/// A transaction as an operator sees it (DescribeTransactions, ListTransactions).
#[derive(Clone, Debug)]
pub(crate) struct TxnView {
    pub(crate) transactional_id: String,
    pub(crate) meta: TxnMeta,
}

/// One transactional id's turn, held from the start of a request until its effects are
/// written (for EndTxn, until the markers and the completed state are).
type Turn = OwnedMutexGuard<()>;

#[derive(Debug)]
pub(crate) struct TxnCoordinator {
    /// The state topic's name as the broker keeps it: `__transaction_state`, or a tenant's
    /// `<tenant>.__transaction_state` on a broker serving every tenant.
    topic: String,
    /// A broker on its own: the local log. `None` in a cluster.
    local: Option<SharedLog>,
    /// What the log holds, held only for reads and updates in memory (never across a
    /// write to the log).
    state: parking_lot::Mutex<State>,
    /// Each transactional id's turn (see [`Turn`]); an entry no request holds is dropped by
    /// [`TxnCoordinator::tick`].
    turns: parking_lot::Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// The scope of the tenant's requests, to ask the controller for the state topic.
    scope: crate::scope::Scope,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl TxnCoordinator {
    /// A broker on its own: opens the local `__transaction_state` and replays it.
    pub(crate) fn open(logs: &LogManager) -> anyhow::Result<Self> {
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            segment_bytes: 100 * 1024 * 1024,
            ..LogConfig::default()
        };
        let log =
            logs.get_or_create(&TopicPartition::new(super::TOPIC, 0), Some(config.clone()))?;
        log.write().set_config(config)?;
        let mut state = replay(&log.read())?;
        state.loaded_in = Some(0);
        Ok(Self {
            topic: super::TOPIC.to_owned(),
            local: Some(log),
            state: parking_lot::Mutex::new(state),
            turns: parking_lot::Mutex::default(),
            scope: crate::scope::Scope::Plain,
        })
    }

    /// A cluster's broker: nothing is loaded until it leads partition 0 of the scope's
    /// `__transaction_state`.
    pub(crate) fn replicated(scope: crate::scope::Scope) -> Self {
        Self {
            topic: scope.qualify(super::TOPIC).into_owned(),
            local: None,
            state: parking_lot::Mutex::default(),
            turns: parking_lot::Mutex::default(),
            scope,
        }
    }

    /// The leader epoch of the state this broker answers from, once it may answer for the
    /// tenant's transactions: on its own always (0); in a cluster while it leads the state
    /// partition, loading the state from the log the first time in each leader epoch.
    async fn take_up(&self, broker: &Broker) -> Result<i32, TxnError> {
        if self.local.is_some() {
            return Ok(0);
        }
        if broker
            .topics
            .internal_topic(&self.scope, super::TOPIC)
            .await
            .is_none()
        {
            return Err(TxnError::NotAvailable(
                "the transaction state topic does not exist yet".to_owned(),
            ));
        }
        let partition = broker
            .replicas
            .leader_of_any(&self.topic, 0, -1)
            .map_err(TxnError::of_partition)?;
        let epoch = partition.leader_epoch();
        let mut state = self.state.lock();
        if state.loaded_in == Some(epoch) {
            return Ok(epoch);
        }
        let mut loaded = partition.with_log(replay)?;
        loaded.loaded_in = Some(epoch);
        tracing::info!(
            epoch,
            topic = %self.topic,
            transactions = loaded.txns.len(),
            "coordinating the transactions of a state topic"
        );
        *state = loaded;
        Ok(epoch)
    }

    /// Waits for `transactional_id`'s turn, then for the state: the epoch it is loaded in.
    async fn turn_of(
        &self,
        broker: &Broker,
        transactional_id: &str,
    ) -> Result<(Turn, i32), TxnError> {
        let turn = Arc::clone(
            self.turns
                .lock()
                .entry(transactional_id.to_owned())
                .or_default(),
        );
        let turn = tokio::time::timeout(TURN_WAIT, turn.lock_owned())
            .await
            .map_err(|_| TxnError::Concurrent)?;
        let epoch = self.take_up(broker).await?;
        Ok((turn, epoch))
    }

    /// The state of `transactional_id` as loaded in `epoch`.
    fn meta(&self, epoch: i32, transactional_id: &str) -> Result<Option<TxnMeta>, TxnError> {
        let state = self.state.lock();
        if state.loaded_in != Some(epoch) {
            return Err(TxnError::NotCoordinator);
        }
        Ok(state.txns.get(transactional_id).cloned())
    }

    /// Whether this broker coordinates the tenant's transactions now (FindCoordinator).
    pub(crate) async fn leader(&self, broker: &Broker) -> Option<i32> {
        if self.local.is_some() {
            return Some(broker.config.node_id);
        }
        broker
            .topics
            .internal_topic(&self.scope, super::TOPIC)
            .await
            .and_then(|info| info.placement_of(0, broker.config.node_id))
            .map(|p| p.leader)
            .filter(|leader| *leader >= 0)
    }

    /// InitProducerId with a transactional id: a producer id and a new epoch, fencing every
    /// older producer of the id. An open transaction of the id is aborted first; one being
    /// completed is finished. `expected` is the id and epoch the producer had (KIP-360),
    /// which must be the current ones.
    pub(crate) async fn init_producer(
        &self,
        broker: &Broker,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        if timeout_ms <= 0 || timeout_ms > broker.config.transaction_max_timeout_ms {
            return Err(TxnError::InvalidTimeout(timeout_ms));
        }
        let (_turn, epoch) = self.turn_of(broker, transactional_id).await?;
        let now = now_ms();
        let meta = match self.meta(epoch, transactional_id)? {
            None => {
                let held = self.state.lock().txns.len();
                if held >= broker.config.max_transactional_ids {
                    return Err(TxnError::TooManyIds(held));
                }
                let producer_id = broker
                    .producer_ids
                    .allocate()
                    .await
                    .map_err(|e| TxnError::ProducerIds(e.to_string()))?;
                TxnMeta {
                    producer_id,
                    producer_epoch: 0,
                    timeout_ms,
                    status: TxnStatus::Empty,
                    partitions: BTreeSet::new(),
                    last_update_ms: now,
                    start_ms: -1,
                }
            }
            Some(mut meta) => {
                if let Some(expected) = expected {
                    if expected != (meta.producer_id, meta.producer_epoch) {
                        return Err(TxnError::Fenced);
                    }
                }
                match meta.status {
                    TxnStatus::Ongoing => {
                        // Fence the old producer, abort its transaction in the new epoch.
                        meta = self.bump(broker, meta).await?;
                        meta = self
                            .prepare(broker, epoch, transactional_id, meta, false)
                            .await?;
                        meta = self.complete(broker, epoch, transactional_id, meta).await?;
                        if matches!(meta.status, TxnStatus::PrepareAbort) {
                            return Err(TxnError::Concurrent);
                        }
                    }
                    TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => {
                        meta = self.complete(broker, epoch, transactional_id, meta).await?;
                        if !matches!(
                            meta.status,
                            TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
                        ) {
                            return Err(TxnError::Concurrent);
                        }
                        meta = self.bump(broker, meta).await?;
                    }
                    _ => meta = self.bump(broker, meta).await?,
                }
                TxnMeta {
                    timeout_ms,
                    status: TxnStatus::Empty,
                    partitions: BTreeSet::new(),
                    last_update_ms: now,
                    start_ms: -1,
                    ..meta
                }
            }
        };
        self.persist(broker, epoch, transactional_id, &meta).await?;
        Ok((meta.producer_id, meta.producer_epoch))
    }

    /// The next epoch of the producer, or a new producer id once the epochs run out.
    async fn bump(&self, broker: &Broker, meta: TxnMeta) -> Result<TxnMeta, TxnError> {
        if meta.producer_epoch < i16::MAX - 1 {
            return Ok(TxnMeta {
                producer_epoch: meta.producer_epoch + 1,
                ..meta
            });
        }
        let producer_id = broker
            .producer_ids
            .allocate()
            .await
            .map_err(|e| TxnError::ProducerIds(e.to_string()))?;
        Ok(TxnMeta {
            producer_id,
            producer_epoch: 0,
            ..meta
        })
    }

    fn check_producer(
        meta: &TxnMeta,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), TxnError> {
        if meta.producer_id != producer_id {
            return Err(TxnError::ProducerIdMapping);
        }
        if meta.producer_epoch != producer_epoch {
            return Err(TxnError::Fenced);
        }
        Ok(())
    }

    /// AddPartitionsToTxn and AddOffsetsToTxn: the partitions (by kept names) join the
    /// producer's transaction, which begins with the first of them. It waits for the
    /// previous transaction of the id to be completed.
    pub(crate) async fn add_partitions(
        &self,
        broker: &Broker,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), TxnError> {
        let (_turn, epoch) = self.turn_of(broker, transactional_id).await?;
        let meta = self
            .meta(epoch, transactional_id)?
            .ok_or(TxnError::ProducerIdMapping)?;
        Self::check_producer(&meta, producer_id, producer_epoch)?;
        let now = now_ms();
        let mut next = match meta.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => return Err(TxnError::Concurrent),
            TxnStatus::Ongoing => {
                if partitions.iter().all(|p| meta.partitions.contains(p)) {
                    return Ok(());
                }
                meta
            }
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => TxnMeta {
                status: TxnStatus::Ongoing,
                partitions: BTreeSet::new(),
                start_ms: now,
                ..meta
            },
        };
        next.partitions.extend(partitions.iter().cloned());
        next.last_update_ms = now;
        self.persist(broker, epoch, transactional_id, &next).await
    }

    /// Whether `producer` (id, epoch) of `transactional_id` has a transaction open that
    /// includes `partition` (a name as the broker keeps it): a partition's leader asks before
    /// it takes the first transactional batch of a transaction (as KIP-890's verification
    /// does), so no batch opens a transaction its coordinator does not know of, which would
    /// hold back the partition's stable offset with nothing to ever end it. It reads the
    /// state without waiting for the id's turn: a partition joins a transaction only once
    /// that is stored.
    pub(crate) async fn verify(
        &self,
        broker: &Broker,
        transactional_id: &str,
        producer: (i64, i16),
        partition: &(String, i32),
    ) -> Result<(), TxnError> {
        let epoch = self.take_up(broker).await?;
        let meta = self
            .meta(epoch, transactional_id)?
            .ok_or(TxnError::ProducerIdMapping)?;
        Self::check_producer(&meta, producer.0, producer.1)?;
        if meta.status != TxnStatus::Ongoing || !meta.partitions.contains(partition) {
            return Err(TxnError::InvalidState(meta.status.name()));
        }
        Ok(())
    }

    /// EndTxn: commits or aborts the producer's transaction. It answers once the decision is
    /// stored; each partition then gets its marker, in the id's turn. Markers that cannot be
    /// written now are written by [`TxnCoordinator::tick`]; the decision stands.
    pub(crate) async fn end(
        self: &Arc<Self>,
        broker: &Broker,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        let (turn, epoch) = self.turn_of(broker, transactional_id).await?;
        let meta = self
            .meta(epoch, transactional_id)?
            .ok_or(TxnError::ProducerIdMapping)?;
        Self::check_producer(&meta, producer_id, producer_epoch)?;
        match (meta.status, commit) {
            (TxnStatus::Ongoing, _) => {
                let prepared = self
                    .prepare(broker, epoch, transactional_id, meta, commit)
                    .await?;
                match broker.shared() {
                    Some(shared) => {
                        let coordinator = Arc::clone(self);
                        let id = transactional_id.to_owned();
                        tokio::spawn(async move {
                            let _turn: Turn = turn;
                            if let Err(error) =
                                coordinator.complete(&shared, epoch, &id, prepared).await
                            {
                                tracing::warn!(transactional_id = %id, %error, "transaction not completed yet; retrying");
                            }
                        });
                    }
                    // The broker is shutting down: whoever coordinates next finishes it.
                    None => {
                        self.complete(broker, epoch, transactional_id, prepared)
                            .await?;
                    }
                }
                Ok(())
            }
            // A retry of an EndTxn that was answered, or lost on the way back.
            (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) => Ok(()),
            // Decided, its markers not written yet (they are retried).
            (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false) => {
                Err(TxnError::Concurrent)
            }
            (status, _) => Err(TxnError::InvalidState(status.name())),
        }
    }

    /// Stores the decision (PrepareCommit or PrepareAbort).
    async fn prepare(
        &self,
        broker: &Broker,
        epoch: i32,
        transactional_id: &str,
        meta: TxnMeta,
        commit: bool,
    ) -> Result<TxnMeta, TxnError> {
        let prepared = TxnMeta {
            status: if commit {
                TxnStatus::PrepareCommit
            } else {
                TxnStatus::PrepareAbort
            },
            last_update_ms: now_ms(),
            ..meta
        };
        self.persist(broker, epoch, transactional_id, &prepared)
            .await?;
        Ok(prepared)
    }

    /// Writes the markers of a decided transaction and, once every partition has its own,
    /// stores it complete. Answers the state it is left in (still prepared when a marker
    /// could not be written).
    async fn complete(
        &self,
        broker: &Broker,
        epoch: i32,
        transactional_id: &str,
        meta: TxnMeta,
    ) -> Result<TxnMeta, TxnError> {
        let (kind, done) = match meta.status {
            TxnStatus::PrepareCommit => (MarkerKind::Commit, TxnStatus::CompleteCommit),
            TxnStatus::PrepareAbort => (MarkerKind::Abort, TxnStatus::CompleteAbort),
            _ => return Ok(meta),
        };
        if let Err(error) = markers::write(
            broker,
            &meta.partitions,
            (meta.producer_id, meta.producer_epoch),
            kind,
            epoch,
        )
        .await
        {
            tracing::warn!(
                %transactional_id,
                %error,
                "transaction markers not written yet; retrying"
            );
            return Ok(meta);
        }
        let completed = TxnMeta {
            status: done,
            partitions: BTreeSet::new(),
            last_update_ms: now_ms(),
            start_ms: -1,
            ..meta
        };
        self.persist(broker, epoch, transactional_id, &completed)
            .await?;
        Ok(completed)
    }

    /// Aborts the transactions open longer than their timeout (fencing their producers with
    /// a new epoch, as Kafka does) and finishes those decided but not yet marked. An id
    /// busy with a request is left for the next tick.
    pub(crate) async fn tick(&self, broker: &Broker) -> Result<(), TxnError> {
        self.turns
            .lock()
            .retain(|_, turn| Arc::strong_count(turn) > 1);
        if self.local.is_none() {
            // Looked up without creating it: until a transactional producer needs the state
            // topic, there is nothing to time out.
            let leader = broker
                .topics
                .get(&self.topic)
                .and_then(|info| info.placement_of(0, broker.config.node_id))
                .map(|p| p.leader);
            if leader != Some(broker.config.node_id) {
                return Ok(());
            }
        }
        let epoch = self.take_up(broker).await?;
        let now = now_ms();
        let due = |meta: &TxnMeta| match meta.status {
            TxnStatus::Ongoing => meta.start_ms.saturating_add(i64::from(meta.timeout_ms)) <= now,
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => true,
            _ => false,
        };
        for id in self.ids_where(&due) {
            let Some(_turn) = self.try_turn(&id) else {
                continue;
            };
            // Read again in the id's turn: a request may have moved it on.
            let Some(meta) = self.meta(epoch, &id)?.filter(|meta| due(meta)) else {
                continue;
            };
            let moved = async {
                if meta.status == TxnStatus::Ongoing {
                    tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                    let fenced = self.bump(broker, meta).await?;
                    let prepared = self.prepare(broker, epoch, &id, fenced, false).await?;
                    self.complete(broker, epoch, &id, prepared).await
                } else {
                    self.complete(broker, epoch, &id, meta).await
                }
            };
            // One transaction whose markers cannot be written yet holds up no other.
            match moved.await {
                Ok(_) => {}
                Err(TxnError::NotCoordinator) => return Err(TxnError::NotCoordinator),
                Err(e) => tracing::warn!(
                    transactional_id = %id,
                    error = %e,
                    "a transaction's end is not all written yet; trying again"
                ),
            }
        }
        self.expire_idle(broker, epoch, now).await
    }

    /// The transactional ids whose state `matches` now.
    fn ids_where(&self, matches: &dyn Fn(&TxnMeta) -> bool) -> Vec<String> {
        self.state
            .lock()
            .txns
            .iter()
            .filter(|(_, meta)| matches(meta))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The id's turn, unless a request holds it (the tick comes back to the id later).
    fn try_turn(&self, id: &str) -> Option<OwnedMutexGuard<()>> {
        let turn = Arc::clone(self.turns.lock().entry(id.to_owned()).or_default());
        turn.try_lock_owned().ok()
    }

    /// Forgets the transactional ids with no transaction open that have not been used for
    /// `transactional.id.expiration.ms` (Kafka's), with a tombstone in the state log, so a
    /// tenant's ids do not pile up for ever.
    async fn expire_idle(&self, broker: &Broker, epoch: i32, now: i64) -> Result<(), TxnError> {
        let expiration = i64::try_from(broker.config.transactional_id_expiration.as_millis())
            .unwrap_or(i64::MAX);
        let idle = |meta: &TxnMeta| {
            matches!(
                meta.status,
                TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
            ) && meta.last_update_ms.saturating_add(expiration) <= now
        };
        for id in self.ids_where(&idle) {
            let Some(_turn) = self.try_turn(&id) else {
                continue;
            };
            // Read again in the id's turn: a request may have used it since.
            if self.meta(epoch, &id)?.filter(|meta| idle(meta)).is_none() {
                continue;
            }
            match self.persist_record(broker, epoch, &id, None).await {
                Ok(()) => {
                    tracing::info!(transactional_id = %id, "expired an idle transactional id")
                }
                Err(TxnError::NotCoordinator) => return Err(TxnError::NotCoordinator),
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "failed to expire a transactional id")
                }
            }
        }
        Ok(())
    }

    /// Every transactional id this coordinator knows, with its state.
    pub(crate) async fn list(&self, broker: &Broker) -> Result<Vec<TxnView>, TxnError> {
        let epoch = self.take_up(broker).await?;
        let state = self.state.lock();
        if state.loaded_in != Some(epoch) {
            return Err(TxnError::NotCoordinator);
        }
        let mut views: Vec<TxnView> = state
            .txns
            .iter()
            .map(|(id, meta)| TxnView {
                transactional_id: id.clone(),
                meta: meta.clone(),
            })
            .collect();
        views.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(views)
    }

    /// Writes the new state of a transactional id to the log (with `acks=all` in a
    /// cluster), then keeps it in memory, if the state is still the one of `epoch`.
    async fn persist(
        &self,
        broker: &Broker,
        epoch: i32,
        transactional_id: &str,
        meta: &TxnMeta,
    ) -> Result<(), TxnError> {
        self.persist_record(broker, epoch, transactional_id, Some(meta))
            .await
    }

    /// Writes a transactional id's state, or its tombstone (`None`: the id is forgotten),
    /// as [`Self::persist`] says.
    async fn persist_record(
        &self,
        broker: &Broker,
        epoch: i32,
        transactional_id: &str,
        meta: Option<&TxnMeta>,
    ) -> Result<(), TxnError> {
        let mut writer = BatchWriter::new();
        let key = state_record::encode_key(transactional_id);
        let value = meta.map(state_record::encode_value);
        writer.push(now_ms(), Some(&key), value.as_deref(), &[]);
        let mut batch = writer.finish(Compression::None, ProducerFields::NONE)?;
        if let Some(log) = &self.local {
            log.write().append(&mut batch, 0)?;
        } else {
            let partition = broker
                .replicas
                .leader_of_any(&self.topic, 0, epoch)
                .map_err(TxnError::of_partition)?;
            let appended = partition
                .append(&batch, -1)
                .map_err(TxnError::of_partition)?;
            let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
            match partition.replicated(appended.end_offset, deadline).await {
                Replicated::BelowMinInsync => {
                    return Err(TxnError::NotAvailable(
                        "too few in-sync replicas after the write".into(),
                    ))
                }
                Replicated::Done => {}
                Replicated::TimedOut => {
                    return Err(TxnError::NotAvailable(
                        "the in-sync replicas did not confirm the write in time".into(),
                    ))
                }
                Replicated::NotLeader { .. } => {
                    // Whoever leads now loads the state afresh.
                    let mut state = self.state.lock();
                    if state.loaded_in == Some(epoch) {
                        state.loaded_in = None;
                    }
                    return Err(TxnError::NotCoordinator);
                }
            }
        }
        let mut state = self.state.lock();
        if state.loaded_in != Some(epoch) {
            // Loaded again since (leadership came back): what the log says stands.
            return Err(TxnError::NotCoordinator);
        }
        match meta {
            Some(meta) => {
                state.txns.insert(transactional_id.to_owned(), meta.clone());
            }
            None => {
                state.txns.remove(transactional_id);
            }
        }
        Ok(())
    }
}

/// Reads every record of a state log: the last value of each transactional id wins, a
/// null value forgets it, and a record that does not decode is skipped with a warning.
fn replay(log: &Log) -> Result<State, TxnError> {
    let mut state = State::default();
    let mut position = log.log_start_offset();
    while position < log.log_end_offset() {
        let slice = log.read(position, 1 << 20, None)?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.to_verified_bytes()?;
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let decoded = DecodedRecords::decode(rest, skein_log::batch::MAX_DECOMPRESSED)?;
            for record in decoded.iter() {
                let record = record?;
                let Some(Ok(id)) = record.key.map(state_record::decode_key) else {
                    continue;
                };
                match record.value.map(state_record::decode_value) {
                    Some(Ok(meta)) => {
                        state.txns.insert(id, meta);
                    }
                    Some(Err(error)) => {
                        tracing::warn!(transactional_id = %id, %error, "skipping a transaction state record");
                    }
                    None => {
                        state.txns.remove(&id);
                    }
                }
            }
            rest = &rest[decoded.header.size()..];
        }
        position = slice.last_offset + 1;
    }
    Ok(state)
}
