//! What `skein dev` and `skein broker` share: where the data lives, where Kafka clients
//! connect, the broker's configuration file, and the maintenance loop that runs until a
//! signal.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use skein_broker::controller_link::BrokerIdentity;
use skein_broker::{Broker, BrokerConfig};
use tokio::net::TcpListener;

#[derive(Debug, clap::Args)]
pub(crate) struct ListenerArgs {
    /// Where topics and partition logs live
    #[arg(long, env = "SKEIN_DATA_DIR", default_value = "./skein-data")]
    pub(crate) data_dir: PathBuf,
    /// Address the Kafka listener binds (port 0 picks a free one)
    #[arg(long, env = "SKEIN_KAFKA_LISTEN", default_value = "127.0.0.1:9092")]
    pub(crate) kafka_listen: SocketAddr,
    /// A TOML configuration file (see `docs/configuration.md`)
    #[arg(long, env = "SKEIN_BROKER_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Seconds between retention and compaction runs
    #[arg(long, default_value_t = 30)]
    pub(crate) maintenance_interval_secs: u64,
}

impl ListenerArgs {
    /// Binds the Kafka listener and builds the broker's configuration (file, environment,
    /// and the address clients were given).
    pub(crate) async fn bind(&self) -> anyhow::Result<(TcpListener, BrokerConfig)> {
        let listener = TcpListener::bind(self.kafka_listen)
            .await
            .with_context(|| {
                format!("failed to bind the Kafka listener on {}", self.kafka_listen)
            })?;
        let address = listener.local_addr()?;
        let mut config = BrokerConfig::new(&self.data_dir);
        crate::config::apply(&mut config, self.config.as_deref(), std::env::vars())?;
        config.advertised_host = address.ip().to_string();
        config.advertised_port = address.port();
        Ok((listener, config))
    }
}

/// Who a broker with `config` is to the controller, serving `tenant`.
pub(crate) fn identity(config: &BrokerConfig, tenant: &str) -> BrokerIdentity {
    BrokerIdentity {
        node_id: config.node_id,
        host: config.advertised_host.clone(),
        port: i32::from(config.advertised_port),
        tenant: tenant.to_owned(),
    }
}

/// Runs retention and compaction every `interval_secs` until SIGINT or SIGTERM.
pub(crate) async fn maintain_until_signal(
    broker: &Arc<Broker>,
    interval_secs: u64,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> anyhow::Result<()> {
    let mut ticks = tokio::time::interval(Duration::from_secs(interval_secs.max(1)));
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = ticks.tick() => {
                let b = Arc::clone(broker);
                let report = tokio::task::spawn_blocking(move || b.logs().maintain()).await?;
                if report.retention.segments_deleted > 0
                    || report.compaction.segments_rewritten > 0
                    || !report.failed.is_empty()
                {
                    tracing::info!(
                        deleted_segments = report.retention.segments_deleted,
                        compacted_segments = report.compaction.segments_rewritten,
                        failed_partitions = report.failed.len(),
                        "maintenance"
                    );
                }
            }
        }
    }
    Ok(())
}
