//! The gateway's APIs under load: REST produce (batches of JSON records), gRPC
//! `ProduceStream` (one report per record) and the gRPC `Consume` stream (credit-based), each
//! compared with librdkafka moving the same records through the Kafka listener. The gateway
//! writes with acks=all, so the native producer it is compared with does too.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::Engine;
use hdrhistogram::Histogram;
use skein_proto::gateway as pb;
use skein_proto::gateway::gateway_client::GatewayClient;
use tonic::transport::Channel;

use super::{create_topic, payload, record_size, Reading, Throughput};

/// The most records in one REST produce request (about 1.4 MB of JSON at 1 KiB, within the
/// gateway's 8 MiB body limit).
pub const REST_BATCH: usize = 1000;
/// REST requests in flight at once, each on its own connection.
pub const REST_IN_FLIGHT: usize = 2;
/// The most records the gRPC producer has sent without a report: the server's read-ahead
/// (1,024) and the batch it is writing.
pub const STREAM_WINDOW: usize = 2048;
/// The gRPC consumer's credit, in records; each batch is acknowledged as it arrives.
pub const CONSUME_CREDIT: u32 = 2000;

/// How long one gateway run may take.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// Where the gateway listens, and a token that may write and read every topic used.
#[derive(Debug, Clone)]
pub struct GatewayAccess {
    /// The REST API's base URL, `http://host:port`.
    pub rest: String,
    /// The gRPC API's URL, `http://host:port`.
    pub grpc: String,
    /// A bearer JWT of the topics' tenant.
    pub token: String,
}

/// One record size moved through every API and through librdkafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewaySpec {
    pub record_bytes: usize,
    pub records: u64,
}

impl GatewaySpec {
    /// 1 KiB and 100 B records, `records` of each per run.
    pub fn matrix(records: u64) -> Vec<Self> {
        [1024, 100]
            .into_iter()
            .map(|record_bytes| Self {
                record_bytes,
                records: records.max(1),
            })
            .collect()
    }

    /// Records in one REST produce request (the gateway splits what exceeds a batch).
    pub fn rest_batch(&self) -> usize {
        REST_BATCH
    }

    /// The most records the gRPC producer keeps without a report.
    pub fn stream_window(&self) -> usize {
        STREAM_WINDOW
    }

    /// A one-partition topic of this run written through `path` (`kafka`, `rest`, `grpc`).
    pub fn topic(&self, path: &str) -> String {
        format!("bench-gateway-{}b-{path}", self.record_bytes)
    }
}

impl fmt::Display for GatewaySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x{}", record_size(self.record_bytes), self.records)
    }
}

/// A gateway workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayApi {
    /// `POST /v1/topics/{topic}/records`, [`GatewaySpec::rest_batch`] records a request.
    RestProduce,
    /// `ProduceStream`, one message and one report per record.
    GrpcProduce,
    /// `Consume` of every partition from the earliest offset.
    GrpcConsume,
}

impl GatewayApi {
    pub const ALL: [Self; 3] = [Self::RestProduce, Self::GrpcProduce, Self::GrpcConsume];

    /// What `--only` matches, e.g. `gateway gRPC produce 1 KiB`.
    pub fn label(self, spec: &GatewaySpec) -> String {
        format!("gateway {self} {}", record_size(spec.record_bytes))
    }

    /// Whether it writes (compared with librdkafka producing) or reads.
    pub fn produces(self) -> bool {
        !matches!(self, Self::GrpcConsume)
    }

    /// What one latency sample is.
    pub fn latency_unit(self) -> &'static str {
        match self {
            Self::RestProduce => "request",
            Self::GrpcProduce => "record",
            Self::GrpcConsume => "-",
        }
    }
}

impl fmt::Display for GatewayApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RestProduce => "REST produce",
            Self::GrpcProduce => "gRPC produce",
            Self::GrpcConsume => "gRPC consume",
        })
    }
}

/// Latency percentiles of one run.
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub samples: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Percentiles {
    fn of(histogram: &Histogram<u64>) -> Self {
        let at = |q: f64| Duration::from_micros(histogram.value_at_quantile(q));
        Self {
            samples: histogram.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: Duration::from_micros(histogram.max()),
        }
    }
}

/// What one gateway run measured.
#[derive(Debug, Clone, Copy)]
pub struct GatewayRun {
    /// For produce, from the first send to the last answer; for consume, from the first
    /// record to the last (see [`Reading::after_first`]).
    pub throughput: Throughput,
    /// Per request (REST) or per record from send to report (gRPC produce); none for
    /// consume.
    pub latency: Option<Percentiles>,
    /// For consume, from subscribing to the first record.
    pub to_first: Option<Duration>,
}

/// Writes `spec.records` records to a new one-partition `topic` through REST, in requests of
/// [`GatewaySpec::rest_batch`] records, [`REST_IN_FLIGHT`] at a time; the time runs from the first
/// request to the last answer, and each request's latency from its sending to its answer.
pub fn rest_produce(
    bootstrap: &str,
    gateway: &GatewayAccess,
    topic: &str,
    spec: &GatewaySpec,
) -> anyhow::Result<GatewayRun> {
    create_topic(bootstrap, topic, 1)?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(REST_IN_FLIGHT)
        .build()?;
    runtime()?.block_on(async {
        wait_for_topic(&http, gateway, topic).await?;
        let batch = spec.rest_batch();
        let requests = spec.records.div_ceil(batch as u64);
        let last = spec.records - (requests - 1) * batch as u64;
        let full = rest_body(spec.record_bytes, batch);
        let tail = rest_body(spec.record_bytes, last as usize);
        let url = format!("{}/v1/topics/{topic}/records", gateway.rest);
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let mut senders = Vec::new();
        for _ in 0..REST_IN_FLIGHT {
            let (http, url, token, next, full, tail) = (
                http.clone(),
                url.clone(),
                gateway.token.clone(),
                Arc::clone(&next),
                full.clone(),
                tail.clone(),
            );
            senders.push(tokio::spawn(async move {
                let mut histogram = histogram()?;
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= requests {
                        return anyhow::Ok(histogram);
                    }
                    let (body, count) = if index + 1 == requests {
                        (tail.clone(), last as usize)
                    } else {
                        (full.clone(), batch)
                    };
                    let sent = Instant::now();
                    let response = http
                        .post(&url)
                        .bearer_auth(&token)
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(body)
                        .send()
                        .await
                        .with_context(|| format!("POST {url}"))?;
                    let status = response.status();
                    let answer = response.bytes().await?;
                    if status != reqwest::StatusCode::OK {
                        bail!(
                            "POST {url}: {status}: {}",
                            String::from_utf8_lossy(&answer[..answer.len().min(500)])
                        );
                    }
                    let results: ProduceResults = serde_json::from_slice(&answer)
                        .with_context(|| format!("the answer to POST {url}"))?;
                    anyhow::ensure!(
                        results.results.len() == count,
                        "{} results for {count} records",
                        results.results.len()
                    );
                    histogram.saturating_record(micros(sent.elapsed()));
                }
            }));
        }
        let mut latencies = histogram()?;
        for sender in senders {
            latencies.add(sender.await??)?;
        }
        Ok(GatewayRun {
            throughput: Throughput {
                records: spec.records,
                bytes: spec.records * spec.record_bytes as u64,
                elapsed: start.elapsed(),
            },
            latency: Some(Percentiles::of(&latencies)),
            to_first: None,
        })
    })
}

/// Writes `spec.records` records to a new one-partition `topic` over one `ProduceStream`,
/// keeping at most [`GatewaySpec::stream_window`] without a report; the time runs from opening the stream
/// to the last report, each record's latency from the client library taking it to its
/// report.
pub fn grpc_produce(
    bootstrap: &str,
    gateway: &GatewayAccess,
    topic: &str,
    spec: &GatewaySpec,
) -> anyhow::Result<GatewayRun> {
    create_topic(bootstrap, topic, 1)?;
    runtime()?.block_on(async {
        wait_for_topic(&reqwest::Client::new(), gateway, topic).await?;
        let mut client = grpc_client(gateway).await?;
        let window = Arc::new(tokio::sync::Semaphore::new(spec.stream_window()));
        let sent_at = Arc::new(Mutex::new(VecDeque::with_capacity(spec.stream_window())));
        let total = spec.records;
        let source = StreamSource {
            topic: topic.to_owned(),
            value: payload(spec.record_bytes),
            window: Arc::clone(&window),
            sent_at: Arc::clone(&sent_at),
        };
        let records =
            futures::stream::unfold((0u64, source), move |(sequence, source)| async move {
                if sequence >= total {
                    return None;
                }
                source.window.acquire().await.ok()?.forget();
                source.sent_at.lock().ok()?.push_back(Instant::now());
                let message = pb::ProduceStreamRequest {
                    topic: source.topic.clone(),
                    sequence,
                    record: Some(pb::Record {
                        value: Some(source.value.clone()),
                        ..Default::default()
                    }),
                };
                Some((message, (sequence + 1, source)))
            });
        let request = authorized(records, &gateway.token)?;
        let start = Instant::now();
        let mut reports = client.produce_stream(request).await?.into_inner();
        let mut latencies = histogram()?;
        let mut reported = 0u64;
        let deadline = tokio::time::Instant::now() + RUN_LIMIT;
        while let Some(report) = tokio::time::timeout_at(deadline, reports.message())
            .await
            .with_context(|| format!("{reported} of {total} records reported in {RUN_LIMIT:?}"))??
        {
            let received = Instant::now();
            anyhow::ensure!(
                report.sequence == reported,
                "report for record {} where {reported} was due",
                report.sequence
            );
            let result = report.result.context("a report without a result")?;
            if result.code != 0 {
                bail!(
                    "record {reported} was not written: code {}: {}",
                    result.code,
                    result.message
                );
            }
            let sent = sent_at
                .lock()
                .map_err(|_| anyhow::anyhow!("send times poisoned"))?
                .pop_front()
                .context("a report for a record not sent")?;
            latencies.saturating_record(micros(received - sent));
            window.add_permits(1);
            reported += 1;
        }
        let elapsed = start.elapsed();
        anyhow::ensure!(
            reported == total,
            "the stream ended after {reported} of {total} reports"
        );
        Ok(GatewayRun {
            throughput: Throughput {
                records: total,
                bytes: total * spec.record_bytes as u64,
                elapsed,
            },
            latency: Some(Percentiles::of(&latencies)),
            to_first: None,
        })
    })
}

/// What the request stream of [`grpc_produce`] carries from one record to the next.
struct StreamSource {
    topic: String,
    value: Vec<u8>,
    window: Arc<tokio::sync::Semaphore>,
    sent_at: Arc<Mutex<VecDeque<Instant>>>,
}

/// Reads `records` records of an existing `topic` from the earliest offset of every
/// partition over one `Consume` stream with [`CONSUME_CREDIT`] records of credit,
/// acknowledging each batch as it arrives; the time runs from opening the stream.
pub fn grpc_consume(gateway: &GatewayAccess, topic: &str, records: u64) -> anyhow::Result<Reading> {
    runtime()?.block_on(async {
        wait_for_topic(&reqwest::Client::new(), gateway, topic).await?;
        let mut client = grpc_client(gateway).await?;
        let (requests, outgoing) = futures::channel::mpsc::unbounded();
        let send = |kind: pb::consume_request::Kind| {
            requests
                .unbounded_send(pb::ConsumeRequest { kind: Some(kind) })
                .map_err(|_| anyhow::anyhow!("the consume stream's requests were closed"))
        };
        send(pb::consume_request::Kind::Subscribe(pb::Subscribe {
            topic: topic.to_owned(),
            mode: Some(pb::subscribe::Mode::Partitions(
                pb::PartitionsSubscription {
                    start: pb::StartFrom::Earliest as i32,
                    ..Default::default()
                },
            )),
            isolation: pb::Isolation::ReadCommitted as i32,
            credit: Some(pb::Credit {
                records: CONSUME_CREDIT,
                bytes: 0,
            }),
        }))?;
        let request = authorized(outgoing, &gateway.token)?;
        let start = Instant::now();
        let mut responses = client.consume(request).await?.into_inner();
        let deadline = tokio::time::Instant::now() + RUN_LIMIT;
        let (mut count, mut bytes) = (0u64, 0u64);
        let (mut to_first, mut first_bytes) = (Duration::ZERO, 0u64);
        while count < records {
            let response = tokio::time::timeout_at(deadline, responses.message())
                .await
                .with_context(|| format!("read {count} of {records} records in {RUN_LIMIT:?}"))??
                .with_context(|| format!("the stream ended after {count} of {records} records"))?;
            let Some(pb::consume_response::Kind::Records(batch)) = response.kind else {
                continue;
            };
            let mut next = BTreeMap::new();
            for record in &batch.records {
                let size = record.value.as_ref().map_or(0, Vec::len) as u64;
                if count == 0 {
                    to_first = start.elapsed();
                    first_bytes = size;
                }
                count += 1;
                bytes += size;
                next.insert(record.partition, record.offset + 1);
            }
            send(pb::consume_request::Kind::Commit(pb::Commit {
                offsets: next
                    .into_iter()
                    .map(|(partition, offset)| pb::PartitionOffset { partition, offset })
                    .collect(),
                generation: 0,
                acknowledge_only: true,
            }))?;
        }
        Ok(Reading {
            records: count,
            bytes,
            to_first,
            first_bytes,
            elapsed: start.elapsed(),
        })
    })
}

/// The answer to a REST produce request; only the number of results is checked (a 200
/// means every record was written).
#[derive(serde::Deserialize)]
struct ProduceResults {
    results: Vec<serde::de::IgnoredAny>,
}

/// A REST produce request body of `records` base64 values of `record_bytes`.
fn rest_body(record_bytes: usize, records: usize) -> bytes::Bytes {
    let value = base64::engine::general_purpose::STANDARD.encode(payload(record_bytes));
    let record = format!("{{\"value\":\"{value}\"}}");
    let mut body = String::with_capacity(64 + records * (record.len() + 1));
    body.push_str("{\"value_format\":\"base64\",\"records\":[");
    for index in 0..records {
        if index > 0 {
            body.push(',');
        }
        body.push_str(&record);
    }
    body.push_str("]}");
    bytes::Bytes::from(body)
}

/// A runtime for one run's client: two worker threads, the number of cores the benchmark is
/// meant for.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-gateway-client")
        .enable_all()
        .build()?)
}

async fn grpc_client(gateway: &GatewayAccess) -> anyhow::Result<GatewayClient<Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(gateway.grpc.clone())?
        .connect()
        .await
        .with_context(|| format!("connecting to the gateway's gRPC at {}", gateway.grpc))?;
    Ok(GatewayClient::new(channel))
}

/// A request carrying `token` in its `authorization` metadata.
fn authorized<T>(message: T, token: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

/// Waits until the gateway knows `topic` (it follows the control plane, which the Kafka
/// listener created the topic through).
async fn wait_for_topic(
    http: &reqwest::Client,
    gateway: &GatewayAccess,
    topic: &str,
) -> anyhow::Result<()> {
    let url = format!("{}/v1/topics/{topic}", gateway.rest);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = http
            .get(&url)
            .bearer_auth(&gateway.token)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?
            .status();
        if status == reqwest::StatusCode::OK {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the gateway still answers {status} for {topic} after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Microseconds, 1 µs to one minute.
fn histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 60_000_000, 3)?)
}

fn micros(elapsed: Duration) -> u64 {
    (elapsed.as_micros() as u64).max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_rest_body_holds_every_record_in_base64() {
        let body: serde_json::Value = serde_json::from_slice(&rest_body(100, 3)).unwrap();
        assert_eq!(body["value_format"], "base64");
        let records = body["records"].as_array().unwrap();
        assert_eq!(records.len(), 3);
        let value = base64::engine::general_purpose::STANDARD
            .decode(records[2]["value"].as_str().unwrap())
            .unwrap();
        assert_eq!(value, payload(100));
    }

    #[test]
    fn labels_name_the_api_and_the_record_size() {
        let spec = GatewaySpec::matrix(10)[1];
        assert_eq!(
            GatewayApi::GrpcProduce.label(&spec),
            "gateway gRPC produce 100 B"
        );
        assert_eq!(spec.to_string(), "100 B x10");
        assert_eq!(
            GatewaySpec::matrix(10)[0].topic("rest"),
            "bench-gateway-1024b-rest"
        );
        let [kib, small] = [GatewaySpec::matrix(10)[0], spec];
        assert_eq!((kib.rest_batch(), kib.stream_window()), (1000, 2048));
        assert_eq!((small.rest_batch(), small.stream_window()), (1000, 2048));
    }
}
