//! Producer throughput with Skein's own client (`skein-client`), which writes each request
//! whole: over TLS its frames leave in full-size records. It shows the broker's cost of TLS
//! apart from librdkafka's, whose SSL transport writes one TLS record per buffer segment
//! (see `docs/benchmarks.md`).

use std::time::Instant;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use skein_client::{
    Acks, Client, ClientConfig, ClientTls, ProduceRecord, Producer, ProducerConfig, SaslPlain,
};

use super::{create_replicated_topic, payload, ProduceSpec, Throughput};

/// Records in one `send`: about one librdkafka batch (`batch.size`, 1 MB) of 1 KiB records.
const RECORDS_PER_SEND: usize = 1000;

/// Sends in flight at once on the client's one connection to the broker.
const SENDS_IN_FLIGHT: usize = 4;

/// `skein-client`'s settings for `bootstrap`, written as for [`super::client_config`]:
/// `host:port` with optional `?security.protocol=...&sasl.username=...&sasl.password=...&
/// ssl.ca.location=...`.
fn native_config(bootstrap: &str) -> anyhow::Result<ClientConfig> {
    let (servers, settings) = bootstrap.split_once('?').unwrap_or((bootstrap, ""));
    let setting = |name: &str| {
        settings
            .split('&')
            .filter_map(|s| s.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
    };
    let mut config = ClientConfig::new(servers.split(','));
    let protocol = setting("security.protocol").unwrap_or_else(|| "PLAINTEXT".to_owned());
    if protocol.ends_with("SSL") {
        let ca = setting("ssl.ca.location")
            .ok_or_else(|| anyhow::anyhow!("{protocol} without ssl.ca.location"))?;
        config.tls = Some(ClientTls::with_ca_file(ca)?);
    }
    if protocol.starts_with("SASL") {
        config.sasl_plain = Some(SaslPlain {
            authorization_id: String::new(),
            username: setting("sasl.username").unwrap_or_default(),
            password: setting("sasl.password").unwrap_or_default(),
        });
    }
    Ok(config)
}

/// Produces `spec.records` unkeyed records of `spec.record_bytes` to a new `topic` with
/// `skein-client`, round-robin over the partitions, [`SENDS_IN_FLIGHT`] requests at a time;
/// the time runs from the first send to the last acknowledgement.
pub fn produce_native(
    bootstrap: &str,
    topic: &str,
    spec: &ProduceSpec,
) -> anyhow::Result<Throughput> {
    create_replicated_topic(bootstrap, topic, spec.partitions, spec.replication)?;
    let config = native_config(bootstrap)?;
    let value = Bytes::from(payload(spec.record_bytes));
    let acks = if spec.acks < 0 {
        Acks::All
    } else {
        Acks::Leader
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = Client::connect(config).await?;
        let mut settings = ProducerConfig::default();
        settings.acks = acks;
        let producer = Producer::new(client, settings);
        let records = usize::try_from(spec.records)?;
        let sends = (0..records).step_by(RECORDS_PER_SEND).map(|first| {
            let count = RECORDS_PER_SEND.min(records - first);
            let batch: Vec<ProduceRecord> = (0..count)
                .map(|_| ProduceRecord::new(value.clone()))
                .collect();
            (batch, &producer)
        });
        let start = Instant::now();
        futures::stream::iter(sends)
            .map(|(batch, producer)| producer.send(topic, batch))
            .buffer_unordered(SENDS_IN_FLIGHT)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        Ok(Throughput {
            records: spec.records,
            bytes: spec.records * spec.record_bytes as u64,
            elapsed: start.elapsed(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secured_bootstrap_gives_tls_and_sasl_plain() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "").unwrap();
        // An empty authority file is refused rather than trusting nothing.
        let bootstrap = super::super::secured_bootstrap("127.0.0.1:9093", &ca, "key", "secret");
        assert!(native_config(&bootstrap).is_err());
        let plain = native_config("127.0.0.1:9092").unwrap();
        assert!(plain.tls.is_none() && plain.sasl_plain.is_none());
        assert_eq!(plain.bootstrap_servers, vec!["127.0.0.1:9092".to_owned()]);
    }
}
