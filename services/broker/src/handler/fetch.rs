//! Fetch: whole batches from each partition's log, waiting up to `max_wait_ms` for
//! `min_bytes`, woken by appends; with fetch sessions (KIP-227) from v7 on.
//!
//! A request with session epoch 0 is a full fetch that opens a session; later requests name
//! the session and the next epoch and carry only partitions whose fetch position changed
//! (plus `forgotten_topics_data`), and the answer carries only partitions with something new.
//! Epoch -1 is a fetch without a session (and closes the one named).

use std::collections::HashSet;

use skein_auth::Operation;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::partition_error_code;
use crate::fetch_session::{FetchTarget, SessionOutcome, SessionOwner};
use crate::quota::Metered;
use crate::replica::{Isolation, PartitionError, ReadLimit};
use crate::router::{Api, Call};
use crate::Broker;

const FINAL_EPOCH: i32 = -1;

/// The replica a follower's fetch names (`replica_id`, in `replica_state` from v15), or
/// `None` for a consumer's.
fn follower_of(request: &FetchRequest) -> Option<i32> {
    let id = if request.replica_state.replica_id.0 >= 0 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    (id >= 0).then_some(id)
}

pub(crate) async fn handle(call: &Call<'_>, request: FetchRequest) -> FetchResponse {
    let (broker, access, version, scope) = (call.broker, call.access(), call.version, &call.scope);
    let follower = follower_of(&request);
    // A follower's fetch comes from another broker, as the node its credential names, or is
    // refused whole, before any session is opened, changed or closed.
    if follower.is_some_and(|replica| !call.is_follower(replica)) {
        return FetchResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    // Who a session belongs to, built only for fetches that use one.
    let owner = || SessionOwner {
        scope: scope.clone(),
        principal: call.session.principal().map(|p| p.to_string()),
        follower,
    };
    // Targets carry the names the broker keeps. From v13 topics are named by id, looked up
    // among the scope's own topics; an unknown id resolves to no name. A follower fetches
    // the internal topics too.
    let name_of = |name: &TopicName, id: &Uuid| -> String {
        if version >= 13 {
            let among = if follower.is_some() {
                None
            } else {
                Some(scope)
            };
            broker.topics.name_of_id(*id, among).unwrap_or_default()
        } else {
            scope.qualify(name.0.as_str()).into_owned()
        }
    };
    let requested: Vec<FetchTarget> = request
        .topics
        .iter()
        .flat_map(|t| {
            let topic = name_of(&t.topic, &t.topic_id);
            t.partitions.iter().map(move |p| FetchTarget {
                topic: topic.clone(),
                topic_id: t.topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
            })
        })
        .collect();
    let forgotten: Vec<(String, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let topic = name_of(&t.topic, &t.topic_id);
            t.partitions.iter().map(move |p| (topic.clone(), *p))
        })
        .collect();
    let (session_id, targets, incremental) = if version < 7 || request.session_epoch == FINAL_EPOCH
    {
        if version >= 7 && request.session_id != 0 {
            broker.fetch_sessions.close(&owner(), request.session_id);
        }
        (0, requested, false)
    } else {
        match broker.fetch_sessions.update(
            &owner(),
            request.session_id,
            request.session_epoch,
            requested,
            &forgotten,
        ) {
            SessionOutcome::Full {
                session_id,
                targets,
            } => (session_id, targets, false),
            SessionOutcome::Incremental { targets } => (request.session_id, targets, true),
            SessionOutcome::Error(error) => {
                return FetchResponse::default().with_error_code(error.code());
            }
        }
    };
    let mut named: Vec<&str> = targets.iter().map(|t| t.topic.as_str()).collect();
    named.sort_unstable();
    named.dedup();
    // A consumer needs READ on each topic, and a name outside its scope (another tenant's)
    // is never its own; a follower (another broker, checked above) reads every topic.
    let denied: HashSet<String> = named
        .iter()
        .filter(|name| {
            follower.is_none()
                && scope
                    .strip(name)
                    .is_none_or(|own| !access.topic(Operation::Read, own))
        })
        .map(|name| (*name).to_owned())
        .collect();
    // A topic created a moment ago elsewhere is known before it is refused (by name; ids
    // come from a client that already has the metadata).
    for name in named.into_iter().filter(|n| !n.is_empty()) {
        if !denied.contains(name) && !broker.topics.contains(name) {
            let _ = broker.topics.lookup(name).await;
        }
    }
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let max_bytes = (request.max_bytes.max(0) as u64).min(broker.config.fetch_max_bytes);
    let isolation = Isolation::of_level(request.isolation_level);
    // What this fetch waits on, made only once a read finds too little: a fetch that finds
    // data at once (most, under load) registers nothing.
    let mut wakers = None;
    loop {
        // Registered before reading, so a change in between is not missed.
        let woken = wakers.as_deref().map(skein_replication::any_woken);
        let (partitions, bytes) = read_once(
            broker, &targets, &denied, max_bytes, version, follower, isolation,
        );
        let done = bytes >= request.min_bytes.max(0) as u64 || Instant::now() >= deadline;
        if !done && woken.is_none() {
            // Too little: register, then read again before waiting.
            drop(woken);
            wakers = Some(
                broker.replicas.wakers(
                    targets
                        .iter()
                        .filter(|t| !denied.contains(&t.topic))
                        .map(|t| (t.topic.as_str(), t.partition)),
                    follower.is_some(),
                ),
            );
            continue;
        }
        let partitions = match woken {
            Some(woken) if !done => {
                if tokio::time::timeout_at(deadline, woken).await.is_ok() {
                    continue;
                }
                read_once(
                    broker, &targets, &denied, max_bytes, version, follower, isolation,
                )
                .0
            }
            _ => partitions,
        };
        for (target, data) in targets.iter().zip(&partitions) {
            let bytes = data.records.as_ref().map_or(0, |r| r.len() as u64);
            match (bytes, follower) {
                (0, _) => {}
                (bytes, Some(_)) => broker.metrics.replicated_out(bytes),
                (bytes, None) => broker.metrics.fetched(&target.topic, bytes),
            }
        }
        return respond(
            broker,
            scope,
            session_id,
            incremental,
            &targets,
            partitions,
            version,
        );
    }
}

/// Builds the response; an incremental one leaves out partitions with nothing new.
fn respond(
    broker: &Broker,
    scope: &crate::scope::Scope,
    session_id: i32,
    incremental: bool,
    targets: &[FetchTarget],
    partitions: Vec<PartitionData>,
    version: i16,
) -> FetchResponse {
    let mut by_topic: BTreeMap<(String, Uuid), Vec<PartitionData>> = BTreeMap::new();
    for (target, data) in targets.iter().zip(partitions) {
        // Remember what the client last saw, for the session's next incremental answer.
        let moved = broker.fetch_sessions.note_progress(
            session_id,
            &target.topic,
            target.partition,
            data.high_watermark,
            data.log_start_offset,
        );
        let keep = !incremental
            || moved
            || data.records.as_ref().is_some_and(|r| !r.is_empty())
            || data.error_code != 0;
        if keep {
            by_topic
                .entry((target.topic.clone(), target.topic_id))
                .or_default()
                .push(data);
        }
    }
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(
            by_topic
                .into_iter()
                .map(|((topic, topic_id), partitions)| {
                    let response = FetchableTopicResponse::default().with_partitions(partitions);
                    // A version names topics either by name (up to v12) or by id, never both.
                    if version >= 13 {
                        response.with_topic_id(topic_id)
                    } else {
                        let shown = scope.strip(&topic).unwrap_or(&topic).to_owned();
                        response.with_topic(TopicName(StrBytes::from_string(shown)))
                    }
                })
                .collect(),
        )
}

fn read_once(
    broker: &Broker,
    targets: &[FetchTarget],
    denied: &HashSet<String>,
    max_bytes: u64,
    version: i16,
    follower: Option<i32>,
    isolation: Isolation,
) -> (Vec<PartitionData>, u64) {
    let mut budget = max_bytes;
    let mut total = 0u64;
    let mut first = true;
    let partitions = targets
        .iter()
        .map(|t| {
            let answer = PartitionData::default()
                .with_partition_index(t.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1);
            if t.topic.is_empty() && version >= 13 {
                return answer.with_error_code(ResponseError::UnknownTopicId.code());
            }
            if denied.contains(&t.topic) {
                return answer.with_error_code(ResponseError::TopicAuthorizationFailed.code());
            }
            // Other brokers replicate the internal topics too; clients never see them.
            let found = match follower {
                Some(_) => broker.replicas.leader_of_any(&t.topic, t.partition, t.current_leader_epoch),
                None => broker.replicas.leader(&t.topic, t.partition, t.current_leader_epoch),
            };
            let partition =
                match found
                {
                    Ok(partition) => partition,
                    Err(e) => {
                        let answer = answer.with_error_code(partition_error_code(&e));
                        return match (&e, version >= 12) {
                            (PartitionError::NotLeader { leader, .. }, true) => {
                                answer.with_current_leader(super::leader_and_epoch(*leader))
                            }
                            _ => answer,
                        };
                    }
                };
            let limit = (t.max_bytes.max(0) as u64).min(budget);
            let limit = match (limit, first) {
                (0, false) => ReadLimit::Nothing,
                (limit, false) => ReadLimit::Within(limit),
                // The first partition may exceed the budget by one batch, as in Kafka, so a
                // large batch never blocks a consumer; others must fit.
                (limit, true) => ReadLimit::AtLeastOneBatch(limit),
            };
            let fetched = match follower {
                Some(replica) => {
                    if !partition.has_replica(replica) {
                        let error = PartitionError::NotAReplica { replica };
                        return answer.with_error_code(partition_error_code(&error));
                    }
                    // A catching-up follower of a throttled replica gets what the
                    // budget has left (one batch at least in the answer's first
                    // partition), or, over
                    // the rate, only the offsets until the budget refills.
                    let throttled = partition.throttles(replica);
                    let limit = match (throttled, broker.leader_throttle.available()) {
                        (false, _) | (true, None) => limit,
                        (true, Some(0)) => ReadLimit::Nothing,
                        // The answer's own bound holds: only its first partition may
                        // take one batch past what is left.
                        (true, Some(left)) => match limit {
                            ReadLimit::Nothing => ReadLimit::Nothing,
                            ReadLimit::Within(max) => ReadLimit::Within(max.min(left)),
                            ReadLimit::AtLeastOneBatch(max) => {
                                ReadLimit::AtLeastOneBatch(max.min(left))
                            }
                        },
                    };
                    let fetched = partition.read_for_follower(replica, t.fetch_offset, limit);
                    if let (true, Ok(Some(bytes))) = (throttled, &fetched.records) {
                        broker.leader_throttle.spend(bytes.len());
                    }
                    fetched
                }
                None => partition.read(t.fetch_offset, limit, isolation),
            };
            let mut answer = answer
                .with_high_watermark(fetched.high_watermark)
                .with_last_stable_offset(fetched.last_stable_offset);
            // Null for read_uncommitted, as Kafka answers.
            answer = answer.with_aborted_transactions(None);
            if isolation == Isolation::ReadCommitted {
                answer = answer.with_aborted_transactions(Some(
                    fetched
                        .aborted
                        .iter()
                        .map(|t| {
                            AbortedTransaction::default()
                                .with_producer_id(ProducerId(t.producer_id))
                                .with_first_offset(t.first_offset as i64)
                        })
                        .collect(),
                ));
            }
            if version >= 5 {
                answer = answer.with_log_start_offset(fetched.log_start_offset);
            }
            match fetched.records {
                Ok(None) => answer,
                Ok(Some(bytes)) => {
                    first = false;
                    budget = budget.saturating_sub(bytes.len() as u64);
                    total += bytes.len() as u64;
                    answer.with_records(Some(bytes))
                }
                Err(e) => {
                    if let PartitionError::Read(error) = &e {
                        tracing::warn!(topic = %t.topic, partition = t.partition, %error, "fetch read failed");
                    }
                    answer.with_error_code(partition_error_code(&e))
                }
            }
        })
        .collect();
    (partitions, total)
}

/// Fetch versions 4 to 17, metered by the record bytes answered.
pub(crate) struct Fetch;

impl Api for Fetch {
    type Request = FetchRequest;
    type Response = FetchResponse;
    const KEY: ApiKey = ApiKey::Fetch;
    const VERSIONS: (i16, i16) = (4, 17);
    const METERED: Option<Metered> = Some(Metered::FetchBytes);

    async fn handle(call: &Call<'_>, request: FetchRequest) -> Option<FetchResponse> {
        Some(handle(call, request).await)
    }

    /// Replication is the cluster's traffic, not the tenant's.
    fn is_metered(request: &FetchRequest) -> bool {
        follower_of(request).is_none()
    }

    fn charged(_request_bytes: usize, response: Option<&FetchResponse>) -> u64 {
        response
            .into_iter()
            .flat_map(|response| &response.responses)
            .flat_map(|topic| &topic.partitions)
            .filter_map(|partition| partition.records.as_ref().map(|r| r.len() as u64))
            .sum()
    }
}
