//! Sinks against a real broker and a real PostgreSQL: envelope rows land once with their
//! positions, JSON values map to columns with upserts and tombstones, records that do not
//! fit go to the dead-letter topic with their reason, a worker whose partitions were
//! claimed stops, and a wrong definition is refused before anything runs.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skein_broker::{BrokerConfig, Node, NodeSettings};
use skein_client::{
    Client, ClientConfig, FetchOptions, NewTopic, OffsetSpec, ProduceRecord, Producer,
    ProducerConfig,
};
use skein_sink::{
    connect_target, prepare, ColumnMapping, Mode, SinkError, SinkSpec, SinkStats, SinkWorker,
    TargetPolicy, ERROR_HEADER,
};
use sqlx::postgres::PgPool;
use tokio::net::TcpListener;

/// id, name, balance, active, extra.
type Account = (
    String,
    Option<String>,
    Option<i32>,
    Option<bool>,
    Option<String>,
);

struct Setup {
    _node: Node,
    _dir: tempfile::TempDir,
    _postgres: skein_testkit::Postgres,
    client: Client,
    pool: PgPool,
    url: String,
}

async fn setup(topics: &[(&str, i32)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = BrokerConfig::new(dir.path());
    config.advertised_port = addr.port();
    let node = Node::start(config, listener, NodeSettings::default())
        .await
        .unwrap();
    let client = Client::connect(ClientConfig::new([addr.to_string()]))
        .await
        .unwrap();
    let new: Vec<NewTopic> = topics.iter().map(|(t, p)| NewTopic::new(*t, *p)).collect();
    client.create_topics(&new).await.unwrap();
    let postgres = tokio::task::spawn_blocking(skein_testkit::Postgres::start)
        .await
        .unwrap()
        .unwrap();
    let url = postgres.database("sink").unwrap();
    let pool = PgPool::connect(&url).await.unwrap();
    Setup {
        _node: node,
        _dir: dir,
        _postgres: postgres,
        client,
        pool,
        url,
    }
}

async fn send(client: &Client, topic: &str, records: Vec<ProduceRecord>) {
    Producer::new(client.clone(), ProducerConfig::default())
        .send(topic, records)
        .await
        .unwrap();
}

/// Rounds until one writes nothing and moves no position.
async fn drain(worker: &mut SinkWorker, stats: &SinkStats) {
    let mut idle = 0;
    while idle < 2 {
        let before = stats.positions.lock().clone();
        worker.step().await.unwrap();
        if *stats.positions.lock() == before {
            idle += 1;
        } else {
            idle = 0;
        }
    }
}

fn all_partitions(topic: &str, count: i32) -> BTreeMap<String, Vec<i32>> {
    BTreeMap::from([(topic.to_owned(), (0..count).collect())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_rows_land_once_with_positions_at_the_log_end() {
    let s = setup(&[("events", 2)]).await;
    sqlx::query(
        "CREATE TABLE events_raw (topic text, partition integer, \"offset\" bigint, \
         \"timestamp\" timestamptz, key bytea, value bytea, headers jsonb, \
         PRIMARY KEY (topic, partition, \"offset\"))",
    )
    .execute(&s.pool)
    .await
    .unwrap();
    for round in 0..10 {
        let records = (0..50)
            .map(|i| {
                ProduceRecord::new(format!("event-{round}-{i}"))
                    .with_key(format!("k{i}"))
                    .with_header("trace", Some(Bytes::from_static(b"abc")))
                    .with_header("raw", Some(Bytes::from_static(&[0xff, 0x00])))
                    .with_partition(i % 2)
            })
            .collect();
        send(&s.client, "events", records).await;
    }
    let spec = SinkSpec {
        name: "raw_events".to_owned(),
        topics: vec!["events".to_owned()],
        table: "public.events_raw".to_owned(),
        mode: Mode::Envelope,
        dead_letter_topic: None,
        skip: Vec::new(),
    };
    let stats = Arc::new(SinkStats::default());
    let mut worker = SinkWorker::start(
        s.client.clone(),
        s.pool.clone(),
        spec,
        &all_partitions("events", 2),
        Arc::clone(&stats),
    )
    .await
    .unwrap();
    drain(&mut worker, &stats).await;
    let (rows, bytes): (i64, i64) =
        sqlx::query_as("SELECT count(*), sum(length(value))::bigint FROM events_raw")
            .fetch_one(&s.pool)
            .await
            .unwrap();
    assert_eq!(rows, 500);
    let expected: usize = (0..10)
        .flat_map(|r| (0..50).map(move |i| format!("event-{r}-{i}").len()))
        .sum();
    assert_eq!(bytes, expected as i64);
    let headers: String = sqlx::query_scalar(
        "SELECT headers::text FROM events_raw WHERE partition = 0 AND \"offset\" = 0",
    )
    .fetch_one(&s.pool)
    .await
    .unwrap();
    assert_eq!(
        headers,
        r#"[{"key": "trace", "value": "abc"}, {"key": "raw", "value_base64": "/wA="}]"#
    );
    let stored: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT partition, next_offset FROM skein_offsets WHERE consumer = 'raw_events' \
         ORDER BY partition",
    )
    .fetch_all(&s.pool)
    .await
    .unwrap();
    for (partition, next) in stored {
        let end = s
            .client
            .list_offset("events", partition, OffsetSpec::Latest)
            .await
            .unwrap()
            .unwrap()
            .offset;
        assert_eq!(next, end);
    }
    assert_eq!(stats.rows.load(std::sync::atomic::Ordering::Relaxed), 500);

    // Another worker claims the partitions: this one is fenced at its next round.
    send(
        &s.client,
        "events",
        vec![ProduceRecord::new("late").with_partition(0)],
    )
    .await;
    let other = SinkWorker::start(
        s.client.clone(),
        s.pool.clone(),
        SinkSpec {
            name: "raw_events".to_owned(),
            topics: vec!["events".to_owned()],
            table: "events_raw".to_owned(),
            mode: Mode::Envelope,
            dead_letter_topic: None,
            skip: Vec::new(),
        },
        &all_partitions("events", 2),
        Arc::new(SinkStats::default()),
    )
    .await
    .unwrap();
    let fenced = worker.step().await.unwrap_err();
    assert!(fenced.is_fenced(), "{fenced}");
    drop(other);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_columns_upsert_by_key_delete_on_tombstones_and_dead_letter_misfits() {
    let s = setup(&[("accounts", 1), ("accounts_dlq", 1)]).await;
    sqlx::query(
        "CREATE TABLE accounts (id text PRIMARY KEY, name varchar(10), balance integer, \
         active boolean, extra jsonb)",
    )
    .execute(&s.pool)
    .await
    .unwrap();
    let record = |key: &str, value: Option<&str>| ProduceRecord {
        key: Some(Bytes::from(key.to_owned())),
        value: value.map(|v| Bytes::from(v.to_owned())),
        ..ProduceRecord::default()
    };
    send(
        &s.client,
        "accounts",
        vec![
            record(
                "a",
                Some(r#"{"name":"alice","balance":10,"active":true,"extra":{"tier":1}}"#),
            ),
            record("b", Some(r#"{"name":"bob","balance":5,"active":false}"#)),
            record("c", Some("not json")),
            record("d", Some(r#"{"name":"dan","balance":"lots"}"#)),
            record("e", Some(r#"{"name":"eve","balance":1099511627776}"#)),
            record("f", Some(r#"{"name":"a name far too long for ten"}"#)),
        ],
    )
    .await;
    send(
        &s.client,
        "accounts",
        vec![
            record("a", Some(r#"{"name":"alice","balance":20,"active":true}"#)),
            record("b", None),
            record("g", Some(r#"{"name":"gus"}"#)),
        ],
    )
    .await;
    let spec = SinkSpec {
        name: "accounts_sink".to_owned(),
        topics: vec!["accounts".to_owned()],
        table: "accounts".to_owned(),
        mode: Mode::Columns {
            columns: ["name", "balance", "active", "extra"]
                .iter()
                .map(|c| ColumnMapping {
                    field: (*c).to_owned(),
                    column: (*c).to_owned(),
                })
                .collect(),
            key_column: Some("id".to_owned()),
        },
        dead_letter_topic: Some("accounts_dlq".to_owned()),
        skip: Vec::new(),
    };
    let stats = Arc::new(SinkStats::default());
    let mut worker = SinkWorker::start(
        s.client.clone(),
        s.pool.clone(),
        spec,
        &all_partitions("accounts", 1),
        Arc::clone(&stats),
    )
    .await
    .unwrap();
    drain(&mut worker, &stats).await;
    let rows: Vec<Account> =
        sqlx::query_as("SELECT id, name, balance, active, extra::text FROM accounts ORDER BY id")
            .fetch_all(&s.pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "a".to_owned(),
                Some("alice".to_owned()),
                Some(20),
                Some(true),
                None
            ),
            ("g".to_owned(), Some("gus".to_owned()), None, None, None),
        ]
    );
    // c (not JSON), d (a string for an integer), e (out of integer's range) are refused by
    // the sink, f (too long for varchar(10)) by the database.
    let letters = s
        .client
        .fetch(
            "accounts_dlq",
            0,
            0,
            &FetchOptions::default().with_max_wait(Duration::from_millis(100)),
        )
        .await
        .unwrap()
        .records;
    let keys: Vec<&[u8]> = letters.iter().map(|r| r.key.as_deref().unwrap()).collect();
    assert_eq!(keys, [&b"c"[..], b"d", b"e", b"f"]);
    let reasons: Vec<String> = letters
        .iter()
        .map(|r| {
            let header = r.headers.iter().find(|h| h.key == ERROR_HEADER).unwrap();
            String::from_utf8(header.value.clone().unwrap().to_vec()).unwrap()
        })
        .collect();
    assert!(reasons[0].contains("not JSON"), "{}", reasons[0]);
    assert!(
        reasons[1].contains("column balance takes integers"),
        "{}",
        reasons[1]
    );
    assert!(
        reasons[2].contains("column balance takes integers"),
        "{}",
        reasons[2]
    );
    assert!(reasons[3].contains("22001"), "{}", reasons[3]);
    assert_eq!(
        stats
            .dead_lettered
            .load(std::sync::atomic::Ordering::Relaxed),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_definition_is_refused_before_anything_runs() {
    let s = setup(&[("orders", 1)]).await;
    sqlx::query("CREATE TABLE orders (id text, qty integer, blob bytea)")
        .execute(&s.pool)
        .await
        .unwrap();
    sqlx::query("CREATE TABLE wrong_envelope (topic text, partition integer, \"offset\" text)")
        .execute(&s.pool)
        .await
        .unwrap();
    let mapped = |table: &str, columns: &[&str], key: Option<&str>| SinkSpec {
        name: "orders_sink".to_owned(),
        topics: vec!["orders".to_owned()],
        table: table.to_owned(),
        mode: Mode::Columns {
            columns: columns
                .iter()
                .map(|c| ColumnMapping {
                    field: (*c).to_owned(),
                    column: (*c).to_owned(),
                })
                .collect(),
            key_column: key.map(str::to_owned),
        },
        dead_letter_topic: None,
        skip: Vec::new(),
    };
    let refused = |spec: SinkSpec| {
        let pool = s.pool.clone();
        async move { prepare(&pool, &spec).await.unwrap_err() }
    };
    assert!(matches!(
        refused(mapped("nowhere", &["qty"], None)).await,
        SinkError::UnknownTable(t) if t == "nowhere"
    ));
    assert!(matches!(
        refused(mapped("orders", &["qty", "colour"], None)).await,
        SinkError::MissingColumn { column, .. } if column == "colour"
    ));
    assert!(matches!(
        refused(mapped("orders", &["blob"], None)).await,
        SinkError::ColumnType { column, .. } if column == "blob"
    ));
    let no_unique = refused(mapped("orders", &["qty"], Some("id"))).await;
    assert!(
        no_unique.to_string().contains("unique index"),
        "{no_unique}"
    );
    let envelope = refused(SinkSpec {
        mode: Mode::Envelope,
        ..mapped("wrong_envelope", &[], None)
    })
    .await;
    assert!(
        matches!(&envelope, SinkError::ColumnType { column, .. } if column == "offset")
            || matches!(&envelope, SinkError::MissingColumn { .. }),
        "{envelope}"
    );
    assert!(matches!(
        refused(mapped("orders; DROP TABLE orders", &["qty"], None)).await,
        SinkError::Invalid(_)
    ));
    assert!(prepare(&s.pool, &mapped("orders", &["qty"], None))
        .await
        .is_ok());

    // An unreachable database, and one that refuses the login, are clear errors too.
    let unreachable = connect_target(
        "postgres://nobody@127.0.0.1:1/none",
        1,
        &TargetPolicy::loopback(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(unreachable, SinkError::Unreachable(_)),
        "{unreachable}"
    );
    let wrong_db = format!("{}_missing", s.url);
    assert!(matches!(
        connect_target(&wrong_db, 1, &TargetPolicy::loopback())
            .await
            .unwrap_err(),
        SinkError::Unreachable(_)
    ));
}
