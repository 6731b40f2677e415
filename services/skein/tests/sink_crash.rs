//! A sink through crashes: two control-plane replicas run its workers (a third is the
//! controller), 100k records are produced while the test SIGKILLs a worker replica at
//! random moments (`SKEIN_SINK_KILLS`, default 20) and starts it again, cuts workers'
//! database connections in the middle of a transaction, and pauses a replica with SIGSTOP
//! past its ownership before letting it go on. At the end the table holds every record
//! exactly once (count, distinct values and a checksum over the payloads), the positions
//! stored in the target database are the log end offsets, and nothing more arrives.
//!
//! And a sink reaches only where the operator allows: a database URL that leads to this
//! host's loopback, a link-local or cloud-metadata address, or a Unix socket is refused
//! before any connection, and what a service that is not PostgreSQL answers never comes
//! back in the error.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::processes::*;
use serde_json::json;
use skein_client::{Client, ClientConfig, OffsetSpec, ProduceRecord, Producer, ProducerConfig};

const RECORDS: u64 = 100_000;
/// Produced while a worker replica is paused, so it wakes to records it may not apply.
const TAIL: u64 = 10_000;
const PARTITIONS: i32 = 4;

/// A pause of 0.5 to 2 s, different each time.
fn random_pause() -> Duration {
    let noise = RandomState::new().hash_one(Instant::now()) % 1500;
    Duration::from_millis(500 + noise)
}

fn signal(process: &Process, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Terminates the target database's connections that are inside a transaction that holds
/// a transaction id (a worker between its claim check and its commit), trying for up to
/// `within`; whether one was cut.
fn cut_a_transaction(
    runtime: &tokio::runtime::Runtime,
    pool: &sqlx::PgPool,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let terminated: i64 = runtime
            .block_on(
                sqlx::query_scalar(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM \
                     pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL \
                     AND state IN ('active', 'idle in transaction')) t",
                )
                .fetch_one(pool),
            )
            .unwrap();
        if terminated > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

fn payload(n: u64) -> String {
    json!({"n": n, "pad": format!("{n:0>64}")}).to_string()
}

#[test]
fn a_sink_applies_every_record_once_while_its_workers_are_killed() {
    let kills: usize = std::env::var("SKEIN_SINK_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let postgres = skein_testkit::Postgres::start().unwrap();
    let catalog = postgres.database("sink_catalog").unwrap();
    let target = postgres.database("sink_target").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pool = runtime.block_on(sqlx::PgPool::connect(&target)).unwrap();
    runtime
        .block_on(sqlx::query("CREATE TABLE events (n bigint, pad text)").execute(&pool))
        .unwrap();

    let work = tempfile::tempdir().unwrap();
    let secret = work.path().join("sink-secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
    let secret_arg = secret.display().to_string();
    // The controller's replica serves the sink API but runs no workers.
    let (controller_process, admin, controller) = control_plane_with(
        &catalog,
        2,
        &[
            "--sink-secret-file",
            secret_arg.as_str(),
            "--run-sinks",
            "false",
            "--sink-allowed-targets",
            "127.0.0.1",
        ],
    );
    let worker_args = [
        "--sink-secret-file",
        secret_arg.as_str(),
        "--sink-allowed-targets",
        "127.0.0.1",
    ];
    let mut workers: Vec<Option<Process>> = (0..2)
        .map(|_| Some(control_plane_with(&catalog, 2, &worker_args).0))
        .collect();
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(created.0, 201, "{}", created.1);
    let data = tempfile::tempdir().unwrap();
    let (broker, bootstrap) = tenant_broker(&controller, data.path(), "acme", 0);
    let topic = common::http(
        &admin,
        "POST",
        "/v1/tenants/acme/topics",
        Some(TOKEN),
        &format!(r#"{{"topic_name":"events","partitions_count":{PARTITIONS}}}"#),
    );
    assert_eq!(topic.0, 201, "{}", topic.1);
    let sink = json!({
        "name": "events_table",
        "topics": ["events"],
        "database_url": target,
        "table": "events",
        "mode": {"kind": "columns", "columns": [
            {"field": "n", "column": "n"}, {"field": "pad", "column": "pad"}
        ]},
    });
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants/acme/sinks",
        Some(TOKEN),
        &sink.to_string(),
    );
    assert_eq!(created.0, 201, "{}", created.1);

    // The records arrive over the kills: 1000 every 0.4 s.
    let produced = Arc::new(AtomicU64::new(0));
    let producing = std::thread::spawn({
        let (bootstrap, produced) = (bootstrap.clone(), Arc::clone(&produced));
        move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let client = Client::connect(ClientConfig::new([bootstrap]))
                    .await
                    .unwrap();
                let producer = Producer::new(client, ProducerConfig::default());
                let mut next = 0;
                while next < RECORDS - TAIL {
                    let batch: Vec<ProduceRecord> = (next..(next + 1000).min(RECORDS - TAIL))
                        .map(|n| ProduceRecord::new(payload(n)))
                        .collect();
                    let count = batch.len() as u64;
                    producer.send("events", batch).await.unwrap();
                    next += count;
                    produced.store(next, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
            });
        }
    });

    // Connections cut in the middle of a transaction (three times, as a cut can race the
    // commit it aims at).
    let mut cuts = 0;
    for kill in 0..kills {
        std::thread::sleep(random_pause());
        let victim = kill % 2;
        workers[victim].take().unwrap().kill();
        if cuts < 3 && kill >= kills / 3 {
            cuts += usize::from(cut_a_transaction(&runtime, &pool, Duration::from_secs(2)));
        }
        std::thread::sleep(random_pause() / 2);
        workers[victim] = Some(control_plane_with(&catalog, 2, &worker_args).0);
    }
    producing.join().unwrap();
    assert_eq!(produced.load(Ordering::Relaxed), RECORDS - TAIL);

    // A zombie: paused past its ownership (the other replica takes its partitions, and the
    // database ends a transaction it left idle) while the last records arrive, then let go
    // on with its old claims and positions.
    let client = runtime
        .block_on(Client::connect(ClientConfig::new([bootstrap.clone()])))
        .unwrap();
    let zombie = workers[0].as_ref().unwrap();
    signal(zombie, "STOP");
    let paused = Instant::now();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let tail: Vec<ProduceRecord> = (RECORDS - TAIL..RECORDS)
        .map(|n| ProduceRecord::new(payload(n)))
        .collect();
    runtime.block_on(producer.send("events", tail)).unwrap();
    if cuts == 0 {
        // The other replica is applying the last records now.
        cuts += usize::from(cut_a_transaction(&runtime, &pool, Duration::from_secs(10)));
    }
    assert!(cuts > 0, "no worker was ever caught inside a transaction");
    std::thread::sleep(Duration::from_secs(15).saturating_sub(paused.elapsed()));
    signal(zombie, "CONT");

    let mut ends = Vec::new();
    for partition in 0..PARTITIONS {
        let end = runtime
            .block_on(client.list_offset("events", partition, OffsetSpec::Latest))
            .unwrap()
            .unwrap()
            .offset;
        ends.push((partition, end));
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let stored: Vec<(i32, Option<i64>)> = runtime
            .block_on(
                sqlx::query_as(
                    "SELECT partition, next_offset FROM skein_offsets \
                     WHERE consumer = 'acme.events_table' AND topic = 'events' ORDER BY partition",
                )
                .fetch_all(&pool),
            )
            .unwrap();
        let caught_up = stored.len() == ends.len()
            && stored
                .iter()
                .zip(&ends)
                .all(|((p, next), (q, end))| p == q && *next == Some(*end));
        if caught_up {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sink did not catch up: stored {stored:?}, log ends {ends:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Nothing more arrives, not even from the zombie.
    std::thread::sleep(Duration::from_secs(3));
    let (rows, distinct, sum, digest, expected): (i64, i64, i64, String, String) = runtime
        .block_on(
            sqlx::query_as(
                "SELECT count(*), count(DISTINCT n), sum(n)::bigint, \
                   md5(string_agg(pad, ',' ORDER BY n)), \
                   (SELECT md5(string_agg(lpad(g::text, 64, '0'), ',' ORDER BY g)) \
                      FROM generate_series(0, $1 - 1) g) \
                 FROM events",
            )
            .bind(RECORDS as i64)
            .fetch_one(&pool),
        )
        .unwrap();
    assert_eq!(rows, RECORDS as i64, "rows");
    assert_eq!(distinct, RECORDS as i64, "distinct records");
    assert_eq!(sum, (RECORDS * (RECORDS - 1) / 2) as i64, "checksum of n");
    assert_eq!(digest, expected, "checksum of the payloads");

    for worker in workers.into_iter().flatten() {
        worker.stop();
    }
    broker.stop();
    controller_process.stop();
}

/// A sink's database URL cannot make the control plane connect where the operator did not
/// allow, nor read back what the service there said.
#[test]
fn a_sink_reaches_only_where_the_operator_allows_and_echoes_nothing() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let catalog = postgres.database("sink_reach_catalog").unwrap();
    let target = postgres.database("sink_reach_target").unwrap();
    let work = tempfile::tempdir().unwrap();
    let secret = work.path().join("sink-secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
    let secret_arg = secret.display().to_string();
    // The default: no allow-list.
    let (_cp, admin, controller) =
        control_plane_with(&catalog, 2, &["--sink-secret-file", secret_arg.as_str()]);
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(created.0, 201, "{}", created.1);
    let data = tempfile::tempdir().unwrap();
    let (_broker, _) = tenant_broker(&controller, data.path(), "acme", 0);
    let topic = common::http(
        &admin,
        "POST",
        "/v1/tenants/acme/topics",
        Some(TOKEN),
        r#"{"topic_name":"events","partitions_count":1}"#,
    );
    assert_eq!(topic.0, 201, "{}", topic.1);
    let sink = |url: &str| {
        json!({
            "name": "events_table",
            "topics": ["events"],
            "database_url": url,
            "table": "events",
            "mode": {"kind": "columns", "columns": [{"field": "n", "column": "n"}]},
        })
        .to_string()
    };
    let create = |admin: &str, url: &str| {
        common::http(
            admin,
            "POST",
            "/v1/tenants/acme/sinks",
            Some(TOKEN),
            &sink(url),
        )
    };
    for (url, says) in [
        // The test's own PostgreSQL, on this host's loopback.
        (target.clone(), "may not be reached"),
        (
            "postgres://u:p@169.254.169.254:5432/db".to_owned(),
            "may not be reached",
        ),
        (
            "postgres://u:p@localhost:5432/db".to_owned(),
            "may not be reached",
        ),
        (
            "postgres:///db?host=/var/run/postgresql&user=u".to_owned(),
            "Unix socket",
        ),
    ] {
        let (status, body) = create(&admin, &url);
        assert_eq!(status, 422, "{url}: {body}");
        assert!(body.contains(says), "{url}: {body}");
    }

    // Allowed loopback, a service that is not PostgreSQL: refused, and nothing it said is
    // in the answer.
    let service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = service.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in service.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            use std::io::Write;
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\nsecret-token-123\n");
        }
    });
    let (_cp2, allowing, _) = control_plane_with(
        &catalog,
        2,
        &[
            "--sink-secret-file",
            secret_arg.as_str(),
            "--sink-allowed-targets",
            "127.0.0.1",
            "--run-sinks",
            "false",
        ],
    );
    let (status, body) = create(
        &allowing,
        &format!("postgres://u:p@127.0.0.1:{port}/db?sslmode=disable"),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        !body.contains("secret") && !body.contains("HTTP"),
        "the service's answer came back: {body}"
    );
    let (_, listed) = common::http(&admin, "GET", "/v1/tenants/acme/sinks", Some(TOKEN), "");
    assert!(!listed.contains("events_table"), "{listed}");
}
