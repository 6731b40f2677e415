//! [`Consumer`]: reads the partitions a consumer group assigns it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::assignor::Assignment;
use super::member::{GroupMember, TopicPartition};
use crate::admin::OffsetSpec;
use crate::error::{ClientError, Result};
use crate::fetch::{FetchOptions, FetchTarget};
use crate::record::ConsumerRecord;
use crate::Client;

/// Where a consumer starts in a partition that has no committed offset
/// (`auto.offset.reset`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetReset {
    /// At the first record of the log.
    Earliest,
    /// After the last record: only new records are read.
    #[default]
    Latest,
}

/// How a [`Consumer`] joins its group and reads.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// The group (`group.id`).
    pub group_id: String,
    /// The topics to read.
    pub topics: Vec<String>,
    /// Where to start without a committed offset, or after an out-of-range one.
    pub auto_offset_reset: OffsetReset,
    /// How long the coordinator keeps a silent member (`session.timeout.ms`).
    pub session_timeout: Duration,
    /// How long the group waits for members to rejoin (`max.poll.interval.ms`).
    pub rebalance_timeout: Duration,
    /// How often the member sends a heartbeat (`heartbeat.interval.ms`).
    pub heartbeat_interval: Duration,
    /// The fetch limits of each poll.
    pub fetch: FetchOptions,
}

impl ConsumerConfig {
    /// Defaults for reading `topics` in group `group_id`.
    pub fn new<S: Into<String>>(
        group_id: impl Into<String>,
        topics: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            group_id: group_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            auto_offset_reset: OffsetReset::Latest,
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(3),
            fetch: FetchOptions::default(),
        }
    }

    /// Sets where to start without a committed offset.
    pub fn with_auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }
}

/// A member of a consumer group that reads its assigned partitions.
///
/// The group is joined on the first [`Consumer::poll`], and joined again whenever the
/// heartbeat learns of a rebalance. Reading starts at the committed offsets, else per
/// [`ConsumerConfig::auto_offset_reset`]. Offsets are committed only by
/// [`Consumer::commit`]; when a rebalance moves a partition to another member, records
/// polled from it since the last commit are read again by that member.
#[derive(Debug)]
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    member: GroupMember,
    assignment: Assignment,
    positions: BTreeMap<TopicPartition, i64>,
    joined: bool,
    rejoin: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
    }
}

impl Consumer {
    /// A consumer using connections of its own (see [`Client::detached`]). Nothing is sent
    /// until the first [`Consumer::poll`].
    pub fn new(client: &Client, config: ConsumerConfig) -> Self {
        let client = client.detached();
        let member = GroupMember::new(
            client.clone(),
            config.group_id.clone(),
            config.session_timeout,
            config.rebalance_timeout,
        );
        Self {
            client,
            config,
            member,
            assignment: Assignment::new(),
            positions: BTreeMap::new(),
            joined: false,
            rejoin: Arc::new(AtomicBool::new(false)),
            heartbeat: None,
        }
    }

    /// The assigned partitions, ordered by topic and partition.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.assignment
            .iter()
            .flat_map(|(topic, partitions)| partitions.iter().map(|p| (topic.clone(), *p)))
            .collect()
    }

    /// The member id the coordinator gave this consumer (empty before joining).
    pub fn member_id(&self) -> &str {
        self.member.member_id()
    }

    /// The generation of the group this consumer last joined, or -1.
    pub fn generation(&self) -> i32 {
        self.member.generation()
    }

    /// The next offset this consumer reads from a partition.
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.positions.get(&(topic.to_owned(), partition)).copied()
    }

    /// Moves the read position of an assigned partition.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) {
        self.positions.insert((topic.to_owned(), partition), offset);
    }

    /// Reads the next records from the assigned partitions, joining the group first when
    /// needed. Waits up to the fetch `max_wait` when there is nothing new.
    pub async fn poll(&mut self) -> Result<Vec<ConsumerRecord>> {
        self.prepare().await?;
        if self.positions.is_empty() {
            tokio::time::sleep(self.config.fetch.max_wait).await;
            return Ok(Vec::new());
        }
        let mut by_leader: BTreeMap<i32, Vec<FetchTarget>> = BTreeMap::new();
        for ((topic, partition), offset) in &self.positions {
            let leader = self.client.leader(topic, *partition).await?;
            by_leader.entry(leader).or_default().push(FetchTarget::new(
                topic.clone(),
                *partition,
                *offset,
            ));
        }
        let fetches = by_leader
            .iter()
            .map(|(leader, targets)| self.client.fetch_from(*leader, targets, &self.config.fetch));
        let outcomes = futures::future::join_all(fetches).await;
        let mut records = Vec::new();
        let mut stale = false;
        let mut out_of_range = Vec::new();
        for ((_, targets), outcome) in by_leader.iter().zip(outcomes) {
            let answers = match outcome {
                Ok(answers) => answers,
                Err(e) if e.is_retriable() => {
                    tracing::debug!(error = %e, "fetch failed; refreshing metadata");
                    stale = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (target, answer) in targets.iter().zip(answers) {
                match answer {
                    Ok(fetched) => {
                        self.positions.insert(
                            (target.topic.clone(), target.partition),
                            fetched.next_offset,
                        );
                        records.extend(fetched.records);
                    }
                    Err(ClientError::OffsetOutOfRange { .. }) => {
                        out_of_range.push((target.topic.clone(), target.partition));
                    }
                    Err(e) if e.is_retriable() => stale = true,
                    Err(e) => return Err(e),
                }
            }
        }
        for (topic, partition) in out_of_range {
            let offset = self.reset_offset(&topic, partition).await?;
            tracing::info!(topic = %topic, partition, offset, "offset out of range; reset");
            self.positions.insert((topic, partition), offset);
        }
        if stale {
            let topics: Vec<&str> = self.config.topics.iter().map(String::as_str).collect();
            if let Err(e) = self.client.refresh_topics(&topics).await {
                tracing::debug!(error = %e, "metadata refresh failed");
            }
        }
        Ok(records)
    }

    /// Joins the group, or joins it again when it is rebalancing, so that the assignment
    /// and [`Consumer::positions`] are current: what [`Consumer::poll`] does before it
    /// fetches, for callers that fetch the positions themselves (and then
    /// [`Consumer::seek`] past what they read).
    pub async fn prepare(&mut self) -> Result<()> {
        if !self.joined || self.rejoin.load(Ordering::SeqCst) {
            self.rebalance().await?;
        }
        Ok(())
    }

    /// The next offset to read of each assigned partition.
    pub fn positions(&self) -> Vec<((String, i32), i64)> {
        self.positions
            .iter()
            .map(|(key, offset)| (key.clone(), *offset))
            .collect()
    }

    /// Moves a partition whose position fell outside its log to where
    /// [`ConsumerConfig::auto_offset_reset`] says; answers the new position.
    pub async fn reset_position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        let offset = self.reset_offset(topic, partition).await?;
        tracing::info!(topic = %topic, partition, offset, "offset out of range; reset");
        self.positions.insert((topic.to_owned(), partition), offset);
        Ok(offset)
    }

    /// Commits the current positions: the offsets after the records polled so far.
    ///
    /// Fails with REBALANCE_IN_PROGRESS (or ILLEGAL_GENERATION) when the group moved on;
    /// the next [`Consumer::poll`] then rejoins.
    pub async fn commit(&mut self) -> Result<()> {
        let positions = self.positions.clone();
        self.commit_offsets(&positions).await
    }

    /// Commits the given offsets (the next offset to read per topic and partition) rather
    /// than the positions, for callers that hand records on and commit what was processed.
    /// Fails like [`Consumer::commit`] when the group moved on.
    pub async fn commit_offsets(&mut self, offsets: &BTreeMap<(String, i32), i64>) -> Result<()> {
        let outcome = self.member.commit(offsets).await;
        if let Err(e) = &outcome {
            if matches!(
                e.kafka_error(),
                Some(
                    kafka_protocol::ResponseError::RebalanceInProgress
                        | kafka_protocol::ResponseError::IllegalGeneration
                        | kafka_protocol::ResponseError::UnknownMemberId
                )
            ) {
                self.rejoin.store(true, Ordering::SeqCst);
            }
        }
        outcome
    }

    /// Whether the group is rebalancing and the next [`Consumer::poll`] rejoins it.
    pub fn rejoin_pending(&self) -> bool {
        !self.joined || self.rejoin.load(Ordering::SeqCst)
    }

    /// The committed offset of a partition for this group, if there is one.
    pub async fn committed(&mut self, topic: &str, partition: i32) -> Result<Option<i64>> {
        let query = Assignment::from([(topic.to_owned(), vec![partition])]);
        let committed = self.member.committed(&query).await?;
        Ok(committed.get(&(topic.to_owned(), partition)).copied())
    }

    /// Leaves the group so the other members take over its partitions at once.
    pub async fn close(mut self) -> Result<()> {
        self.stop_heartbeat();
        self.joined = false;
        self.member.leave().await
    }

    fn stop_heartbeat(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
    }

    /// Joins the group, takes the new assignment and starts from its committed offsets.
    ///
    /// A partition this member keeps from the generation just before keeps its position:
    /// no other member can have read it in between, and its uncommitted progress is not
    /// read again.
    async fn rebalance(&mut self) -> Result<()> {
        self.stop_heartbeat();
        self.joined = false;
        self.assignment.clear();
        let previous_generation = self.member.generation();
        let previous_member = self.member.member_id().to_owned();
        let previous_positions = std::mem::take(&mut self.positions);
        self.rejoin.store(false, Ordering::SeqCst);
        let assignment = self.member.join_and_sync(&self.config.topics).await?;
        let kept = if previous_generation >= 0
            && self.member.generation() == previous_generation + 1
            && self.member.member_id() == previous_member
        {
            previous_positions
        } else {
            BTreeMap::new()
        };
        let committed = self.member.committed(&assignment).await?;
        let mut positions = BTreeMap::new();
        for (topic, partitions) in &assignment {
            for partition in partitions {
                let key = (topic.clone(), *partition);
                let offset = match kept.get(&key).or_else(|| committed.get(&key)) {
                    Some(offset) => *offset,
                    None => self.reset_offset(topic, *partition).await?,
                };
                positions.insert(key, offset);
            }
        }
        tracing::info!(
            group = %self.config.group_id,
            member = %self.member.member_id(),
            generation = self.member.generation(),
            partitions = positions.len(),
            "assigned partitions"
        );
        self.assignment = assignment;
        self.positions = positions;
        self.heartbeat = Some(
            self.member
                .start_heartbeat(self.config.heartbeat_interval, Arc::clone(&self.rejoin))
                .await?,
        );
        self.joined = true;
        Ok(())
    }

    async fn reset_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        let spec = match self.config.auto_offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
        };
        let listed = self.client.list_offset(topic, partition, spec).await?;
        Ok(listed.map_or(0, |l| l.offset))
    }
}
