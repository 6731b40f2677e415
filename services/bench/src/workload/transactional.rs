//! Transactional produce beside idempotent produce of the same records: the cost of
//! exactly-once writes. Both runs use the same producers, partitions and settings; the
//! transactional one commits every `records_per_txn` records (each commit waits for its
//! records' acknowledgements, ends the transaction at the coordinator and writes the
//! markers), the idempotent one sends without pause.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::util::Timeout;

use super::produce::CountingContext;
use super::{client_config, create_topic, payload, record_size, Throughput};

/// One transactional run and its idempotent reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnSpec {
    pub record_bytes: usize,
    pub records: u64,
    pub records_per_txn: u64,
    /// Producers sending at once, each with its transactional id (and its own connections).
    pub producers: u64,
    pub partitions: i32,
}

impl TxnSpec {
    /// 1 KiB records, 100 per transaction, about `bytes` in all.
    pub fn standard(bytes: u64) -> Self {
        Self {
            record_bytes: 1024,
            records: (bytes / 1024).max(100),
            records_per_txn: 100,
            producers: 4,
            partitions: 4,
        }
    }
}

impl fmt::Display for TxnSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transactions {}, {} records/txn, {} producers x{}p",
            record_size(self.record_bytes),
            self.records_per_txn,
            self.producers,
            self.partitions
        )
    }
}

/// How each producer of a run writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Idempotent,
    Transactional,
}

/// The records of `spec` written idempotently (acks=all) to a new `topic`.
pub fn produce_idempotent(
    bootstrap: &str,
    topic: &str,
    spec: &TxnSpec,
) -> anyhow::Result<Throughput> {
    run(bootstrap, topic, spec, Mode::Idempotent)
}

/// The records of `spec` written in transactions of `spec.records_per_txn` to a new `topic`.
pub fn produce_transactional(
    bootstrap: &str,
    topic: &str,
    spec: &TxnSpec,
) -> anyhow::Result<Throughput> {
    run(bootstrap, topic, spec, Mode::Transactional)
}

fn run(bootstrap: &str, topic: &str, spec: &TxnSpec, mode: Mode) -> anyhow::Result<Throughput> {
    create_topic(bootstrap, topic, spec.partitions)?;
    let producers = spec.producers.max(1);
    let value = payload(spec.record_bytes);
    // Producers start (and transactional ones register their ids) before the clock does.
    let ready = Arc::new(std::sync::Barrier::new(producers as usize + 1));
    let start = std::thread::scope(|scope| {
        let sending: Vec<_> = (0..producers)
            .map(|index| {
                let share = spec.records / producers + u64::from(index < spec.records % producers);
                let value = &value;
                let ready = Arc::clone(&ready);
                scope.spawn(move || {
                    let id = format!("{topic}-{index}");
                    share_of(bootstrap, topic, spec, mode, &id, share, value, &ready)
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        sending.into_iter().try_for_each(|one| {
            one.join()
                .map_err(|_| anyhow::anyhow!("a producer thread panicked"))?
        })?;
        anyhow::Ok(start)
    })?;
    Ok(Throughput {
        records: spec.records,
        bytes: spec.records * spec.record_bytes as u64,
        elapsed: start.elapsed(),
    })
}

/// Waits until every record sent is acknowledged, serving delivery reports. rust-rdkafka's
/// own flush (which its commit_transaction calls first) sleeps in poll() for 100 ms
/// whenever a record is still in flight, which would put 100 ms into every transaction
/// whatever the broker does; with nothing in flight it returns at once.
fn drain(producer: &BaseProducer<CountingContext>) -> anyhow::Result<()> {
    // A flush that does not wait sends what lingers at once, as a commit's flush does.
    let _ = producer.flush(Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(300);
    while producer.in_flight_count() > 0 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "records unacknowledged after 300 s"
        );
        producer.poll(Duration::from_millis(1));
    }
    Ok(())
}

/// Sends `record`, serving delivery reports while librdkafka's queue is full.
fn send(
    producer: &BaseProducer<CountingContext>,
    mut record: BaseRecord<'_, (), [u8]>,
) -> anyhow::Result<()> {
    loop {
        match producer.send(record) {
            Ok(()) => {
                producer.poll(Duration::ZERO);
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => bail!("send failed: {e}"),
        }
    }
}

/// One producer's `records`, all acknowledged (and, transactional, committed) or an error.
#[allow(clippy::too_many_arguments)]
fn share_of(
    bootstrap: &str,
    topic: &str,
    spec: &TxnSpec,
    mode: Mode,
    transactional_id: &str,
    records: u64,
    value: &[u8],
    ready: &std::sync::Barrier,
) -> anyhow::Result<()> {
    let context = CountingContext::default();
    let deliveries = Arc::clone(&context.0);
    let mut config = client_config(bootstrap);
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "1000000");
    if mode == Mode::Transactional {
        config.set("transactional.id", transactional_id);
    }
    // A BaseProducer polled here (see `drain`).
    let producer: BaseProducer<CountingContext> = config.create_with_context(context)?;
    let timeout = Timeout::After(Duration::from_secs(60));
    let started = match mode {
        Mode::Transactional => producer.init_transactions(timeout),
        Mode::Idempotent => Ok(()),
    };
    ready.wait();
    started?;
    let mut sent = 0;
    while sent < records {
        let count = match mode {
            Mode::Transactional => spec.records_per_txn.min(records - sent),
            Mode::Idempotent => records - sent,
        };
        if mode == Mode::Transactional {
            producer.begin_transaction()?;
        }
        for _ in 0..count {
            send(&producer, BaseRecord::to(topic).payload(value))?;
        }
        match mode {
            // A commit sends what is queued and waits for every acknowledgement first.
            Mode::Transactional => {
                drain(&producer)?;
                producer.commit_transaction(timeout)?;
            }
            Mode::Idempotent => drain(&producer)?,
        }
        sent += count;
    }
    let delivered = deliveries.delivered.load(Ordering::Relaxed);
    let failed = deliveries.failed.load(Ordering::Relaxed);
    if failed > 0 || delivered != records {
        let first = deliveries.first_error.lock().ok().and_then(|e| e.clone());
        bail!(
            "{delivered} of {records} records delivered, {failed} failed (first error: {first:?})"
        );
    }
    Ok(())
}
