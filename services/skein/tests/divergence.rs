//! Divergence: a leader that accepted `acks=1` writes its followers never copied is cut off
//! (SIGSTOP) and replaced; the new leader takes new writes; when the old leader returns, it
//! truncates its extra records to the new leader's epoch boundary before it follows, and
//! when leadership comes back to it (it is the preferred replica), consumers read the new
//! leader's records and never the ones it alone had.
//!
//! Three broker processes of one tenant, a control-plane process and a real PostgreSQL.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster;
use common::kafka::{name, RawKafka};
use common::processes::*;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

fn produce(raw: &mut RawKafka, label: &str, count: usize, acks: i16) -> i16 {
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: None,
            value: Some(format!("{label}-{i}").into_bytes()),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        })
        .collect();
    let batch = build_batch(&records, Compression::None, ProducerFields::NONE).unwrap();
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("diverge"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.into()))])]);
    let response: ProduceResponse = raw.call(ApiKey::Produce, 9, &request);
    response.responses[0].partition_responses[0].error_code
}

fn signal(process: &Process, signal: &str) {
    let pid = process.child.id().to_string();
    assert!(Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap()
        .success());
}

/// Partition 0's (leader, ISR size) as `bootstrap` answers; leader 0 while it has none.
fn leader(python: &str, bootstrap: &str) -> (usize, usize) {
    cluster::leader_of(python, bootstrap, "diverge", 0).unwrap()
}

#[test]
fn a_replaced_leaders_unreplicated_records_are_truncated_and_never_read() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("divergence").unwrap();
    // A session long enough that followers stopped for under a second stay live under load:
    // only the cut-off leader's session lapses.
    let (cp, admin, controller) = control_plane_with_session(&url, 6);
    let created = common::http(
        &admin,
        "POST",
        "/v1/tenants",
        Some(TOKEN),
        r#"{"name":"acme"}"#,
    );
    assert_eq!(created.0, 201);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // A long lag allowance: only the controller's session decides who is in sync here.
    let brokers: Vec<(Process, String)> = (1..=3)
        .map(|node| {
            tenant_broker_with(
                &controller,
                dirs[node - 1].path(),
                "acme",
                node as i32,
                &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "60000")],
            )
        })
        .collect();
    let bootstrap: Vec<&str> = brokers.iter().map(|(_, b)| b.as_str()).collect();
    let all = bootstrap.join(",");
    cluster::create_topic(&python, &all, "diverge", 1, 3, &[]);
    // A new topic's leader and ISR reach the metadata a moment after it is created.
    let (old, _) = wait_for(|| {
        let (leader, isr) = leader(&python, &all);
        (leader > 0 && isr == 3).then_some((leader, isr))
    });
    let followers: Vec<usize> = (1..=3).filter(|n| *n != old).collect();
    let mut at_old = RawKafka::connect(bootstrap[old - 1]);
    assert_eq!(produce(&mut at_old, "committed", 10, -1), 0);

    // The followers stop for under a second (well inside their session): the leader takes
    // acks=1 writes that nobody copies. Then the leader itself is cut off.
    for f in &followers {
        signal(&brokers[f - 1].0, "-STOP");
    }
    // Their fetches already held by the leader end empty after the 500 ms they may wait
    // (answers a stopped process still receives); no new ones come.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(produce(&mut at_old, "unreplicated", 5, 1), 0);
    signal(&brokers[old - 1].0, "-STOP");
    for f in &followers {
        signal(&brokers[f - 1].0, "-CONT");
    }

    // The controller replaces it once its session lapses; the new leader takes new writes.
    let deadline = Instant::now() + Duration::from_secs(45);
    let new = loop {
        let (now, _) = leader(&python, bootstrap[followers[0] - 1]);
        if now != old && now > 0 {
            break now;
        }
        assert!(Instant::now() < deadline, "no new leader");
        std::thread::sleep(Duration::from_millis(200));
    };
    // The new leader may hear of its election a snapshot after the broker that told us:
    // until then it refuses as a client would be told to retry, writing nothing.
    let mut at_new = RawKafka::connect(bootstrap[new - 1]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match produce(&mut at_new, "after", 7, -1) {
            0 => break,
            code @ (6 | 19) if Instant::now() < deadline => {
                println!("the new leader answered {code}; retrying");
                std::thread::sleep(Duration::from_millis(200));
            }
            code => panic!("acks=all at the new leader: error {code}"),
        }
    }
    assert_eq!(at_new.latest_offset("diverge", 0), 17);

    // The old leader returns: it truncates, follows, rejoins the ISR and, as the preferred
    // replica, leads again.
    signal(&brokers[old - 1].0, "-CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    while leader(&python, bootstrap[new - 1]) != (old, 3) {
        assert!(Instant::now() < deadline, "leadership never came back");
        std::thread::sleep(Duration::from_millis(200));
    }
    let read = script(
        &python,
        "cluster_placement.py",
        bootstrap[old - 1],
        &["values", "diverge", "0"],
    );
    let read: serde_json::Value = serde_json::from_str(read.trim()).unwrap();
    let values: Vec<String> = read["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (0..10)
        .map(|i| format!("committed-{i}"))
        .chain((0..7).map(|i| format!("after-{i}")))
        .collect();
    assert_eq!(values, expected, "{read}");
    for (process, _) in brokers {
        process.stop();
    }
    cp.stop();
}
