//! The operations listener (`--ops-listen`) of `skein dev`: health and readiness, and
//! Prometheus metrics that move by exactly what the test did: records and bytes produced
//! and fetched per topic, Kafka requests per API, connections per listener, SASL and JWT
//! rejections by reason, REST requests by route and status, gRPC calls by method and
//! status. On a three-broker cluster, a
//! stopped follower shows as under-replicated partitions and an ISR shrink, and its return
//! as an expansion with nothing under-replicated.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::dev::{after, Dev};
use common::kafka::RawKafka;
use common::metrics::{assert_served, dashboard_series, eventually, ops_of, sample, scrape};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_records::{build_batch, Compression, NewRecord, ProducerFields};

#[test]
fn metrics_move_by_exactly_what_clients_did() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start_with(data.path(), None, &["--ops-listen", "127.0.0.1:0"]);
    let ops = ops_of(&dev);
    assert_eq!(common::http(&ops, "GET", "/healthz", None, "").0, 200);
    let (status, body) = common::http(&ops, "GET", "/readyz", None, "");
    assert_eq!(status, 200, "{body}");
    dev.create_topic("metered", 1);

    let before = scrape(&ops);
    assert!(
        before.ends_with("# EOF\n"),
        "not OpenMetrics text:\n{before}"
    );
    let produces = sample(&before, "skein_kafka_requests_total", &[("api", "Produce")]);

    // Five records in one batch, produced once: exactly 5 records and the batch's bytes.
    let records: Vec<NewRecord> = (0..5)
        .map(|i| NewRecord {
            value: Some(format!("value-{i}").into_bytes()),
            ..NewRecord::default()
        })
        .collect();
    let batch = build_batch(&records, Compression::None, ProducerFields::NONE).unwrap();
    let batch_bytes = batch.len() as f64;
    let mut kafka = RawKafka::connect(&dev.kafka);
    assert_eq!(kafka.produce("metered", 0, batch), 0);
    let connected = scrape(&ops);
    assert_eq!(
        sample(
            &connected,
            "skein_topic_records_in_total",
            &[("topic", "metered")]
        ),
        5.0
    );
    assert_eq!(
        sample(
            &connected,
            "skein_topic_bytes_in_total",
            &[("topic", "metered")]
        ),
        batch_bytes
    );
    assert_eq!(
        sample(
            &connected,
            "skein_kafka_requests_total",
            &[("api", "Produce")]
        ),
        produces + 1.0
    );
    assert!(
        sample(
            &connected,
            "skein_kafka_request_duration_seconds_count",
            &[("api", "Produce")]
        ) >= produces + 1.0
    );
    let open = sample(
        &connected,
        "skein_kafka_connections",
        &[("listener", "PLAINTEXT")],
    );
    assert!(open >= 1.0, "{connected}");
    drop(kafka);
    eventually(&ops, "the closed connection", |text| {
        sample(
            text,
            "skein_kafka_connections",
            &[("listener", "PLAINTEXT")],
        ) == open - 1.0
    });

    // A consumer reads the batch once: the same bytes out.
    let read = Command::new("kcat")
        .args([
            "-b",
            &dev.kafka,
            "-t",
            "metered",
            "-C",
            "-o",
            "beginning",
            "-c",
            "5",
            "-e",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(read.status.success(), "{read:?}");
    assert_eq!(String::from_utf8_lossy(&read.stdout).lines().count(), 5);
    let consumed = scrape(&ops);
    assert_eq!(
        sample(
            &consumed,
            "skein_topic_bytes_out_total",
            &[("topic", "metered")]
        ),
        batch_bytes
    );
    // One broker leads its partitions; nothing is under-replicated or offline.
    assert!(sample(&consumed, "skein_partitions_leaders", &[]) >= 1.0);
    assert_eq!(
        sample(&consumed, "skein_partitions_under_replicated", &[]),
        0.0
    );
    assert_eq!(sample(&consumed, "skein_partitions_offline", &[]), 0.0);

    // A group that has read two of the five records lags by three.
    let grouped = Command::new("kcat")
        .args([
            "-b",
            &dev.kafka,
            "-G",
            "lagging",
            "-c",
            "2",
            "-q",
            "-X",
            "auto.offset.reset=earliest",
            "metered",
        ])
        .output()
        .unwrap();
    assert!(grouped.status.success(), "{grouped:?}");
    let lag = [
        ("group", "lagging"),
        ("topic", "metered"),
        ("partition", "0"),
    ];
    eventually(&ops, "the group's lag", |text| {
        sample(text, "skein_consumer_group_lag", &lag) == 3.0
    });

    // A wrong API key secret over SASL/PLAIN: one rejection, for bad credentials.
    let sasl = after(&dev.printed, "): bootstrap server ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let rejected = sample(
        &consumed,
        "skein_kafka_sasl_rejections_total",
        &[("mechanism", "PLAIN"), ("reason", "bad_credentials")],
    );
    let mut client = RawKafka::connect(&sasl);
    let handshake: SaslHandshakeResponse = client.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(handshake.error_code, 0);
    let refused: SaslAuthenticateResponse = client.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from_static(b"\0no-such-key\0wrong-secret")),
    );
    assert_eq!(
        refused.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    let after_sasl = scrape(&ops);
    assert_eq!(
        sample(
            &after_sasl,
            "skein_kafka_sasl_rejections_total",
            &[("mechanism", "PLAIN"), ("reason", "bad_credentials")],
        ),
        rejected + 1.0
    );

    // The gateway: a request with a token that is no JWT, one with the dev token.
    let route = [("route", "/v1/topics"), ("method", "GET")];
    let denied = [route[0], route[1], ("status", "401")];
    let allowed = [route[0], route[1], ("status", "200")];
    let (was_denied, was_allowed, was_malformed) = (
        sample(&after_sasl, "skein_http_requests_total", &denied),
        sample(&after_sasl, "skein_http_requests_total", &allowed),
        sample(
            &after_sasl,
            "skein_gateway_auth_rejections_total",
            &[("reason", "malformed")],
        ),
    );
    assert_eq!(
        common::http(&dev.rest, "GET", "/v1/topics", Some("not-a-jwt"), "").0,
        401
    );
    assert_eq!(
        common::http(&dev.rest, "GET", "/v1/topics", Some(&dev.dev_token), "").0,
        200
    );
    let after_rest = scrape(&ops);
    assert_eq!(
        sample(&after_rest, "skein_http_requests_total", &denied),
        was_denied + 1.0
    );
    assert_eq!(
        sample(&after_rest, "skein_http_requests_total", &allowed),
        was_allowed + 1.0
    );
    assert_eq!(
        sample(
            &after_rest,
            "skein_gateway_auth_rejections_total",
            &[("reason", "malformed")]
        ),
        was_malformed + 1.0
    );
    // Paths are counted by route, never as sent.
    assert!(
        !after_rest.contains("route=\"/v1/topics/metered\""),
        "{after_rest}"
    );

    // gRPC: calls counted by method and status; a made-up method counts as unmatched,
    // never under the name it was called by.
    let list = [("method", "skein.v1.Gateway/ListTopics")];
    let listed = [list[0], ("code", "OK")];
    let unauthenticated = [list[0], ("code", "Unauthenticated")];
    let unmatched = [("method", "unmatched"), ("code", "Unimplemented")];
    let was = [&listed[..], &unauthenticated, &unmatched]
        .map(|labels| sample(&after_rest, "skein_grpc_calls_total", labels));
    let was_timed = sample(
        &after_rest,
        "skein_grpc_request_duration_seconds_count",
        &list,
    );
    grpc_calls(&dev.grpc, &dev.dev_token);
    // A call is counted as its answer's body ends, which may be just after the client has it.
    let after_grpc = eventually(&ops, "the gRPC calls", |text| {
        [&listed[..], &unauthenticated, &unmatched]
            .iter()
            .zip(was)
            .all(|(labels, was)| sample(text, "skein_grpc_calls_total", labels) > was)
    });
    let now = [&listed[..], &unauthenticated, &unmatched]
        .map(|labels| sample(&after_grpc, "skein_grpc_calls_total", labels));
    assert_eq!(now, [was[0] + 1.0, was[1] + 1.0, was[2] + 1.0]);
    assert_eq!(
        sample(
            &after_grpc,
            "skein_grpc_request_duration_seconds_count",
            &list
        ),
        was_timed + 2.0
    );
    assert!(!after_grpc.contains("Made/Up"), "{after_grpc}");

    // A produce quota of 1000 bytes/s holds back a tenant producing more: the time shows.
    let (status, body) = common::http(
        &dev.admin,
        "PUT",
        "/v1/tenants/dev/quota",
        Some(&dev.admin_token),
        r#"{"produce_bytes_per_sec":1000}"#,
    );
    assert_eq!(status, 200, "{body}");
    let large: Vec<NewRecord> = (0..20)
        .map(|_| NewRecord {
            value: Some(vec![b'x'; 1000]),
            ..NewRecord::default()
        })
        .collect();
    let mut kafka = RawKafka::connect(&dev.kafka);
    let deadline = Instant::now() + Duration::from_secs(60);
    let after_rest = loop {
        let batch = build_batch(&large, Compression::None, ProducerFields::NONE).unwrap();
        assert_eq!(kafka.produce("metered", 0, batch), 0);
        let text = scrape(&ops);
        if sample(
            &text,
            "skein_kafka_throttle_seconds_total",
            &[("tenant", "dev")],
        ) > 0.0
        {
            break text;
        }
        assert!(Instant::now() < deadline, "no throttle time:\n{text}");
    };

    // Every series the Grafana dashboard plots is one these services serve (the sinks'
    // show once a sink has written: sinks.rs checks those).
    let plotted = dashboard_series(|series| !series.starts_with("skein_sink_"));
    assert!(plotted.len() >= 15, "{plotted:?}");
    assert_served(&plotted, &after_rest);
}

/// Over gRPC: ListTopics with the dev token and with a token that is no JWT, and a method
/// no service has.
/// One client's group ids cannot grow a scrape without bound: a 30,000-character group id is
/// refused (INVALID_GROUP_ID) and so is 120 KiB of commit metadata
/// (OFFSET_METADATA_TOO_LARGE), and the lag series of the longest group ids allowed name them
/// cut to the label bound.
#[test]
fn group_ids_a_client_chooses_grow_a_scrape_by_a_bounded_amount() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start_with(data.path(), None, &["--ops-listen", "127.0.0.1:0"]);
    let ops = ops_of(&dev);
    dev.create_topic("lagged", 1);
    let mut kafka = RawKafka::connect(&dev.kafka);
    let batch = build_batch(
        &[NewRecord {
            value: Some(b"one".to_vec()),
            ..NewRecord::default()
        }],
        Compression::None,
        ProducerFields::NONE,
    )
    .unwrap();
    assert_eq!(kafka.produce("lagged", 0, batch), 0);
    let before = scrape(&ops).len();

    for i in 0..40 {
        let huge = format!("{i:02}{}", "g".repeat(30_000));
        assert_eq!(
            kafka.offset_commit(&huge, "lagged", 0, 0, ""),
            24,
            "INVALID_GROUP_ID"
        );
        let group = format!("{i:02}{}", "g".repeat(253));
        assert_eq!(
            kafka.offset_commit(&group, "lagged", 0, 0, &"m".repeat(120 * 1024)),
            12,
            "OFFSET_METADATA_TOO_LARGE"
        );
        assert_eq!(kafka.offset_commit(&group, "lagged", 0, 0, "m"), 0);
    }
    let text = eventually(&ops, "forty lag series", |text| {
        text.lines()
            .filter(|l| l.starts_with("skein_consumer_group_lag{"))
            .count()
            >= 40
    });
    for line in text
        .lines()
        .filter(|l| l.starts_with("skein_consumer_group_lag{"))
    {
        let group = line
            .split("group=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        assert!(group.len() <= 128, "a group label of {} bytes", group.len());
    }
    let grown = text.len().saturating_sub(before);
    assert!(
        grown < 40 * 400,
        "forty groups grew the scrape by {grown} bytes"
    );
}

fn grpc_calls(address: &str, token: &str) {
    use skein_proto::gateway as pb;
    use tonic::codegen::http::uri::PathAndQuery;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = common::grpc::client(address).await;
        client
            .list_topics(common::grpc::authorized(pb::ListTopicsRequest {}, token))
            .await
            .unwrap();
        let refused = client
            .list_topics(common::grpc::authorized(
                pb::ListTopicsRequest {},
                "not-a-jwt",
            ))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut raw = tonic::client::Grpc::new(channel);
        raw.ready().await.unwrap();
        let unknown = raw
            .unary::<_, pb::ListTopicsResponse, _>(
                tonic::Request::new(pb::ListTopicsRequest {}),
                PathAndQuery::from_static("/Made/Up"),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::Unimplemented);
    });
}

/// The pid of the child broker whose data directory is `dir`.
fn pid_of(dir: &std::path::Path) -> String {
    let out = Command::new("pgrep")
        .args(["-f", "--", &format!("--data-dir {}", dir.display())])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .expect("the child broker runs")
        .to_owned()
}

#[test]
fn a_stopped_follower_shows_as_under_replicated_and_its_return_as_an_expansion() {
    let data = tempfile::tempdir().unwrap();
    // Followers leave the ISR after 3 s without catching up (30 s by default).
    let dev = Dev::start_with_env(
        data.path(),
        None,
        &["--brokers", "3", "--ops-listen", "127.0.0.1:0"],
        &[("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000")],
    );
    let ops = ops_of(&dev);
    // Six partitions of three replicas: broker 0 (this process) leads some of them.
    dev.create_replicated_topic("watched", 6, 3);
    let healthy = eventually(&ops, "six led or followed partitions", |text| {
        sample(text, "skein_partitions_replicas", &[]) >= 6.0
            && sample(text, "skein_partitions_under_replicated", &[]) == 0.0
    });
    assert!(
        sample(&healthy, "skein_partitions_leaders", &[]) >= 1.0,
        "{healthy}"
    );
    let shrinks = sample(&healthy, "skein_replication_isr_shrinks_total", &[]);
    let expands = sample(&healthy, "skein_replication_isr_expands_total", &[]);

    // Broker 2 stops (SIGSTOP: it neither fetches nor exits).
    let pid = pid_of(&data.path().join("broker-2"));
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let degraded = eventually(
        &ops,
        "under-replicated partitions and an ISR shrink",
        |text| {
            sample(text, "skein_partitions_under_replicated", &[]) >= 1.0
                && sample(text, "skein_replication_isr_shrinks_total", &[]) > shrinks
        },
    );
    assert_eq!(sample(&degraded, "skein_partitions_offline", &[]), 0.0);

    // It resumes, catches up and rejoins every ISR.
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    eventually(&ops, "the follower back in sync", |text| {
        sample(text, "skein_partitions_under_replicated", &[]) == 0.0
            && sample(text, "skein_replication_isr_expands_total", &[]) > expands
    });
}
