//! librdkafka workloads, each against one broker's bootstrap address, and the gateway's REST
//! and gRPC APIs measured beside them.

mod consume;
mod gateway;
mod group;
mod latency;
mod native_produce;
mod produce;
mod replay;
mod transactional;

use std::time::Duration;

use anyhow::Context;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

pub use consume::{consume, read_back, Reading};
pub use gateway::{
    grpc_consume, grpc_produce, rest_produce, GatewayAccess, GatewayApi, GatewayRun, GatewaySpec,
    Percentiles, CONSUME_CREDIT as GATEWAY_CONSUME_CREDIT, REST_BATCH as GATEWAY_REST_BATCH,
    REST_IN_FLIGHT as GATEWAY_REST_IN_FLIGHT, STREAM_WINDOW as GATEWAY_STREAM_WINDOW,
};
pub use group::{group_assignment, GroupSpec};
pub use latency::{latency, Latency, LatencySpec};
pub use native_produce::produce_native;
pub use produce::{produce, produce_with, ProduceSpec};
pub(crate) use produce::{send_blocking, CountingContext};
pub use replay::{replay_fetch, replay_produce, REPLAY_CONNECTIONS, REPLAY_IN_FLIGHT};
pub use transactional::{produce_idempotent, produce_transactional, TxnSpec};

/// Records and payload bytes moved in a time.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    pub records: u64,
    /// Record values only: what the application asked to move.
    pub bytes: u64,
    pub elapsed: Duration,
}

impl Throughput {
    pub fn mib_per_sec(&self) -> f64 {
        self.bytes as f64 / (1024.0 * 1024.0) / self.elapsed.as_secs_f64()
    }

    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
}

/// Incompressible record bytes (none of the runs compress, but nothing should flatter them).
pub(crate) fn payload(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A record size as the report prints it: `1 KiB`, `100 B`.
pub(crate) fn record_size(bytes: usize) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// A client configuration for `bootstrap` with the settings every workload shares.
/// `bootstrap` is `host:port[,host:port...]`, optionally followed by `?name=value&...`
/// librdkafka settings for the listener (the SASL_SSL runs' security settings, as
/// [`secured_bootstrap`] writes them).
pub(crate) fn client_config(bootstrap: &str) -> ClientConfig {
    let (servers, settings) = bootstrap.split_once('?').unwrap_or((bootstrap, ""));
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", servers)
        .set("broker.address.family", "v4");
    for setting in settings.split('&').filter(|s| !s.is_empty()) {
        let (name, value) = setting.split_once('=').unwrap_or((setting, ""));
        config.set(name, value);
    }
    config
}

/// The bootstrap of a SASL_SSL listener at `address`, its certificate signed by the
/// authority in the PEM file `ca`, for SASL/PLAIN with an API key.
pub fn secured_bootstrap(
    address: &str,
    ca: &std::path::Path,
    key_id: &str,
    secret: &str,
) -> String {
    format!(
        "{address}?security.protocol=SASL_SSL&sasl.mechanism=PLAIN&sasl.username={key_id}\
         &sasl.password={secret}&ssl.ca.location={}",
        ca.display()
    )
}

/// Deletes `topics`, so that their files leave the disk and the page cache before the
/// next run.
pub(crate) fn delete_topics(bootstrap: &str, topics: &[&str]) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = futures::executor::block_on(admin.delete_topics(topics, &options))?;
    for result in results {
        result.map_err(|(name, code)| anyhow::anyhow!("deleting topic {name}: {code}"))?;
    }
    Ok(())
}

/// Creates `topic` with `partitions` partitions and waits until a client sees all of them.
pub(crate) fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    create_replicated_topic(bootstrap, topic, partitions, 1)
}

/// Creates `topic` with `replication` replicas per partition (with more than one,
/// `min.insync.replicas=2`, the durable setting acks=all is used with) and waits until
/// metadata shows every partition.
pub(crate) fn create_replicated_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    if replication > 1 {
        new = new.set("min.insync.replicas", "2");
    }
    let results = futures::executor::block_on(admin.create_topics([&new], &options))?;
    for result in results {
        result.map_err(|(name, code)| anyhow::anyhow!("creating topic {name}: {code}"))?;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .with_context(|| format!("metadata for {topic}"))?;
        let seen = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        if seen == partitions as usize {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{topic} shows {seen} of {partitions} partitions after 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
