//! One tenant's streams cannot take another's service: a gateway process, on a broker
//! process serving two tenants (a control plane on a real PostgreSQL), holds at most
//! `--max-streams-per-tenant` Server-Sent Events tails of one tenant; past that acme's next
//! tail is refused with 429 and a problem body, while globex still opens one and receives
//! the record it produces; a tail that ends gives its place back. A token whose tenant claim
//! is not a tenant name is refused. And however many streams a tenant opens, they read over
//! one connection of the gateway's per broker: thirty tails of one tenant add no more than
//! two connections to the broker's listener, and each of them receives what is produced.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::admin::{admin, new_principal, TOPICS_AND_GROUPS};
use common::issuer::{serve_jwks, test_key};
use common::processes::*;
use serde_json::json;

/// A token of `tenant`'s `app`, signed with the key the issuer's JWKS lists as `rsa-jwk`.
fn token(tenant: &str) -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"sub": "app", "tenant": tenant, "exp": now + 900});
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-jwk".to_owned());
    let key = EncodingKey::from_rsa_pem(&std::fs::read(test_key("rsa.pem")).unwrap()).unwrap();
    encode(&header, &claims, &key).unwrap()
}

/// An SSE tail of `feed` with curl: its process, and its output read line by line.
fn tail(rest: &str, token: &str) -> (common::dev::Killed, BufReader<std::process::ChildStdout>) {
    let mut curl = common::dev::Killed(
        Command::new("curl")
            .args(["-sN", "--max-time", "60", "-i", "-H"])
            .arg(format!("Authorization: Bearer {token}"))
            .arg(format!(
                "http://{rest}/v1/topics/feed/events?offset=earliest"
            ))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = BufReader::new(curl.0.stdout.take().unwrap());
    (curl, out)
}

/// The status code of a response whose head `out` reads.
fn status(out: &mut impl BufRead) -> u16 {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap()
}

/// What a test of streams runs on: a control plane on PostgreSQL with tenants acme and
/// globex, each with a one-partition topic `feed`, a broker serving both (its ops listener
/// on `ops`), and a gateway started with `gateway_args` (its REST address in `rest`).
struct Stage {
    rest: String,
    ops: String,
    _gateway: Process,
    _broker: Process,
    _data: tempfile::TempDir,
    _control_plane: Process,
    _postgres: skein_testkit::Postgres,
}

fn stage(gateway_args: &[&str]) -> Stage {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("gateway_streams").unwrap();
    let (control_plane, admin_addr, controller) = control_plane(&url);
    for tenant in ["acme", "globex"] {
        admin(
            &admin_addr,
            "POST",
            "/v1/tenants",
            &format!(r#"{{"name":"{tenant}"}}"#),
        );
        new_principal(&admin_addr, tenant, "app", TOPICS_AND_GROUPS);
    }
    let data = tempfile::tempdir().unwrap();
    let ops = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let broker = Process::start(
        every_tenant_broker(&controller, data.path(), 1, EVERY_TENANT_LISTENERS)
            .args(["--ops-listen", &ops]),
    );
    for tenant in ["acme", "globex"] {
        admin(
            &admin_addr,
            "POST",
            &format!("/v1/tenants/{tenant}/topics"),
            r#"{"topic_name":"feed","partitions_count":1}"#,
        );
    }
    let jwks = serve_jwks();
    let mut args = vec!["--jwks-url", jwks.as_str()];
    args.extend_from_slice(gateway_args);
    let (gateway, rest, _) = gateway(&controller, &args);
    // Ready once the gateway knows both tenants' topic and a broker serving them.
    for tenant in ["acme", "globex"] {
        wait_for(|| {
            let (code, _) = common::http(
                &rest,
                "GET",
                "/v1/topics/feed/partitions/0/records?offset=earliest",
                Some(&token(tenant)),
                "",
            );
            (code == 200).then_some(())
        });
    }
    Stage {
        rest,
        ops,
        _gateway: gateway,
        _broker: broker,
        _data: data,
        _control_plane: control_plane,
        _postgres: postgres,
    }
}

/// Reads `out` until a line contains `wanted`, for up to 20 s.
fn read_until(out: &mut impl BufRead, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while !seen.contains(wanted) {
        assert!(Instant::now() < deadline, "{wanted:?} never came: {seen}");
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the tail ended: {seen}"
        );
        seen.push_str(&line);
    }
    seen
}

#[test]
fn one_tenants_streams_leave_another_tenant_its_own() {
    let stage = stage(&["--max-streams-per-tenant", "3"]);
    let rest = &stage.rest;
    let (acme, globex) = (token("acme"), token("globex"));

    // A token whose tenant claim is no tenant name (`acme.eu` would name acme's `eu.*`
    // topics once prefixed) is refused as a credential, whatever the issuer signed.
    let (code, problem) = common::http(rest, "GET", "/v1/topics", Some(&token("acme.eu")), "");
    assert_eq!(code, 401, "{problem}");
    assert!(problem.contains("not a tenant name"), "{problem}");

    // acme's three tails are served; its fourth is refused.
    let mut held: Vec<_> = (0..3)
        .map(|_| {
            let (curl, mut out) = tail(rest, &acme);
            assert_eq!(status(&mut out), 200);
            (curl, out)
        })
        .collect();
    let (_refused, mut out) = tail(rest, &acme);
    assert_eq!(status(&mut out), 429);
    let mut body = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !body.contains("open streams") && Instant::now() < deadline {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        body.push_str(&line);
    }
    assert!(body.contains("open streams"), "{body}");

    // globex opens its own, and receives what it produces.
    let (_globex_tail, mut out) = tail(rest, &globex);
    assert_eq!(status(&mut out), 200);
    let (code, produced) = common::http(
        rest,
        "POST",
        "/v1/topics/feed/records",
        Some(&globex),
        r#"{"records":[{"value":"for globex"}]}"#,
    );
    assert_eq!(code, 200, "{produced}");
    read_until(&mut out, "for globex");

    // A tail that ends gives acme its place back, once the gateway sees it gone (its next
    // write, at the latest a keep-alive comment 15 s on, fails).
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_curl, mut out) = tail(rest, &acme);
        match status(&mut out) {
            200 => break,
            429 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            other => panic!("acme's tail after one ended: {other}"),
        }
    }
}

#[test]
fn a_tenants_streams_share_its_connections_to_a_broker() {
    let stage = stage(&["--max-streams-per-tenant", "40"]);
    let rest = &stage.rest;
    let acme = token("acme");
    let connections = || {
        common::metrics::sample(
            &common::metrics::scrape(&stage.ops),
            "skein_kafka_connections",
            &[("listener", "INTERNAL")],
        )
    };
    // The gateway's own connections first: one tail open, one record read.
    let (_first, mut out) = tail(rest, &acme);
    assert_eq!(status(&mut out), 200);
    let (code, produced) = common::http(
        rest,
        "POST",
        "/v1/topics/feed/records",
        Some(&acme),
        r#"{"records":[{"value":"before"}]}"#,
    );
    assert_eq!(code, 200, "{produced}");
    read_until(&mut out, "before");
    let before = connections();
    assert!(
        before >= 1.0,
        "the gateway holds no connection to the broker"
    );

    let mut tails: Vec<_> = (0..30)
        .map(|_| {
            let (curl, mut out) = tail(rest, &acme);
            assert_eq!(status(&mut out), 200);
            (curl, out)
        })
        .collect();
    for (_, out) in &mut tails {
        read_until(out, "before");
    }
    let (code, produced) = common::http(
        rest,
        "POST",
        "/v1/topics/feed/records",
        Some(&acme),
        r#"{"records":[{"value":"for every tail"}]}"#,
    );
    assert_eq!(code, 200, "{produced}");
    for (_, out) in &mut tails {
        read_until(out, "for every tail");
    }
    let after = connections();
    assert!(
        after <= before + 2.0,
        "thirty tails took {after} connections to the broker (one took {before})"
    );
}
