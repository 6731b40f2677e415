//! Exactly-once consumption into PostgreSQL (feature `postgres`): the application applies a
//! batch of records in a database transaction that also stores, for every partition of the
//! batch, the offset to read next; the positions live in the application's database, never
//! in Kafka, so a batch and its offsets commit or vanish together.
//!
//! Ownership is fenced. [`ExactlyOnce::claim`] raises each partition's owner epoch in the
//! table, and every transaction [`ExactlyOnce::begin`] opens first locks the partitions'
//! rows and checks that their epochs are still this consumer's: a consumer whose partitions
//! were claimed by another gets [`ExactlyOnceError::Fenced`] and commits nothing. Rows stay
//! locked until the transaction ends, so a claim waits for a transaction in progress; and
//! a transaction left idle (its process paused or gone) is ended by PostgreSQL after
//! [`ExactlyOnceConfig::idle_timeout`], releasing the rows to the next owner.
//!
//! ```no_run
//! use skein_client::exactly_once::{ExactlyOnce, ExactlyOnceConfig, Start};
//! # async fn run(client: skein_client::Client, pool: sqlx::PgPool)
//! #     -> Result<(), skein_client::exactly_once::ExactlyOnceError> {
//! ExactlyOnce::install(&pool).await?;
//! let config = ExactlyOnceConfig::new("billing", "orders");
//! let mut consumer = ExactlyOnce::claim(client, pool, config, &[0, 1, 2], Start::Earliest).await?;
//! loop {
//!     let batch = consumer.poll().await?;
//!     let mut tx = consumer.begin().await?;
//!     for record in &batch.records {
//!         sqlx::query("INSERT INTO orders (id, body) VALUES ($1, $2)")
//!             .bind(record.offset)
//!             .bind(record.value.as_deref())
//!             .execute(tx.connection())
//!             .await?;
//!     }
//!     consumer.commit(tx, &batch).await?;
//! }
//! # }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, Row, Transaction};

use crate::{Client, ClientError, ConsumerRecord, FetchOptions, Isolation, OffsetSpec};

/// The table positions and owner epochs are kept in, in the application's database.
pub const OFFSETS_TABLE: &str = "skein_offsets";

/// Why a batch could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum ExactlyOnceError {
    /// Another consumer claimed the partition since this one did: this consumer must stop
    /// (and, to go on, claim again).
    #[error(
        "partition {topic}-{partition} now belongs to owner epoch {current:?}, not this \
         consumer's {mine}: another consumer claimed it"
    )]
    Fenced {
        topic: String,
        partition: i32,
        mine: i64,
        current: Option<i64>,
    },
    /// A batch names a partition this consumer does not own.
    #[error("partition {topic}-{partition} is not one this consumer claimed")]
    NotOwned { topic: String, partition: i32 },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Where a partition with no stored position starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
}

/// Who consumes what, and the bounds of each read and transaction.
#[derive(Debug, Clone)]
pub struct ExactlyOnceConfig {
    /// The name positions are stored under (as a group id is in Kafka).
    pub consumer: String,
    pub topic: String,
    /// How long a poll waits for records when there are none.
    pub max_wait: Duration,
    /// About the most bytes one poll reads from one partition.
    pub partition_max_bytes: i32,
    /// PostgreSQL ends a transaction of this consumer idle for longer
    /// (`idle_in_transaction_session_timeout`), so a paused process cannot hold its
    /// partitions from the next owner.
    pub idle_timeout: Duration,
    /// How long a claim or a transaction waits for another's row locks.
    pub lock_timeout: Duration,
}

impl ExactlyOnceConfig {
    pub fn new(consumer: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            consumer: consumer.into(),
            topic: topic.into(),
            max_wait: Duration::from_millis(500),
            partition_max_bytes: 1024 * 1024,
            idle_timeout: Duration::from_secs(10),
            lock_timeout: Duration::from_secs(30),
        }
    }
}

/// Records read by one poll, and each polled partition's offset to read next.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// In offset order per partition.
    pub records: Vec<ConsumerRecord>,
    /// Every polled partition's next offset (past control records and aborted
    /// transactions too, so it can move with no records).
    pub next_offsets: BTreeMap<i32, i64>,
}

impl Batch {
    /// Whether committing this batch would move no position.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.next_offsets.is_empty()
    }
}

/// A partition this consumer owns.
#[derive(Debug, Clone, Copy)]
struct Owned {
    epoch: i64,
    next_offset: i64,
}

/// A consumer of some partitions of one topic whose positions are stored in PostgreSQL with
/// the rows it applies.
#[derive(Debug)]
pub struct ExactlyOnce {
    client: Client,
    pool: PgPool,
    config: ExactlyOnceConfig,
    owned: BTreeMap<i32, Owned>,
}

/// A transaction of the application's database that [`ExactlyOnce::commit`] ends with the
/// batch's positions. Dropped without commit, it rolls back.
#[derive(Debug)]
pub struct ApplyTransaction {
    tx: Transaction<'static, Postgres>,
}

impl ApplyTransaction {
    /// The connection to apply records on, inside the transaction.
    pub fn connection(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}

fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis().max(1))
}

impl ExactlyOnce {
    /// Creates the positions table if it is not there (safe to call from many processes at
    /// once).
    pub async fn install(pool: &PgPool) -> Result<(), ExactlyOnceError> {
        let mut tx = pool.begin().await?;
        // Two CREATE TABLE IF NOT EXISTS at once can still collide on the catalog.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(OFFSETS_TABLE)
            .execute(&mut *tx)
            .await?;
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (
                consumer text NOT NULL,
                topic text NOT NULL,
                partition integer NOT NULL,
                next_offset bigint,
                owner_epoch bigint NOT NULL,
                PRIMARY KEY (consumer, topic, partition)
            )"
        ))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes `partitions` over: raises each one's owner epoch (fencing every earlier owner)
    /// and reads its stored position; a partition with none starts at `start`.
    pub async fn claim(
        client: Client,
        pool: PgPool,
        config: ExactlyOnceConfig,
        partitions: &[i32],
        start: Start,
    ) -> Result<Self, ExactlyOnceError> {
        let mut owned = BTreeMap::new();
        let mut tx = pool.begin().await?;
        sqlx::query(&format!(
            "SET LOCAL lock_timeout = '{}'",
            millis(config.lock_timeout)
        ))
        .execute(&mut *tx)
        .await?;
        for &partition in partitions {
            let row = sqlx::query(&format!(
                "INSERT INTO {OFFSETS_TABLE} (consumer, topic, partition, next_offset, owner_epoch)
                 VALUES ($1, $2, $3, NULL, 1)
                 ON CONFLICT (consumer, topic, partition)
                 DO UPDATE SET owner_epoch = {OFFSETS_TABLE}.owner_epoch + 1
                 RETURNING next_offset, owner_epoch"
            ))
            .bind(&config.consumer)
            .bind(&config.topic)
            .bind(partition)
            .fetch_one(&mut *tx)
            .await?;
            let stored: Option<i64> = row.try_get("next_offset")?;
            let epoch: i64 = row.try_get("owner_epoch")?;
            owned.insert(partition, (epoch, stored));
        }
        tx.commit().await?;
        let mut resolved = BTreeMap::new();
        for (partition, (epoch, stored)) in owned {
            let next_offset = match stored {
                Some(offset) => offset,
                None => {
                    let spec = match start {
                        Start::Earliest => OffsetSpec::Earliest,
                        Start::Latest => OffsetSpec::Latest,
                    };
                    client
                        .list_offset(&config.topic, partition, spec)
                        .await?
                        .map_or(0, |listed| listed.offset)
                }
            };
            resolved.insert(partition, Owned { epoch, next_offset });
        }
        Ok(Self {
            client,
            pool,
            config,
            owned: resolved,
        })
    }

    /// The topic this consumer reads.
    pub fn topic(&self) -> &str {
        &self.config.topic
    }

    /// The partitions this consumer owns, with its epoch and the offset it reads next.
    pub fn positions(&self) -> BTreeMap<i32, (i64, i64)> {
        self.owned
            .iter()
            .map(|(p, o)| (*p, (o.epoch, o.next_offset)))
            .collect()
    }

    /// Reads committed records (`read_committed`) from every owned partition, from the
    /// positions of the last commit; waits up to `max_wait` when there are none.
    pub async fn poll(&self) -> Result<Batch, ExactlyOnceError> {
        let options = FetchOptions::default()
            .with_isolation(Isolation::ReadCommitted)
            .with_max_wait(self.config.max_wait)
            .with_partition_max_bytes(self.config.partition_max_bytes)
            .with_max_bytes(self.config.partition_max_bytes);
        let fetches = self.owned.iter().map(|(&partition, owned)| {
            let options = &options;
            async move {
                self.client
                    .fetch(&self.config.topic, partition, owned.next_offset, options)
                    .await
                    .map(|fetched| (partition, owned.next_offset, fetched))
            }
        });
        let mut batch = Batch::default();
        for fetched in futures::future::join_all(fetches).await {
            let (partition, from, fetched) = fetched?;
            if fetched.next_offset > from {
                batch.next_offsets.insert(partition, fetched.next_offset);
            }
            batch.records.extend(fetched.records);
        }
        Ok(batch)
    }

    /// Opens a transaction for a batch: locks the owned partitions' rows and checks they
    /// are still this consumer's ([`ExactlyOnceError::Fenced`] if not).
    pub async fn begin(&self) -> Result<ApplyTransaction, ExactlyOnceError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(&format!(
            "SET LOCAL idle_in_transaction_session_timeout = '{}'",
            millis(self.config.idle_timeout)
        ))
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "SET LOCAL lock_timeout = '{}'",
            millis(self.config.lock_timeout)
        ))
        .execute(&mut *tx)
        .await?;
        let partitions: Vec<i32> = self.owned.keys().copied().collect();
        let rows = sqlx::query(&format!(
            "SELECT partition, owner_epoch FROM {OFFSETS_TABLE}
             WHERE consumer = $1 AND topic = $2 AND partition = ANY($3)
             ORDER BY partition FOR UPDATE"
        ))
        .bind(&self.config.consumer)
        .bind(&self.config.topic)
        .bind(&partitions)
        .fetch_all(&mut *tx)
        .await?;
        let mut current = BTreeMap::new();
        for row in rows {
            current.insert(
                row.try_get::<i32, _>("partition")?,
                row.try_get::<i64, _>("owner_epoch")?,
            );
        }
        for (partition, owned) in &self.owned {
            let now = current.get(partition).copied();
            if now != Some(owned.epoch) {
                return Err(self.fenced(*partition, owned.epoch, now));
            }
        }
        Ok(ApplyTransaction { tx })
    }

    /// Stores the batch's positions in `tx` and commits it: the rows applied in it and the
    /// positions after them become durable together, or neither does. Only then does the
    /// consumer read on from the new positions.
    pub async fn commit(
        &mut self,
        mut apply: ApplyTransaction,
        batch: &Batch,
    ) -> Result<(), ExactlyOnceError> {
        for (&partition, &next_offset) in &batch.next_offsets {
            let owned = self
                .owned
                .get(&partition)
                .ok_or_else(|| ExactlyOnceError::NotOwned {
                    topic: self.config.topic.clone(),
                    partition,
                })?;
            let updated = sqlx::query(&format!(
                "UPDATE {OFFSETS_TABLE} SET next_offset = $4
                 WHERE consumer = $1 AND topic = $2 AND partition = $3 AND owner_epoch = $5"
            ))
            .bind(&self.config.consumer)
            .bind(&self.config.topic)
            .bind(partition)
            .bind(next_offset)
            .bind(owned.epoch)
            .execute(&mut *apply.tx)
            .await?;
            if updated.rows_affected() != 1 {
                return Err(self.fenced(partition, owned.epoch, None));
            }
        }
        apply.tx.commit().await?;
        for (partition, next_offset) in &batch.next_offsets {
            if let Some(owned) = self.owned.get_mut(partition) {
                owned.next_offset = *next_offset;
            }
        }
        Ok(())
    }

    fn fenced(&self, partition: i32, mine: i64, current: Option<i64>) -> ExactlyOnceError {
        ExactlyOnceError::Fenced {
            topic: self.config.topic.clone(),
            partition,
            mine,
            current,
        }
    }
}
