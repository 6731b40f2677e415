//! The tenant's ACLs decide what an authenticated Kafka client may do, API by API, as Kafka
//! decides it: a broker process with a SASL_PLAINTEXT listener on a control-plane process
//! and a real PostgreSQL; principals with different bindings (made through the admin API)
//! call each API with confluent-kafka; each gets either its answer or the
//! *_AUTHORIZATION_FAILED error Kafka gives, and a denied write leaves the log as it was.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::admin::*;
use common::kafka::RawKafka;
use common::processes::*;
use common::sasl_acls as call;

/// A PLAINTEXT listener (for checks from outside the ACLs) and a SASL one.
const LISTENERS: &str = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0";

/// A principal of acme with an API key, allowed each (resource type, name, operation).
fn principal(addr: &str, name: &str, allowed: &[(&str, &str, &str)]) -> (String, String) {
    new_principal(addr, "acme", name, allowed);
    issue_api_key(addr, "acme", name)
}

#[test]
fn each_kafka_api_answers_as_the_principals_acls_say() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("kafka_acls").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let data = tempfile::tempdir().unwrap();
    let broker = Process::start(
        acme_broker_command(&controller, data.path(), &["--listeners", LISTENERS])
            .env("SKEIN_BROKER_AUTO_CREATE_TOPICS", "false"),
    );
    let plaintext = field(&broker.first_line, " on ");
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    for topic in ["orders", "secret"] {
        admin(
            &admin_addr,
            "POST",
            "/v1/tenants/acme/topics",
            &format!(r#"{{"topic_name":"{topic}","partitions_count":1}}"#),
        );
    }
    let writer = principal(&admin_addr, "writer", &[("TOPIC", "orders", "WRITE")]);
    let reader = principal(
        &admin_addr,
        "reader",
        &[("TOPIC", "orders", "READ"), ("GROUP", "readers", "READ")],
    );
    let operator = principal(
        &admin_addr,
        "operator",
        &[
            ("CLUSTER", "kafka-cluster", "ALL"),
            ("TOPIC", "*", "ALL"),
            ("GROUP", "*", "ALL"),
        ],
    );
    let nobody = principal(&admin_addr, "nobody", &[]);

    // The ACLs reach the broker with the metadata stream.
    wait_for(|| {
        (call(&python, &sasl, &writer, &["produce", "orders"])["result"] == "ok").then_some(())
    });
    let mut raw = RawKafka::connect(&plaintext);
    let written = raw.latest_offset("orders", 0);

    // (who, call, what it answers)
    let matrix: Vec<(&(String, String), Vec<&str>, &str)> = vec![
        (
            &writer,
            vec!["produce", "secret"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (
            &reader,
            vec!["produce", "orders"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (
            &nobody,
            vec!["produce", "orders"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (
            &reader,
            vec!["init-producer-id", "orders"],
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (&reader, vec!["consume", "orders", "readers"], "ok"),
        (
            &reader,
            vec!["consume", "orders", "others"],
            "GROUP_AUTHORIZATION_FAILED",
        ),
        (
            &nobody,
            vec!["create", "fresh"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (&operator, vec!["create", "fresh"], "ok"),
        (
            &writer,
            vec!["delete", "orders"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (
            &writer,
            vec!["describe-configs", "secret"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (&operator, vec!["describe-configs", "orders"], "ok"),
        (
            &reader,
            vec!["alter-configs", "orders"],
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (&operator, vec!["alter-configs", "orders"], "ok"),
        (
            &nobody,
            vec!["describe-acls"],
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (&operator, vec!["describe-acls"], "ok"),
    ];
    let mut wrong = Vec::new();
    for (who, args, expected) in &matrix {
        let answer = call(&python, &sasl, who, args);
        println!("{args:?}: {answer}");
        if answer["result"] != *expected {
            wrong.push(format!("{args:?}: expected {expected}, got {answer}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Nothing the denied producers sent was written; an allowed idempotent producer writes.
    assert_eq!(raw.latest_offset("orders", 0), written);
    assert_eq!(raw.latest_offset("secret", 0), 0);
    let idempotent = call(&python, &sasl, &writer, &["init-producer-id", "orders"]);
    assert_eq!(idempotent["result"], "ok", "{idempotent}");
    assert_eq!(raw.latest_offset("orders", 0), written + 1);

    // Metadata and ListGroups show only what the principal may describe.
    let topics = |who| call(&python, &sasl, who, &["metadata"])["topics"].clone();
    assert_eq!(topics(&nobody), serde_json::json!([]));
    assert_eq!(topics(&writer), serde_json::json!(["orders"]));
    assert_eq!(
        topics(&operator),
        serde_json::json!(["fresh", "orders", "secret"])
    );
    let groups = |who| call(&python, &sasl, who, &["list-groups"])["groups"].clone();
    assert_eq!(groups(&reader), serde_json::json!(["readers"]));
    assert_eq!(groups(&nobody), serde_json::json!([]));
    assert_eq!(groups(&operator), serde_json::json!(["readers"]));

    broker.stop();
    cp.stop();
}

#[test]
fn a_principal_producing_above_its_quota_is_held_to_it_and_loses_nothing() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("kafka_quota").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(&controller, data.path(), &["--listeners", LISTENERS]);
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"metered","partitions_count":1}"#,
    );
    let limited = principal(
        &admin_addr,
        "limited",
        &[("TOPIC", "metered", "ALL"), ("GROUP", "*", "ALL")],
    );
    const LIMIT: f64 = 200_000.0;
    admin(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/principals/limited/quota",
        &format!(r#"{{"produce_bytes_per_sec":{LIMIT}}}"#),
    );
    // The quota reaches the broker with the metadata stream; the tenant has none.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let script = format!(
        "{}/../../tests/clients/sasl_quota.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new("timeout")
        .args([
            "300", &python, &script, &sasl, &limited.0, &limited.1, "metered", "30",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ratio = measured["bytes_per_sec"].as_f64().unwrap() / LIMIT;
    println!("produce under a {LIMIT} B/s principal quota: {measured}, ratio {ratio:.3}");
    assert!((0.9..=1.1).contains(&ratio), "{measured}");
    assert_eq!(measured["failed"], 0, "{measured}");
    assert_eq!(measured["read"], measured["acked"], "{measured}");

    broker.stop();
    cp.stop();
}

/// Kafka's request-time quota: a principal allowed 1% of a request thread who sends
/// Metadata requests back to back is told to back off (`throttle_time_ms`) and held back,
/// while an unlimited principal of the same tenant is not.
#[test]
fn a_principal_over_its_request_time_quota_is_throttled_and_others_are_not() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("kafka_request_time").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(&controller, data.path(), &["--listeners", LISTENERS]);
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    let busy = principal(&admin_addr, "busy", &[("TOPIC", "*", "DESCRIBE")]);
    let free = principal(&admin_addr, "free", &[("TOPIC", "*", "DESCRIBE")]);
    admin(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/principals/busy/quota",
        r#"{"request_percentage":1}"#,
    );
    // The quota reaches the broker with the metadata stream.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let hammered = call(&python, &sasl, &busy, &["hammer", "6"]);
    let unlimited = call(&python, &sasl, &free, &["hammer", "6"]);
    println!("1% of a thread: {hammered}; unlimited: {unlimited}");
    assert!(
        hammered["throttle_events"].as_u64().unwrap() > 0,
        "{hammered}"
    );
    assert_eq!(unlimited["throttle_events"], 0, "{unlimited}");
    assert!(
        hammered["calls"].as_u64().unwrap() < unlimited["calls"].as_u64().unwrap(),
        "the throttled principal was not held back: {hammered} vs {unlimited}"
    );

    broker.stop();
    cp.stop();
}
