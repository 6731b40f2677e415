//! A broker says it is ready only when it can serve its share: a broker process of tenant
//! acme on a control-plane process and a real PostgreSQL, its one partition led by it, is
//! killed with SIGKILL and, once the controller has fenced it (the partition then has no
//! leader), started again on the same data. From the moment its operations listener
//! answers, `/readyz` says 503 with the reason until the controller has named it leader
//! again; its first 200 comes when the controller's view shows the partition led by it.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::admin::admin;
use common::processes::*;

/// A free port on 127.0.0.1 for an operations listener.
fn free_address() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

/// The leader of partition 0 of acme's `ready` as the controller sees it.
fn leader(admin_addr: &str) -> i64 {
    let topic = admin(admin_addr, "GET", "/v1/tenants/acme/topics/ready", "");
    topic["partitions"][0]["leader"].as_i64().unwrap()
}

#[test]
fn a_restarted_broker_is_ready_only_once_it_leads_again() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("readiness").unwrap();
    let (_cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let data = tempfile::tempdir().unwrap();
    let ops = free_address();
    let broker = acme_broker(
        &controller,
        data.path(),
        &["--kafka-listen", "127.0.0.1:0", "--ops-listen", &ops],
    );
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"ready","partitions_count":1}"#,
    );
    wait_for(|| (common::http(&ops, "GET", "/readyz", None, "").0 == 200).then_some(()));
    assert_eq!(leader(&admin_addr), 1);

    // Killed, the broker's session lapses and the controller leaves the partition with no
    // leader.
    broker.kill();
    wait_for(|| (leader(&admin_addr) < 0).then_some(()));

    let ops = free_address();
    let _broker = acme_broker(
        &controller,
        data.path(),
        &["--kafka-listen", "127.0.0.1:0", "--ops-listen", &ops],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut not_ready = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "never ready: {not_ready:?}");
        // Not listening yet, or answering.
        if std::net::TcpStream::connect(&ops).is_ok() {
            match common::http(&ops, "GET", "/readyz", None, "") {
                (200, _) => break,
                (code, reason) => not_ready.push(format!("{code} {reason}")),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("before ready: {not_ready:?}");
    assert_eq!(
        leader(&admin_addr),
        1,
        "ready while the controller names no leader here"
    );
    assert!(
        not_ready
            .iter()
            .any(|r| r.starts_with("503") && r.contains("partition 0 of ready")),
        "{not_ready:?}"
    );
}
