//! A sink worker: owns some partitions of a sink's topics and, round after round, reads
//! their committed records, writes the rows, and stores the partitions' next offsets with
//! the rows in one transaction of the target database (`skein_client::exactly_once`).
//! Records that do not fit go to the dead-letter topic before that transaction commits.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use skein_client::exactly_once::{Batch, ExactlyOnce, ExactlyOnceConfig, Start};
use skein_client::{Client, ConsumerRecord, ProduceRecord, Producer, ProducerConfig};
use skein_ops::prometheus_client::metrics::histogram::Histogram;
use sqlx::postgres::PgPool;

use crate::row::{change_of, Change};
use crate::spec::SinkSpec;
use crate::target::{check, inspect, TableShape};
use crate::writer::Writer;
use crate::SinkError;

/// Header names on dead-lettered records.
pub const ERROR_HEADER: &str = "skein.sink.error";
pub const SOURCE_HEADERS: [&str; 4] = [
    "skein.sink.name",
    "skein.sink.topic",
    "skein.sink.partition",
    "skein.sink.offset",
];

/// What a worker did in one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionCounts {
    /// Rows written (inserted or upserted; a key's last change in a batch counts once).
    pub rows: u64,
    pub dead_lettered: u64,
}

/// What a worker has done, shared with whoever reports the sink's status.
#[derive(Debug, Default)]
pub struct SinkStats {
    pub rows: AtomicU64,
    pub dead_lettered: AtomicU64,
    /// The same, per partition.
    pub counts: Mutex<BTreeMap<(String, i32), PartitionCounts>>,
    /// Each owned partition's stored next offset.
    pub positions: Mutex<BTreeMap<(String, i32), i64>>,
    pub last_error: Mutex<Option<String>>,
    /// Rows per second, smoothed over the last rounds.
    rate: Mutex<(Option<Instant>, f64)>,
    /// Where each transaction's time from begin to commit is observed, if anywhere.
    transactions: Option<Histogram>,
}

impl SinkStats {
    /// Stats whose transactions are timed in `histogram`.
    pub fn timed(histogram: Histogram) -> Self {
        Self {
            transactions: Some(histogram),
            ..Self::default()
        }
    }

    pub fn rows_per_sec(&self) -> f64 {
        self.rate.lock().1
    }

    fn count(&self, rows: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
        let mut rate = self.rate.lock();
        let now = Instant::now();
        if let Some(last) = rate.0 {
            let elapsed = now.duration_since(last).as_secs_f64().max(1e-3);
            let current = rows as f64 / elapsed;
            // About the last few seconds' worth.
            let weight = (elapsed / 5.0).min(1.0);
            rate.1 = rate.1 * (1.0 - weight) + current * weight;
        }
        rate.0 = Some(now);
    }
}

/// Checks `spec` and its target table, and installs the positions table: everything a
/// sink needs before it runs, as errors a caller can show.
pub async fn prepare(pool: &PgPool, spec: &SinkSpec) -> Result<TableShape, SinkError> {
    spec.validate()?;
    let shape = inspect(pool, &spec.table).await?;
    check(spec, &shape)?;
    ExactlyOnce::install(pool).await?;
    Ok(shape)
}

/// The reason a record an operator asked the sink to skip carries as a dead letter.
const SKIPPED: &str = "skipped: an operator asked the sink to pass this record over";

/// A worker of one sink over some partitions.
#[derive(Debug)]
pub struct SinkWorker {
    spec: SinkSpec,
    shape: TableShape,
    writer: Writer,
    producer: Producer,
    consumers: Vec<ExactlyOnce>,
    stats: Arc<SinkStats>,
}

impl SinkWorker {
    /// Claims `partitions` (topic to partition indexes) of `spec`'s topics in the target
    /// database, fencing their earlier owners, and reads their positions from it.
    pub async fn start(
        client: Client,
        pool: PgPool,
        spec: SinkSpec,
        partitions: &BTreeMap<String, Vec<i32>>,
        stats: Arc<SinkStats>,
    ) -> Result<Self, SinkError> {
        let positions = spec.name.clone();
        Self::start_as(&positions, client, pool, spec, partitions, stats).await
    }

    /// [`SinkWorker::start`] with the positions kept in the target database under
    /// `positions` rather than the sink's name (the control plane names them
    /// `<tenant>.<sink>`, so two tenants' sinks of one name never share positions).
    pub async fn start_as(
        positions: &str,
        client: Client,
        pool: PgPool,
        spec: SinkSpec,
        partitions: &BTreeMap<String, Vec<i32>>,
        stats: Arc<SinkStats>,
    ) -> Result<Self, SinkError> {
        let shape = prepare(&pool, &spec).await?;
        let writer = Writer::new(&spec, &shape);
        let mut consumers = Vec::new();
        for (topic, owned) in partitions {
            if !spec.topics.contains(topic) {
                return Err(SinkError::Invalid(format!(
                    "topic {topic} is not one of the sink's"
                )));
            }
            let config = ExactlyOnceConfig::new(positions, topic.clone());
            let consumer =
                ExactlyOnce::claim(client.clone(), pool.clone(), config, owned, Start::Earliest)
                    .await?;
            for (partition, (_, next)) in consumer.positions() {
                stats
                    .positions
                    .lock()
                    .insert((topic.clone(), partition), next);
            }
            consumers.push(consumer);
        }
        Ok(Self {
            producer: Producer::new(client, ProducerConfig::default()),
            spec,
            shape,
            writer,
            consumers,
            stats,
        })
    }

    /// One round: each topic's new records applied and their positions stored. Answers the
    /// rows written.
    pub async fn step(&mut self) -> Result<u64, SinkError> {
        let mut written = 0;
        for index in 0..self.consumers.len() {
            let batch = self.consumers[index].poll().await?;
            if batch.is_empty() {
                continue;
            }
            written += self.apply(index, &batch).await?;
        }
        if written > 0 {
            self.stats.count(written);
        }
        Ok(written)
    }

    /// Applies a batch in one transaction: a span while traces are exported, the child of
    /// the first record's trace context and linked to the others'.
    async fn apply(&mut self, index: usize, batch: &Batch) -> Result<u64, SinkError> {
        use skein_ops::telemetry;
        use tracing::Instrument;

        if !telemetry::enabled() {
            return self.apply_records(index, batch).await;
        }
        let topic = self.consumers[index].topic();
        let span = tracing::info_span!(
            "sink apply",
            otel.name = %format!("process {topic}"),
            otel.kind = "consumer",
            messaging.operation.type = "process",
            messaging.destination.name = %topic,
            messaging.batch.message_count = batch.records.len(),
            db.system = "postgresql",
            sink = %self.spec.name,
        );
        telemetry::adopt(
            &span,
            batch.records.iter().flat_map(|record| {
                record
                    .headers
                    .iter()
                    .filter(|h| h.key == telemetry::TRACEPARENT)
                    .filter_map(|h| h.value.as_deref())
            }),
        );
        self.apply_records(index, batch).instrument(span).await
    }

    async fn apply_records(&mut self, index: usize, batch: &Batch) -> Result<u64, SinkError> {
        let mut changes = Vec::with_capacity(batch.records.len());
        let mut misfits = Vec::new();
        for (i, record) in batch.records.iter().enumerate() {
            if self.skipped(record) {
                // Passed over as an operator asked: a dead letter where there is a topic for
                // them, else nothing.
                if self.spec.dead_letter_topic.is_some() {
                    misfits.push((i, SKIPPED.to_owned()));
                }
                continue;
            }
            match change_of(&self.spec, &self.shape, record) {
                Ok(change) => changes.push((i, change)),
                Err(misfit) => misfits.push((i, misfit.0)),
            }
        }
        let consumer = &mut self.consumers[index];
        let began = Instant::now();
        let mut tx = consumer.begin().await?;
        let refused = self.writer.write(tx.connection(), &changes).await?;
        misfits.extend(refused);
        misfits.sort_by_key(|m| m.0);
        self.dead_letter(&batch.records, &misfits).await?;
        let consumer = &mut self.consumers[index];
        consumer.commit(tx, batch).await?;
        if let Some(histogram) = &self.stats.transactions {
            histogram.observe(began.elapsed().as_secs_f64());
        }
        let topic = consumer.topic().to_owned();
        let mut positions = self.stats.positions.lock();
        for (partition, next) in &batch.next_offsets {
            positions.insert((topic.clone(), *partition), *next);
        }
        drop(positions);
        let refused: std::collections::BTreeSet<usize> = misfits.iter().map(|m| m.0).collect();
        let mut rows = 0;
        let mut counts = self.stats.counts.lock();
        for (i, change) in &changes {
            if !matches!(change, Change::Delete(_)) && !refused.contains(i) {
                let record = &batch.records[*i];
                counts
                    .entry((record.topic.clone(), record.partition))
                    .or_default()
                    .rows += 1;
                rows += 1;
            }
        }
        for i in &refused {
            let record = &batch.records[*i];
            counts
                .entry((record.topic.clone(), record.partition))
                .or_default()
                .dead_lettered += 1;
        }
        drop(counts);
        self.stats
            .dead_lettered
            .fetch_add(refused.len() as u64, Ordering::Relaxed);
        Ok(rows)
    }

    /// Whether an operator asked the sink to pass `record` over.
    fn skipped(&self, record: &ConsumerRecord) -> bool {
        self.spec.skip.iter().any(|at| {
            at.topic == record.topic
                && at.partition == record.partition
                && at.offset == record.offset
        })
    }

    /// Sends the records that did not fit to the dead-letter topic, each with its reason
    /// and origin in headers; without one, the first is the sink's error.
    async fn dead_letter(
        &self,
        records: &[ConsumerRecord],
        misfits: &[(usize, String)],
    ) -> Result<(), SinkError> {
        if misfits.is_empty() {
            return Ok(());
        }
        let Some(topic) = &self.spec.dead_letter_topic else {
            let (i, reason) = &misfits[0];
            let record = &records[*i];
            return Err(SinkError::Misfit {
                topic: record.topic.clone(),
                partition: record.partition,
                offset: record.offset,
                reason: reason.clone(),
            });
        };
        let letters: Vec<ProduceRecord> = misfits
            .iter()
            .map(|(i, reason)| {
                let record = &records[*i];
                let mut letter = ProduceRecord::new(record.value.clone().unwrap_or_default());
                if let Some(key) = &record.key {
                    letter = letter.with_key(key.clone());
                }
                for header in &record.headers {
                    letter = letter.with_header(header.key.clone(), header.value.clone());
                }
                let origin = [
                    self.spec.name.clone(),
                    record.topic.clone(),
                    record.partition.to_string(),
                    record.offset.to_string(),
                ];
                letter = letter.with_header(ERROR_HEADER, Some(Bytes::from(reason.clone())));
                for (name, value) in SOURCE_HEADERS.iter().zip(origin) {
                    letter = letter.with_header(*name, Some(Bytes::from(value)));
                }
                letter
            })
            .collect();
        self.producer.send(topic, letters).await?;
        Ok(())
    }

    /// Rounds until `stop` resolves or an error that retrying cannot mend: lost partitions
    /// ([`SinkError::is_fenced`]) or a definition error. Other errors (the database or the
    /// brokers away for a while) are kept as the last error and the round is tried again.
    pub async fn run(
        mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), SinkError> {
        tokio::pin!(stop);
        loop {
            let round = tokio::select! {
                () = &mut stop => return Ok(()),
                round = self.step() => round,
            };
            match round {
                Ok(_) => {}
                Err(e) if e.is_fenced() || e.is_definition() => {
                    *self.stats.last_error.lock() = Some(e.to_string());
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(sink = %self.spec.name, error = %e, "a sink round failed; retrying");
                    *self.stats.last_error.lock() = Some(e.to_string());
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}
