//! Consumer throughput: a topic read back from its start, from the page cache.

use std::time::{Duration, Instant};

use anyhow::bail;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::{client_config, Throughput};

/// Reads `records` records from every partition of `topic`, assigned (no group
/// coordination) from the earliest offset; the time runs from the assignment to the last
/// record.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
) -> anyhow::Result<Throughput> {
    Ok(read_back(bootstrap, topic, partitions, records)?.from_start())
}

/// A topic read back: when the first record came and when the last did.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub records: u64,
    pub bytes: u64,
    /// From the start (assignment or subscription) to the first record.
    pub to_first: Duration,
    /// The first record's value bytes.
    pub first_bytes: u64,
    /// From the start to the last record.
    pub elapsed: Duration,
}

impl Reading {
    /// Everything, timed from the start.
    pub fn from_start(&self) -> Throughput {
        Throughput {
            records: self.records,
            bytes: self.bytes,
            elapsed: self.elapsed,
        }
    }

    /// The records after the first, timed from the first record to the last: the rate
    /// once records flow, without the client's start-up.
    pub fn after_first(&self) -> Throughput {
        Throughput {
            records: self.records.saturating_sub(1),
            bytes: self.bytes - self.first_bytes,
            elapsed: self.elapsed - self.to_first,
        }
    }
}

/// [`consume`], also saying when the first record came.
pub fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
) -> anyhow::Result<Reading> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "skein-bench-consume")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        // librdkafka 2.x pauses fetching for `fetch.queue.backoff.ms` (default 1000) whenever
        // its queue passes `queued.min.messages`; a broker that answers faster than the
        // application drains then leaves the consumer idle for most of each second. The
        // benchmark measures the brokers, so both get a consumer that never idles.
        .set("fetch.queue.backoff.ms", "0")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    let start = Instant::now();
    consumer.assign(&assignment)?;
    let deadline = start + Duration::from_secs(300);
    let (mut count, mut bytes) = (0u64, 0u64);
    let (mut to_first, mut first_bytes) = (Duration::ZERO, 0u64);
    while count < records {
        if Instant::now() > deadline {
            bail!("read {count} of {records} records in 300 s");
        }
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(message)) => {
                if count == 0 {
                    to_first = start.elapsed();
                    first_bytes = message.payload_len() as u64;
                }
                count += 1;
                bytes += message.payload_len() as u64;
            }
            Some(Err(e)) => bail!("consume failed after {count} records: {e}"),
            None => {}
        }
    }
    Ok(Reading {
        records: count,
        bytes,
        to_first,
        first_bytes,
        elapsed: start.elapsed(),
    })
}
