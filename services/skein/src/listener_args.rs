//! What `skein dev` and `skein broker` share: where the data lives, where Kafka clients
//! connect, the broker's configuration file, and the maintenance loop that runs until a
//! signal.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use skein_broker::controller_link::BrokerIdentity;
use skein_broker::{BrokerConfig, NodeSettings};
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
        rack: config.rack.clone(),
    }
}

impl ListenerArgs {
    /// How often a broker started with these arguments maintains its logs, and heartbeats.
    pub(crate) fn node_settings(&self, heartbeat_interval: std::time::Duration) -> NodeSettings {
        NodeSettings {
            maintenance_interval: std::time::Duration::from_secs(self.maintenance_interval_secs),
            heartbeat_interval,
        }
    }
}

/// Waits for SIGINT or SIGTERM.
pub(crate) async fn until_signal(
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) {
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}
