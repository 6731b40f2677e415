//! The records users produce and consume.

use bytes::Bytes;

/// A record header: a key with an optional value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// The header key.
    pub key: String,
    /// The header value.
    pub value: Option<Bytes>,
}

/// A record to produce.
///
/// Its partition is the one set with [`ProduceRecord::with_partition`], else chosen from the
/// key by Kafka's murmur2 partitioner, else round-robin (see [`crate::Partitioner`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProduceRecord {
    /// The key; records with the same key go to the same partition.
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone on compacted topics.
    pub value: Option<Bytes>,
    /// Headers, in order. Keys should be unique: the record batch codec keeps the last value
    /// of a repeated key.
    pub headers: Vec<RecordHeader>,
    /// Creation time in milliseconds since the epoch; `None` means now.
    pub timestamp: Option<i64>,
    /// An explicit partition.
    pub partition: Option<i32>,
}

impl ProduceRecord {
    /// A record with a value and nothing else.
    pub fn new(value: impl Into<Bytes>) -> Self {
        Self {
            value: Some(value.into()),
            ..Self::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Appends a header.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push(RecordHeader {
            key: key.into(),
            value,
        });
        self
    }

    /// Sets the creation timestamp (milliseconds since the epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Sends the record to this partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }
}

/// A record read from a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// Creation or log-append time in milliseconds, per the topic's
    /// `message.timestamp.type`.
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// The headers, in order.
    pub headers: Vec<RecordHeader>,
}

impl ConsumerRecord {
    /// The bytes of its key, value and headers: what a fetch size or a byte quota counts.
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self
                .headers
                .iter()
                .map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
    }
}
