//! A real broker on an ephemeral port, for tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod raw;

use std::net::SocketAddr;
use std::sync::Arc;

use skein_broker::{Broker, BrokerConfig, Node, NodeSettings};
use tokio::net::TcpListener;

pub struct TestBroker {
    pub addr: SocketAddr,
    tune: fn(&mut BrokerConfig),
    node: Option<Node>,
    pub runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

impl TestBroker {
    pub fn start() -> Self {
        Self::start_with(|_| {})
    }

    /// A broker whose configuration `tune` changes after the test defaults.
    pub fn start_with(tune: fn(&mut BrokerConfig)) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut this = Self {
            addr,
            tune,
            node: None,
            runtime,
            dir,
        };
        this.run(listener);
        this
    }

    fn run(&mut self, listener: TcpListener) {
        let mut config = BrokerConfig::new(self.dir.path());
        config.advertised_port = self.addr.port();
        config.max_request_bytes = 1024 * 1024;
        config.group_initial_rebalance_delay_ms = 0;
        (self.tune)(&mut config);
        let node = self
            .runtime
            .block_on(Node::start(config, listener, NodeSettings::default()))
            .unwrap();
        self.node = Some(node);
    }

    /// Adds a SASL_PLAINTEXT listener on an ephemeral port; answers its address.
    pub fn add_sasl_listener(&mut self) -> SocketAddr {
        let listener = self
            .runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let info = skein_broker::listeners::ListenerInfo {
            name: "CLIENT".to_owned(),
            protocol: skein_broker::listeners::SecurityProtocol::SaslPlaintext,
            advertised_host: addr.ip().to_string(),
            advertised_port: addr.port(),
            tls: None,
        };
        let node = self.node.as_mut().unwrap();
        let _guard = self.runtime.enter();
        node.add_listener(listener, info);
        addr
    }

    /// The running broker (drop it before a restart: the logs close only once nothing holds
    /// the broker).
    pub fn broker(&self) -> Arc<Broker> {
        Arc::clone(self.node.as_ref().unwrap().broker())
    }

    fn stop(&mut self) {
        if let Some(node) = self.node.take() {
            self.runtime.block_on(node.shutdown()).unwrap();
        }
    }

    /// Stops the broker cleanly and starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        let listener = self.runtime.block_on(TcpListener::bind(self.addr)).unwrap();
        self.run(listener);
    }

    /// Stops the broker cleanly, lets `while_down` change its data directory, and starts it
    /// again on the same port.
    pub fn restart_after(&mut self, while_down: impl FnOnce(&std::path::Path)) {
        self.stop();
        while_down(self.dir.path());
        let listener = self.runtime.block_on(TcpListener::bind(self.addr)).unwrap();
        self.run(listener);
    }

    /// Creates a topic directly in the broker's registry.
    pub fn create_topic(&self, name: &str, partitions: i32) -> skein_broker::TopicInfo {
        let broker = self.broker();
        self.runtime
            .block_on(broker.topics.create(name, partitions))
            .unwrap()
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `tests/clients/setup.sh`, which installs the third-party client packages (once), and
/// returns the Python interpreter it prepared.
pub fn setup_clients() -> String {
    let setup = format!(
        "{}/../../tests/clients/setup.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = std::process::Command::new("bash")
        .arg(&setup)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{setup} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
