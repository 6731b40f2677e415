//! A real broker on an ephemeral port, in the test's own runtime.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use skein_broker::{BrokerConfig, Node, NodeSettings};
use skein_client::{Client, ClientConfig};
use std::net::SocketAddr;
use tokio::net::TcpListener;

pub struct TestBroker {
    pub addr: SocketAddr,
    node: Option<Node>,
    _dir: tempfile::TempDir,
}

impl TestBroker {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts a broker after `configure` adjusts its settings.
    pub async fn start_with(configure: impl FnOnce(&mut BrokerConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = BrokerConfig::new(dir.path());
        config.advertised_port = addr.port();
        config.max_request_bytes = 16 * 1024 * 1024;
        config.group_initial_rebalance_delay_ms = 0;
        configure(&mut config);
        let node = Node::start(config, listener, NodeSettings::default())
            .await
            .unwrap();
        Self {
            addr,
            node: Some(node),
            _dir: dir,
        }
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new([self.bootstrap()]);
        config.client_id = "skein-client-tests".to_owned();
        config
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.client_config()).await.unwrap()
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        // Stops serving; the test's runtime ends the rest.
        drop(self.node.take());
    }
}
