//! Why a partition operation failed, as a type; `handler::partition_error_code` maps it to
//! Kafka's error codes, once.

use kafka_protocol::ResponseError;
use skein_log::LogError;

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// The topic is not known, or has no partition of that index.
    #[error("no partition {partition} of topic {topic:?} here")]
    UnknownTopicOrPartition { topic: String, partition: i32 },
    /// This broker does not lead the partition; `leader` is the one that does, with its
    /// epoch, when there is one.
    #[error("this broker does not lead partition {partition} of {topic:?}")]
    NotLeader {
        topic: String,
        partition: i32,
        leader: Option<(i32, i32)>,
    },
    /// A replica fetcher's answer from a leader (and epoch) that no longer leads: it is not
    /// applied.
    #[error("answer of leader {asked:?} arrived after leadership moved to {now:?}")]
    LeaderMoved {
        asked: (i32, i32),
        now: Option<(i32, i32)>,
    },
    /// A follower's fetch from a broker that is not one of the partition's replicas.
    #[error("broker {replica} is not a replica of this partition")]
    NotAReplica { replica: i32 },
    /// The caller's leader epoch is older than the partition's (KIP-320).
    #[error("leader epoch {requested} is fenced; the partition is at {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    /// The caller's leader epoch is newer than this broker knows (its metadata is behind).
    #[error("leader epoch {requested} is unknown; this broker knows {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    /// `acks=all` asked for more in-sync replicas than the partition has.
    #[error("{required} in-sync replicas required, {in_sync} in sync")]
    NotEnoughReplicas { required: i32, in_sync: i32 },
    /// A read or offset lookup below the log start or past the high watermark.
    #[error("offset {offset} is out of range")]
    OffsetOutOfRange { offset: i64 },
    /// An idempotent producer's batch out of sequence, or of a fenced epoch.
    #[error("idempotent producer batch refused: {0:?}")]
    Producer(ResponseError),
    #[error(transparent)]
    Log(#[from] LogError),
    /// Records the topic refuses (KIP-467): each one's index in its batch, and why.
    #[error("{reason}")]
    InvalidRecords { records: Vec<i32>, reason: String },
    /// The partition's files could not be read into a response.
    #[error("reading the partition's files: {0}")]
    Read(std::io::Error),
}
