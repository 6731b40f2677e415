//! The brokers under test: Skein as a child process (the `skein` binary) or served from this
//! process, and Tansu as a child process.

use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use skein_broker::{Broker, BrokerConfig};
use tokio::sync::oneshot;

/// A broker the workloads can be pointed at.
pub trait BrokerUnderTest: std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn bootstrap(&self) -> String;
}

/// Skein on an ephemeral port, on its own runtime, writing to a data directory on disk.
#[derive(Debug)]
pub struct SkeinBroker {
    addr: SocketAddr,
    broker: Option<Arc<Broker>>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    runtime: tokio::runtime::Runtime,
}

impl SkeinBroker {
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("skein-broker")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let mut config = BrokerConfig::new(dir);
        config.advertised_host = "127.0.0.1".to_owned();
        config.advertised_port = addr.port();
        config.group_initial_rebalance_delay_ms = 0;
        let broker = Broker::open(config)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = runtime.spawn(skein_broker::serve(listener, Arc::clone(&broker), async {
            let _ = stopped.await;
        }));
        Ok(Self {
            addr,
            broker: Some(broker),
            stop: Some(stop),
            server: Some(server),
            runtime,
        })
    }
}

impl BrokerUnderTest for SkeinBroker {
    fn name(&self) -> &'static str {
        "skein"
    }

    fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for SkeinBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = self.runtime.block_on(server);
        }
        if let Some(broker) = self.broker.take() {
            if let Err(e) = broker.shutdown() {
                eprintln!("skein: shutdown failed: {e}");
            }
        }
    }
}

/// A broker binary run as a child process on an ephemeral port, killed when dropped: the
/// `skein` binary (`skein dev`) or Tansu with its memory storage engine.
#[derive(Debug)]
pub struct ChildBroker {
    name: &'static str,
    port: u16,
    child: Child,
}

impl ChildBroker {
    /// `skein dev` with its data in `dir` and no initial rebalance delay.
    pub fn skein(binary: &Path, dir: &Path) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut command = Command::new(binary);
        command
            .arg("dev")
            .arg("--data-dir")
            .arg(dir)
            .args(["--kafka-listen", &format!("127.0.0.1:{port}")])
            .args([
                "--admin-listen",
                "127.0.0.1:0",
                "--gateway-listen",
                "127.0.0.1:0",
            ])
            .env("SKEIN_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0");
        Self::spawn("skein", binary, port, command)
    }

    /// `tansu broker` keeping everything in memory.
    pub fn tansu(binary: &Path) -> anyhow::Result<Self> {
        let port = free_port()?;
        let url = format!("tcp://127.0.0.1:{port}");
        let mut command = Command::new(binary);
        command
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"]);
        let this = Self::spawn("tansu", binary, port, command)?;
        // The port opens before Tansu is ready for its first metadata request.
        std::thread::sleep(Duration::from_millis(200));
        Ok(this)
    }

    fn spawn(
        name: &'static str,
        binary: &Path,
        port: u16,
        mut command: Command,
    ) -> anyhow::Result<Self> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut this = Self { name, port, child };
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = this.child.try_wait()? {
                bail!("{name} exited before listening: {status}");
            }
            if Instant::now() > deadline {
                bail!("{name} did not listen on port {port} within 15 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(this)
    }
}

impl BrokerUnderTest for ChildBroker {
    fn name(&self) -> &'static str {
        self.name
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for ChildBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
