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
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::util::Timeout;

use super::produce::{send_blocking, CountingContext};
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

impl TxnSpec {
    /// The runs `skein bench` makes: [`TxnSpec::standard`] with 4 producers, where each
    /// producer's round trips per transaction (AddPartitionsToTxn, Produce, EndTxn, one after
    /// the other) bound what it writes, and with 16, enough to keep the broker busy.
    pub fn matrix(bytes: u64) -> Vec<Self> {
        [4, 16]
            .into_iter()
            .map(|producers| Self {
                producers,
                ..Self::standard(bytes)
            })
            .collect()
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

/// librdkafka's flush (`Flush`) or commit (`Commit`, which flushes first) of `producer`,
/// waiting up to `timeout`. rust-rdkafka's own `flush` (which its `commit_transaction` calls
/// first) asks librdkafka for a flush without waiting and then sleeps in `poll()` for up to
/// 100 ms; librdkafka's own calls send what lingers at once and return with the last
/// acknowledgement (the producer's thread serves the delivery reports meanwhile), as a
/// Java or confluent-kafka client's commit does.
#[allow(unsafe_code)]
fn finish(
    producer: &ThreadedProducer<CountingContext>,
    step: Finish,
    timeout: Duration,
) -> anyhow::Result<()> {
    use rdkafka::bindings as rd;
    let handle = producer.client().native_ptr();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    match step {
        Finish::Flush => {
            // SAFETY: `handle` is the live producer's, borrowed for the call; rd_kafka_flush
            // may be called from any thread.
            let code = unsafe { rd::rd_kafka_flush(handle, timeout_ms) };
            anyhow::ensure!(
                code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                "flush failed: {:?}",
                code
            );
        }
        Finish::Commit => {
            // SAFETY: as above; a non-null error is read, then destroyed once, here.
            unsafe {
                let error = rd::rd_kafka_commit_transaction(handle, timeout_ms);
                if !error.is_null() {
                    let message = std::ffi::CStr::from_ptr(rd::rd_kafka_error_string(error))
                        .to_string_lossy()
                        .into_owned();
                    rd::rd_kafka_error_destroy(error);
                    bail!("commit failed: {message}");
                }
            }
        }
    }
    Ok(())
}

/// How [`finish`] ends a batch of records.
#[derive(Debug, Clone, Copy)]
enum Finish {
    Flush,
    Commit,
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
    // Its thread serves the delivery reports while `finish` waits in librdkafka.
    let producer: ThreadedProducer<CountingContext> = config.create_with_context(context)?;
    let timeout = Timeout::After(Duration::from_secs(60));
    let step = match mode {
        Mode::Transactional => Finish::Commit,
        Mode::Idempotent => Finish::Flush,
    };
    // One record (in a transaction of its own) before the clock starts: both runs then time
    // producers that are connected and have their producer ids.
    let warm_up = || -> anyhow::Result<()> {
        if mode == Mode::Transactional {
            producer.init_transactions(timeout)?;
            producer.begin_transaction()?;
        }
        send_blocking(&producer, BaseRecord::to(topic).payload(value))?;
        finish(&producer, step, Duration::from_secs(60))
    };
    let started = warm_up();
    ready.wait();
    started?;
    let warm_up_records = 1;
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
            send_blocking(&producer, BaseRecord::to(topic).payload(value))?;
        }
        // A commit sends what is queued and waits for every acknowledgement first.
        finish(&producer, step, Duration::from_secs(300))?;
        sent += count;
    }
    let delivered = deliveries.delivered.load(Ordering::Relaxed);
    let failed = deliveries.failed.load(Ordering::Relaxed);
    if failed > 0 || delivered != records + warm_up_records {
        let first = deliveries.first_error.lock().ok().and_then(|e| e.clone());
        bail!(
            "{delivered} of {records} records (and {warm_up_records} before the clock) delivered, {failed} failed (first error: {first:?})"
        );
    }
    Ok(())
}
