//! Kafka-style listeners across a cluster, as a client meets them: two brokers of a
//! control plane, each bound to 0.0.0.0 with an inter-broker PLAINTEXT listener and a
//! SASL_PLAINTEXT one for clients, each advertising a name of its own choosing
//! (`advertised.listeners`). A client on the SASL listener of one broker must be told the
//! SASL listener of every broker (not the address they replicate on) and reach all of them.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::admin::*;
use common::processes::*;
use common::sasl_acls;

/// A port free now (bound and let go), for a listener whose advertised address must be
/// known before the broker starts.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn every_broker_is_advertised_on_the_listener_the_client_came_in_on() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("listeners").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "writer", TOPICS_AND_GROUPS);
    let writer = issue_api_key(&admin_addr, "acme", "writer");

    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut advertised = BTreeMap::new();
    let mut brokers = Vec::new();
    for (node, dir) in (1..).zip(&dirs) {
        let (internal, client) = (free_port(), free_port());
        let listeners = format!("INTERNAL://0.0.0.0:{internal},CLIENT://0.0.0.0:{client}");
        let names = format!("INTERNAL://127.0.0.1:{internal},CLIENT://localhost:{client}");
        brokers.push(Process::start(
            acme_broker_command(
                &controller,
                dir.path(),
                &[
                    "--listeners",
                    &listeners,
                    "--advertised-listeners",
                    &names,
                    "--listener-security-protocol-map",
                    "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
                ],
            )
            .env("SKEIN_BROKER_NODE_ID", node.to_string()),
        ));
        advertised.insert(node.to_string(), format!("localhost:{client}"));
    }
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"spread","partitions_count":4,"replication_factor":1}"#,
    );

    // Once both brokers are live in the controller's snapshots and the topic reached them,
    // broker 1's SASL listener names both brokers at their SASL listeners.
    let bootstrap = advertised["1"].clone();
    let answer = wait_for(|| {
        let answer = sasl_acls(&python, &bootstrap, &writer, &["brokers", "spread"]);
        let ready = answer["brokers"].as_object().unwrap().len() == 2
            && answer["leaders"].as_object().unwrap().len() == 4;
        ready.then_some(answer)
    });
    assert_eq!(answer["brokers"], serde_json::json!(advertised), "{answer}");
    let leaders: BTreeSet<i64> = answer["leaders"]
        .as_object()
        .unwrap()
        .values()
        .map(|leader| leader.as_i64().unwrap())
        .collect();
    assert_eq!(leaders, BTreeSet::from([1, 2]), "{answer}");
    // And the client reaches each leader there, authenticated.
    for partition in ["0", "1", "2", "3"] {
        let written = sasl_acls(
            &python,
            &bootstrap,
            &writer,
            &["produce-to", "spread", partition],
        );
        assert_eq!(written["result"], "ok", "partition {partition}: {written}");
    }

    for broker in brokers {
        broker.stop();
    }
    cp.stop();
}
