//! Test support shared by the crates that need a real PostgreSQL.
//!
//! [`Postgres::start`] gives a test a server: `DATABASE_URL` when it is set, otherwise a
//! throwaway cluster (`initdb` into a temporary directory, trust authentication, an ephemeral
//! port on 127.0.0.1) that is stopped and removed when the value is dropped. PostgreSQL refuses
//! to run as root, so as root the cluster runs as the `postgres` user.
//! [`Postgres::start_tls`] starts a throwaway cluster that takes TCP connections only over
//! TLS, with the certificate and key it is given.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Why a server could not be provided.
#[derive(Debug)]
pub struct PostgresError(pub String);

impl std::fmt::Display for PostgresError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PostgresError {}

fn fail(message: impl Into<String>) -> PostgresError {
    PostgresError(message.into())
}

/// A PostgreSQL server for one test binary: `DATABASE_URL`, or a cluster of its own.
#[derive(Debug)]
pub struct Postgres {
    /// `postgres://user@host:port` without a database name.
    base_url: String,
    /// The database `DATABASE_URL` names, used as is (it cannot be assumed we may create more).
    given_database: Option<String>,
    cluster: Option<Cluster>,
}

#[derive(Debug)]
struct Cluster {
    server: Child,
    port: u16,
    tools: Tools,
    dir: tempfile::TempDir,
}

/// Runs PostgreSQL's programs, as the `postgres` user when this process is root.
#[derive(Debug, Clone)]
struct Tools {
    bin: PathBuf,
    as_postgres_user: bool,
}

impl Postgres {
    /// `DATABASE_URL` when set; otherwise starts a throwaway cluster.
    pub fn start() -> Result<Self, PostgresError> {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            if !url.is_empty() {
                let (base, database) = split_url(&url);
                return Ok(Self {
                    base_url: base,
                    given_database: Some(database),
                    cluster: None,
                });
            }
        }
        Self::throwaway(None)
    }

    /// A throwaway cluster (whatever `DATABASE_URL` says) that serves TLS with the PEM
    /// certificate chain `certificate` and key `key`, and refuses TCP connections without
    /// it (`hostssl` only).
    pub fn start_tls(certificate: &Path, key: &Path) -> Result<Self, PostgresError> {
        Self::throwaway(Some((certificate, key)))
    }

    fn throwaway(tls: Option<(&Path, &Path)>) -> Result<Self, PostgresError> {
        let cluster = Cluster::start(tls)?;
        let base_url = format!("postgres://postgres@127.0.0.1:{}", cluster.port);
        Ok(Self {
            base_url,
            given_database: None,
            cluster: Some(cluster),
        })
    }

    /// A URL for a fresh, empty database (`name` plus a counter). With `DATABASE_URL`, the
    /// database it names.
    pub fn database(&self, name: &str) -> Result<String, PostgresError> {
        if let Some(database) = &self.given_database {
            return Ok(format!("{}/{}", self.base_url, database));
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let database = format!("{name}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let cluster = self
            .cluster
            .as_ref()
            .ok_or_else(|| fail("no cluster to create a database in"))?;
        let port = cluster.port.to_string();
        cluster.tools.run(
            "createdb",
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", &database],
        )?;
        Ok(format!("{}/{}", self.base_url, database))
    }

    /// Whether this is a throwaway cluster (so databases can be created freely).
    pub fn is_throwaway(&self) -> bool {
        self.cluster.is_some()
    }
}

fn split_url(url: &str) -> (String, String) {
    let without_query = url.split('?').next().unwrap_or(url);
    match without_query.rsplit_once('/') {
        Some((base, database)) if base.contains("://") && !base.ends_with('/') => {
            (base.to_owned(), database.to_owned())
        }
        _ => (without_query.to_owned(), "postgres".to_owned()),
    }
}

/// The directory holding `initdb`, `postgres` and `createdb`: `pg_config --bindir`, else the
/// newest under /usr/lib/postgresql.
fn postgres_bin() -> Result<PathBuf, PostgresError> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            fail(format!(
                "PostgreSQL is not installed (/usr/lib/postgresql: {e})"
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .ok_or_else(|| fail("no initdb under /usr/lib/postgresql/*/bin"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Tools {
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path).args(args);
            command
        } else {
            let mut command = Command::new(path);
            command.args(args);
            command
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), PostgresError> {
        let out = self
            .command(program, args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| fail(format!("{program}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(fail(format!(
                "{program} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Cluster {
    fn start(tls: Option<(&Path, &Path)>) -> Result<Self, PostgresError> {
        let tools = Tools {
            bin: postgres_bin()?,
            as_postgres_user: is_root(),
        };
        let dir = tempfile::Builder::new()
            .prefix("skein-pg")
            .tempdir()
            .map_err(|e| fail(format!("temp dir: {e}")))?;
        if tools.as_postgres_user {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .map_err(|e| fail(format!("chown: {e}")))?;
            if !status.success() {
                return Err(fail("chown of the cluster directory to postgres failed"));
            }
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| fail(format!("no free port: {e}")))?
            .port();
        let data = dir.path().join("data").to_string_lossy().into_owned();
        tools.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let socket_dir = dir.path().to_string_lossy().into_owned();
        let port_arg = port.to_string();
        let mut settings = vec![
            "listen_addresses=127.0.0.1".to_owned(),
            "fsync=off".to_owned(),
            "max_connections=200".to_owned(),
        ];
        if let Some((certificate, key)) = tls {
            settings.extend(serve_tls(&tools, &data, certificate, key)?);
        }
        let mut args = vec!["-D", &data, "-p", &port_arg, "-k", &socket_dir];
        for setting in &settings {
            args.extend(["-c", setting.as_str()]);
        }
        let server = tools
            .command("postgres", &args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| fail(format!("starting postgres: {e}")))?;
        // From here on, dropping the value stops the server.
        let mut this = Self {
            server,
            port,
            tools,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = this
                .tools
                .command("pg_isready", &["-h", "127.0.0.1", "-p", &port_arg, "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(this);
            }
            if let Ok(Some(status)) = this.server.try_wait() {
                return Err(fail(format!("postgres exited during start: {status}")));
            }
            if Instant::now() > deadline {
                return Err(fail("postgres did not accept connections within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self, data: &Path) {
        let data_arg = data.to_string_lossy().into_owned();
        let stopped = self
            .tools
            .command(
                "pg_ctl",
                &["stop", "-D", &data_arg, "-m", "immediate", "-w"],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = self.server.kill();
        }
        let _ = self.server.wait();
    }
}

/// Puts the certificate and key in the cluster's data directory (the key readable by its
/// owner only, as PostgreSQL requires) and makes TCP logins TLS-only; answers the settings
/// that turn TLS on.
fn serve_tls(
    tools: &Tools,
    data: &str,
    certificate: &Path,
    key: &Path,
) -> Result<Vec<String>, PostgresError> {
    use std::os::unix::fs::PermissionsExt;
    let data = Path::new(data);
    let (cert_file, key_file) = (data.join("server.crt"), data.join("server.key"));
    for (from, to) in [(certificate, &cert_file), (key, &key_file)] {
        std::fs::copy(from, to).map_err(|e| fail(format!("{}: {e}", from.display())))?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(format!("{}: {e}", to.display())))?;
    }
    if tools.as_postgres_user {
        let status = Command::new("chown")
            .arg("postgres:postgres")
            .args([&cert_file, &key_file])
            .status()
            .map_err(|e| fail(format!("chown: {e}")))?;
        if !status.success() {
            return Err(fail("chown of the TLS files to postgres failed"));
        }
    }
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).map_err(|e| fail(format!("pg_hba.conf: {e}")))?;
    let rules: String = rules
        .lines()
        .map(|line| match line.strip_prefix("host ") {
            Some(rest) => format!("hostssl {rest}\n"),
            None => format!("{line}\n"),
        })
        .collect();
    std::fs::write(&hba, rules).map_err(|e| fail(format!("pg_hba.conf: {e}")))?;
    Ok(vec![
        "ssl=on".to_owned(),
        format!("ssl_cert_file={}", cert_file.display()),
        format!("ssl_key_file={}", key_file.display()),
    ])
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        self.stop(&data);
    }
}
