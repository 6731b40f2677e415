//! Sinks through the admin API of `skein dev` into a real PostgreSQL: one request creates a
//! sink and the table fills with the records produced through the gateway, upserted by
//! key; a record that does not fit goes to the dead-letter topic; the status shows every
//! partition caught up; pause holds the rows back and resume brings them; the database URL
//! is never returned nor stored in the clear; the metrics count the rows, the dead letter
//! and the lag; and a wrong definition is refused with a problem before anything runs.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::dev::Dev;
use common::metrics::{assert_served, dashboard_series, eventually, ops_of, sample};
use serde_json::{json, Value};

const PASSWORD: &str = "not-in-the-catalog-7f3c";

fn admin(dev: &Dev, method: &str, path: &str, body: &str) -> (u16, Value) {
    let (status, text) = common::http(&dev.admin, method, path, Some(&dev.admin_token), body);
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, value)
}

fn produce(dev: &Dev, records: Value) {
    let (status, body) = common::http(
        &dev.rest,
        "POST",
        "/v1/topics/orders/records",
        Some(&dev.dev_token),
        &json!({ "records": records }).to_string(),
    );
    assert_eq!(status, 200, "{body}");
}

/// Runs `query` until it answers `want`, for up to 30 s.
async fn until(pool: &sqlx::PgPool, query: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got: i64 = sqlx::query_scalar(query).fetch_one(pool).await.unwrap();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{query}: {got}, not {want}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn a_sink_made_with_one_request_fills_its_table_and_refuses_bad_definitions() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sinks").unwrap();
    // The throwaway cluster trusts local logins, so the password only has to be carried.
    let target = url.replacen("postgres@", &format!("postgres:{PASSWORD}@"), 1);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pool = runtime.block_on(sqlx::PgPool::connect(&url)).unwrap();
    runtime.block_on(async {
        sqlx::query("CREATE TABLE orders (id text PRIMARY KEY, item text, qty integer)")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE blobs (id text PRIMARY KEY, data bytea)")
            .execute(&pool)
            .await
            .unwrap();
    });

    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start_with(data.path(), None, &["--ops-listen", "127.0.0.1:0"]);
    let ops = ops_of(&dev);
    dev.create_topic("orders", 2);
    // The dead-letter topic does not exist yet: making the sink makes it.

    let sink = |table: &str, url: &str, columns: &[&str]| {
        json!({
            "name": "orders_table",
            "topics": ["orders"],
            "database_url": url,
            "table": table,
            "mode": {
                "kind": "columns",
                "columns": columns.iter().map(|c| json!({"field": c, "column": c})).collect::<Vec<_>>(),
                "key_column": "id",
            },
            "dead_letter_topic": "orders-rejected",
        })
        .to_string()
    };
    let path = "/v1/tenants/dev/sinks";
    // Each mistake is a problem naming it, and nothing is stored.
    for (body, says) in [
        (sink("nowhere", &target, &["item"]), "no table nowhere"),
        (
            sink("orders", &target, &["item", "colour"]),
            "no column colour",
        ),
        (sink("blobs", &target, &["data"]), "column data is bytea"),
        (
            sink("orders", "postgres://nobody@127.0.0.1:1/none", &["item"]),
            "unreachable",
        ),
        (sink("orders", "mysql://x", &["item"]), "postgres://"),
        (
            sink("orders", &target, &["item"]).replace("\"orders\"]", "\"ghost\"]"),
            "no topic ghost",
        ),
        (
            sink("orders", &target, &["item"]).replace("orders_table", "orders table"),
            "sink name",
        ),
    ] {
        let (status, problem) = admin(&dev, "POST", path, &body);
        assert_eq!(status, 422, "{body}: {problem}");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{says:?} not in {detail:?}");
    }
    let (_, listed) = admin(&dev, "GET", path, "");
    assert_eq!(listed["data"], json!([]));

    let (status, created) = admin(
        &dev,
        "POST",
        path,
        &sink("orders", &target, &["item", "qty"]),
    );
    assert_eq!(status, 201, "{created}");
    assert!(!created.to_string().contains(PASSWORD), "{created}");
    assert!(created.get("database_url").is_none());
    let (status, again) = admin(
        &dev,
        "POST",
        path,
        &sink("orders", &target, &["item", "qty"]),
    );
    assert_eq!(status, 409, "{again}");

    produce(
        &dev,
        json!([
            {"key": "o1", "value": {"item": "book", "qty": 1}},
            {"key": "o2", "value": {"item": "pen", "qty": 3}},
            {"key": "o3", "value": {"item": "ink", "qty": "many"}},
            {"key": "o1", "value": {"item": "book", "qty": 2}},
        ]),
    );
    runtime.block_on(until(&pool, "SELECT count(*) FROM orders", 2));
    runtime.block_on(until(
        &pool,
        "SELECT coalesce(sum(qty), 0)::bigint FROM orders",
        5,
    ));

    // The status shows every partition caught up and the record that did not fit.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let (code, body) = admin(&dev, "GET", &format!("{path}/orders_table"), "");
        assert_eq!(code, 200, "{body}");
        let partitions = body["status"]["partitions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let caught_up = partitions.len() == 2
            && partitions.iter().all(|p| p["lag"] == json!(0))
            && body["status"]["dead_lettered"] == json!(1);
        if caught_up {
            break body;
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status["status"]["state"], "running");
    assert!(!status.to_string().contains(PASSWORD));
    // The metrics say what the status says: the rows, the dead letter, no lag, and the
    // transactions that wrote them timed.
    let labels = [("tenant", "dev"), ("sink", "orders_table")];
    let rows = status["status"]["rows_applied"].as_i64().unwrap() as f64;
    assert!(rows >= 2.0, "{status}");
    let scraped = eventually(&ops, "the sink's rows", |text| {
        sample(text, "skein_sink_rows_total", &labels) == rows
            && sample(text, "skein_sink_dead_lettered_total", &labels) == 1.0
            && sample(text, "skein_sink_lag_records", &labels) == 0.0
    });
    assert!(
        sample(
            &scraped,
            "skein_sink_transaction_duration_seconds_count",
            &labels
        ) >= 1.0,
        "{scraped}"
    );
    let plotted = dashboard_series(|series| series.starts_with("skein_sink_"));
    assert_eq!(plotted.len(), 4, "{plotted:?}");
    assert_served(&plotted, &scraped);
    let (_, rejected) = {
        let (code, text) = common::http(
            &dev.rest,
            "GET",
            "/v1/topics/orders-rejected/partitions/0/records?offset=earliest&value_format=string",
            Some(&dev.dev_token),
            "",
        );
        (code, serde_json::from_str::<Value>(&text).unwrap())
    };
    let letter = &rejected["records"][0];
    assert_eq!(letter["key"], "o3", "{rejected}");
    let reason = letter["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["key"] == "skein.sink.error")
        .unwrap();
    assert!(
        reason["value"]
            .as_str()
            .unwrap()
            .contains("column qty takes integers"),
        "{reason}"
    );

    // Paused, new records wait; resumed, they arrive.
    let (code, paused) = admin(&dev, "POST", &format!("{path}/orders_table/pause"), "");
    assert_eq!(code, 200, "{paused}");
    assert_eq!(paused["status"]["state"], "paused");
    std::thread::sleep(Duration::from_secs(3));
    produce(
        &dev,
        json!([{"key": "o4", "value": {"item": "cup", "qty": 1}}]),
    );
    std::thread::sleep(Duration::from_secs(3));
    let count: i64 = runtime
        .block_on(sqlx::query_scalar("SELECT count(*) FROM orders").fetch_one(&pool))
        .unwrap();
    assert_eq!(count, 2, "a paused sink wrote");
    let (code, _) = admin(&dev, "POST", &format!("{path}/orders_table/resume"), "");
    assert_eq!(code, 200);
    runtime.block_on(until(&pool, "SELECT count(*) FROM orders", 3));
    eventually(&ops, "the resumed sink's row", |text| {
        sample(text, "skein_sink_rows_total", &labels) == rows + 1.0
    });

    // The URL is sealed in the catalog, never in the clear.
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with("catalog") {
            let bytes = std::fs::read(entry.path()).unwrap();
            assert!(
                !bytes
                    .windows(PASSWORD.len())
                    .any(|w| w == PASSWORD.as_bytes()),
                "{} holds the password",
                entry.path().display()
            );
        }
    }

    let (code, _) = admin(&dev, "DELETE", &format!("{path}/orders_table"), "");
    assert_eq!(code, 204);
    let (code, _) = admin(&dev, "GET", &format!("{path}/orders_table"), "");
    assert_eq!(code, 404);
    // Its series leave the metrics with it.
    eventually(&ops, "the deleted sink's series gone", |text| {
        !text.contains(r#"sink="orders_table""#)
    });

    // A sink without a dead-letter topic, holding a record it cannot apply, says so: its
    // state is `failing` and its last error names the record, and stays so while the
    // worker is started again.
    let strict = json!({
        "name": "strict_orders",
        "topics": ["orders"],
        "database_url": target,
        "table": "orders",
        "mode": {
            "kind": "columns",
            "columns": [{"field": "item", "column": "item"}, {"field": "qty", "column": "qty"}],
            "key_column": "id",
        },
    });
    let (code, created) = admin(&dev, "POST", path, &strict.to_string());
    assert_eq!(code, 201, "{created}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut failing_since = None;
    let stuck = loop {
        let (_, body) = admin(&dev, "GET", &format!("{path}/strict_orders"), "");
        let state = body["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match (&state[..], failing_since) {
            ("failing", None) => {
                let error = body["status"]["last_error"].as_str().unwrap_or_default();
                assert!(error.contains("does not fit"), "{body}");
                failing_since = Some(Instant::now());
            }
            // Past two restarts of the worker, it still says so.
            ("failing", Some(since)) if since.elapsed() > Duration::from_secs(9) => {
                break body["status"]["last_error"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            }
            ("failing", Some(_)) => {}
            (other, Some(_)) => panic!("a failing sink said {other}: {body}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(250));
    };

    // Told to skip the record its error names ("record orders-P@O does not fit: ..."), the
    // sink passes it over and runs again; the record is never applied.
    let at = stuck
        .split("record ")
        .nth(1)
        .and_then(|rest| rest.split(" does not fit").next())
        .unwrap();
    let (topic_partition, offset) = at.rsplit_once('@').unwrap();
    let (topic, partition) = topic_partition.rsplit_once('-').unwrap();
    let (code, skipped) = admin(
        &dev,
        "POST",
        &format!("{path}/strict_orders/skip"),
        &json!({"topic": topic, "partition": partition.parse::<i32>().unwrap(),
            "offset": offset.parse::<i64>().unwrap()})
        .to_string(),
    );
    assert_eq!(code, 200, "{skipped}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut running_since = None;
    loop {
        let (_, body) = admin(&dev, "GET", &format!("{path}/strict_orders"), "");
        let lag_free = body["status"]["partitions"]
            .as_array()
            .is_some_and(|ps| !ps.is_empty() && ps.iter().all(|p| p["lag"] == json!(0)));
        match (body["status"]["state"].as_str(), running_since) {
            (Some("running"), None) if lag_free => running_since = Some(Instant::now()),
            (Some("running"), Some(since)) if since.elapsed() > Duration::from_secs(5) => break,
            (Some("running"), _) => {}
            (_, Some(_)) => panic!("a sink past its record failed again: {body}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(250));
    }

    // Edited: a change the target cannot take is refused and changes nothing; a dead-letter
    // topic that does not exist yet is made with the sink's new definition.
    let strict_path = format!("{path}/strict_orders");
    let (code, problem) = admin(&dev, "PATCH", &strict_path, r#"{"table":"nowhere"}"#);
    assert_eq!(code, 422, "{problem}");
    let (_, unchanged) = admin(&dev, "GET", &strict_path, "");
    assert_eq!(unchanged["table"], "orders", "{unchanged}");
    let (code, edited) = admin(
        &dev,
        "PATCH",
        &strict_path,
        r#"{"dead_letter_topic":"strict-rejected"}"#,
    );
    assert_eq!(code, 200, "{edited}");
    assert_eq!(edited["dead_letter_topic"], "strict-rejected");
    let (code, text) = common::http(
        &dev.rest,
        "GET",
        "/v1/topics/strict-rejected/partitions/0/records?offset=earliest",
        Some(&dev.dev_token),
        "",
    );
    assert_eq!(code, 200, "{text}");
    // A record that does not fit now goes there, and the sink goes on.
    produce(
        &dev,
        json!([{"key": "o5", "value": {"item": "lamp", "qty": "lots"}}]),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = admin(&dev, "GET", &strict_path, "");
        if body["status"]["state"] == "running" && body["status"]["dead_lettered"] == json!(1) {
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let (code, text) = common::http(
        &dev.rest,
        "GET",
        "/v1/topics/strict-rejected/partitions/0/records?offset=earliest&value_format=string",
        Some(&dev.dev_token),
        "",
    );
    assert_eq!(code, 200, "{text}");
    let letters: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(letters["records"][0]["key"], "o5", "{letters}");
}
