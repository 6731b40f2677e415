//! Fetch sessions (KIP-227): the broker remembers a consumer's partitions and fetch positions,
//! so later requests carry only what changed and answers only what is new.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use crate::scope::Scope;
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

/// Who opened a session: only a request of the same scope (the same tenant), principal and
/// kind of fetch (a consumer's, or the same follower's) may use, advance or close it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionOwner {
    pub(crate) scope: Scope,
    /// The authenticated principal; `None` on a listener without authentication.
    pub(crate) principal: Option<String>,
    /// The replica id of a follower's fetch; `None` for a consumer's.
    pub(crate) follower: Option<i32>,
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
    /// Who opened it, and alone may use it.
    owner: SessionOwner,
    next_epoch: i32,
    partitions: BTreeMap<(String, i32), SessionPartition>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<i32, Session>,
}

/// A new session's id: random, so that a client cannot guess another client's session and
/// close or advance it (which would make that client start its session again); never 0
/// (no session) and never one in use. There are at most `MAX_SESSIONS` in use, so the
/// first draw almost always serves.
fn fresh_id(in_use: &HashMap<i32, Session>) -> i32 {
    loop {
        let id = i32::try_from(rand::random::<u32>() >> 1).unwrap_or(1);
        if id != 0 && !in_use.contains_key(&id) {
            return id;
        }
    }
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
    /// A fetch of `owner`'s through the session it names: a session of another owner (another
    /// tenant's, principal's or kind of fetch) is unknown to it.
    pub(crate) fn update(
        &self,
        owner: &SessionOwner,
        session_id: i32,
        epoch: i32,
        requested: Vec<FetchTarget>,
        forgotten: &[(String, i32)],
    ) -> SessionOutcome {
        let mut inner = self.inner.lock();
        let now = Instant::now();
        if epoch == 0 {
            if inner
                .by_id
                .get(&session_id)
                .is_some_and(|s| s.owner == *owner)
            {
                inner.by_id.remove(&session_id);
            }
            if inner.by_id.len() >= MAX_SESSIONS {
                // The oldest session of whoever holds the most: a client (or tenant) opening
                // sessions in a loop evicts its own, not everyone else's.
                let mut held: HashMap<&Scope, usize> = HashMap::new();
                for session in inner.by_id.values() {
                    *held.entry(&session.owner.scope).or_default() += 1;
                }
                let heaviest = held
                    .into_iter()
                    .max_by_key(|(_, count)| *count)
                    .map(|(owner, _)| owner.clone());
                let oldest = inner
                    .by_id
                    .iter()
                    .filter(|(_, s)| Some(&s.owner.scope) == heaviest.as_ref())
                    .min_by_key(|(_, s)| s.last_used)
                    .map(|(id, _)| *id);
                if let Some(oldest) = oldest {
                    inner.by_id.remove(&oldest);
                }
            }
            let id = fresh_id(&inner.by_id);
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
                    owner: owner.clone(),
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
        let Some(session) = inner
            .by_id
            .get_mut(&session_id)
            .filter(|s| s.owner == *owner)
        else {
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

    /// Closes `owner`'s session of that id (another owner's stays open).
    pub(crate) fn close(&self, owner: &SessionOwner, session_id: i32) {
        let mut inner = self.inner.lock();
        if inner
            .by_id
            .get(&session_id)
            .is_some_and(|s| s.owner == *owner)
        {
            inner.by_id.remove(&session_id);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn target(partition: i32) -> FetchTarget {
        FetchTarget {
            topic: "t".to_owned(),
            topic_id: Uuid::nil(),
            partition,
            fetch_offset: 0,
            max_bytes: 1024,
            current_leader_epoch: -1,
        }
    }

    fn consumer(scope: Scope) -> SessionOwner {
        SessionOwner {
            scope,
            principal: None,
            follower: None,
        }
    }

    fn open(sessions: &FetchSessions) -> i32 {
        match sessions.update(&consumer(Scope::Plain), 0, 0, vec![target(0)], &[]) {
            SessionOutcome::Full { session_id, .. } => session_id,
            _ => panic!("a full fetch opens a session"),
        }
    }

    #[test]
    fn sessions_get_distinct_unguessable_ids_and_follow_their_epochs() {
        let sessions = FetchSessions::default();
        let ids: std::collections::HashSet<i32> = (0..64).map(|_| open(&sessions)).collect();
        assert_eq!(ids.len(), 64);
        assert!(ids.iter().all(|id| *id > 0));
        // Not handed out in order: a client cannot name the next one from its own.
        let mut sorted: Vec<i32> = ids.iter().copied().collect();
        sorted.sort_unstable();
        assert!(sorted.windows(2).any(|w| w[1] - w[0] > 1));
        // An id never handed out names no session.
        let unknown = (1..).find(|id| !ids.contains(id)).unwrap_or(1);
        assert!(matches!(
            sessions.update(&consumer(Scope::Plain), unknown, 1, Vec::new(), &[]),
            SessionOutcome::Error(ResponseError::FetchSessionIdNotFound)
        ));

        let id = open(&sessions);
        // Another tenant's request can neither use, advance nor close the session.
        let other = consumer(Scope::Tenant("globex".into()));
        assert!(matches!(
            sessions.update(&other, id, 1, Vec::new(), &[]),
            SessionOutcome::Error(ResponseError::FetchSessionIdNotFound)
        ));
        sessions.close(&other, id);
        assert!(matches!(
            sessions.update(&other, id, 0, Vec::new(), &[]),
            SessionOutcome::Full { session_id, .. } if session_id != id
        ));
        assert!(matches!(
            sessions.update(&consumer(Scope::Plain), id, 1, Vec::new(), &[]),
            SessionOutcome::Incremental { .. }
        ));
        assert!(matches!(
            sessions.update(&consumer(Scope::Plain), id, 1, Vec::new(), &[]),
            SessionOutcome::Error(ResponseError::InvalidFetchSessionEpoch)
        ));
    }

    #[test]
    fn a_session_serves_only_the_principal_and_kind_of_fetch_that_opened_it() {
        let sessions = FetchSessions::default();
        let alice = SessionOwner {
            scope: Scope::Tenant("acme".into()),
            principal: Some("User:alice".to_owned()),
            follower: None,
        };
        let id = match sessions.update(&alice, 0, 0, vec![target(0)], &[]) {
            SessionOutcome::Full { session_id, .. } => session_id,
            _ => panic!("a full fetch opens a session"),
        };
        let bob = SessionOwner {
            principal: Some("User:bob".to_owned()),
            ..alice.clone()
        };
        let as_follower = SessionOwner {
            follower: Some(1),
            ..alice.clone()
        };
        for stranger in [&bob, &as_follower] {
            assert!(matches!(
                sessions.update(stranger, id, 1, Vec::new(), &[]),
                SessionOutcome::Error(ResponseError::FetchSessionIdNotFound)
            ));
            sessions.close(stranger, id);
        }
        assert!(matches!(
            sessions.update(&alice, id, 1, Vec::new(), &[]),
            SessionOutcome::Incremental { targets } if targets.len() == 1
        ));
    }

    #[test]
    fn a_tenant_opening_sessions_in_a_loop_evicts_its_own() {
        let sessions = FetchSessions::default();
        let acme = consumer(Scope::Tenant("acme".into()));
        let mine = match sessions.update(&acme, 0, 0, vec![target(0)], &[]) {
            SessionOutcome::Full { session_id, .. } => session_id,
            _ => panic!("a full fetch opens a session"),
        };
        let globex = consumer(Scope::Tenant("globex".into()));
        for _ in 0..2 * MAX_SESSIONS {
            let _ = sessions.update(&globex, 0, 0, vec![target(0)], &[]);
        }
        assert!(matches!(
            sessions.update(&acme, mine, 1, Vec::new(), &[]),
            SessionOutcome::Incremental { .. }
        ));
    }
}
