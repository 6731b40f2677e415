//! Producer throughput: a fixed number of records as fast as librdkafka sends them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::Timeout;
use rdkafka::ClientContext;

use super::{client_config, create_replicated_topic, payload, record_size, Throughput};

/// One produce run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceSpec {
    /// `acks`: 1 or -1 (all).
    pub acks: i16,
    pub record_bytes: usize,
    pub partitions: i32,
    pub records: u64,
    /// Replicas per partition of the topic it writes.
    pub replication: i32,
}

impl ProduceSpec {
    /// acks=1 and all, 1 KiB and 100 B records, 1 and 16 partitions, about `bytes` each.
    pub fn matrix(bytes: u64) -> Vec<Self> {
        let mut specs = Vec::new();
        for record_bytes in [1024usize, 100] {
            for partitions in [1, 16] {
                for acks in [1, -1] {
                    specs.push(Self {
                        acks,
                        record_bytes,
                        partitions,
                        records: (bytes / record_bytes as u64).max(1),
                        replication: 1,
                    });
                }
            }
        }
        specs
    }

    /// A topic name unique to this run.
    pub fn topic(&self) -> String {
        format!(
            "bench-{}b-{}p-acks{}",
            self.record_bytes,
            self.partitions,
            if self.acks < 0 {
                "all".to_owned()
            } else {
                self.acks.to_string()
            }
        )
    }

    /// Whether the consume workload reads this run's topic back (the acks=1 runs).
    pub fn consumed(&self) -> bool {
        self.acks == 1
    }
}

impl fmt::Display for ProduceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let acks = if self.acks < 0 {
            "all".to_owned()
        } else {
            self.acks.to_string()
        };
        write!(
            f,
            "acks={acks} {} x{}p",
            record_size(self.record_bytes),
            self.partitions
        )?;
        if self.replication > 1 {
            write!(f, " RF={}", self.replication)?;
        }
        Ok(())
    }
}

/// Counts delivery reports.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    pub(crate) delivered: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) first_error: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct CountingContext(pub(crate) Arc<Deliveries>);

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        match result {
            Ok(_) => {
                self.0.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.0.first_error.lock() {
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
}

/// Sends `record`, waiting while librdkafka's queue is full.
pub(crate) fn send_blocking(
    producer: &ThreadedProducer<CountingContext>,
    mut record: BaseRecord<'_, (), [u8]>,
) -> anyhow::Result<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_micros(200));
            }
            Err((e, _)) => bail!("send failed: {e}"),
        }
    }
}

/// Produces `spec.records` unkeyed records of `spec.record_bytes` to a new `topic`; the time
/// runs from the first send to the last delivery report.
pub fn produce(bootstrap: &str, topic: &str, spec: &ProduceSpec) -> anyhow::Result<Throughput> {
    produce_with(bootstrap, topic, spec, 1)
}

/// [`produce`] with the records split over `producers` librdkafka producers, each with
/// connections (and a broker thread) of its own, sending at once: what several clients of
/// one broker get together, rather than what one client's connection can carry.
pub fn produce_with(
    bootstrap: &str,
    topic: &str,
    spec: &ProduceSpec,
    producers: u64,
) -> anyhow::Result<Throughput> {
    create_replicated_topic(bootstrap, topic, spec.partitions, spec.replication)?;
    let producers = producers.max(1);
    let value = payload(spec.record_bytes);
    let start = Instant::now();
    std::thread::scope(|scope| {
        let sending: Vec<_> = (0..producers)
            .map(|index| {
                let share = spec.records / producers + u64::from(index < spec.records % producers);
                let value = &value;
                scope.spawn(move || produce_share(bootstrap, topic, spec, share, value))
            })
            .collect();
        sending.into_iter().try_for_each(|one| {
            one.join()
                .map_err(|_| anyhow::anyhow!("a producer thread panicked"))?
        })
    })?;
    Ok(Throughput {
        records: spec.records,
        bytes: spec.records * spec.record_bytes as u64,
        elapsed: start.elapsed(),
    })
}

/// One producer's `records` of `value`, all delivered or an error.
fn produce_share(
    bootstrap: &str,
    topic: &str,
    spec: &ProduceSpec,
    records: u64,
    value: &[u8],
) -> anyhow::Result<()> {
    let context = CountingContext::default();
    let deliveries = Arc::clone(&context.0);
    let producer: ThreadedProducer<CountingContext> = client_config(bootstrap)
        .set("acks", spec.acks.to_string())
        .set("enable.idempotence", "false")
        .set("linger.ms", "5")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "1000000")
        .create_with_context(context)?;
    for _ in 0..records {
        send_blocking(&producer, BaseRecord::to(topic).payload(value))?;
    }
    producer.flush(Timeout::After(Duration::from_secs(300)))?;
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
