//! Fetch sessions (KIP-227): the broker remembers a consumer's partitions and fetch positions,
//! so later requests carry only what changed and answers only what is new.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::time::Instant;
use uuid::Uuid;

/// Sessions kept at most; the least recently used goes first.
const MAX_SESSIONS: usize = 1000;

/// One partition a fetch reads.
#[derive(Clone, Debug)]
pub(crate) struct FetchTarget {
    pub(crate) topic: String,
    pub(crate) topic_id: Uuid,
    pub(crate) partition: i32,
    pub(crate) fetch_offset: i64,
    pub(crate) max_bytes: i32,
    /// The leader epoch the consumer believes current (KIP-320), -1 when it does not say.
    pub(crate) current_leader_epoch: i32,
}

/// What a session-carrying request resolves to.
#[derive(Debug)]
pub(crate) enum SessionOutcome {
    /// A full fetch; `session_id` 0 when no session could be kept.
    Full {
        session_id: i32,
        targets: Vec<FetchTarget>,
    },
    /// An incremental fetch over the session's partitions.
    Incremental {
        targets: Vec<FetchTarget>,
    },
    Error(ResponseError),
}

#[derive(Debug)]
struct SessionPartition {
    target: FetchTarget,
    high_watermark: i64,
    log_start: i64,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: BTreeMap<(String, i32), SessionPartition>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Sessions {
    next_id: i32,
    by_id: HashMap<i32, Session>,
}

#[derive(Debug, Default)]
pub(crate) struct FetchSessions {
    inner: Mutex<Sessions>,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessions {
    pub(crate) fn update(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<FetchTarget>,
        forgotten: &[(String, i32)],
    ) -> SessionOutcome {
        let mut inner = self.inner.lock();
        let now = Instant::now();
        if epoch == 0 {
            if session_id != 0 {
                inner.by_id.remove(&session_id);
            }
            if inner.by_id.len() >= MAX_SESSIONS {
                let oldest = inner
                    .by_id
                    .iter()
                    .min_by_key(|(_, s)| s.last_used)
                    .map(|(id, _)| *id);
                if let Some(oldest) = oldest {
                    inner.by_id.remove(&oldest);
                }
            }
            inner.next_id = next(inner.next_id.max(0));
            let id = inner.next_id;
            let partitions = requested
                .iter()
                .map(|t| {
                    (
                        (t.topic.clone(), t.partition),
                        SessionPartition {
                            target: t.clone(),
                            high_watermark: -1,
                            log_start: -1,
                        },
                    )
                })
                .collect();
            inner.by_id.insert(
                id,
                Session {
                    next_epoch: 1,
                    partitions,
                    last_used: now,
                },
            );
            return SessionOutcome::Full {
                session_id: id,
                targets: requested,
            };
        }
        let Some(session) = inner.by_id.get_mut(&session_id) else {
            return SessionOutcome::Error(ResponseError::FetchSessionIdNotFound);
        };
        if epoch != session.next_epoch {
            return SessionOutcome::Error(ResponseError::InvalidFetchSessionEpoch);
        }
        for t in requested {
            let key = (t.topic.clone(), t.partition);
            match session.partitions.get_mut(&key) {
                Some(p) => p.target = t,
                None => {
                    session.partitions.insert(
                        key,
                        SessionPartition {
                            target: t,
                            high_watermark: -1,
                            log_start: -1,
                        },
                    );
                }
            }
        }
        for key in forgotten {
            session.partitions.remove(key);
        }
        session.next_epoch = next(epoch);
        session.last_used = now;
        SessionOutcome::Incremental {
            targets: session
                .partitions
                .values()
                .map(|p| p.target.clone())
                .collect(),
        }
    }

    pub(crate) fn close(&self, session_id: i32) {
        self.inner.lock().by_id.remove(&session_id);
    }

    /// Records the high watermark and log start a session's client was just told; true when
    /// they differ from what it knew (so an incremental answer must include the partition).
    pub(crate) fn note_progress(
        &self,
        session_id: i32,
        topic: &str,
        partition: i32,
        high_watermark: i64,
        log_start: i64,
    ) -> bool {
        if session_id == 0 {
            return true;
        }
        let mut inner = self.inner.lock();
        let Some(p) = inner
            .by_id
            .get_mut(&session_id)
            .and_then(|s| s.partitions.get_mut(&(topic.to_owned(), partition)))
        else {
            return true;
        };
        let moved = p.high_watermark != high_watermark || p.log_start != log_start;
        p.high_watermark = high_watermark;
        p.log_start = log_start;
        moved
    }
}
