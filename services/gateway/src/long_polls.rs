//! [`LongPolls`]: every read of one tenant that may wait for records (SSE tails, gRPC
//! Consume streams, REST reads with a `max_wait`) gathered into one Fetch per leader broker,
//! as a Kafka consumer reads its whole assignment, over one connection per broker of the
//! tenant's own. However many streams a tenant opens, it holds one long-poll connection to
//! each broker, so the connections a gateway replica holds to a broker's shared listener are
//! bounded by the tenants it serves, not by the streams they open.
//!
//! A poller per leader keeps the reads waiting on it and fetches them in rounds: one request
//! naming each partition once, waiting up to [`ROUND_WAIT`] or the nearest deadline. The
//! broker answers as soon as any of them has records; each read is answered when its records
//! came (sliced from its own offset, up to its own bytes), when its position moved, when its
//! partition failed, or when its deadline passed; the rest wait for the next round. So that
//! no read waits on others, rounds take turns: between the two isolation levels when both
//! are waiting, and, for a partition read at several offsets, between the lowest offset
//! (readers catching up) and the highest (readers at the tail). A read whose caller went
//! away is dropped before the next round.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use skein_client::{
    Client, ClientError, ConsumerRecord, FetchOptions, FetchTarget, FetchedPartition, Isolation,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::error::GatewayError;

/// The longest one round waits at the broker, so that a read arriving during a round waits
/// at most this long for its own.
pub const ROUND_WAIT: Duration = Duration::from_millis(500);

/// How long a poller with nothing to read stays, with its connection.
const IDLE: Duration = Duration::from_secs(60);

/// The most bytes one round asks of a broker, over all the partitions it names.
const ROUND_MAX_BYTES: i32 = 16 * 1024 * 1024;

/// The reads one poller holds waiting (each a few hundred bytes); past it new reads wait to
/// be taken.
const WAITING_PER_POLLER: usize = 65_536;

/// Reads handed to a poller and not yet taken.
const HANDED: usize = 1024;

/// How often a read is retried after the leader moved or the connection broke.
const RETRIES: u32 = 3;

/// One read waiting for records.
#[derive(Debug)]
struct Wanted {
    topic: String,
    partition: i32,
    offset: i64,
    max_bytes: i32,
    isolation: Isolation,
    deadline: Instant,
    /// Set once the read was in a round; only then may an empty answer be given.
    asked: bool,
    /// The high watermark the last round saw.
    high_watermark: i64,
    reply: oneshot::Sender<Result<FetchedPartition, Failed>>,
}

/// Why a read failed, classified once for the caller's retry.
#[derive(Debug, Clone)]
struct Failed {
    error: GatewayError,
    /// The leader may have moved: refresh the topic's metadata and ask again.
    retry: bool,
}

impl From<ClientError> for Failed {
    fn from(e: ClientError) -> Self {
        Self {
            retry: e.is_retriable(),
            error: GatewayError::from(e),
        }
    }
}

/// One tenant's long polls.
#[derive(Debug)]
pub struct LongPolls {
    /// A client with connections of its own: a broker answers a connection's requests in
    /// order, so a waiting fetch must not share one with the tenant's other calls.
    client: Client,
    pollers: Mutex<HashMap<i32, mpsc::Sender<Wanted>>>,
}

impl LongPolls {
    /// Long polls over a copy of `client` with connections of its own.
    pub fn new(client: &Client) -> Arc<Self> {
        Arc::new(Self {
            client: client.detached(),
            pollers: Mutex::default(),
        })
    }

    /// Records of `partition` of `topic` from `offset`, waiting up to `max_wait` for some;
    /// empty when none came in time.
    pub async fn read(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
        isolation: Isolation,
    ) -> Result<FetchedPartition, GatewayError> {
        let deadline = Instant::now() + max_wait;
        let mut attempt = 0;
        loop {
            let outcome = match self.client.leader(topic, partition).await {
                Ok(leader) => {
                    let (reply, answer) = oneshot::channel();
                    let wanted = Wanted {
                        topic: topic.to_owned(),
                        partition,
                        offset,
                        max_bytes,
                        isolation,
                        deadline,
                        asked: false,
                        high_watermark: -1,
                        reply,
                    };
                    let poller = self.poller(leader);
                    match poller.send(wanted).await {
                        Ok(()) => answer.await.unwrap_or_else(|_| {
                            Err(Failed {
                                error: GatewayError::Unavailable(
                                    "the read was dropped; try again".to_owned(),
                                ),
                                retry: true,
                            })
                        }),
                        Err(_) => {
                            // Stopped (idle): forget it, unless another read started its
                            // successor already.
                            let mut pollers = self.pollers.lock();
                            if pollers
                                .get(&leader)
                                .is_some_and(|s| s.same_channel(&poller))
                            {
                                pollers.remove(&leader);
                            }
                            Err(Failed {
                                error: GatewayError::Unavailable(
                                    "the poller stopped; try again".to_owned(),
                                ),
                                retry: true,
                            })
                        }
                    }
                }
                Err(e) => Err(Failed::from(e)),
            };
            match outcome {
                Ok(fetched) => return Ok(fetched),
                Err(failed) if failed.retry && attempt < RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Err(e) = self.client.refresh_topics(&[topic]).await {
                        tracing::debug!(error = %e, "metadata refresh before a read failed");
                    }
                }
                Err(failed) => return Err(failed.error),
            }
        }
    }

    /// The poller of `leader`, started when there is none.
    fn poller(&self, leader: i32) -> mpsc::Sender<Wanted> {
        let mut pollers = self.pollers.lock();
        if let Some(sender) = pollers.get(&leader).filter(|s| !s.is_closed()) {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::channel(HANDED);
        tokio::spawn(poll(self.client.clone(), leader, receiver));
        pollers.insert(leader, sender.clone());
        sender
    }

    /// How many pollers run (one per leader broker read from lately).
    pub fn pollers(&self) -> usize {
        self.pollers
            .lock()
            .values()
            .filter(|s| !s.is_closed())
            .count()
    }
}

/// Reads from `leader` in rounds until no read has come for [`IDLE`].
async fn poll(client: Client, leader: i32, mut incoming: mpsc::Receiver<Wanted>) {
    let mut waiting: Vec<Wanted> = Vec::new();
    let mut turn = 0usize;
    loop {
        if waiting.is_empty() {
            match tokio::time::timeout(IDLE, incoming.recv()).await {
                Ok(Some(wanted)) => waiting.push(wanted),
                Ok(None) | Err(_) => return,
            }
        }
        // Taken up to the bound; past it, senders find the channel full.
        while waiting.len() < WAITING_PER_POLLER {
            match incoming.try_recv() {
                Ok(wanted) => waiting.push(wanted),
                Err(_) => break,
            }
        }
        waiting.retain(|w| !w.reply.is_closed());
        // Reads whose time is up after at least one round: answered empty.
        let now = Instant::now();
        let (expired, rest): (Vec<Wanted>, Vec<Wanted>) = waiting
            .drain(..)
            .partition(|w| w.asked && w.deadline <= now);
        waiting = rest;
        for wanted in expired {
            let empty = FetchedPartition {
                topic: wanted.topic,
                partition: wanted.partition,
                records: Vec::new(),
                next_offset: wanted.offset,
                high_watermark: wanted.high_watermark,
                last_stable_offset: -1,
                log_start_offset: -1,
            };
            let _ = wanted.reply.send(Ok(empty));
        }
        if waiting.is_empty() {
            continue;
        }
        turn = turn.wrapping_add(1);
        let round = Round::of(&waiting, turn);
        let options = FetchOptions::default()
            .with_isolation(round.isolation)
            .with_max_wait(round.max_wait(&waiting))
            .with_max_bytes(ROUND_MAX_BYTES);
        let answers = client.fetch_from(leader, &round.targets, &options).await;
        waiting = round.answer(waiting, answers);
    }
}

/// One round's request: each partition once, from the lowest offset a read of the round's
/// isolation wants there.
#[derive(Debug)]
struct Round {
    isolation: Isolation,
    targets: Vec<FetchTarget>,
    /// Where each partition is among the targets.
    at: HashMap<(String, i32), usize>,
}

impl Round {
    fn of(waiting: &[Wanted], turn: usize) -> Self {
        // The isolation of the read waiting longest on even turns, the other one (when a
        // read wants it) on odd ones: neither waits more than a round for the other.
        let oldest = waiting[0].isolation;
        let isolation = if turn % 2 == 1 {
            waiting
                .iter()
                .map(|w| w.isolation)
                .find(|i| *i != oldest)
                .unwrap_or(oldest)
        } else {
            oldest
        };
        // A partition read at several offsets: from the lowest on even turns of the pair,
        // the highest on odd ones, so that readers catching up cannot keep readers at the
        // tail from new records, nor the other way round.
        let from_highest = (turn / 2) % 2 == 1;
        let mut targets: Vec<FetchTarget> = Vec::new();
        let mut at: HashMap<(String, i32), usize> = HashMap::new();
        for wanted in waiting.iter().filter(|w| w.isolation == isolation) {
            match at.get(&(wanted.topic.clone(), wanted.partition)) {
                Some(&i) => {
                    let target = &mut targets[i];
                    target.offset = if from_highest {
                        target.offset.max(wanted.offset)
                    } else {
                        target.offset.min(wanted.offset)
                    };
                    target.max_bytes = target.max_bytes.max(Some(wanted.max_bytes));
                }
                None => {
                    at.insert((wanted.topic.clone(), wanted.partition), targets.len());
                    targets.push(
                        FetchTarget::new(wanted.topic.clone(), wanted.partition, wanted.offset)
                            .with_max_bytes(wanted.max_bytes),
                    );
                }
            }
        }
        // A broker fills an answer in the order partitions are named: start each round at
        // another one so that no partition always comes last.
        let len = targets.len();
        targets.rotate_left(turn % len);
        for (i, target) in targets.iter().enumerate() {
            at.insert((target.topic.clone(), target.partition), i);
        }
        Self {
            isolation,
            targets,
            at,
        }
    }

    /// How long the broker may wait: to the nearest deadline of the round's reads, at most
    /// [`ROUND_WAIT`].
    fn max_wait(&self, waiting: &[Wanted]) -> Duration {
        let now = Instant::now();
        waiting
            .iter()
            .filter(|w| w.isolation == self.isolation)
            .map(|w| w.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or_default()
            .min(ROUND_WAIT)
    }

    /// Answers the reads the round's `answers` settle; answers the rest.
    fn answer(
        &self,
        waiting: Vec<Wanted>,
        answers: Result<Vec<Result<FetchedPartition, ClientError>>, ClientError>,
    ) -> Vec<Wanted> {
        let answers: Vec<Result<FetchedPartition, Failed>> = match answers {
            Ok(answers) => answers
                .into_iter()
                .map(|a| a.map_err(Failed::from))
                .collect(),
            Err(e) => {
                let failed = Failed::from(e);
                self.targets.iter().map(|_| Err(failed.clone())).collect()
            }
        };
        let mut left = Vec::with_capacity(waiting.len());
        for mut wanted in waiting {
            let at = (wanted.isolation == self.isolation)
                .then(|| {
                    self.at
                        .get(&(wanted.topic.clone(), wanted.partition))
                        .copied()
                })
                .flatten();
            let Some(at) = at else {
                left.push(wanted);
                continue;
            };
            wanted.asked = true;
            let target = &self.targets[at];
            match &answers[at] {
                Err(failed) if wanted.offset == target.offset => {
                    let _ = wanted.reply.send(Err(failed.clone()));
                }
                // Another read's offset failed (out of range, say): this one asks alone next.
                Err(_) => left.push(wanted),
                // Fetched from past this read's offset: its records are not in the answer.
                Ok(fetched) if wanted.offset < target.offset => {
                    wanted.high_watermark = fetched.high_watermark;
                    left.push(wanted);
                }
                Ok(fetched) => {
                    wanted.high_watermark = fetched.high_watermark;
                    match from_offset(fetched, wanted.offset, wanted.max_bytes) {
                        Some(own) => {
                            let _ = wanted.reply.send(Ok(own));
                        }
                        None => left.push(wanted),
                    }
                }
            }
        }
        left
    }
}

/// What `fetched` (read from an offset at or before `offset`) answers a read from `offset`
/// of at most `max_bytes`: its records from there on, as many as fit (one at least), or,
/// when there are none, the position it moved to; `None` when it says nothing new for that
/// read.
fn from_offset(
    fetched: &FetchedPartition,
    offset: i64,
    max_bytes: i32,
) -> Option<FetchedPartition> {
    let budget = usize::try_from(max_bytes).unwrap_or(0);
    let mut taken = 0usize;
    let mut records: Vec<ConsumerRecord> = Vec::new();
    let mut cut = false;
    for record in fetched.records.iter().filter(|r| r.offset >= offset) {
        let size = record.size();
        if !records.is_empty() && taken.saturating_add(size) > budget {
            cut = true;
            break;
        }
        taken = taken.saturating_add(size);
        records.push(record.clone());
    }
    if records.is_empty() && fetched.next_offset <= offset {
        return None;
    }
    let next_offset = match records.last() {
        Some(last) if cut => last.offset + 1,
        _ => fetched.next_offset.max(offset),
    };
    Some(FetchedPartition {
        topic: fetched.topic.clone(),
        partition: fetched.partition,
        records,
        next_offset,
        high_watermark: fetched.high_watermark,
        last_stable_offset: fetched.last_stable_offset,
        log_start_offset: fetched.log_start_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: "t".to_owned(),
            partition: 0,
            offset,
            timestamp: 0,
            key: None,
            value: Some(bytes::Bytes::from(offset.to_string())),
            headers: Vec::new(),
        }
    }

    fn fetched(offsets: std::ops::Range<i64>, next: i64) -> FetchedPartition {
        FetchedPartition {
            topic: "t".to_owned(),
            partition: 0,
            records: offsets.map(record).collect(),
            next_offset: next,
            high_watermark: next,
            last_stable_offset: next,
            log_start_offset: 0,
        }
    }

    fn wanted(
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> (Wanted, oneshot::Receiver<Result<FetchedPartition, Failed>>) {
        let (reply, answer) = oneshot::channel();
        let wanted = Wanted {
            topic: topic.to_owned(),
            partition,
            offset,
            max_bytes: 1024,
            isolation: Isolation::ReadCommitted,
            deadline: Instant::now() + Duration::from_secs(5),
            asked: false,
            high_watermark: -1,
            reply,
        };
        (wanted, answer)
    }

    #[test]
    fn a_read_gets_only_its_own_records_of_a_fetch_from_an_earlier_offset() {
        let answer = fetched(3..8, 8);
        let own = from_offset(&answer, 5, 1024).unwrap();
        assert_eq!(
            own.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            [5, 6, 7]
        );
        assert_eq!(own.next_offset, 8);
        // Nothing at or after 8 yet: the read keeps waiting.
        assert!(from_offset(&answer, 8, 1024).is_none());
        // No records but a position that moved (control records, say): answered.
        let moved = from_offset(&fetched(0..0, 4), 2, 1024).unwrap();
        assert!(moved.records.is_empty());
        assert_eq!(moved.next_offset, 4);
        // Only what fits the read's own bytes (each value here is one byte), one at least.
        let small = from_offset(&answer, 3, 2).unwrap();
        assert_eq!(
            small.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(small.next_offset, 5);
        assert_eq!(from_offset(&answer, 3, 0).unwrap().records.len(), 1);
    }

    #[test]
    fn rounds_take_turns_between_isolations_and_between_low_and_high_offsets() {
        let (mut uncommitted, _answer) = wanted("t", 1, 0);
        uncommitted.isolation = Isolation::ReadUncommitted;
        let reads = vec![wanted("t", 0, 2).0, wanted("t", 0, 9).0, uncommitted];
        let offsets_of = |round: &Round| -> Vec<(i32, i64)> {
            let mut o: Vec<(i32, i64)> = round
                .targets
                .iter()
                .map(|t| (t.partition, t.offset))
                .collect();
            o.sort();
            o
        };
        // Turn 0: the oldest read's isolation, from the lowest offset.
        let round = Round::of(&reads, 0);
        assert_eq!(round.isolation, Isolation::ReadCommitted);
        assert_eq!(offsets_of(&round), [(0, 2)]);
        // Turn 1: the other isolation.
        let round = Round::of(&reads, 1);
        assert_eq!(round.isolation, Isolation::ReadUncommitted);
        assert_eq!(offsets_of(&round), [(1, 0)]);
        // Turn 2: from the highest offset; the read behind it is not answered from it.
        let round = Round::of(&reads, 2);
        assert_eq!(offsets_of(&round), [(0, 9)]);
        let left = round.answer(reads, Ok(vec![Ok(fetched(9..11, 11))]));
        assert_eq!(left.len(), 2);
        assert!(left.iter().any(|w| w.offset == 2 && w.asked));
    }

    #[test]
    fn a_round_names_each_partition_once_from_its_lowest_offset() {
        let reads = vec![
            wanted("t", 0, 9).0,
            wanted("t", 1, 4).0,
            wanted("t", 0, 2).0,
            wanted("u", 0, 7).0,
        ];
        let round = Round::of(&reads, 0);
        let mut named: Vec<(String, i32, i64)> = round
            .targets
            .iter()
            .map(|t| (t.topic.clone(), t.partition, t.offset))
            .collect();
        named.sort();
        assert_eq!(
            named,
            [
                ("t".to_owned(), 0, 2),
                ("t".to_owned(), 1, 4),
                ("u".to_owned(), 0, 7)
            ]
        );
        // Another turn (of the same isolation and offsets) starts at another partition.
        assert_ne!(
            Round::of(&reads, 0).targets[0],
            Round::of(&reads, 4).targets[0]
        );
    }

    #[test]
    fn answers_go_to_the_reads_they_settle_and_the_rest_wait() {
        let (early, mut early_answer) = wanted("t", 0, 2);
        let (late, mut late_answer) = wanted("t", 0, 9);
        let (quiet, mut quiet_answer) = wanted("t", 1, 0);
        let reads = vec![early, late, quiet];
        let round = Round::of(&reads, 0);
        let answers = round
            .targets
            .iter()
            .map(|t| {
                Ok(if t.partition == 0 {
                    fetched(2..6, 6)
                } else {
                    let mut none = fetched(0..0, 0);
                    none.partition = 1;
                    none
                })
            })
            .collect();
        let left = round.answer(reads, Ok(answers));
        let early = early_answer.try_recv().unwrap().unwrap();
        assert_eq!(early.records.len(), 4);
        assert!(late_answer.try_recv().is_err());
        assert!(quiet_answer.try_recv().is_err());
        assert_eq!(left.len(), 2);
        assert!(left.iter().all(|w| w.asked));
    }

    #[test]
    fn a_failed_request_fails_every_read_of_the_round() {
        let (a, mut a_answer) = wanted("t", 0, 0);
        let (b, mut b_answer) = wanted("u", 3, 1);
        let reads = vec![a, b];
        let round = Round::of(&reads, 0);
        let left = round.answer(
            reads,
            Err(ClientError::ConnectionClosed {
                addr: "127.0.0.1:1".to_owned(),
            }),
        );
        assert!(left.is_empty());
        assert!(a_answer.try_recv().unwrap().unwrap_err().retry);
        assert!(b_answer.try_recv().unwrap().is_err());
    }
}
