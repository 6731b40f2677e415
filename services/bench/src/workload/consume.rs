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
    while count < records {
        if Instant::now() > deadline {
            bail!("read {count} of {records} records in 300 s");
        }
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(message)) => {
                count += 1;
                bytes += message.payload_len() as u64;
            }
            Some(Err(e)) => bail!("consume failed after {count} records: {e}"),
            None => {}
        }
    }
    Ok(Throughput {
        records: count,
        bytes,
        elapsed: start.elapsed(),
    })
}
