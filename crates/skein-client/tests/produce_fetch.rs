//! Produce and fetch against a real broker: every codec, keyed partitioning, acks.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestBroker;
use skein_client::{
    partition_for_key, Acks, Compression, FetchOptions, NewTopic, ProduceRecord, Producer,
    ProducerConfig,
};

fn keyed_records(n: usize) -> Vec<ProduceRecord> {
    (0..n)
        .map(|i| {
            ProduceRecord::new(format!("value-{i}-{}", "x".repeat(i % 50)))
                .with_key(format!("key-{}", i % 7))
                .with_header("seq", Some(Bytes::from(i.to_string())))
                .with_header("null", None)
                .with_timestamp(1_700_000_000_000 + i as i64)
        })
        .collect()
}

fn quick() -> FetchOptions {
    FetchOptions::default().with_max_wait(Duration::from_millis(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_round_trip_with_every_codec_in_order() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let topic = format!("codec-{codec:?}").to_lowercase();
        client
            .create_topics(&[NewTopic::new(&topic, 3)])
            .await
            .unwrap();
        let producer = Producer::new(
            client.clone(),
            ProducerConfig::default().with_compression(codec),
        );
        let records = keyed_records(200);
        let batches = producer.send(&topic, records.clone()).await.unwrap();
        assert_eq!(
            batches.iter().map(|b| b.record_count).sum::<usize>(),
            200,
            "{codec:?}"
        );
        for batch in &batches {
            assert_eq!(
                batch.base_offset,
                Some(0),
                "{codec:?}: first batch of each partition"
            );
            let fetched = client
                .fetch(&topic, batch.partition, 0, &quick())
                .await
                .unwrap();
            assert_eq!(fetched.high_watermark, batch.record_count as i64);
            assert_eq!(fetched.next_offset, batch.record_count as i64);
            // Records of one partition come back identical and in the order produced.
            let expected: Vec<&ProduceRecord> = records
                .iter()
                .filter(|r| partition_for_key(r.key.as_deref().unwrap(), 3) == batch.partition)
                .collect();
            assert_eq!(fetched.records.len(), expected.len(), "{codec:?}");
            for (offset, (got, want)) in fetched.records.iter().zip(&expected).enumerate() {
                assert_eq!(got.offset, offset as i64);
                assert_eq!(got.partition, batch.partition);
                assert_eq!(got.key, want.key);
                assert_eq!(got.value, want.value);
                assert_eq!(got.headers, want.headers);
                assert_eq!(Some(got.timestamp), want.timestamp);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_goes_to_the_java_partition() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("keys", 50)])
        .await
        .unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    // toPositive(murmur2("foobar")) % 50 = 16 in the Java client.
    for _ in 0..3 {
        let batches = producer
            .send("keys", [ProduceRecord::new("v").with_key("foobar")])
            .await
            .unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].partition, 16);
    }
    let fetched = client.fetch("keys", 16, 0, &quick()).await.unwrap();
    assert_eq!(fetched.records.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_records_rotate_and_explicit_partitions_are_kept() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("rotate", 3)])
        .await
        .unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let batches = producer
        .send("rotate", (0..6).map(|i| ProduceRecord::new(format!("{i}"))))
        .await
        .unwrap();
    assert_eq!(
        batches
            .iter()
            .map(|b| (b.partition, b.record_count))
            .collect::<Vec<_>>(),
        [(0, 2), (1, 2), (2, 2)]
    );
    let batches = producer
        .send(
            "rotate",
            [ProduceRecord::new("p2").with_key("k").with_partition(2)],
        )
        .await
        .unwrap();
    assert_eq!(batches[0].partition, 2);
    assert_eq!(batches[0].base_offset, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_one_and_all_all_write() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("acks", 1)])
        .await
        .unwrap();
    for (i, acks) in [Acks::All, Acks::Leader, Acks::None]
        .into_iter()
        .enumerate()
    {
        let producer = Producer::new(client.clone(), ProducerConfig::default().with_acks(acks));
        let batches = producer
            .send("acks", [ProduceRecord::new(format!("{i}"))])
            .await
            .unwrap();
        let expected = (acks != Acks::None).then_some(i as i64);
        assert_eq!(batches[0].base_offset, expected, "{acks:?}");
    }
    // The acks=0 record arrives without an answer; wait for it with the fetch.
    let fetched = client
        .fetch("acks", 0, 0, &FetchOptions::default().with_min_bytes(1))
        .await
        .unwrap();
    let mut values: Vec<Bytes> = fetched
        .records
        .into_iter()
        .filter_map(|r| r.value)
        .collect();
    for _ in 0..50 {
        if values.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        values = client
            .fetch("acks", 0, 0, &quick())
            .await
            .unwrap()
            .records
            .into_iter()
            .filter_map(|r| r.value)
            .collect();
    }
    assert_eq!(values, ["0", "1", "2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_on_one_client_all_complete() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("pipelined", 4)])
        .await
        .unwrap();
    let producer = std::sync::Arc::new(Producer::new(client.clone(), ProducerConfig::default()));
    let sends = (0..32).map(|i| {
        let producer = std::sync::Arc::clone(&producer);
        async move {
            producer
                .send(
                    "pipelined",
                    [ProduceRecord::new(format!("{i}")).with_partition(i % 4)],
                )
                .await
        }
    });
    let results = futures::future::join_all(sends).await;
    assert!(results.iter().all(|r| r.is_ok()));
    for partition in 0..4 {
        let fetched = client
            .fetch("pipelined", partition, 0, &quick())
            .await
            .unwrap();
        assert_eq!(fetched.records.len(), 8);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_once_are_written_once_however_often_they_are_sent() {
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    client
        .create_topics(&[NewTopic::new("once", 2)])
        .await
        .unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let records = || (0..5).map(|i| ProduceRecord::new(format!("{i}")).with_partition(i % 2));
    let first = producer
        .send_once("once", records(), 7_000, 0, 0)
        .await
        .unwrap();
    let again = producer
        .send_once("once", records(), 7_000, 0, 0)
        .await
        .unwrap();
    assert_eq!(first, again, "the repeat answers the first write's offsets");
    for partition in 0..2 {
        let fetched = client.fetch("once", partition, 0, &quick()).await.unwrap();
        assert_eq!(fetched.high_watermark, [3, 2][partition as usize]);
    }
    // Another producer id is another write.
    let other = producer
        .send_once("once", records(), 7_001, 0, 0)
        .await
        .unwrap();
    assert_eq!(other[0].base_offset, Some(3));
    // A record without a partition is refused before anything is sent.
    assert!(producer
        .send_once("once", [ProduceRecord::new("x")], 7_002, 0, 0)
        .await
        .is_err());
}
