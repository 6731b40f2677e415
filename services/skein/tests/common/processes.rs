//! Skein processes for the tests: a control plane on PostgreSQL, brokers joined to it, and
//! the Python client environment.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const SKEIN: &str = env!("CARGO_BIN_EXE_skein");
pub const TOKEN: &str = "cluster-test-token";

/// Where the tests keep the controller's secret and the credentials minted from it.
fn credentials_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("controller-secret"), "s".repeat(48)).unwrap();
        dir
    })
    .path()
}

/// The controller secret every test control plane signs credentials with.
pub fn controller_secret_file() -> std::path::PathBuf {
    credentials_dir().join("controller-secret")
}

/// A controller credential minted by `skein controller-token` for `role` (and `tenants`),
/// in a file. Each credential is minted once per test binary: tests run in parallel, and a
/// file rewritten while another test's process reads it would read empty.
pub fn controller_token_file(role: &str, tenants: &[&str]) -> std::path::PathBuf {
    static MINTED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let path = credentials_dir().join(format!("{role}-{}.token", tenants.join("+")));
    let mut minted = MINTED.lock().unwrap_or_else(|e| e.into_inner());
    if minted.contains(&path) {
        return path;
    }
    let mut command = Command::new(SKEIN);
    command
        .args(["controller-token", "--role", role, "--secret-file"])
        .arg(controller_secret_file());
    for tenant in tenants {
        command.args(["--tenant", tenant]);
    }
    if role == "broker" {
        // One credential for every broker of a test.
        command.args(["--acl-changes", "--any-node"]);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, &out.stdout).unwrap();
    minted.push(path.clone());
    path
}

/// A child process killed (SIGTERM, then waited for) when dropped.
pub struct Process {
    pub child: Child,
    pub first_line: String,
    /// The process's log, removed with the process unless SKEIN_TEST_LOG_DIR keeps it.
    log: Option<tempfile::TempPath>,
}

impl Process {
    pub fn start(command: &mut Command) -> Self {
        // Every process logs to a file: in SKEIN_TEST_LOG_DIR when set, kept for a failure to
        // be read later; else a temporary one, for a process that exits before starting to
        // show why.
        let (file, path, log) = match std::env::var_os("SKEIN_TEST_LOG_DIR") {
            Some(dir) => {
                static NEXT: std::sync::atomic::AtomicUsize =
                    std::sync::atomic::AtomicUsize::new(0);
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let path =
                    std::path::Path::new(&dir).join(format!("{}-{n}.log", std::process::id()));
                (std::fs::File::create(&path).ok(), path, None)
            }
            None => match tempfile::NamedTempFile::new() {
                Ok(temp) => {
                    let (file, log) = temp.into_parts();
                    (Some(file), log.to_path_buf(), Some(log))
                }
                Err(_) => (None, std::path::PathBuf::new(), None),
            },
        };
        let stderr = file.map_or_else(Stdio::null, Stdio::from);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (first, started) = std::sync::mpsc::channel();
        // Reads the first line, then keeps draining the output so that the process never
        // blocks on a full pipe.
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let _ = first.send(line);
            let mut sink = String::new();
            while stdout.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        let mut process = Self {
            child,
            first_line: String::new(),
            log,
        };
        // Dropping `process` on failure kills the child.
        process.first_line = started
            .recv_timeout(STARTUP_BOUND)
            .expect("the process said nothing for 60 s after it started");
        if process.first_line.is_empty() {
            let _ = process.child.wait();
            let said = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "the process exited before starting; its last lines:\n{}",
                tail.join("\n")
            );
        }
        process
    }

    pub fn stop(mut self) {
        self.terminate();
    }

    /// As if the machine lost power: SIGKILL.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = exits_within(&mut self.child, SHUTDOWN_BOUND);
        assert!(status.success(), "exited with {status}");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process that has not said it is serving this long after it started is stuck.
pub const STARTUP_BOUND: Duration = Duration::from_secs(60);

/// Longer than any process's shutdown grace: a process still running this long after
/// SIGTERM or SIGINT is stuck.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(60);

/// Waits for `child` to exit; one still running after `within` is killed, and the test
/// fails rather than hangs.
pub fn exits_within(child: &mut Child, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "process {} was still running {within:?} after it was asked to stop",
                child.id()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text after `marker` up to the next space, `;` or line end.
pub fn field(line: &str, marker: &str) -> String {
    let start = line
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {line}"))
        + marker.len();
    line[start..]
        .split(|c: char| c.is_whitespace() || c == ';')
        .next()
        .unwrap()
        .to_owned()
}

pub fn control_plane(url: &str) -> (Process, String, String) {
    control_plane_with_session(url, 2)
}

/// A control-plane process whose lease, and broker session, last `secs` seconds.
pub fn control_plane_with_session(url: &str, secs: u64) -> (Process, String, String) {
    control_plane_with(url, secs, &[])
}

/// A control-plane process with extra arguments, its lease and broker session `secs` long.
pub fn control_plane_with(url: &str, secs: u64, extra: &[&str]) -> (Process, String, String) {
    let secs = secs.to_string();
    let process = Process::start(
        Command::new(SKEIN)
            .args(["control-plane", "--migrate", "--database-url", url])
            .args([
                "--admin-listen",
                "127.0.0.1:0",
                "--controller-listen",
                "127.0.0.1:0",
            ])
            .args(["--bootstrap-token", TOKEN, "--lease-ttl-secs", &secs])
            .args(["--broker-session-ms", &format!("{secs}000")])
            .arg("--controller-secret-file")
            .arg(controller_secret_file())
            .args(extra)
            .env_remove("SKEIN_DATABASE_URL"),
    );
    let admin = field(&process.first_line, "admin API on http://");
    let controller = format!(
        "http://{}",
        field(&process.first_line, "controller on http://")
    );
    (process, admin, controller)
}

pub fn broker(controller: &str, data: &std::path::Path) -> (Process, String) {
    tenant_broker(controller, data, "acme", 0)
}

pub fn tenant_broker(
    controller: &str,
    data: &std::path::Path,
    tenant: &str,
    node_id: i32,
) -> (Process, String) {
    tenant_broker_with(controller, data, tenant, node_id, &[])
}

/// A broker of `tenant` with extra environment variables (`SKEIN_BROKER_*` settings).
pub fn tenant_broker_with(
    controller: &str,
    data: &std::path::Path,
    tenant: &str,
    node_id: i32,
    env: &[(&str, &str)],
) -> (Process, String) {
    tenant_broker_at(controller, data, tenant, node_id, env, "127.0.0.1:0")
}

/// A tenant's broker listening on `listen` (a restarted broker taking its old address back,
/// as a StatefulSet's pod keeps its name).
pub fn tenant_broker_at(
    controller: &str,
    data: &std::path::Path,
    tenant: &str,
    node_id: i32,
    env: &[(&str, &str)],
    listen: &str,
) -> (Process, String) {
    let process = Process::start(
        Command::new(SKEIN)
            .args(["broker", "--control-plane", controller, "--tenant", tenant])
            .env("SKEIN_BROKER_NODE_ID", node_id.to_string())
            .envs(env.iter().copied())
            .env(
                "SKEIN_CONTROLLER_TOKEN_FILE",
                controller_token_file("broker", &[tenant]),
            )
            .args(["--kafka-listen", listen, "--heartbeat-interval-secs", "1"])
            .arg("--data-dir")
            .arg(data),
    );
    let bootstrap = field(&process.first_line, " on ");
    (process, bootstrap)
}

pub fn python() -> String {
    let setup = format!(
        "{}/../../tests/clients/setup.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new("bash").arg(&setup).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

pub fn client(python: &str, bootstrap: &str, args: &[&str]) -> String {
    script(python, "controlled_cluster.py", bootstrap, args)
}

/// Runs `tests/clients/<name>` with the bootstrap address and `args`; answers its output.
pub fn script(python: &str, name: &str, bootstrap: &str, args: &[&str]) -> String {
    let script = format!("{}/../../tests/clients/{name}", env!("CARGO_MANIFEST_DIR"));
    // A client that hangs fails the test after five minutes instead of holding it up.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", python])
        .arg(script)
        .arg(bootstrap)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `tests/clients/<name>` with node, the packages `tests/clients/setup.sh` installed
/// (through [`python`]) on its path; answers its output.
pub fn node_script(name: &str, bootstrap: &str, args: &[&str]) -> String {
    let script = format!("{}/../../tests/clients/{name}", env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::var("SKEIN_NODE_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/skein/node",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", "node"])
        .arg(script)
        .arg(bootstrap)
        .args(args)
        .env("NODE_PATH", format!("{dir}/node_modules"))
        .env("KAFKAJS_NO_PARTITIONER_WARNING", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A gateway process following `controller`; answers it and its REST and gRPC addresses.
pub fn gateway(controller: &str, args: &[&str]) -> (Process, String, String) {
    let process = Process::start(
        Command::new(SKEIN)
            .args([
                "gateway",
                "--control-plane",
                controller,
                "--controller-token-file",
                &controller_token_file("gateway", &[]).display().to_string(),
                "--listen",
                "127.0.0.1:0",
                "--grpc-listen",
                "127.0.0.1:0",
            ])
            .args(args),
    );
    let rest = field(&process.first_line, "REST on http://");
    let grpc = field(&process.first_line, "gRPC on http://");
    (process, rest, grpc)
}

/// Retries `attempt` for up to 20 s (the metadata stream needs a moment to deliver changes).
pub fn wait_for<T>(mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "gave up waiting");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A broker of tenant acme (node 1) on `controller` with its data in `data`, given its
/// listener arguments and any others; add environment before starting it.
pub fn acme_broker_command(controller: &str, data: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(SKEIN);
    command
        .args(["broker", "--control-plane", controller, "--tenant", "acme"])
        .env(
            "SKEIN_CONTROLLER_TOKEN_FILE",
            controller_token_file("broker", &["acme"]),
        )
        .env("SKEIN_BROKER_NODE_ID", "1")
        .args(["--heartbeat-interval-secs", "1"])
        .args(args)
        .arg("--data-dir")
        .arg(data);
    command
}

/// [`acme_broker_command`], started.
pub fn acme_broker(controller: &str, data: &std::path::Path, args: &[&str]) -> Process {
    Process::start(&mut acme_broker_command(controller, data, args))
}

/// Brokers replicate over INTERNAL (SASL_PLAINTEXT, their controller credentials); clients
/// come to the SASL_PLAINTEXT listener.
pub const EVERY_TENANT_LISTENERS: &str = "INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0";

/// A broker serving every tenant, node `node`, on `listeners` (INTERNAL the inter-broker
/// one, SASL_PLAINTEXT).
pub fn every_tenant_broker(
    controller: &str,
    data: &std::path::Path,
    node: i32,
    listeners: &str,
) -> Command {
    every_tenant_broker_with(controller, data, node, listeners, "INTERNAL:SASL_PLAINTEXT")
}

/// [`every_tenant_broker`] with the listener security protocol map `map`.
pub fn every_tenant_broker_with(
    controller: &str,
    data: &std::path::Path,
    node: i32,
    listeners: &str,
    map: &str,
) -> Command {
    let mut command = Command::new(SKEIN);
    command
        .args(["broker", "--control-plane", controller])
        .env(
            "SKEIN_CONTROLLER_TOKEN_FILE",
            controller_token_file("broker", &["*"]),
        )
        .env("SKEIN_BROKER_NODE_ID", node.to_string())
        .args(["--heartbeat-interval-secs", "1", "--listeners", listeners])
        .args(["--listener-security-protocol-map", map])
        .arg("--data-dir")
        .arg(data);
    if listeners.contains("INTERNAL://") {
        command.args(["--inter-broker-listener-name", "INTERNAL"]);
    }
    command
}
