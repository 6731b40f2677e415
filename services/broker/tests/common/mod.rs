//! A real broker on an ephemeral port, for tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use skein_broker::{Broker, BrokerConfig};
use tokio::net::TcpListener;

pub struct TestBroker {
    pub addr: SocketAddr,
    pub broker: Arc<Broker>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    pub runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl TestBroker {
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = BrokerConfig::new(dir.path());
        config.advertised_port = addr.port();
        config.max_request_bytes = 1024 * 1024;
        let broker = Broker::open(config).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = runtime.spawn(skein_broker::serve(listener, Arc::clone(&broker), async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            broker,
            stop: Some(stop),
            server: Some(server),
            runtime,
            _dir: dir,
        }
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = self.runtime.block_on(server);
        }
    }
}
