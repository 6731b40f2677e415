//! `skein dev --brokers N`: brokers 1 to N-1 beside the one `skein dev` runs itself, each a
//! `skein broker` child process joined to the in-process controller, so a developer can kill
//! one (`kill -9 <pid>`) and watch its partitions fail over. A broker that exits is started
//! again after a pause, on the same data, so it catches up and rejoins the ISR.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

/// How long a broker that exited stays down before it is started again: longer than the
/// broker session (6 s), so its partitions fail over to the other replicas first, as they
/// would for a lost machine. Back sooner, the broker would simply lead them again in the
/// same epoch from its own log, and nothing would have failed over to watch.
const RESTART_AFTER: Duration = Duration::from_secs(8);

/// What the child brokers need to know.
pub(crate) struct ChildBrokers {
    /// The in-process controller's gRPC address.
    pub controller: String,
    /// Each child's broker credential (node id, token), written to a file it reads.
    pub tokens: Vec<(i32, String)>,
    pub data_dir: PathBuf,
    /// `skein dev`'s own Kafka listener: the children take the ports after it (or free
    /// ones, chosen at start, when it has port 0).
    pub kafka_listen: SocketAddr,
    pub config: Option<PathBuf>,
    pub replication_factor: i32,
}

/// The process a supervisor runs now, if any.
type Slot = Arc<Mutex<Option<Child>>>;

/// The running children; [`Running::stop`] ends them cleanly.
pub(crate) struct Running {
    stopping: Arc<AtomicBool>,
    children: Vec<(Slot, std::thread::JoinHandle<()>)>,
}

impl ChildBrokers {
    /// Starts brokers `1..count` and supervises them.
    pub(crate) fn start(self, count: u16) -> anyhow::Result<Running> {
        let stopping = Arc::new(AtomicBool::new(false));
        let mut children = Vec::new();
        for node in 1..count {
            let port = match self.kafka_listen.port() {
                // A port free now, kept across the child's restarts so that its address
                // stays the one the cluster registered.
                0 => std::net::TcpListener::bind((self.kafka_listen.ip(), 0))
                    .and_then(|free| free.local_addr())
                    .context("no free port for a broker")?
                    .port(),
                port => port
                    .checked_add(node)
                    .context("no port left for a broker")?,
            };
            let listen = SocketAddr::new(self.kafka_listen.ip(), port);
            let token = self
                .tokens
                .iter()
                .find(|(n, _)| *n == i32::from(node))
                .map(|(_, token)| token)
                .context("no credential minted for a broker")?;
            let token_file = self.data_dir.join(format!("broker-{node}-credential"));
            write_private(&token_file, token)?;
            let dir = self.data_dir.join(format!("broker-{node}"));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("failed to create {}", dir.display()))?;
            let mut command =
                Command::new(std::env::current_exe().context("cannot find this executable")?);
            command
                .args([
                    "broker",
                    "--tenant",
                    super::dev::DEV_TENANT,
                    "--control-plane",
                ])
                .arg(&self.controller)
                .arg("--controller-token-file")
                .arg(&token_file)
                .arg("--kafka-listen")
                .arg(listen.to_string())
                .arg("--data-dir")
                .arg(&dir)
                .args(["--heartbeat-interval-secs", "1"])
                .env("SKEIN_BROKER_NODE_ID", node.to_string())
                .env("SKEIN_DEV_PARENT_PID", std::process::id().to_string())
                .env(
                    "SKEIN_BROKER_DEFAULT_REPLICATION_FACTOR",
                    self.replication_factor.to_string(),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if let Some(config) = &self.config {
                command.arg("--config").arg(config);
            }
            let slot: Slot = Arc::new(Mutex::new(None));
            let thread = {
                let slot = Arc::clone(&slot);
                let stopping = Arc::clone(&stopping);
                std::thread::spawn(move || supervise(node, command, &slot, &stopping))
            };
            children.push((slot, thread));
        }
        Ok(Running { stopping, children })
    }
}

/// Runs one child broker until `stopping`, starting it again whenever it exits.
fn supervise(node: u16, mut command: Command, slot: &Mutex<Option<Child>>, stopping: &AtomicBool) {
    while !stopping.load(Ordering::Acquire) {
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                println!("broker {node}: failed to start: {e}");
                return;
            }
        };
        let pid = child.id();
        let stdout = child.stdout.take();
        if let Ok(mut guard) = slot.lock() {
            *guard = Some(child);
        }
        if let Some(stdout) = stdout {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("broker {node} (pid {pid}): {line}");
            }
        }
        // Output ends when the process does.
        let status = slot
            .lock()
            .ok()
            .and_then(|mut guard| guard.take())
            .and_then(|mut child| child.wait().ok());
        if stopping.load(Ordering::Acquire) {
            return;
        }
        let how = status.map_or_else(|| "ended".to_owned(), |s| s.to_string());
        println!(
            "broker {node} (pid {pid}) exited ({how}); starting it again in {}s",
            RESTART_AFTER.as_secs()
        );
        std::thread::sleep(RESTART_AFTER);
    }
}

impl Running {
    /// Stops every child with SIGTERM (they close their logs) and waits for them.
    pub(crate) fn stop(self) {
        self.stopping.store(true, Ordering::Release);
        for (slot, _) in &self.children {
            if let Ok(guard) = slot.lock() {
                if let Some(child) = guard.as_ref() {
                    let _ = Command::new("kill")
                        .args(["-TERM", &child.id().to_string()])
                        .status();
                }
            }
        }
        for (_, thread) in self.children {
            let _ = thread.join();
        }
    }
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("failed to create {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}
