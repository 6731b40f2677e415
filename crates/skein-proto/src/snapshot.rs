//! Metadata snapshots in chunks: the controller splits a snapshot of any size into messages
//! of at most [`CHUNK_BYTES`] of entries, so no snapshot outgrows a gRPC message limit, and a
//! receiver puts them back together up to a limit of its own ([`MAX_SNAPSHOT_BYTES`]).

use prost::Message;

use crate::controller as pb;

/// How many bytes of entries the controller puts in one chunk. An entry larger than this
/// (a topic with thousands of partitions) travels alone in its chunk; every entry is bounded
/// (names by `skein-auth` and the catalog, partitions per topic by the controller), so a
/// chunk stays well inside [`crate::replicas::MAX_CONTROLLER_MESSAGE_BYTES`].
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// The largest snapshot, all chunks together, that a broker or gateway assembles.
pub const MAX_SNAPSHOT_BYTES: usize = 256 * 1024 * 1024;

/// Splits `snapshot` into chunks of the same version, each holding entries of at most
/// `budget` encoded bytes (or one larger entry). Every chunk but the last has `more` set;
/// an empty snapshot is one empty chunk.
pub fn into_chunks(snapshot: pb::MetadataSnapshot, budget: usize) -> Vec<pb::MetadataSnapshot> {
    let mut chunker = Chunker {
        budget,
        version: snapshot.version,
        done: Vec::new(),
        current: empty(snapshot.version),
        size: 0,
    };
    for broker in snapshot.brokers {
        chunker
            .room(field_len(broker.encoded_len()))
            .brokers
            .push(broker);
    }
    for topic in snapshot.topics {
        chunker
            .room(field_len(topic.encoded_len()))
            .topics
            .push(topic);
    }
    for acl in snapshot.acls {
        chunker.room(field_len(acl.encoded_len())).acls.push(acl);
    }
    for quota in snapshot.quotas {
        chunker
            .room(field_len(quota.encoded_len()))
            .quotas
            .push(quota);
    }
    for key in snapshot.api_keys {
        chunker.room(field_len(key.len())).api_keys.push(key);
    }
    for key in snapshot.keys_in_force {
        chunker
            .room(field_len(key.encoded_len()))
            .keys_in_force
            .push(key);
    }
    let Chunker {
        mut done, current, ..
    } = chunker;
    done.push(current);
    done
}

struct Chunker {
    budget: usize,
    version: i64,
    done: Vec<pb::MetadataSnapshot>,
    current: pb::MetadataSnapshot,
    size: usize,
}

impl Chunker {
    /// The chunk an entry of `len` bytes goes into: the current one while it has room.
    fn room(&mut self, len: usize) -> &mut pb::MetadataSnapshot {
        if self.size > 0 && self.size.saturating_add(len) > self.budget {
            let mut full = std::mem::replace(&mut self.current, empty(self.version));
            full.more = true;
            self.done.push(full);
            self.size = 0;
        }
        self.size = self.size.saturating_add(len);
        &mut self.current
    }
}

fn empty(version: i64) -> pb::MetadataSnapshot {
    pb::MetadataSnapshot {
        version,
        ..Default::default()
    }
}

/// The encoded size of a length-delimited field holding `len` bytes (a one-byte tag).
fn field_len(len: usize) -> usize {
    1 + prost::length_delimiter_len(len) + len
}

/// Why chunks could not be put together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AssemblyError {
    #[error("a chunk of metadata version {got} arrived inside the snapshot of version {expected}")]
    VersionChanged { expected: i64, got: i64 },
    #[error("the metadata snapshot grew past {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the metadata stream ended inside a snapshot")]
    Truncated,
}

impl From<AssemblyError> for tonic::Status {
    fn from(e: AssemblyError) -> Self {
        match e {
            AssemblyError::TooLarge { .. } => tonic::Status::resource_exhausted(e.to_string()),
            AssemblyError::VersionChanged { .. } | AssemblyError::Truncated => {
                tonic::Status::data_loss(e.to_string())
            }
        }
    }
}

/// Puts chunks back together into whole snapshots.
#[derive(Debug)]
pub struct Assembler {
    limit: usize,
    partial: Option<pb::MetadataSnapshot>,
    size: usize,
}

impl Assembler {
    /// An assembler that refuses a snapshot of more than `limit` encoded bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            partial: None,
            size: 0,
        }
    }

    /// Takes the next chunk; returns the snapshot it completes, if it is the last.
    pub fn push(
        &mut self,
        chunk: pb::MetadataSnapshot,
    ) -> Result<Option<pb::MetadataSnapshot>, AssemblyError> {
        self.size = self.size.saturating_add(chunk.encoded_len());
        if self.size > self.limit {
            self.reset();
            return Err(AssemblyError::TooLarge { limit: self.limit });
        }
        let more = chunk.more;
        let assembled = match self.partial.take() {
            None => chunk,
            Some(mut partial) => {
                if partial.version != chunk.version {
                    self.reset();
                    return Err(AssemblyError::VersionChanged {
                        expected: partial.version,
                        got: chunk.version,
                    });
                }
                partial.brokers.extend(chunk.brokers);
                partial.topics.extend(chunk.topics);
                partial.acls.extend(chunk.acls);
                partial.quotas.extend(chunk.quotas);
                partial.api_keys.extend(chunk.api_keys);
                partial.keys_in_force.extend(chunk.keys_in_force);
                partial
            }
        };
        if more {
            self.partial = Some(assembled);
            Ok(None)
        } else {
            self.size = 0;
            Ok(Some(pb::MetadataSnapshot {
                more: false,
                ..assembled
            }))
        }
    }

    /// Ends the stream: an error if a snapshot was left half assembled.
    pub fn finish(&mut self) -> Result<(), AssemblyError> {
        let truncated = self.partial.is_some();
        self.reset();
        if truncated {
            Err(AssemblyError::Truncated)
        } else {
            Ok(())
        }
    }

    fn reset(&mut self) {
        self.partial = None;
        self.size = 0;
    }
}

/// The controller's metadata stream as whole snapshots.
#[derive(Debug)]
pub struct Snapshots {
    chunks: tonic::Streaming<pb::MetadataSnapshot>,
    assembler: Assembler,
}

impl Snapshots {
    /// Assembles the chunks of `chunks`, refusing a snapshot over [`MAX_SNAPSHOT_BYTES`].
    pub fn new(chunks: tonic::Streaming<pb::MetadataSnapshot>) -> Self {
        Self {
            chunks,
            assembler: Assembler::new(MAX_SNAPSHOT_BYTES),
        }
    }

    /// The next whole snapshot; `None` when the stream ends between snapshots. Cancel-safe:
    /// the chunks of a snapshot read so far are kept until the next call.
    pub async fn message(&mut self) -> Result<Option<pb::MetadataSnapshot>, tonic::Status> {
        loop {
            match self.chunks.message().await? {
                Some(chunk) => {
                    if let Some(snapshot) = self.assembler.push(chunk)? {
                        return Ok(Some(snapshot));
                    }
                }
                None => {
                    self.assembler.finish()?;
                    return Ok(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn snapshot(acls: usize, name_bytes: usize) -> pb::MetadataSnapshot {
        pb::MetadataSnapshot {
            version: 7,
            brokers: vec![pb::BrokerEndpoint {
                node_id: 1,
                host: "broker-1".to_owned(),
                port: 9092,
                rack: None,
                tenant: None,
                advertised_listeners: String::new(),
            }],
            topics: Vec::new(),
            acls: (0..acls)
                .map(|i| pb::Acl {
                    tenant: "acme".to_owned(),
                    resource_name: format!("{i:0name_bytes$}"),
                    principal: "User:alice".to_owned(),
                    host: "*".to_owned(),
                    ..Default::default()
                })
                .collect(),
            quotas: Vec::new(),
            api_keys: (0..acls).map(|i| format!("key-{i}")).collect(),
            more: false,
            keys_in_force: (0..acls)
                .map(|i| pb::ApiKeyInForce {
                    id: format!("key-{i}"),
                    tenant: "acme".to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn chunks_stay_within_their_budget_and_assemble_to_the_snapshot() {
        let whole = snapshot(5000, 1000);
        let chunks = into_chunks(whole.clone(), CHUNK_BYTES);
        assert!(chunks.len() >= 5, "{} chunks", chunks.len());
        for (i, chunk) in chunks.iter().enumerate() {
            assert!(chunk.encoded_len() <= CHUNK_BYTES + 64, "chunk {i}");
            assert_eq!(chunk.version, 7);
            assert_eq!(chunk.more, i + 1 < chunks.len());
        }
        let mut assembler = Assembler::new(MAX_SNAPSHOT_BYTES);
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(assembler.push(chunk).unwrap());
        }
        assert_eq!(out, vec![whole]);
        assembler.finish().unwrap();
    }

    #[test]
    fn an_empty_snapshot_is_one_chunk_and_a_large_entry_travels_alone() {
        let chunks = into_chunks(empty(3), CHUNK_BYTES);
        assert_eq!(chunks, vec![empty(3)]);
        let chunks = into_chunks(snapshot(3, 400), 300);
        // The broker, then each ACL alone, then the keys together.
        assert_eq!(chunks.len(), 5);
        assert_eq!(chunks[0].brokers.len(), 1);
        assert!(chunks[1..4].iter().all(|c| c.acls.len() == 1));
        assert_eq!(chunks[4].api_keys.len(), 3);
        assert_eq!(chunks[4].keys_in_force.len(), 3);
    }

    #[test]
    fn a_stream_that_breaks_the_chunk_rules_is_refused() {
        let mut chunks = into_chunks(snapshot(100, 100), 2000);
        assert!(chunks.len() > 2);
        let mut assembler = Assembler::new(MAX_SNAPSHOT_BYTES);
        assembler.push(chunks[0].clone()).unwrap();
        chunks[1].version = 8;
        assert_eq!(
            assembler.push(chunks[1].clone()),
            Err(AssemblyError::VersionChanged {
                expected: 7,
                got: 8
            })
        );
        // After a refusal the next snapshot assembles from scratch.
        let whole = snapshot(2, 10);
        assert_eq!(assembler.push(whole.clone()).unwrap(), Some(whole));

        let mut assembler = Assembler::new(10_000);
        let endless = pb::MetadataSnapshot {
            more: true,
            ..snapshot(10, 100)
        };
        let refused = (0..100).find_map(|_| assembler.push(endless.clone()).err());
        assert_eq!(refused, Some(AssemblyError::TooLarge { limit: 10_000 }));

        let mut assembler = Assembler::new(MAX_SNAPSHOT_BYTES);
        assembler.push(chunks[0].clone()).unwrap();
        assert_eq!(assembler.finish(), Err(AssemblyError::Truncated));
    }
}
