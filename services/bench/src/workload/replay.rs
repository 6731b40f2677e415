//! A load generator that costs the broker's cores as little as possible: Produce requests
//! encoded once and replayed over several connections, several requests in flight on each,
//! and Fetch requests read the same way, answers walked only as far as their batch headers.
//! Beside librdkafka (whose own work on these two cores competes with the broker's), it
//! shows the broker's ceiling.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

use super::{create_replicated_topic, payload, ProduceSpec, Throughput};

/// Connections the replayed load uses, and requests in flight on each.
pub const REPLAY_CONNECTIONS: usize = 4;
pub const REPLAY_IN_FLIGHT: usize = 4;

/// About this many bytes of record values in each replayed batch.
const BATCH_BYTES: usize = 256 * 1024;
const PRODUCE_VERSION: i16 = 7;
const FETCH_VERSION: i16 = 11;
/// The most an answer may hold before the load generator refuses it.
const MAX_ANSWER: usize = 64 * 1024 * 1024;

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// A length-prefixed request frame.
fn frame<R: Encodable>(key: ApiKey, version: i16, request: &R) -> anyhow::Result<Bytes> {
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("skein-bench-replay")))
        .encode(&mut body, key.request_header_version(version))?;
    request.encode(&mut body, version)?;
    let mut out = BytesMut::with_capacity(body.len() + 4);
    out.extend_from_slice(&u32::try_from(body.len())?.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out.freeze())
}

/// Reads one response frame, past its header.
fn read_answer(
    reader: &mut impl Read,
    key: ApiKey,
    version: i16,
    buf: &mut Vec<u8>,
) -> anyhow::Result<Bytes> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    anyhow::ensure!(len <= MAX_ANSWER, "an answer of {len} bytes");
    buf.resize(len, 0);
    reader.read_exact(buf)?;
    let mut body = Bytes::copy_from_slice(buf);
    ResponseHeader::decode(&mut body, key.response_header_version(version))?;
    Ok(body)
}

/// Produces `spec.records` records of `spec.record_bytes` to a new `topic` by replaying
/// pre-encoded Produce requests (one batch of about [`BATCH_BYTES`] to one partition each,
/// partitions in turn) over [`REPLAY_CONNECTIONS`] connections, [`REPLAY_IN_FLIGHT`] at a
/// time on each; every answer is checked for errors. The time runs from the first request
/// to the last answer.
pub fn replay_produce(
    bootstrap: &str,
    topic: &str,
    spec: &ProduceSpec,
) -> anyhow::Result<Throughput> {
    create_replicated_topic(bootstrap, topic, spec.partitions, spec.replication)?;
    let per_batch = (BATCH_BYTES / spec.record_bytes).max(1);
    let value = payload(spec.record_bytes);
    let records: Vec<NewRecord> = (0..per_batch)
        .map(|_| NewRecord {
            key: None,
            value: Some(value.clone()),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        })
        .collect();
    let batch = Bytes::from(build_batch(
        &records,
        Compression::None,
        ProducerFields::NONE,
    )?);
    let requests: Vec<Bytes> = (0..spec.partitions)
        .map(|partition| {
            let request = ProduceRequest::default()
                .with_acks(spec.acks)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name(topic))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch.clone()))])]);
            frame(ApiKey::Produce, PRODUCE_VERSION, &request)
        })
        .collect::<anyhow::Result<_>>()?;
    let total_batches = spec.records.div_ceil(per_batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..REPLAY_CONNECTIONS)
        .map(|_| {
            let (next, requests) = (Arc::clone(&next), requests.clone());
            let stream = TcpStream::connect(bootstrap);
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let stream = stream?;
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(Duration::from_secs(60)))?;
                let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
                let mut writer = BufWriter::with_capacity(1 << 20, stream);
                let (mut sent, mut answered, mut buf) = (0u64, 0u64, Vec::new());
                loop {
                    // Keep REPLAY_IN_FLIGHT requests outstanding.
                    while sent - answered < REPLAY_IN_FLIGHT as u64 {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= total_batches {
                            break;
                        }
                        writer.write_all(&requests[(n % requests.len() as u64) as usize])?;
                        sent += 1;
                    }
                    writer.flush()?;
                    if answered == sent {
                        return Ok(sent);
                    }
                    let mut body =
                        read_answer(&mut reader, ApiKey::Produce, PRODUCE_VERSION, &mut buf)?;
                    let response = ProduceResponse::decode(&mut body, PRODUCE_VERSION)?;
                    for partition in response
                        .responses
                        .iter()
                        .flat_map(|t| &t.partition_responses)
                    {
                        if partition.error_code != 0 {
                            bail!(
                                "replayed produce to partition {} refused: error {}",
                                partition.index,
                                partition.error_code
                            );
                        }
                    }
                    answered += 1;
                }
            })
        })
        .collect();
    let mut batches = 0;
    for worker in workers {
        batches += worker
            .join()
            .map_err(|_| anyhow::anyhow!("replay worker panicked"))??;
    }
    let elapsed = start.elapsed();
    let records = batches * per_batch as u64;
    Ok(Throughput {
        records,
        bytes: records * spec.record_bytes as u64,
        elapsed,
    })
}

/// Reads `topic`'s `partitions` from the start until `records` records are read, with
/// Fetch requests over [`REPLAY_CONNECTIONS`] connections (the partitions dealt among
/// them), each answer walked only through its batch headers for the next offsets.
pub fn replay_fetch(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    record_bytes: usize,
    records: u64,
) -> anyhow::Result<Throughput> {
    let read = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let connections = REPLAY_CONNECTIONS.min(partitions.max(1) as usize);
    let workers: Vec<_> = (0..connections)
        .map(|c| {
            let owned: Vec<i32> = (0..partitions)
                .filter(|p| *p as usize % connections == c)
                .collect();
            let (read, topic) = (Arc::clone(&read), topic.to_owned());
            let stream = TcpStream::connect(bootstrap);
            std::thread::spawn(move || -> anyhow::Result<()> {
                let stream = stream?;
                stream.set_read_timeout(Some(Duration::from_secs(60)))?;
                let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone()?);
                let mut writer = stream;
                let mut offsets: Vec<i64> = vec![0; owned.len()];
                let mut buf = Vec::new();
                while read.load(Ordering::Relaxed) < records {
                    let request = FetchRequest::default()
                        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                        .with_max_wait_ms(100)
                        .with_min_bytes(1)
                        .with_max_bytes(32 * 1024 * 1024)
                        .with_session_epoch(-1)
                        .with_topics(vec![FetchTopic::default()
                            .with_topic(topic_name(&topic))
                            .with_partitions(
                                owned
                                    .iter()
                                    .zip(&offsets)
                                    .map(|(p, offset)| {
                                        FetchPartition::default()
                                            .with_partition(*p)
                                            .with_fetch_offset(*offset)
                                            .with_partition_max_bytes(8 * 1024 * 1024)
                                    })
                                    .collect(),
                            )]);
                    writer.write_all(&frame(ApiKey::Fetch, FETCH_VERSION, &request)?)?;
                    let mut body =
                        read_answer(&mut reader, ApiKey::Fetch, FETCH_VERSION, &mut buf)?;
                    let response = FetchResponse::decode(&mut body, FETCH_VERSION)?;
                    for answer in response.responses.iter().flat_map(|t| &t.partitions) {
                        if answer.error_code != 0 {
                            bail!(
                                "replayed fetch of partition {} refused: error {}",
                                answer.partition_index,
                                answer.error_code
                            );
                        }
                        let Some(at) = owned.iter().position(|p| *p == answer.partition_index)
                        else {
                            continue;
                        };
                        if let Some(bytes) = &answer.records {
                            let (next, count) = walk_batches(bytes)?;
                            if let Some(next) = next {
                                offsets[at] = next;
                            }
                            read.fetch_add(count, Ordering::Relaxed);
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("replay worker panicked"))??;
    }
    let elapsed = start.elapsed();
    let records = read.load(Ordering::Relaxed);
    Ok(Throughput {
        records,
        bytes: records * record_bytes as u64,
        elapsed,
    })
}

/// The offset after the last whole batch in `bytes`, and how many records the whole
/// batches hold: read from the batch headers (base offset, length, last offset delta,
/// record count) alone.
fn walk_batches(bytes: &[u8]) -> anyhow::Result<(Option<i64>, u64)> {
    let (mut at, mut next, mut count) = (0usize, None, 0u64);
    let field = |at: usize, len: usize| -> anyhow::Result<&[u8]> {
        bytes.get(at..at + len).context("a batch header cut short")
    };
    while at + 61 <= bytes.len() {
        let base = i64::from_be_bytes(field(at, 8)?.try_into()?);
        let length = i32::from_be_bytes(field(at + 8, 4)?.try_into()?);
        let size = 12 + usize::try_from(length)?;
        if at + size > bytes.len() {
            break;
        }
        let last_delta = i32::from_be_bytes(field(at + 23, 4)?.try_into()?);
        let records = i32::from_be_bytes(field(at + 57, 4)?.try_into()?);
        next = Some(base + i64::from(last_delta) + 1);
        count += u64::try_from(records.max(0))?;
        at += size;
    }
    Ok((next, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_headers_give_the_next_offset_and_the_record_count() {
        let records: Vec<NewRecord> = (0..7)
            .map(|i| NewRecord {
                key: None,
                value: Some(vec![i; 10]),
                headers: vec![],
                timestamp: 0,
            })
            .collect();
        let one = build_batch(&records, Compression::None, ProducerFields::NONE).unwrap();
        let mut two = one.clone();
        // The second batch at base offset 7.
        two[..8].copy_from_slice(&7i64.to_be_bytes());
        let mut both = one.clone();
        both.extend_from_slice(&two);
        assert_eq!(walk_batches(&both).unwrap(), (Some(14), 14));
        // A cut-off last batch is left for the next fetch.
        assert_eq!(walk_batches(&both[..both.len() - 3]).unwrap(), (Some(7), 7));
        assert_eq!(walk_batches(&[]).unwrap(), (None, 0));
    }
}
