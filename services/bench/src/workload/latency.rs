//! End-to-end latency at a fixed rate, corrected for coordinated omission: each record
//! carries the time it was *meant* to be sent, so a stalled producer shows up as latency
//! instead of as fewer, later samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::produce::{send_blocking, CountingContext};
use super::{client_config, create_replicated_topic, payload};

/// One latency run.
#[derive(Debug, Clone, Copy)]
pub struct LatencySpec {
    pub rate: u64,
    /// Measured time, after the warm-up.
    pub duration: Duration,
    pub warmup: Duration,
    pub record_bytes: usize,
    /// The producer's `acks` (1 or -1), and the topic's replicas per partition.
    pub acks: i16,
    pub replication: i32,
}

/// Send-to-receive latency percentiles.
#[derive(Debug, Clone)]
pub struct Latency {
    pub spec: LatencySpec,
    pub samples: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

/// Produces to a new one-partition `topic` at `spec.rate` (linger.ms=0) while a consumer
/// reads it; latency is receive time minus intended send time.
pub fn latency(bootstrap: &str, topic: &str, spec: &LatencySpec) -> anyhow::Result<Latency> {
    anyhow::ensure!(spec.record_bytes >= 16, "records carry 16 bytes of timing");
    create_replicated_topic(bootstrap, topic, 1, spec.replication)?;
    let warmup_records = spec.rate * spec.warmup.as_millis() as u64 / 1000;
    let total = warmup_records + spec.rate * spec.duration.as_millis() as u64 / 1000;
    let period = Duration::from_nanos(1_000_000_000 / spec.rate.max(1));

    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "skein-bench-latency")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;

    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || -> anyhow::Result<Histogram<u64>> {
            let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            let mut seen = 0u64;
            while seen < total && !stop.load(Ordering::Relaxed) {
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(message)) => {
                        let received = base.elapsed().as_nanos() as u64;
                        let Some(value) = message.payload() else {
                            continue;
                        };
                        let (Some(meant), Some(index)) = (read_u64(value, 0), read_u64(value, 8))
                        else {
                            continue;
                        };
                        seen += 1;
                        if index >= warmup_records {
                            let micros = received.saturating_sub(meant) / 1000;
                            histogram.saturating_record(micros.max(1));
                        }
                    }
                    Some(Err(e)) => bail!("consume failed: {e}"),
                    None => {}
                }
            }
            if seen < total {
                bail!("received {seen} of {total} records");
            }
            Ok(histogram)
        })
    };

    let context = CountingContext::default();
    let producer: ThreadedProducer<CountingContext> = client_config(bootstrap)
        .set("acks", spec.acks.to_string())
        .set("enable.idempotence", "false")
        .set("linger.ms", "0")
        .create_with_context(context)?;
    let mut value = payload(spec.record_bytes);
    let start = base.elapsed();
    for index in 0..total {
        // Sleep (never spin: the brokers and librdkafka share these cores) until the record
        // is due; after oversleeping, every record already due goes out at once, and the
        // lateness counts in its latency.
        let meant = start + period * index as u32;
        let now = base.elapsed();
        if meant > now {
            std::thread::sleep(meant - now);
        }
        value[0..8].copy_from_slice(&(meant.as_nanos() as u64).to_be_bytes());
        value[8..16].copy_from_slice(&index.to_be_bytes());
        send_blocking(&producer, BaseRecord::to(topic).payload(&value[..]))?;
    }
    producer.flush(Timeout::After(Duration::from_secs(60)))?;
    // Everything was delivered; give the reader a bounded time to see it.
    let watchdog = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(30));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let histogram = reader
        .join()
        .map_err(|_| anyhow::anyhow!("latency reader panicked"))??;
    drop(watchdog);
    let at = |q: f64| Duration::from_micros(histogram.value_at_quantile(q));
    Ok(Latency {
        spec: *spec,
        samples: histogram.len(),
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max: Duration::from_micros(histogram.max()),
    })
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let field: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(field))
}
