//! Traces over OTLP: `skein dev` exports its spans to a collector this test runs (a tonic
//! server of OTLP's trace service, as an OpenTelemetry Collector would be), set by the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT`. One REST produce that carries a W3C
//! `traceparent` becomes three spans of the client's trace: the gateway's request (the
//! child of the client's span), the broker's append and the sink's transaction into a
//! real PostgreSQL (both children of the gateway's span, whose context the record carried
//! in its headers). Without the variables nothing is exported and no record gains a header.
//! And `--log-format json` writes log lines a collector can parse.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::dev::Dev;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use parking_lot::Mutex;
use serde_json::json;

/// The client's trace and span, as its `traceparent` names them.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Waits until the collector holds a span of the client's trace named `name`.
fn span_named(collector: &Collector, name: &str) -> Span {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = collector
            .spans
            .lock()
            .iter()
            .find(|s| hex(&s.trace_id) == TRACE && s.name == name)
            .cloned();
        if let Some(span) = found {
            return span;
        }
        let names: Vec<String> = collector
            .spans
            .lock()
            .iter()
            .map(|s| format!("{} in {}", s.name, hex(&s.trace_id)))
            .collect();
        assert!(
            Instant::now() < deadline,
            "no span {name:?} in trace {TRACE}; spans: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The headers of a topic's first record as kcat prints them (`[k=v,...]`).
fn first_headers(dev: &Dev, topic: &str) -> String {
    let read = std::process::Command::new("kcat")
        .args(["-b", &dev.kafka, "-t", topic, "-C", "-o", "beginning"])
        .args(["-c", "1", "-e", "-q", "-f", "[%h]"])
        .output()
        .unwrap();
    assert!(read.status.success(), "{read:?}");
    String::from_utf8_lossy(&read.stdout).into_owned()
}

#[test]
fn a_rest_produce_is_one_trace_through_gateway_broker_and_sink() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let collector = Collector::default();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(collector.clone());
    runtime.spawn(async move {
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });

    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("traces").unwrap();
    let pool = runtime.block_on(sqlx::PgPool::connect(&url)).unwrap();
    runtime.block_on(async {
        sqlx::query("CREATE TABLE orders (id text PRIMARY KEY, item text)")
            .execute(&pool)
            .await
            .unwrap();
    });

    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start_with_env(
        data.path(),
        None,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    dev.create_topic("orders", 1);
    let (status, body) = common::http(
        &dev.admin,
        "POST",
        "/v1/tenants/dev/sinks",
        Some(&dev.admin_token),
        &json!({
            "name": "orders_table",
            "topics": ["orders"],
            "database_url": url,
            "table": "orders",
            "mode": {
                "kind": "columns",
                "columns": [{"field": "item", "column": "item"}],
                "key_column": "id",
            },
        })
        .to_string(),
    );
    assert_eq!(status, 201, "{body}");

    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let authorization = format!("Bearer {}", dev.dev_token);
    let answer = common::request(
        &dev.rest,
        "POST",
        "/v1/topics/orders/records",
        &[
            ("Authorization", &authorization),
            ("traceparent", &traceparent),
        ],
        &json!({"records": [{"key": "o1", "value": {"item": "book"}}]}).to_string(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM orders WHERE item = 'book'")
                .fetch_one(&pool)
                .await
                .unwrap();
            if rows == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the sink never wrote the row");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    // The gateway's span is the child of the client's; the broker's and the sink's are
    // children of the gateway's, found through the record's headers.
    let gateway = span_named(&collector, "POST /v1/topics/{topic}/records");
    assert_eq!(hex(&gateway.parent_span_id), CLIENT_SPAN);
    let broker = span_named(&collector, "append orders");
    assert_eq!(hex(&broker.parent_span_id), hex(&gateway.span_id));
    let sink = span_named(&collector, "process orders");
    assert_eq!(hex(&sink.parent_span_id), hex(&gateway.span_id));
    // Each in its own moment: the append within the request, the sink's after the append.
    assert!(broker.start_time_unix_nano >= gateway.start_time_unix_nano);
    assert!(broker.end_time_unix_nano <= gateway.end_time_unix_nano);
    assert!(sink.start_time_unix_nano >= broker.start_time_unix_nano);

    // The record carries the gateway's context to any consumer.
    let headers = first_headers(&dev, "orders");
    assert_eq!(
        headers,
        format!("[traceparent=00-{TRACE}-{}-01]", hex(&gateway.span_id))
    );
}

#[test]
fn without_the_otel_variables_nothing_is_exported_and_records_stay_as_sent() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    dev.create_topic("plain", 1);
    let authorization = format!("Bearer {}", dev.dev_token);
    let answer = common::request(
        &dev.rest,
        "POST",
        "/v1/topics/plain/records",
        &[
            ("Authorization", &authorization),
            ("traceparent", &format!("00-{TRACE}-{CLIENT_SPAN}-01")),
        ],
        &json!({"records": [{"value": "v"}]}).to_string(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(first_headers(&dev, "plain"), "[]");
}

#[test]
fn json_logs_are_one_object_a_line() {
    let data = tempfile::tempdir().unwrap();
    let log = data.path().join("stderr.log");
    let dev = Dev::start_with_env(
        data.path(),
        Some(&log),
        &[],
        &[("SKEIN_LOG_FORMAT", "json")],
    );
    dev.create_topic("logged", 1);
    drop(dev);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "{text}");
    for line in lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(object["level"].is_string(), "{line}");
        assert!(object["fields"].is_object(), "{line}");
    }
}
