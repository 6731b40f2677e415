//! The brokers under test: Skein as a child process (the `skein` binary, with its gateway)
//! or served from this process, and Tansu as a child process.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use skein_broker::{BrokerConfig, Node, NodeSettings};

use crate::workload::GatewayAccess;

/// A broker the workloads can be pointed at.
pub trait BrokerUnderTest: std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn bootstrap(&self) -> String;
    /// Skein's REST and gRPC gateway in front of it, when it runs one.
    fn gateway(&self) -> Option<&GatewayAccess> {
        None
    }
    /// The CPU time the broker has used so far, where it runs as a process of its own.
    fn cpu_time(&self) -> Option<Duration> {
        None
    }
}

/// Skein on an ephemeral port, on its own runtime, writing to a data directory on disk.
#[derive(Debug)]
pub struct SkeinBroker {
    addr: SocketAddr,
    node: Option<Node>,
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
        let node = runtime.block_on(Node::start(config, listener, NodeSettings::default()))?;
        Ok(Self {
            addr,
            node: Some(node),
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
        if let Some(node) = self.node.take() {
            if let Err(e) = self.runtime.block_on(node.shutdown()) {
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
    gateway: Option<GatewayAccess>,
}

impl ChildBroker {
    /// `skein dev` with its data in `dir` and no initial rebalance delay; its admin API and
    /// both gateway listeners on ephemeral ports, the gateway's addresses and development
    /// token read from what it prints.
    pub fn skein(binary: &Path, dir: &Path) -> anyhow::Result<Self> {
        Self::skein_with(binary, dir, &[])
    }

    /// `skein dev` as [`ChildBroker::skein`] starts it, with `extra` arguments
    /// (`--brokers 3` for a cluster).
    pub fn skein_with(binary: &Path, dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let port = free_port()?;
        let listen = format!("127.0.0.1:{port}");
        Self::skein_on(
            binary,
            dir,
            port,
            &[&["--kafka-listen", &listen], extra].concat(),
        )
    }

    /// `skein dev` with a SASL_SSL listener beside its PLAINTEXT one, its certificate made
    /// with `openssl` in `dir/tls`; answers the broker and the SASL_SSL listener's bootstrap
    /// (SASL/PLAIN with the API key `skein dev` keeps in its data directory).
    pub fn skein_secured(binary: &Path, dir: &Path) -> anyhow::Result<(Self, String)> {
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls)?;
        let (ca, certificate, key) = self_signed_for_localhost(&tls)?;
        let (port, tls_port) = (free_port()?, free_port()?);
        let listeners = format!("PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{tls_port}");
        let (certificate, key) = (certificate.display().to_string(), key.display().to_string());
        let broker = Self::skein_on(
            binary,
            &dir.join("data"),
            port,
            &[
                "--listeners",
                &listeners,
                "--ssl-certificate-location",
                &certificate,
                "--ssl-key-location",
                &key,
            ],
        )?;
        let kept = std::fs::read_to_string(dir.join("data").join("dev-api-key"))
            .context("skein dev's API key")?;
        let (id, secret) = kept
            .trim()
            .split_once(':')
            .context("skein dev's API key is not id:secret")?;
        let bootstrap =
            crate::workload::secured_bootstrap(&format!("127.0.0.1:{tls_port}"), &ca, id, secret);
        Ok((broker, bootstrap))
    }

    /// The CPU time (user and system, every thread) the broker process has used so far,
    /// from `/proc/<pid>/stat`; `None` where there is no such file.
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        cpu_time_of(&stat)
    }

    /// The broker process's resident memory (`VmRSS` in `/proc/<pid>/status`).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// `skein dev` serving its PLAINTEXT listener on `port`, with `extra` arguments.
    fn skein_on(binary: &Path, dir: &Path, port: u16, extra: &[&str]) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command
            .arg("dev")
            .args(extra)
            .arg("--data-dir")
            .arg(dir)
            .args([
                "--admin-listen",
                "127.0.0.1:0",
                "--gateway-listen",
                "127.0.0.1:0",
                "--gateway-grpc-listen",
                "127.0.0.1:0",
                "--kafka-sasl-listen",
                "127.0.0.1:0",
            ])
            .env("SKEIN_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0");
        let mut this = Self::spawn("skein", binary, port, command.stdout(Stdio::piped()))?;
        let stdout = this
            .child
            .stdout
            .take()
            .context("skein dev's standard output")?;
        // A three-broker `skein dev` on a loaded two-core machine (the smoke tests run
        // beside each other) can take longer than a single broker to say it is running.
        this.gateway = read_gateway(stdout, Duration::from_secs(60))?;
        if this.gateway.is_none() {
            eprintln!("skein: {} runs no gateway", binary.display());
        }
        Ok(this)
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
        let this = Self::spawn("tansu", binary, port, command.stdout(Stdio::null()))?;
        // The port opens before Tansu is ready for its first metadata request.
        std::thread::sleep(Duration::from_millis(200));
        Ok(this)
    }

    /// Starts `command` (its standard output already chosen) and waits for its port.
    fn spawn(
        name: &'static str,
        binary: &Path,
        port: u16,
        command: &mut Command,
    ) -> anyhow::Result<Self> {
        let child = command
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut this = Self {
            name,
            port,
            child,
            gateway: None,
        };
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

/// utime + stime of a `/proc/<pid>/stat` line, in Linux's fixed user-visible clock ticks
/// (`USER_HZ`, 100 per second). The fields are counted after the command name, which is in
/// parentheses and may hold spaces.
fn cpu_time_of(stat: &str) -> Option<Duration> {
    const USER_HZ: u64 = 100;
    let (_, after_name) = stat.rsplit_once(") ")?;
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 1000 / USER_HZ))
}

impl BrokerUnderTest for ChildBroker {
    fn name(&self) -> &'static str {
        self.name
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn gateway(&self) -> Option<&GatewayAccess> {
        self.gateway.as_ref()
    }

    fn cpu_time(&self) -> Option<Duration> {
        ChildBroker::cpu_time(self)
    }
}

impl Drop for ChildBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An authority and a certificate for 127.0.0.1 it signed, made with `openssl` in `dir`:
/// (authority, certificate, key), PEM files.
fn self_signed_for_localhost(
    dir: &Path,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf, std::path::PathBuf)> {
    let run = |args: &[&str]| -> anyhow::Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .context("running openssl, which makes the SASL_SSL listener's certificate")?;
        anyhow::ensure!(
            out.status.success(),
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=skein-bench-ca",
        ],
    ]
    .concat())?;
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat())?;
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n")?;
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ])?;
    Ok((
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    ))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Reads `skein dev`'s standard output on a thread of its own (which drains it until the
/// process ends, so it never blocks on a full pipe) until the line saying it is running;
/// returns the gateway it printed, or `None` when it printed none.
fn read_gateway(stdout: ChildStdout, within: Duration) -> anyhow::Result<Option<GatewayAccess>> {
    let (lines, received) = mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("skein-stdout".to_owned())
        .spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // Once the reader below is done, the rest is only drained.
                let _ = lines.send(line);
            }
        })?;
    let deadline = Instant::now() + within;
    let mut printed = PrintedGateway::default();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(line) => {
                if printed.read(&line) {
                    return Ok(printed.access());
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("skein dev did not say it was running within {within:?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("skein dev closed its output before saying it was running")
            }
        }
    }
}

/// What `skein dev` prints about its gateway, gathered line by line.
#[derive(Debug, Default)]
struct PrintedGateway {
    rest: Option<String>,
    grpc: Option<String>,
    token: Option<String>,
}

impl PrintedGateway {
    /// Takes in one line; true once `skein dev` says it is running (its last line at start).
    fn read(&mut self, line: &str) -> bool {
        let word_after = |marker: &str| {
            line.split_once(marker)
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .map(str::to_owned)
        };
        if line.starts_with("gateway: ") {
            self.rest = word_after("REST ");
            self.grpc = word_after("gRPC ");
        } else if line.starts_with("dev token ") {
            self.token = word_after("): ");
        }
        line.starts_with("running ")
    }

    fn access(self) -> Option<GatewayAccess> {
        Some(GatewayAccess {
            rest: self.rest?,
            grpc: self.grpc?,
            token: self.token?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_read_from_what_skein_dev_prints() {
        let printed = "\
skein dev: data directory /tmp/d
kafka: bootstrap server 127.0.0.1:9092 (tenant \"dev\"; topics are created on first use)
admin API: http://127.0.0.1:43999 (catalog /tmp/d/catalog.db)
admin token (24 h): eyJadmin
gateway: REST http://127.0.0.1:18080 (OpenAPI at /openapi.json); gRPC http://127.0.0.1:9090 (skein.v1.Gateway, with reflection)
dev token (24 h; writes and reads every topic of tenant \"dev\"): eyJdev.x.y
running retention and compaction every 30s; press Ctrl-C to stop";
        let mut gateway = PrintedGateway::default();
        let running: Vec<bool> = printed.lines().map(|l| gateway.read(l)).collect();
        assert_eq!(running.iter().filter(|r| **r).count(), 1);
        assert_eq!(running.last(), Some(&true));
        let access = gateway.access().expect("a gateway");
        assert_eq!(access.rest, "http://127.0.0.1:18080");
        assert_eq!(access.grpc, "http://127.0.0.1:9090");
        assert_eq!(access.token, "eyJdev.x.y");

        let mut none = PrintedGateway::default();
        assert!(none.read("running retention and compaction every 30s; press Ctrl-C to stop"));
        assert!(none.access().is_none());
    }

    #[test]
    fn cpu_time_adds_user_and_system_ticks() {
        let stat = "4242 (skein dev) S 1 4242 4242 0 -1 4194560 3120 0 0 0 250 75 0 0 20 0 9 0";
        assert_eq!(cpu_time_of(stat), Some(Duration::from_millis(3250)));
        assert_eq!(cpu_time_of("4242 (skein"), None);
    }
}
