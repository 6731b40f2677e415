//! Exactly-once consumption into a real PostgreSQL from a real broker: rows and positions
//! commit together, a restart resumes from the database, and a consumer whose partitions
//! were claimed by another (or whose transaction sat idle past its bound) commits nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::TestBroker;
use skein_client::exactly_once::{Batch, ExactlyOnce, ExactlyOnceConfig, ExactlyOnceError, Start};
use skein_client::{Client, NewTopic, OffsetSpec, ProduceRecord, Producer, ProducerConfig};
use sqlx::postgres::PgPool;

const TOPIC: &str = "payments";

async fn setup(records: usize) -> (TestBroker, Client, skein_testkit::Postgres, PgPool) {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new(TOPIC, 2)])
        .await
        .unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    // Ten records a send, so a poll (bounded by bytes) takes some batches, not all.
    for first in (0..records).step_by(10) {
        let batch: Vec<ProduceRecord> = (first..records.min(first + 10))
            .map(|i| ProduceRecord::new(format!("payment-{i}")).with_partition((i % 2) as i32))
            .collect();
        producer.send(TOPIC, batch).await.unwrap();
    }
    let postgres = tokio::task::spawn_blocking(skein_testkit::Postgres::start)
        .await
        .unwrap()
        .unwrap();
    let url = postgres.database("exactly_once").unwrap();
    let pool = PgPool::connect(&url).await.unwrap();
    sqlx::query(
        "CREATE TABLE applied (partition integer, position bigint, body text, \
         PRIMARY KEY (partition, position))",
    )
    .execute(&pool)
    .await
    .unwrap();
    ExactlyOnce::install(&pool).await.unwrap();
    // Twice is harmless.
    ExactlyOnce::install(&pool).await.unwrap();
    (broker, client, postgres, pool)
}

fn config() -> ExactlyOnceConfig {
    let mut config = ExactlyOnceConfig::new("ledger", TOPIC);
    config.max_wait = Duration::from_millis(100);
    config.partition_max_bytes = 256;
    config
}

async fn apply(consumer: &mut ExactlyOnce, batch: &Batch) -> Result<(), ExactlyOnceError> {
    let mut tx = consumer.begin().await?;
    for record in &batch.records {
        sqlx::query("INSERT INTO applied VALUES ($1, $2, $3)")
            .bind(record.partition)
            .bind(record.offset)
            .bind(std::str::from_utf8(record.value.as_deref().unwrap()).unwrap())
            .execute(tx.connection())
            .await?;
    }
    consumer.commit(tx, batch).await
}

async fn rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM applied")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn stored(pool: &PgPool) -> Vec<(i32, Option<i64>, i64)> {
    sqlx::query_as(
        "SELECT partition, next_offset, owner_epoch FROM skein_offsets ORDER BY partition",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_positions_commit_together_and_a_restart_resumes_from_the_database() {
    let (_broker, client, _postgres, pool) = setup(400).await;
    let mut first = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        config(),
        &[0, 1],
        Start::Earliest,
    )
    .await
    .unwrap();
    let batch = first.poll().await.unwrap();
    assert!(!batch.records.is_empty() && batch.records.len() < 400);
    apply(&mut first, &batch).await.unwrap();
    let applied = rows(&pool).await;
    assert_eq!(applied, batch.records.len() as i64);

    // The next batch's rows go in, then the process dies before commit: neither its rows
    // nor its positions stay.
    let lost = first.poll().await.unwrap();
    assert!(!lost.records.is_empty());
    let mut tx = first.begin().await.unwrap();
    sqlx::query("INSERT INTO applied VALUES (0, 999999, 'half')")
        .execute(tx.connection())
        .await
        .unwrap();
    drop(tx);
    drop(first);
    assert_eq!(rows(&pool).await, applied);

    // A new consumer starts from the positions in the database, not from the beginning.
    let mut second = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        config(),
        &[0, 1],
        Start::Earliest,
    )
    .await
    .unwrap();
    for (partition, (epoch, next)) in second.positions() {
        assert_eq!(epoch, 2, "partition {partition}");
        let from_batch = batch.next_offsets.get(&partition).copied().unwrap_or(0);
        assert_eq!(next, from_batch, "partition {partition}");
    }
    loop {
        let batch = second.poll().await.unwrap();
        if batch.is_empty() {
            break;
        }
        apply(&mut second, &batch).await.unwrap();
    }
    // Every record once (the primary key refuses a second), and the stored positions are
    // the log end offsets.
    assert_eq!(rows(&pool).await, 400);
    for (partition, next, epoch) in stored(&pool).await {
        let end = client
            .list_offset(TOPIC, partition, OffsetSpec::Latest)
            .await
            .unwrap()
            .unwrap()
            .offset;
        assert_eq!(next, Some(end), "partition {partition}");
        assert_eq!(epoch, 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_partitions_were_claimed_commits_nothing() {
    let (_broker, client, _postgres, pool) = setup(100).await;
    let zombie = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        config(),
        &[0, 1],
        Start::Earliest,
    )
    .await
    .unwrap();
    let batch = zombie.poll().await.unwrap();
    assert!(!batch.records.is_empty());

    // Claimed before the zombie opens its transaction: the zombie is refused at begin.
    let _owner = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        config(),
        &[1],
        Start::Earliest,
    )
    .await
    .unwrap();
    match zombie.begin().await {
        Err(ExactlyOnceError::Fenced {
            partition,
            mine,
            current,
            ..
        }) => {
            assert_eq!((partition, mine, current), (1, 1, Some(2)));
        }
        other => panic!("the zombie was not fenced: {other:?}"),
    }
    assert_eq!(rows(&pool).await, 0);
    assert!(stored(&pool)
        .await
        .iter()
        .all(|(_, next, _)| next.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_waits_for_a_transaction_in_progress_and_an_idle_one_is_ended() {
    let (_broker, client, _postgres, pool) = setup(100).await;
    let mut quick = config();
    quick.idle_timeout = Duration::from_millis(1500);
    let mut first = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        quick.clone(),
        &[0, 1],
        Start::Earliest,
    )
    .await
    .unwrap();

    // A claim made while a transaction is in progress sees what it commits.
    let batch = first.poll().await.unwrap();
    let tx = first.begin().await.unwrap();
    let claiming = tokio::spawn({
        let (client, pool, quick) = (client.clone(), pool.clone(), quick.clone());
        async move {
            ExactlyOnce::claim(client, pool, quick, &[0, 1], Start::Earliest)
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claiming.is_finished(),
        "the claim did not wait for the transaction"
    );
    first.commit(tx, &batch).await.unwrap();
    let mut second = claiming.await.unwrap();
    for (partition, (_, next)) in second.positions() {
        assert_eq!(Some(&next), batch.next_offsets.get(&partition));
    }

    // A transaction left idle (its process paused) is ended by the database, so the next
    // owner is not held up and the paused one commits nothing when it wakes.
    let batch = second.poll().await.unwrap();
    assert!(!batch.records.is_empty());
    let mut tx = second.begin().await.unwrap();
    sqlx::query("INSERT INTO applied VALUES (0, 999999, 'paused')")
        .execute(tx.connection())
        .await
        .unwrap();
    let _third = ExactlyOnce::claim(
        client.clone(),
        pool.clone(),
        quick,
        &[0, 1],
        Start::Earliest,
    )
    .await
    .unwrap();
    assert!(second.commit(tx, &batch).await.is_err());
    let paused: i64 = sqlx::query_scalar("SELECT count(*) FROM applied WHERE position = 999999")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(paused, 0);
}
