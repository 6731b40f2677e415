//! The `skein` binary, run as a user runs it.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};
use skein_log::{HandleCache, Log, LogConfig, SystemClock};

use common::http;

const SKEIN: &str = env!("CARGO_BIN_EXE_skein");

fn batch(n: usize) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            key: Some(format!("key{i}").into_bytes()),
            value: Some(b"value".to_vec()),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000,
        })
        .collect();
    build_batch(&records, Compression::None, ProducerFields::NONE).unwrap()
}

fn open(dir: &std::path::Path) -> Log {
    Log::open(
        dir,
        LogConfig::default(),
        Arc::new(SystemClock),
        HandleCache::new(8),
    )
    .unwrap()
}

#[test]
fn dev_recovers_partitions_and_closes_them_cleanly_on_ctrl_c() {
    let data = tempfile::tempdir().unwrap();
    let partition = data.path().join("logs").join("orders-0");
    let mut log = open(&partition);
    for _ in 0..10 {
        log.append(&mut batch(3), 0).unwrap();
    }
    drop(log); // as if the last process was killed
               // A topic registry left by a broker that ran on its own, before the catalog;
               // its partition names that broker's id of the topic.
    let local_id = "7f3c1f3e-2d4b-4a63-9a51-0c9a3f1d2e11";
    std::fs::write(data.path().join("topics"), format!("orders 1 {local_id}\n")).unwrap();
    skein_log::write_topic_id(&partition, uuid::Uuid::parse_str(local_id).unwrap()).unwrap();

    let mut child = common::dev::command(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains("press Ctrl-C") {
        assert!(Instant::now() < deadline, "skein dev did not start: {seen}");
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "skein dev exited: {seen}"
        );
        seen.push_str(&line);
    }
    // orders-0 (the offsets topic is made when a group first needs it).
    assert!(
        seen.contains("1 partition(s) opened, 1 recovered after an unclean shutdown"),
        "{seen}"
    );
    assert!(seen.contains("orders-0: scanned 1 segment(s)"), "{seen}");

    // The admin API runs beside the broker, and the printed token is an admin credential.
    let admin = after(&seen, "admin API: http://")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let token = after(&seen, "admin token (24 h): ").trim().to_owned();
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(&token),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(status, 201, "{body}");
    let (status, _) = http(&admin, "POST", "/v1/tenants", None, r#"{"name":"beta"}"#);
    assert_eq!(status, 401);

    // The old registry's topic moved into the catalog, and the recovered log is its partition.
    assert!(
        seen.contains("imported topic orders into the catalog"),
        "{seen}"
    );
    assert!(data.path().join("topics.imported").is_file());
    let (status, body) = http(
        &admin,
        "GET",
        "/v1/tenants/dev/topics/orders",
        Some(&token),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let catalog_id: serde_json::Value = serde_json::from_str(&body).unwrap();
    let catalog_id = uuid::Uuid::parse_str(catalog_id["topic_id"].as_str().unwrap()).unwrap();
    // A topic made through the admin API reaches the broker, which kcat sees.
    let kafka = after(&seen, "kafka: bootstrap server ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/dev/topics",
        Some(&token),
        r#"{"topic_name":"from-admin","partitions_count":2}"#,
    );
    assert_eq!(status, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listing = Command::new("kcat")
            .args(["-b", &kafka, "-L", "-t", "from-admin"])
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
        if listing.contains("topic \"from-admin\" with 2 partitions") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kcat never saw the topic: {listing}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let orders = Command::new("kcat")
        .args([
            "-b",
            &kafka,
            "-C",
            "-t",
            "orders",
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&orders.stdout).lines().count(),
        30,
        "the recovered records are readable"
    );

    let status = Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("closed cleanly"), "{rest}");

    let log = open(&partition);
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(log.recovery_report().bytes_scanned, 0);
    assert_eq!(log.log_end_offset(), 30);
    // The partition now names the catalog's id of the topic.
    assert_eq!(
        skein_log::read_topic_id(&partition).unwrap(),
        Some(catalog_id)
    );
}

#[test]
fn log_dump_lists_batches_and_fails_on_a_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append(&mut batch(2), 4).unwrap();
    log.append(&mut batch(3), 4).unwrap();
    log.close().unwrap();
    let segment = dir.path().join("00000000000000000000.log");
    let out = Command::new(SKEIN)
        .args(["log", "dump", "--records"])
        .arg(&segment)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("base_offset 2 last_offset 4 count 3"),
        "{text}"
    );
    assert!(
        text.contains("offset 4 timestamp 1700000000000 key key2 value_bytes 5"),
        "{text}"
    );
    assert!(text.contains("2 batch(es)"), "{text}");

    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&segment, bytes).unwrap();
    let out = Command::new(SKEIN)
        .args(["log", "dump"])
        .arg(&segment)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("invalid batch: batch crc"));
}

#[test]
fn bench_log_runs_end_to_end_and_reports_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let bench_dir = dir.path().join("bench");
    let out = Command::new(SKEIN)
        .args([
            "bench",
            "log",
            "--size-mib",
            "8",
            "--lookups",
            "200",
            "--dir",
        ])
        .arg(&bench_dir)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for figure in [
        "ratio log/raw",
        "random offset",
        "random timestamp",
        "after clean shutdown",
        "no recovery point",
    ] {
        assert!(text.contains(figure), "missing {figure}: {text}");
    }
    assert!(
        !bench_dir.try_exists().unwrap(),
        "the bench directory is removed afterwards"
    );
}

#[test]
fn bench_records_checks_every_batch_shape_against_its_references() {
    let out = Command::new(SKEIN)
        .args(["bench", "records", "--mib", "1", "--rounds", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for shape in ["1 KiB, none", "100 B, none", "lz4", "zstd", "gzip"] {
        let line = text
            .lines()
            .find(|l| l.contains(shape))
            .unwrap_or_else(|| panic!("missing {shape}: {text}"));
        // Seven figures after the name, each a positive number.
        let figures: Vec<f64> = line
            .split_whitespace()
            .rev()
            .take(7)
            .map(|f| f.parse().unwrap())
            .collect();
        assert!(figures.iter().all(|f| *f > 0.0), "{line}");
    }
}

#[test]
fn dev_takes_broker_and_topic_defaults_from_its_config_file() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("skein.toml");
    std::fs::write(
        &config,
        "[broker]\ndefault_partitions = 3\n[log]\n\"retention.ms\" = 1000\n",
    )
    .unwrap();
    let mut child = common::dev::command(&data.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut bootstrap = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while bootstrap.is_none() {
        assert!(Instant::now() < deadline, "skein dev did not start");
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "skein dev exited");
        if let Some(rest) = line.strip_prefix("kafka: bootstrap server ") {
            bootstrap = rest.split_whitespace().next().map(str::to_owned);
        }
    }
    let bootstrap = bootstrap.unwrap();
    let produce = Command::new("sh")
        .arg("-c")
        .arg(format!("echo hello | kcat -b {bootstrap} -P -t defaults"))
        .status()
        .unwrap();
    assert!(produce.success());
    let listing = Command::new("kcat")
        .args(["-b", &bootstrap, "-L", "-t", "defaults"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("with 3 partitions"), "{listing}");
    Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(
        common::processes::exits_within(&mut child, common::processes::SHUTDOWN_BOUND).success()
    );

    std::fs::write(&config, "[broker]\nnot_a_setting = 1\n").unwrap();
    let out = common::dev::command(&data.path().join("data"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_a_setting"));
}

/// Runs `skein migrate` against `url` and returns its output.
fn migrate(url: &str) -> std::process::Output {
    Command::new(SKEIN)
        .args(["migrate", "--database-url", url])
        .env_remove("SKEIN_DATABASE_URL")
        .output()
        .unwrap()
}

#[test]
fn migrate_creates_the_catalog_schema_once_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("catalog.db").display());
    let server = skein_testkit::Postgres::start().unwrap();
    let postgres = server.database("migrate").unwrap();
    let migrations = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../migrations/postgres"
    ))
    .unwrap()
    .filter(|entry| {
        entry
            .as_ref()
            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
    })
    .count();
    assert!(migrations >= 5);
    for url in [sqlite.as_str(), postgres.as_str()] {
        for _ in 0..2 {
            let out = migrate(url);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{url}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                stdout.contains(&format!("catalog is up to date ({migrations} migrations)")),
                "{stdout}"
            );
        }
    }
    assert!(dir.path().join("catalog.db").is_file());
    // A URL it cannot use is refused with a reason.
    let out = migrate("mysql://nope");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("postgres://"));
}

/// The rest of the line after `marker` in `text`.
fn after<'a>(text: &'a str, marker: &str) -> &'a str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {text}"))
        + marker.len();
    text[start..].lines().next().unwrap_or_default()
}

#[test]
fn control_plane_serves_the_admin_api_on_postgres_until_sigterm() {
    let server = skein_testkit::Postgres::start().unwrap();
    let url = server.database("control_plane").unwrap();
    let mut child = Command::new(SKEIN)
        .args([
            "control-plane",
            "--migrate",
            "--admin-listen",
            "127.0.0.1:0",
            "--controller-listen",
            "127.0.0.1:0",
            "--replica-id",
            "cp-test",
        ])
        .args(["--database-url", &url, "--bootstrap-token", "first-login"])
        .arg("--controller-secret-file")
        .arg(common::processes::controller_secret_file())
        .env_remove("SKEIN_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("Postgres catalog"), "{line}");
    let admin = after(&line, "admin API on http://")
        .split(';')
        .next()
        .unwrap()
        .trim()
        .to_owned();
    assert!(line.contains("controller on http://127.0.0.1:"), "{line}");
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants",
        Some("first-login"),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = http(&admin, "GET", "/v1/tenants/acme", Some("first-login"), "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""name":"acme""#), "{body}");
    assert_eq!(http(&admin, "GET", "/v1/tenants", Some("wrong"), "").0, 401);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        common::processes::exits_within(&mut child, common::processes::SHUTDOWN_BOUND).success()
    );
    // Without any admin credential it refuses to start.
    let out = Command::new(SKEIN)
        .args(["control-plane", "--database-url", &url])
        .arg("--controller-secret-file")
        .arg(common::processes::controller_secret_file())
        .env_remove("SKEIN_BOOTSTRAP_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no admin credential"));
    // Nor without the secret its callers' credentials are signed with.
    let out = Command::new(SKEIN)
        .args([
            "control-plane",
            "--database-url",
            &url,
            "--bootstrap-token",
            "x",
        ])
        .env_remove("SKEIN_CONTROLLER_SECRET_FILE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--controller-secret-file"));
}
