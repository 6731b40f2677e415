//! The gateway reads `read_committed` by default: REST, SSE and gRPC never return a record
//! of an aborted transaction and stop at the last stable offset while a transaction is
//! open; `read_uncommitted`, asked for, returns everything up to the high watermark. The
//! transactions come from a confluent-kafka transactional producer
//! (`tests/clients/txn_steps.py`) on `skein dev`.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::dev::Dev;
use common::grpc;
use common::processes::python;
use serde_json::Value;
use skein_proto::gateway as pb;

/// The values (JSON strings) of a REST read of partition 0 of `topic` from the start.
fn rest_values(dev: &Dev, topic: &str, isolation: Option<&str>) -> Vec<String> {
    let query = isolation.map_or(String::new(), |i| format!("&isolation={i}"));
    let (status, body) = common::http(
        &dev.rest,
        "GET",
        &format!("/v1/topics/{topic}/partitions/0/records?offset=earliest{query}"),
        Some(&dev.dev_token),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let read: Value = serde_json::from_str(&body).unwrap();
    read["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_str().unwrap().to_owned())
        .collect()
}

/// The values a gRPC Consume stream of partition 0 sends until `count` have come.
async fn grpc_values(
    dev: &Dev,
    topic: &str,
    isolation: pb::Isolation,
    count: usize,
) -> Vec<String> {
    let mut client = grpc::client(&dev.grpc).await;
    let subscribe = pb::Subscribe {
        topic: topic.to_owned(),
        mode: Some(pb::subscribe::Mode::Partitions(
            pb::PartitionsSubscription {
                partitions: vec![pb::PartitionStart {
                    partition: 0,
                    position: Some(pb::partition_start::Position::From(
                        pb::StartFrom::Earliest as i32,
                    )),
                }],
                ..Default::default()
            },
        )),
        isolation: isolation as i32,
        credit: Some(pb::Credit {
            records: 100,
            bytes: 0,
        }),
    };
    let mut stream = grpc::consume(&mut client, &dev.dev_token, subscribe)
        .await
        .unwrap();
    let mut values = Vec::new();
    while values.len() < count {
        match stream.next(Duration::from_secs(20)).await {
            Some(pb::consume_response::Kind::Records(batch)) => {
                values.extend(batch.records.iter().map(|r| {
                    serde_json::from_slice::<String>(r.value.as_deref().unwrap()).unwrap()
                }));
            }
            Some(_) => {}
            None => panic!("the stream sent only {values:?}"),
        }
    }
    values
}

/// The values of the next `count` SSE events.
fn sse_values(reader: &mut impl BufRead, count: usize) -> Vec<String> {
    let mut values = Vec::new();
    let mut kind = String::new();
    while values.len() < count {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the tail ended");
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix("event:") {
            kind = name.trim().to_owned();
        } else if let Some(data) = line.strip_prefix("data:") {
            assert_eq!(kind, "record", "the tail sent {kind}: {data}");
            let event: Value = serde_json::from_str(data.trim()).unwrap();
            values.push(event["value"].as_str().unwrap().to_owned());
        }
    }
    values
}

#[test]
fn rest_sse_and_grpc_reads_never_show_aborted_records_and_stop_at_open_transactions() {
    let python = python();
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    dev.create_topic("ledger", 1);

    let script = format!(
        "{}/../../tests/clients/txn_steps.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut producer = common::dev::Killed(
        Command::new(&python)
            .arg(script)
            .args([&dev.kafka, "ledger"])
            .args(["commit:c1,c2", "abort:a1,a2", "commit:c3", "open:o1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut printed = BufReader::new(producer.0.stdout.take().unwrap());
    let mut line = String::new();
    printed.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    // Committed only, and nothing past the open transaction's first record.
    assert_eq!(rest_values(&dev, "ledger", None), ["c1", "c2", "c3"]);
    assert_eq!(
        rest_values(&dev, "ledger", Some("read_committed")),
        ["c1", "c2", "c3"]
    );
    assert_eq!(
        rest_values(&dev, "ledger", Some("read_uncommitted")),
        ["c1", "c2", "a1", "a2", "c3", "o1"]
    );
    let (status, body) = common::http(
        &dev.rest,
        "GET",
        "/v1/topics/ledger/partitions/0/records?isolation=dirty",
        Some(&dev.dev_token),
        "",
    );
    assert_eq!(status, 400, "{body}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(
        runtime.block_on(grpc_values(&dev, "ledger", pb::Isolation::Unspecified, 3)),
        ["c1", "c2", "c3"]
    );
    assert_eq!(
        runtime.block_on(grpc_values(
            &dev,
            "ledger",
            pb::Isolation::ReadUncommitted,
            6
        )),
        ["c1", "c2", "a1", "a2", "c3", "o1"]
    );

    // The SSE tail shows the committed records, then the open transaction's once it commits.
    // curl reads it, so the stream's chunked encoding never splits a line here.
    let mut curl = common::dev::Killed(
        Command::new("curl")
            .args(["-sN", "--max-time", "60", "-H"])
            .arg(format!("Authorization: Bearer {}", dev.dev_token))
            .arg(format!(
                "http://{}/v1/topics/ledger/events?offset=earliest",
                dev.rest
            ))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut tail = BufReader::new(curl.0.stdout.take().unwrap());
    assert_eq!(sse_values(&mut tail, 3), ["c1", "c2", "c3"]);
    drop(producer.0.stdin.take());
    line.clear();
    printed.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "committed");
    assert_eq!(sse_values(&mut tail, 1), ["o1"]);
    assert_eq!(rest_values(&dev, "ledger", None), ["c1", "c2", "c3", "o1"]);
}
