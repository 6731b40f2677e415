//! Consumer groups against a real broker: splitting partitions, taking over on leave, and
//! resuming from committed offsets.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::TestBroker;
use skein_client::{
    Client, Consumer, ConsumerConfig, ConsumerRecord, FetchOptions, NewTopic, OffsetReset,
    ProduceRecord, Producer, ProducerConfig,
};
use tokio::time::Instant;

fn config(group: &str, topic: &str) -> ConsumerConfig {
    let mut config =
        ConsumerConfig::new(group, [topic]).with_auto_offset_reset(OffsetReset::Earliest);
    config.session_timeout = Duration::from_secs(6);
    config.rebalance_timeout = Duration::from_secs(5);
    config.heartbeat_interval = Duration::from_millis(100);
    config.fetch = FetchOptions::default().with_max_wait(Duration::from_millis(100));
    config
}

async fn produce(client: &Client, topic: &str, from: usize, to: usize) {
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    producer
        .send(
            topic,
            (from..to).map(|i| ProduceRecord::new(format!("{i}")).with_key(format!("k{i}"))),
        )
        .await
        .unwrap();
}

fn value(record: &ConsumerRecord) -> usize {
    std::str::from_utf8(record.value.as_deref().unwrap())
        .unwrap()
        .parse()
        .unwrap()
}

/// Polls and commits until `done` says so or the deadline passes.
async fn poll_until(
    mut consumer: Consumer,
    seen: &mut Vec<usize>,
    mut done: impl FnMut(&Consumer, &[usize]) -> bool,
) -> Consumer {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done(&consumer, seen) {
        assert!(
            Instant::now() < deadline,
            "gave up waiting; saw {}",
            seen.len()
        );
        let records = consumer.poll().await.unwrap();
        seen.extend(records.iter().map(value));
        if !records.is_empty() {
            // A commit can race a rebalance; the next poll rejoins.
            let _ = consumer.commit().await;
        }
    }
    consumer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_split_six_partitions_and_one_takes_over_when_the_other_leaves() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("orders", 6)])
        .await
        .unwrap();
    let a = Consumer::new(&client, config("split", "orders"));
    let b = Consumer::new(&client, config("split", "orders"));

    // Both join; the group settles at three partitions each.
    let balanced = |c: &Consumer, _: &[usize]| c.assignment().len() == 3;
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    let (a, b) = {
        let settle_a = poll_until(a, &mut seen_a, balanced);
        let settle_b = poll_until(b, &mut seen_b, balanced);
        tokio::join!(settle_a, settle_b)
    };
    let mut owned: Vec<(String, i32)> = a.assignment();
    owned.extend(b.assignment());
    owned.sort();
    assert_eq!(
        owned,
        (0..6).map(|p| ("orders".to_owned(), p)).collect::<Vec<_>>()
    );
    assert_eq!(a.generation(), b.generation());

    // Every record is consumed exactly once between the two.
    produce(&client, "orders", 0, 300).await;
    let total = |seen_a: &[usize], seen_b: &[usize]| seen_a.len() + seen_b.len();
    let (a, b) = {
        let all_a = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let all_b = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (ca, cb) = (all_a.clone(), all_b.clone());
        let (ra, rb) = (all_a.clone(), all_b.clone());
        let run_a = poll_until(a, &mut seen_a, move |_, seen| {
            ca.store(seen.len(), std::sync::atomic::Ordering::SeqCst);
            seen.len() + rb.load(std::sync::atomic::Ordering::SeqCst) >= 300
        });
        let run_b = poll_until(b, &mut seen_b, move |_, seen| {
            cb.store(seen.len(), std::sync::atomic::Ordering::SeqCst);
            seen.len() + ra.load(std::sync::atomic::Ordering::SeqCst) >= 300
        });
        tokio::join!(run_a, run_b)
    };
    assert!(!seen_a.is_empty() && !seen_b.is_empty());
    let mut all: Vec<usize> = seen_a.iter().chain(&seen_b).copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..300).collect::<Vec<_>>(),
        "total {}",
        total(&seen_a, &seen_b)
    );

    // A leaves; B takes over all six partitions, from A's committed offsets.
    a.close().await.unwrap();
    produce(&client, "orders", 300, 400).await;
    let mut after = Vec::new();
    let b = poll_until(b, &mut after, |c, seen| {
        c.assignment().len() == 6 && seen.len() >= 100
    })
    .await;
    after.sort_unstable();
    assert_eq!(after, (300..400).collect::<Vec<_>>());
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_consumer_resumes_from_committed_offsets() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("resume", 2)])
        .await
        .unwrap();
    produce(&client, "resume", 0, 50).await;
    let mut first = Vec::new();
    let consumer = poll_until(
        Consumer::new(&client, config("resume-group", "resume")),
        &mut first,
        |_, seen| seen.len() >= 50,
    )
    .await;
    let mut consumer = consumer;
    consumer.commit().await.unwrap();
    let committed: BTreeMap<i32, Option<i64>> = {
        let mut committed = BTreeMap::new();
        for p in 0..2 {
            committed.insert(p, consumer.committed("resume", p).await.unwrap());
        }
        committed
    };
    let total: i64 = committed.values().map(|c| c.unwrap()).sum();
    assert_eq!(total, 50);
    consumer.close().await.unwrap();

    produce(&client, "resume", 50, 80).await;
    let mut second = Vec::new();
    let consumer = poll_until(
        Consumer::new(&client, config("resume-group", "resume")),
        &mut second,
        |_, seen| seen.len() >= 30,
    )
    .await;
    second.sort_unstable();
    assert_eq!(second, (50..80).collect::<Vec<_>>());
    for p in 0..2 {
        assert_eq!(
            consumer.position("resume", p),
            Some(
                client
                    .list_offset("resume", p, skein_client::OffsetSpec::Latest)
                    .await
                    .unwrap()
                    .unwrap()
                    .offset
            )
        );
    }
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_reset_skips_records_written_before_joining() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("fresh", 1)])
        .await
        .unwrap();
    produce(&client, "fresh", 0, 10).await;
    let mut cfg = config("latest-group", "fresh");
    cfg.auto_offset_reset = OffsetReset::Latest;
    let mut consumer = Consumer::new(&client, cfg);
    assert!(consumer.poll().await.unwrap().is_empty());
    assert_eq!(consumer.position("fresh", 0), Some(10));
    produce(&client, "fresh", 10, 12).await;
    let mut seen = Vec::new();
    let consumer = poll_until(consumer, &mut seen, |_, seen| seen.len() >= 2).await;
    assert_eq!(seen, [10, 11]);
    consumer.close().await.unwrap();
}
