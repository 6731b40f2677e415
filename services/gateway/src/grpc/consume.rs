//! The Consume stream. The first message subscribes — to a group, whose coordinator on the
//! brokers assigns partitions and keeps offsets, or to named partitions from start
//! positions or a resume token — and grants credit. The session then loops:
//!
//! - it sends buffered records while the outstanding records and bytes (sent, neither
//!   acknowledged nor committed) stay within the credit, in batches that each carry a
//!   resume token (the position after the batch, per partition);
//! - when nothing is buffered and credit remains, it fetches (waiting up to half a second);
//! - client messages acknowledge or commit offsets (returning their credit) and add
//!   credit; a group commit names its generation, and one from an older generation is
//!   refused without committing;
//! - assignment changes (with the generation, the fencing epoch) and high watermarks are
//!   sent as they happen; records of revoked partitions are dropped unsent;
//! - the stream ends with UNAUTHENTICATED when the token expires, with PERMISSION_DENIED
//!   when the ACLs stop allowing it; a group member leaves its group when the stream ends.
//!
//! Nothing outlives the stream: a client resumes with a resume token or its group's
//! committed offsets, through any gateway.

// tonic's `Status` is the error type of every gRPC call; it is large by design.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_auth::{Operation, ResourceType};
use skein_client::{
    Consumer, ConsumerConfig, ConsumerRecord, FetchOptions, Isolation, OffsetReset, OffsetSpec,
};
use skein_proto::gateway as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::brokers::TenantClient;
use crate::call::Call;
use crate::client_state::{ClientStateKeys, Kind};
use crate::error::GatewayError;
use crate::long_polls::LongPolls;
use crate::quota::Metered;
use crate::read::{read, resolve, ReadLimits, Reader, Start};
use crate::streams::{Backoff, StreamSlot};
use crate::Gateway;

/// How long a fetch waits for records.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// How often high watermarks are sent.
const WATERMARK_EVERY: Duration = Duration::from_secs(2);
/// The most records in one batch message.
const BATCH_RECORDS: usize = 500;

type Sender = mpsc::Sender<Result<pb::ConsumeResponse, Status>>;

/// Positions as a resume token: `topic` and `partition:offset` pairs, sealed for the
/// caller's tenant (see [`crate::client_state`]).
pub fn resume_token(
    keys: &ClientStateKeys,
    tenant: &str,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
) -> String {
    let pairs: Vec<String> = positions.iter().map(|(p, o)| format!("{p}:{o}")).collect();
    let text = format!("v1\n{topic}\n{}", pairs.join(","));
    keys.seal(Kind::ResumeToken, tenant, text.as_bytes())
}

/// The topic and positions of a resume token this deployment issued for `tenant`.
pub fn parse_resume_token(
    keys: &ClientStateKeys,
    tenant: &str,
    token: &str,
) -> Result<(String, BTreeMap<i32, i64>), GatewayError> {
    let invalid =
        || GatewayError::Invalid("the resume token is not one this gateway issued".to_owned());
    let bytes = keys
        .open(Kind::ResumeToken, tenant, token)
        .ok_or_else(invalid)?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut lines = text.splitn(3, '\n');
    if lines.next() != Some("v1") {
        return Err(invalid());
    }
    let topic = lines.next().ok_or_else(invalid)?.to_owned();
    let mut positions = BTreeMap::new();
    for pair in lines
        .next()
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
    {
        let (p, o) = pair.split_once(':').ok_or_else(invalid)?;
        let p: i32 = p.parse().map_err(|_| invalid())?;
        let o: i64 = o.parse().map_err(|_| invalid())?;
        if p < 0 || o < 0 {
            return Err(invalid());
        }
        positions.insert(p, o);
    }
    Ok((topic, positions))
}

/// The next records of a group member's partitions: joins the group again when it is
/// rebalancing, reads the assigned partitions from their positions through the tenant's
/// long polls, and moves the positions past what was read (or, out of range, to where the
/// member's reset policy says). Answers once any partition has answered, with what the
/// others answered by then (as one Fetch for them all would); the reads still waiting are
/// dropped, their positions unmoved. Fails only when nothing was read and a read failed.
async fn read_group(
    consumer: &mut Consumer,
    polls: &LongPolls,
    isolation: Isolation,
) -> Result<Vec<skein_client::ConsumerRecord>, GatewayError> {
    use futures::stream::{FuturesUnordered, StreamExt};
    use futures::FutureExt;
    consumer.prepare().await?;
    let positions = consumer.positions();
    if positions.is_empty() {
        tokio::time::sleep(FETCH_WAIT).await;
        return Ok(Vec::new());
    }
    let mut reads: FuturesUnordered<_> = positions
        .iter()
        .map(|((topic, partition), offset)| async move {
            let outcome = polls
                .read(
                    topic,
                    *partition,
                    *offset,
                    1024 * 1024,
                    FETCH_WAIT,
                    isolation,
                )
                .await;
            (topic, *partition, outcome)
        })
        .collect();
    let mut answered = Vec::new();
    if let Some(first) = reads.next().await {
        answered.push(first);
        // What the others have by now; the rest are left for the next poll.
        while let Some(Some(more)) = reads.next().now_or_never() {
            answered.push(more);
        }
    }
    drop(reads);
    let mut records = Vec::new();
    let mut failed = None;
    for (topic, partition, outcome) in answered {
        match outcome {
            Ok(fetched) => {
                consumer.seek(topic, partition, fetched.next_offset);
                records.extend(fetched.records);
            }
            Err(GatewayError::OffsetOutOfRange(_)) => {
                if let Err(e) = consumer.reset_position(topic, partition).await {
                    failed = Some(GatewayError::from(e));
                }
            }
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) if records.is_empty() => Err(e),
        _ => Ok(records),
    }
}

/// Where records come from.
enum Source {
    Partitions {
        tenant: TenantClient,
        /// The tenant's long polls, which this stream's reads join.
        reader: Reader,
        /// The next offset to fetch, per partition.
        positions: BTreeMap<i32, i64>,
        isolation: Isolation,
    },
    Group {
        group: String,
        /// The group member: its coordinator calls go over connections of its own (a
        /// JoinGroup waits at the broker), its reads join the tenant's long polls.
        consumer: Box<Consumer>,
        /// The assignment last told to the client.
        told: Option<(i32, BTreeSet<i32>)>,
        tenant: TenantClient,
        isolation: Isolation,
    },
}

/// Credit: limits (0 = none) and what is outstanding.
#[derive(Debug, Default)]
struct Window {
    max_records: u64,
    max_bytes: u64,
    /// Sent and not yet acknowledged: partition → (offset, bytes), in offset order.
    outstanding: BTreeMap<i32, VecDeque<(i64, u64)>>,
    records: u64,
    bytes: u64,
}

impl Window {
    fn grant(&mut self, credit: &pb::Credit) {
        self.max_records = self.max_records.saturating_add(u64::from(credit.records));
        self.max_bytes = self.max_bytes.saturating_add(credit.bytes);
    }

    /// Whether one more record of `size` bytes may go out.
    fn admits(&self, size: u64) -> bool {
        let records_ok = self.max_records == 0 || self.records < self.max_records;
        // A record larger than the byte credit goes out alone once nothing is outstanding.
        let bytes_ok =
            self.max_bytes == 0 || self.bytes + size <= self.max_bytes || self.records == 0;
        records_ok && bytes_ok
    }

    fn has_room(&self) -> bool {
        self.admits(0)
    }

    fn sent(&mut self, partition: i32, offset: i64, size: u64) {
        self.outstanding
            .entry(partition)
            .or_default()
            .push_back((offset, size));
        self.records += 1;
        self.bytes += size;
    }

    /// Acknowledges everything of `partition` before `offset`.
    fn acknowledge(&mut self, partition: i32, offset: i64) {
        if let Some(queue) = self.outstanding.get_mut(&partition) {
            while queue.front().is_some_and(|(o, _)| *o < offset) {
                if let Some((_, size)) = queue.pop_front() {
                    self.records -= 1;
                    self.bytes -= size;
                }
            }
        }
    }

    /// Forgets a partition's outstanding records (it was revoked).
    fn forget(&mut self, partition: i32) {
        if let Some(queue) = self.outstanding.remove(&partition) {
            for (_, size) in queue {
                self.records -= 1;
                self.bytes -= size;
            }
        }
    }
}

fn size(record: &ConsumerRecord) -> u64 {
    record.size() as u64
}

fn start_of(from: i32) -> Start {
    match pb::StartFrom::try_from(from) {
        Ok(pb::StartFrom::Latest) => Start::Latest,
        _ => Start::Earliest,
    }
}

/// Checks the subscription and starts the session.
pub(super) async fn start(
    gateway: Arc<Gateway>,
    call: Call,
    mut inbound: Streaming<pb::ConsumeRequest>,
) -> Result<ReceiverStream<Result<pb::ConsumeResponse, Status>>, Status> {
    let first = inbound
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("the stream ended before subscribing"))?;
    let Some(pb::consume_request::Kind::Subscribe(subscribe)) = first.kind else {
        return Err(Status::invalid_argument("the first message must subscribe"));
    };
    let topic = subscribe.topic.clone();
    let summary = call.topic_known(&gateway, &topic, Operation::Read).await?;
    // A place among the tenant's streams, held while the session runs.
    let slot = gateway.streams.open(&call.caller.tenant)?;
    let tenant = call.client(&gateway).await?;
    let isolation = match pb::Isolation::try_from(subscribe.isolation) {
        Ok(pb::Isolation::ReadUncommitted) => Isolation::ReadUncommitted,
        Ok(_) => Isolation::ReadCommitted,
        Err(_) => return Err(Status::invalid_argument("unknown isolation")),
    };
    let source = match subscribe.mode {
        Some(pb::subscribe::Mode::Group(group)) => {
            if group.group_id.is_empty() {
                return Err(Status::invalid_argument("the group needs an id"));
            }
            call.check(Operation::Read, ResourceType::Group, &group.group_id)?;
            let reset = match start_of(group.start) {
                Start::Latest => OffsetReset::Latest,
                _ => OffsetReset::Earliest,
            };
            let mut config = ConsumerConfig::new(group.group_id.clone(), [topic.clone()])
                .with_auto_offset_reset(reset);
            config.fetch = FetchOptions::default()
                .with_max_wait(FETCH_WAIT)
                .with_isolation(isolation);
            Source::Group {
                group: group.group_id.clone(),
                consumer: Box::new(Consumer::new(&tenant.client, config)),
                told: None,
                tenant,
                isolation,
            }
        }
        Some(pb::subscribe::Mode::Partitions(partitions)) => {
            let mut positions = BTreeMap::new();
            if !partitions.resume_token.is_empty() {
                let (token_topic, resumed) = parse_resume_token(
                    &gateway.client_state,
                    &call.caller.tenant,
                    &partitions.resume_token,
                )?;
                if token_topic != topic {
                    return Err(Status::invalid_argument(format!(
                        "the resume token is for topic {token_topic}, not {topic}"
                    )));
                }
                positions = resumed;
            } else if partitions.partitions.is_empty() {
                for partition in 0..summary.partitions {
                    let offset =
                        resolve(&tenant, &topic, partition, start_of(partitions.start)).await?;
                    positions.insert(partition, offset);
                }
            } else {
                for start in &partitions.partitions {
                    let from = match start.position {
                        Some(pb::partition_start::Position::Offset(offset)) if offset >= 0 => {
                            Start::Offset(offset)
                        }
                        Some(pb::partition_start::Position::Offset(offset)) => {
                            return Err(Status::invalid_argument(format!(
                                "offset {offset} is negative"
                            )))
                        }
                        Some(pb::partition_start::Position::From(from)) => start_of(from),
                        None => start_of(partitions.start),
                    };
                    positions.insert(start.partition, 0);
                    if start.partition < 0 || start.partition >= summary.partitions {
                        return Err(Status::not_found(format!(
                            "{topic} has no partition {} (it has {})",
                            start.partition, summary.partitions
                        )));
                    }
                    let offset = resolve(&tenant, &topic, start.partition, from).await?;
                    positions.insert(start.partition, offset);
                }
            }
            if let Some(p) = positions
                .keys()
                .find(|p| **p < 0 || **p >= summary.partitions)
            {
                return Err(Status::not_found(format!("{topic} has no partition {p}")));
            }
            Source::Partitions {
                reader: Reader::Waiting(Arc::clone(&tenant.long_polls)),
                tenant,
                positions,
                isolation,
            }
        }
        None => {
            return Err(Status::invalid_argument(
                "subscribe to a group or to partitions",
            ))
        }
    };
    let mut window = Window::default();
    if let Some(credit) = &subscribe.credit {
        window.grant(credit);
    }
    let (sender, receiver) = mpsc::channel(16);
    let (client_sender, client_messages) = mpsc::channel(64);
    let failed = sender.clone();
    tokio::spawn(async move {
        loop {
            match inbound.message().await {
                Ok(Some(message)) => {
                    if client_sender.send(message).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(status) => {
                    tracing::debug!(%status, "consume stream broke off");
                    let _ = failed.send(Err(status)).await;
                    return;
                }
            }
        }
    });
    let session = Session {
        gateway,
        call,
        topic,
        source,
        window,
        pending: VecDeque::new(),
        sent_positions: BTreeMap::new(),
        sender,
        watermarks_at: Instant::now(),
        backoff: Backoff::default(),
        _slot: slot,
    };
    tokio::spawn(session.run(client_messages));
    Ok(ReceiverStream::new(receiver))
}

struct Session {
    gateway: Arc<Gateway>,
    call: Call,
    topic: String,
    source: Source,
    window: Window,
    /// Fetched, not yet sent.
    pending: VecDeque<ConsumerRecord>,
    /// The position after the last record sent (or the start), per partition.
    sent_positions: BTreeMap<i32, i64>,
    sender: Sender,
    watermarks_at: Instant,
    /// Waits after failed reads.
    backoff: Backoff,
    /// The session's place among the tenant's streams.
    _slot: StreamSlot,
}

/// Why a session ends.
enum End {
    /// The client went away or closed its side.
    Closed,
    Failed(Status),
}

impl Session {
    async fn run(mut self, mut client: mpsc::Receiver<pb::ConsumeRequest>) {
        if let Source::Partitions { positions, .. } = &self.source {
            self.sent_positions = positions.clone();
            let _ = self
                .send(pb::consume_response::Kind::Assignment(pb::Assignment {
                    generation: 0,
                    member_id: String::new(),
                    partitions: positions.keys().copied().collect(),
                    revoked: Vec::new(),
                }))
                .await;
        }
        let gateway = Arc::clone(&self.gateway);
        let end = tokio::select! {
            end = self.serve(&mut client) => end,
            () = gateway.stopping() => End::Failed(Status::unavailable(
                "the gateway is shutting down; resume on another with the last resume token \
                 (or the group's committed offsets)",
            )),
        };
        // The status first, so that it reaches the client even if leaving the group is slow;
        // a client that is not reading does not hold the leave up for long.
        if let End::Failed(status) = end {
            let _ = tokio::time::timeout(FETCH_WAIT, self.sender.send(Err(status))).await;
        }
        if let Source::Group { consumer, .. } = self.source {
            if let Err(e) = consumer.close().await {
                tracing::debug!(error = %e, "leaving the group failed");
            }
        }
    }

    async fn send(&self, kind: pb::consume_response::Kind) -> Result<(), End> {
        self.sender
            .send(Ok(pb::ConsumeResponse { kind: Some(kind) }))
            .await
            .map_err(|_| End::Closed)
    }

    async fn serve(&mut self, client: &mut mpsc::Receiver<pb::ConsumeRequest>) -> End {
        loop {
            if let Err(end) = self.check_still_allowed() {
                return end;
            }
            if let Err(end) = self.send_pending().await {
                return end;
            }
            let rejoin =
                matches!(&self.source, Source::Group { consumer, .. } if consumer.rejoin_pending());
            if (self.pending.is_empty() && self.window.has_room()) || rejoin {
                if let Err(end) = self.fetch().await {
                    return end;
                }
                loop {
                    match client.try_recv() {
                        Ok(message) => {
                            if let Err(end) = self.handle(message).await {
                                return end;
                            }
                        }
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => return End::Closed,
                    }
                }
            } else {
                match tokio::time::timeout(FETCH_WAIT, client.recv()).await {
                    Ok(Some(message)) => {
                        if let Err(end) = self.handle(message).await {
                            return end;
                        }
                    }
                    Ok(None) => return End::Closed,
                    Err(_) => {}
                }
            }
            if let Err(end) = self.send_watermarks().await {
                return end;
            }
        }
    }

    fn check_still_allowed(&self) -> Result<(), End> {
        let now = self.call.current(&self.gateway).map_err(|e| {
            End::Failed(Status::unauthenticated(format!(
                "{e}; resume with a new credential and the last resume token (or the group's \
                 committed offsets)"
            )))
        })?;
        now.check(Operation::Read, ResourceType::Topic, &self.topic)
            .map_err(|e| End::Failed(e.into()))?;
        if let Source::Group { group, .. } = &self.source {
            now.check(Operation::Read, ResourceType::Group, group)
                .map_err(|e| End::Failed(e.into()))?;
        }
        Ok(())
    }

    async fn handle(&mut self, message: pb::ConsumeRequest) -> Result<(), End> {
        match message.kind {
            Some(pb::consume_request::Kind::Credit(credit)) => {
                self.window.grant(&credit);
                Ok(())
            }
            Some(pb::consume_request::Kind::Commit(commit)) => self.commit(commit).await,
            Some(pb::consume_request::Kind::Subscribe(_)) => Err(End::Failed(
                Status::invalid_argument("a stream subscribes once, in its first message"),
            )),
            None => Ok(()),
        }
    }

    async fn commit(&mut self, commit: pb::Commit) -> Result<(), End> {
        let mut answer = pb::Committed {
            offsets: commit.offsets.clone(),
            generation: commit.generation,
            code: 0,
            message: String::new(),
        };
        if let Source::Group { consumer, .. } = &mut self.source {
            if !commit.acknowledge_only {
                if commit.generation != consumer.generation() {
                    answer.code = tonic::Code::Aborted as i32;
                    answer.message = format!(
                        "generation {} is not the group's current one ({}); nothing was committed",
                        commit.generation,
                        consumer.generation()
                    );
                    return self
                        .send(pb::consume_response::Kind::Committed(answer))
                        .await;
                }
                let offsets: BTreeMap<(String, i32), i64> = commit
                    .offsets
                    .iter()
                    .map(|o| ((self.topic.clone(), o.partition), o.offset))
                    .collect();
                if let Err(e) = consumer.commit_offsets(&offsets).await {
                    let e = GatewayError::from(e);
                    answer.code = Status::from(e.clone()).code() as i32;
                    answer.message = e.to_string();
                    return self
                        .send(pb::consume_response::Kind::Committed(answer))
                        .await;
                }
            }
        }
        for offset in &commit.offsets {
            self.window.acknowledge(offset.partition, offset.offset);
        }
        self.send(pb::consume_response::Kind::Committed(answer))
            .await
    }

    /// Sends buffered records as far as the credit allows.
    async fn send_pending(&mut self) -> Result<(), End> {
        let mut batch = Vec::new();
        while let Some(record) = self.pending.front() {
            let size = size(record);
            if !self.window.admits(size) || batch.len() >= BATCH_RECORDS {
                break;
            }
            let Some(record) = self.pending.pop_front() else {
                break;
            };
            self.window.sent(record.partition, record.offset, size);
            self.sent_positions
                .insert(record.partition, record.offset + 1);
            batch.push(pb::ConsumedRecord {
                partition: record.partition,
                offset: record.offset,
                timestamp: record.timestamp,
                key: record.key.map(Vec::from),
                value: record.value.map(Vec::from),
                headers: record
                    .headers
                    .into_iter()
                    .map(|h| pb::Header {
                        key: h.key,
                        value: h.value.map(Vec::from),
                    })
                    .collect(),
            });
        }
        if batch.is_empty() {
            return Ok(());
        }
        let token = resume_token(
            &self.gateway.client_state,
            &self.call.caller.tenant,
            &self.topic,
            &self.sent_positions,
        );
        self.send(pb::consume_response::Kind::Records(pb::RecordBatch {
            topic: self.topic.clone(),
            records: batch,
            resume_token: token,
        }))
        .await?;
        if !self.pending.is_empty() && self.window.has_room() {
            // More may fit: the loop comes back here before fetching.
            Box::pin(self.send_pending()).await?;
        }
        Ok(())
    }

    async fn fetch(&mut self) -> Result<(), End> {
        let debt = self
            .gateway
            .quotas
            .debt(&self.call.caller, Metered::FetchBytes);
        if !debt.is_zero() {
            tokio::time::sleep(debt.min(Duration::from_secs(5))).await;
        }
        let view = self.gateway.view.now();
        let records = match &mut self.source {
            Source::Partitions {
                reader,
                positions,
                isolation,
                ..
            } => {
                if positions.is_empty() {
                    tokio::time::sleep(FETCH_WAIT).await;
                    return Ok(());
                }
                let reads = positions.iter().map(|(partition, offset)| {
                    read(
                        reader,
                        &self.topic,
                        *partition,
                        *offset,
                        ReadLimits {
                            max_records: BATCH_RECORDS,
                            max_bytes: 1024 * 1024,
                            max_wait: FETCH_WAIT,
                            isolation: *isolation,
                        },
                    )
                });
                let batches = futures::future::join_all(reads).await;
                let mut records = Vec::new();
                let partitions: Vec<i32> = positions.keys().copied().collect();
                let mut failed = false;
                for (partition, batch) in partitions.into_iter().zip(batches) {
                    match batch {
                        Ok(batch) => {
                            positions.insert(partition, batch.next_offset);
                            records.extend(batch.records);
                        }
                        Err(GatewayError::OffsetOutOfRange(message)) => {
                            return Err(End::Failed(Status::out_of_range(message)));
                        }
                        Err(GatewayError::NotFound(message)) => {
                            return Err(End::Failed(Status::not_found(message)));
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "fetch failed; retrying");
                            failed = true;
                        }
                    }
                }
                if failed {
                    // Do not spin against brokers that fail at once.
                    tokio::time::sleep(self.backoff.after_failure()).await;
                } else {
                    self.backoff.reset();
                }
                records
            }
            Source::Group {
                consumer,
                told,
                tenant,
                isolation,
                ..
            } => {
                let polled = read_group(consumer, &tenant.long_polls, *isolation).await;
                let generation = consumer.generation();
                let assigned: BTreeSet<i32> =
                    consumer.assignment().into_iter().map(|(_, p)| p).collect();
                let changed = told
                    .as_ref()
                    .is_none_or(|(g, partitions)| *g != generation || *partitions != assigned);
                if changed && generation >= 0 {
                    let previous = told.take().map(|(_, p)| p).unwrap_or_default();
                    let revoked: Vec<i32> = previous.difference(&assigned).copied().collect();
                    *told = Some((generation, assigned.clone()));
                    for partition in &revoked {
                        self.window.forget(*partition);
                        self.sent_positions.remove(partition);
                    }
                    self.pending.retain(|r| assigned.contains(&r.partition));
                    for partition in &assigned {
                        if let Some(position) = consumer.position(&self.topic, *partition) {
                            self.sent_positions.entry(*partition).or_insert(position);
                        }
                    }
                    let member_id = consumer.member_id().to_owned();
                    self.send(pb::consume_response::Kind::Assignment(pb::Assignment {
                        generation,
                        member_id,
                        partitions: assigned.iter().copied().collect(),
                        revoked,
                    }))
                    .await?;
                }
                match polled {
                    Ok(records) => {
                        self.backoff.reset();
                        records
                            .into_iter()
                            .filter(|r| assigned.contains(&r.partition))
                            .collect()
                    }
                    Err(e) => match e {
                        GatewayError::Unavailable(_) | GatewayError::Conflict(_) => {
                            tracing::debug!(error = %e, "group poll failed; retrying");
                            tokio::time::sleep(self.backoff.after_failure()).await;
                            Vec::new()
                        }
                        other => return Err(End::Failed(other.into())),
                    },
                }
            }
        };
        let bytes: u64 = records.iter().map(size).sum();
        self.gateway
            .quotas
            .charge(&view, &self.call.caller, Metered::FetchBytes, bytes);
        self.pending.extend(records);
        Ok(())
    }

    async fn send_watermarks(&mut self) -> Result<(), End> {
        if self.watermarks_at.elapsed() < WATERMARK_EVERY {
            return Ok(());
        }
        self.watermarks_at = Instant::now();
        let tenant = match &self.source {
            Source::Partitions { tenant, .. } | Source::Group { tenant, .. } => tenant.clone(),
        };
        let mut partitions = Vec::new();
        for (partition, position) in &self.sent_positions {
            if let Ok(Some(listed)) = tenant
                .client
                .list_offset(&self.topic, *partition, OffsetSpec::Latest)
                .await
            {
                partitions.push(pb::PartitionWatermark {
                    partition: *partition,
                    high_watermark: listed.offset,
                    position: *position,
                });
            }
        }
        if partitions.is_empty() {
            return Ok(());
        }
        self.send(pb::consume_response::Kind::Watermarks(pb::Watermarks {
            partitions,
        }))
        .await
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;

    #[test]
    fn resume_tokens_round_trip_and_refuse_others() {
        let keys = ClientStateKeys::random();
        let positions = BTreeMap::from([(0, 10), (3, 0)]);
        let token = resume_token(&keys, "acme", "orders", &positions);
        assert_eq!(
            parse_resume_token(&keys, "acme", &token).unwrap(),
            ("orders".to_owned(), positions)
        );
        assert!(parse_resume_token(&keys, "globex", &token).is_err());
        assert!(parse_resume_token(&keys, "acme", "garbage!").is_err());
        // Well-formed but unsealed, or sealed with a negative offset: refused.
        let unsealed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("v1\norders\n0:4");
        assert!(parse_resume_token(&keys, "acme", &unsealed).is_err());
        let negative = keys.seal(Kind::ResumeToken, "acme", b"v1\norders\n0:-4");
        assert!(parse_resume_token(&keys, "acme", &negative).is_err());
    }

    #[test]
    fn the_window_admits_within_credit_and_acknowledgements_return_it() {
        let mut window = Window::default();
        window.grant(&pb::Credit {
            records: 2,
            bytes: 0,
        });
        assert!(window.admits(100));
        window.sent(0, 5, 100);
        window.sent(0, 6, 100);
        assert!(!window.admits(1));
        window.acknowledge(0, 6);
        assert!(window.admits(1));
        assert_eq!(window.records, 1);
        window.forget(0);
        assert_eq!((window.records, window.bytes), (0, 0));
        let mut bytes = Window::default();
        bytes.grant(&pb::Credit {
            records: 0,
            bytes: 150,
        });
        assert!(bytes.admits(1000), "one oversized record goes alone");
        bytes.sent(1, 0, 1000);
        assert!(!bytes.admits(1));
    }
}
