//! Skein's async Kafka client: typed produce, fetch, admin and consumer-group calls over the
//! Kafka wire protocol, on tokio.
//!
//! Organization, from the wire up:
//! - [`Connection`] (`connection.rs`): one TCP connection to one broker, with API versions
//!   negotiated at connect and several requests in flight, matched by correlation id; in
//!   TLS with [`ClientTls`] (`tls.rs`) and SASL/PLAIN when the config asks for them;
//! - [`Client`] (`cluster.rs`): bootstrap, the [`ClusterMetadata`] cache (`metadata.rs`) and
//!   a connection pool keyed by node id; clones share both;
//! - [`Producer`] (`produce.rs`): records to partitions (explicit, by key with Kafka's
//!   murmur2 partitioner in `partitioner.rs`, or round-robin), compressed into record
//!   batches (`batch.rs`);
//! - [`Client::fetch`] (`fetch.rs`): records from a partition;
//! - `admin.rs`: [`Client::create_topics`], [`Client::delete_topics`],
//!   [`Client::create_partitions`], [`Client::list_offset`] and
//!   [`Client::describe_topic_configs`];
//! - [`Consumer`] (`group/`): a consumer-group member with the classic protocol and the
//!   range assignor;
//! - [`ClientError`] (`error.rs`): every failure, with the Kafka error when a broker sent one;
//! - `exactly_once` (feature `postgres`): consumption into PostgreSQL that stores each
//!   partition's position in the same transaction as the rows, fenced by owner epochs.
//!
//! ```no_run
//! use skein_client::{Client, ClientConfig, FetchOptions, NewTopic, ProduceRecord, Producer,
//!     ProducerConfig};
//!
//! # async fn run() -> Result<(), skein_client::ClientError> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:9092"])).await?;
//! client.create_topics(&[NewTopic::new("orders", 3)]).await?;
//! let producer = Producer::new(client.clone(), ProducerConfig::default());
//! let batches = producer
//!     .send("orders", [ProduceRecord::new("shipped").with_key("order-7")])
//!     .await?;
//! let batch = &batches[0];
//! let fetched = client
//!     .fetch("orders", batch.partition, batch.base_offset.unwrap_or(0), &FetchOptions::default())
//!     .await?;
//! assert_eq!(fetched.records[0].value.as_deref(), Some(&b"shipped"[..]));
//! # Ok(())
//! # }
//! ```

mod admin;
mod batch;
mod cluster;
mod config;
mod connection;
mod error;
#[cfg(feature = "postgres")]
pub mod exactly_once;
mod fetch;
mod group;
mod metadata;
mod partitioner;
mod produce;
mod record;
mod tls;
mod versions;

pub use admin::{ConfigEntry, ListedOffset, NewTopic, OffsetSpec};
pub use cluster::Client;
pub use config::{ClientConfig, SaslPlain};
pub use connection::Connection;
pub use error::{BoxError, ClientError, Result};
pub use fetch::{FetchOptions, FetchTarget, FetchedPartition, Isolation};
pub use group::{range_assign, Assignment, Consumer, ConsumerConfig, GroupSession, OffsetReset};
pub use kafka_protocol::records::Compression;
pub use kafka_protocol::ResponseError;
pub use metadata::{BrokerAddress, ClusterMetadata, PartitionMetadata, TopicMetadata};
pub use partitioner::{murmur2, partition_for_key, Partitioner};
pub use produce::{Acks, ProducedBatch, Producer, ProducerConfig};
pub use record::{ConsumerRecord, ProduceRecord, RecordHeader};
pub use tls::{ClientTls, TlsConfigError};

/// The records of a fetched record set (a Fetch response's `records` for one partition) from
/// `from_offset` on, as [`Client`] reads them: CRCs checked, control batches left out, a
/// trailing partial batch ignored, and everything bounded by the bytes themselves, never by
/// the counts and lengths they declare. Answers the records and the offset after the last
/// complete batch.
pub fn decode_record_set(
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
    from_offset: i64,
) -> std::result::Result<(Vec<ConsumerRecord>, Option<i64>), BoxError> {
    let decoded = batch::decode(topic, partition, records, from_offset)?;
    Ok((decoded.records, decoded.next_offset))
}
