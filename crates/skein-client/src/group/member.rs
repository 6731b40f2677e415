//! [`GroupMember`]: one member of a consumer group with the classic protocol —
//! FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and
//! OffsetFetch — over a connection to the coordinator of its own, so its long-polling joins
//! and its heartbeats never wait behind fetches.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::task::JoinHandle;

use super::assignor::{self, Assignment};
use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::Client;

/// How often a member rejoins before giving up on a rebalance that keeps restarting.
const MAX_JOIN_ATTEMPTS: u32 = 10;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A partition of a topic.
pub(crate) type TopicPartition = (String, i32);

/// Membership of one consumer group.
#[derive(Debug)]
pub(crate) struct GroupMember {
    client: Client,
    group_id: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    coordinator: Option<Arc<Connection>>,
    member_id: String,
    generation: i32,
}

impl GroupMember {
    pub(crate) fn new(
        client: Client,
        group_id: String,
        session_timeout: Duration,
        rebalance_timeout: Duration,
    ) -> Self {
        Self {
            client,
            group_id,
            session_timeout,
            rebalance_timeout,
            coordinator: None,
            member_id: String::new(),
            generation: -1,
        }
    }

    /// A member that joined before (perhaps through another process): it continues with
    /// that identity, and rejoins under it when the group rebalances.
    pub(crate) fn resume(mut self, member_id: String, generation: i32) -> Self {
        self.member_id = member_id;
        self.generation = generation;
        self
    }

    /// One heartbeat: fails with REBALANCE_IN_PROGRESS when the member must rejoin, and
    /// with UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION when the group moved on without it.
    pub(crate) async fn heartbeat(&mut self) -> Result<()> {
        let coordinator = self.coordinator().await?;
        let request = HeartbeatRequest::default()
            .with_group_id(self.group())
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id));
        let outcome = coordinator.send(&request).await.and_then(|response| {
            ClientError::check(
                ApiKey::Heartbeat,
                self.group_id.as_str(),
                response.error_code,
                None,
            )
        });
        if let Err(e) = &outcome {
            self.note_error(e);
        }
        outcome
    }

    pub(crate) fn member_id(&self) -> &str {
        &self.member_id
    }

    pub(crate) fn generation(&self) -> i32 {
        self.generation
    }

    fn group(&self) -> GroupId {
        GroupId(s(&self.group_id))
    }

    /// The coordinator connection: found with FindCoordinator and opened on first use, and
    /// again after it closed or was dropped for NOT_COORDINATOR.
    async fn coordinator(&mut self) -> Result<Arc<Connection>> {
        if let Some(connection) = &self.coordinator {
            if !connection.is_closed() {
                return Ok(Arc::clone(connection));
            }
        }
        let mut attempt = 0;
        let addr = loop {
            match self.find_coordinator().await {
                Ok(addr) => break addr,
                Err(e) => {
                    if !self.client.prepare_retry(&e, attempt, &[]).await {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        };
        let connection = Arc::new(Connection::connect(&addr, self.client.config()).await?);
        self.coordinator = Some(Arc::clone(&connection));
        Ok(connection)
    }

    async fn find_coordinator(&self) -> Result<String> {
        let connection = self.client.any_connection().await?;
        let version = connection.version(ApiKey::FindCoordinator)?;
        let request = if version >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s(&self.group_id)])
        } else {
            FindCoordinatorRequest::default().with_key(s(&self.group_id))
        };
        let response = connection.send(&request).await?;
        let (code, message, host, port) = if version >= 4 {
            let Some(found) = response.coordinators.into_iter().next() else {
                return Err(ClientError::Kafka {
                    api: ApiKey::FindCoordinator,
                    resource: self.group_id.clone(),
                    error: ResponseError::CoordinatorNotAvailable,
                    code: ResponseError::CoordinatorNotAvailable.code(),
                    message: Some("no coordinator in the answer".to_owned()),
                });
            };
            (
                found.error_code,
                found.error_message,
                found.host,
                found.port,
            )
        } else {
            (
                response.error_code,
                response.error_message,
                response.host,
                response.port,
            )
        };
        ClientError::check(
            ApiKey::FindCoordinator,
            self.group_id.as_str(),
            code,
            message.as_ref().map(|m| m.as_str()),
        )?;
        Ok(format!("{}:{port}", host.as_str()))
    }

    /// Forgets the coordinator when an error says it moved or went away.
    fn note_error(&mut self, error: &ClientError) {
        if matches!(
            error.kafka_error(),
            Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
        ) || matches!(
            error,
            ClientError::Io { .. } | ClientError::ConnectionClosed { .. }
        ) {
            self.coordinator = None;
        }
        if matches!(
            error.kafka_error(),
            Some(ResponseError::UnknownMemberId | ResponseError::FencedInstanceId)
        ) {
            self.member_id.clear();
            self.generation = -1;
        }
    }

    /// Joins (or rejoins) the group and returns this member's assignment. The leader
    /// computes the range assignment for everyone.
    pub(crate) async fn join_and_sync(&mut self, topics: &[String]) -> Result<Assignment> {
        let mut attempt = 0;
        loop {
            let outcome = self.try_join_and_sync(topics).await;
            match outcome {
                Ok(assignment) => return Ok(assignment),
                Err(e) => {
                    self.note_error(&e);
                    let rejoin = matches!(
                        e.kafka_error(),
                        Some(
                            ResponseError::RebalanceInProgress
                                | ResponseError::IllegalGeneration
                                | ResponseError::UnknownMemberId
                        )
                    ) || e.is_retriable();
                    attempt += 1;
                    if !rejoin || attempt >= MAX_JOIN_ATTEMPTS {
                        return Err(e);
                    }
                    tracing::debug!(group = %self.group_id, error = %e, "rejoining group");
                    tokio::time::sleep(self.client.config().retry_backoff).await;
                }
            }
        }
    }

    async fn try_join_and_sync(&mut self, topics: &[String]) -> Result<Assignment> {
        let members = self.join(topics).await?;
        let assignments = match members {
            Some(members) => self.assign(members).await?,
            None => BTreeMap::new(),
        };
        self.sync(assignments).await
    }

    /// JoinGroup; returns the members' subscriptions when this member leads.
    async fn join(&mut self, topics: &[String]) -> Result<Option<BTreeMap<String, Bytes>>> {
        let metadata =
            assignor::encode_subscription(topics).map_err(|source| ClientError::Encode {
                api: ApiKey::JoinGroup,
                version: 0,
                source,
            })?;
        let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        // A v4+ join without a member id gets MEMBER_ID_REQUIRED and its id; join again.
        for _ in 0..2 {
            let coordinator = self.coordinator().await?;
            let request = JoinGroupRequest::default()
                .with_group_id(self.group())
                .with_session_timeout_ms(millis(self.session_timeout))
                .with_rebalance_timeout_ms(millis(self.rebalance_timeout))
                .with_member_id(s(&self.member_id))
                .with_protocol_type(s(assignor::PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(s(assignor::RANGE))
                    .with_metadata(metadata.clone())]);
            let wait = self.rebalance_timeout + self.client.config().request_timeout;
            let response = coordinator.send_with_timeout(&request, wait).await?;
            if response.error_code == ResponseError::MemberIdRequired.code() {
                self.member_id = response.member_id.as_str().to_owned();
                continue;
            }
            ClientError::check(
                ApiKey::JoinGroup,
                self.group_id.as_str(),
                response.error_code,
                None,
            )?;
            self.member_id = response.member_id.as_str().to_owned();
            self.generation = response.generation_id;
            tracing::debug!(
                group = %self.group_id,
                member = %self.member_id,
                generation = self.generation,
                leader = %response.leader.as_str(),
                "joined group"
            );
            if response.leader.as_str() != self.member_id {
                return Ok(None);
            }
            return Ok(Some(
                response
                    .members
                    .into_iter()
                    .map(|m| (m.member_id.as_str().to_owned(), m.metadata))
                    .collect(),
            ));
        }
        Err(ClientError::Kafka {
            api: ApiKey::JoinGroup,
            resource: self.group_id.clone(),
            error: ResponseError::MemberIdRequired,
            code: ResponseError::MemberIdRequired.code(),
            message: Some("the coordinator asked for a member id twice".to_owned()),
        })
    }

    /// The leader's range assignment over every member's subscription.
    async fn assign(&self, members: BTreeMap<String, Bytes>) -> Result<BTreeMap<String, Bytes>> {
        let mut subscriptions = BTreeMap::new();
        for (member, metadata) in members {
            let topics =
                assignor::decode_subscription(metadata).map_err(|source| ClientError::Decode {
                    api: ApiKey::JoinGroup,
                    version: 0,
                    addr: format!("member {member}"),
                    source,
                })?;
            subscriptions.insert(member, topics);
        }
        let mut topics: Vec<&str> = subscriptions
            .values()
            .flatten()
            .map(String::as_str)
            .collect();
        topics.sort_unstable();
        topics.dedup();
        let errors = self.client.refresh_topics(&topics).await?;
        for (topic, error) in &errors {
            tracing::warn!(group = %self.group_id, topic = %topic, error = %error, "subscribed topic left unassigned");
        }
        let metadata = self.client.metadata();
        let partitions: BTreeMap<String, i32> = topics
            .iter()
            .filter_map(|t| {
                let count = metadata.topic(t)?.partitions.len();
                Some(((*t).to_owned(), i32::try_from(count).ok()?))
            })
            .collect();
        assignor::range_assign(&subscriptions, &partitions)
            .into_iter()
            .map(|(member, assignment)| {
                let bytes = assignor::encode_assignment(&assignment).map_err(|source| {
                    ClientError::Encode {
                        api: ApiKey::SyncGroup,
                        version: 0,
                        source,
                    }
                })?;
                Ok((member, bytes))
            })
            .collect()
    }

    async fn sync(&mut self, assignments: BTreeMap<String, Bytes>) -> Result<Assignment> {
        let coordinator = self.coordinator().await?;
        let version = coordinator.version(ApiKey::SyncGroup)?;
        let mut request = SyncGroupRequest::default()
            .with_group_id(self.group())
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id))
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(member, assignment)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(s(&member))
                            .with_assignment(assignment)
                    })
                    .collect(),
            );
        if version >= 5 {
            request = request
                .with_protocol_type(Some(s(assignor::PROTOCOL_TYPE)))
                .with_protocol_name(Some(s(assignor::RANGE)));
        }
        let wait = self.rebalance_timeout + self.client.config().request_timeout;
        let response = coordinator.send_with_timeout(&request, wait).await?;
        ClientError::check(
            ApiKey::SyncGroup,
            self.group_id.as_str(),
            response.error_code,
            None,
        )?;
        assignor::decode_assignment(response.assignment).map_err(|source| ClientError::Decode {
            api: ApiKey::SyncGroup,
            version,
            addr: coordinator.addr().to_owned(),
            source,
        })
    }

    /// Starts heartbeats every `interval`; the task sets `rejoin` and stops when the
    /// coordinator answers that the group is rebalancing or no longer knows this member
    /// (or when the coordinator cannot be reached).
    pub(crate) async fn start_heartbeat(
        &mut self,
        interval: Duration,
        rejoin: Arc<AtomicBool>,
    ) -> Result<JoinHandle<()>> {
        let coordinator = self.coordinator().await?;
        let request = HeartbeatRequest::default()
            .with_group_id(self.group())
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id));
        let group = self.group_id.clone();
        Ok(tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let outcome = coordinator.send(&request).await.and_then(|response| {
                    ClientError::check(ApiKey::Heartbeat, group.as_str(), response.error_code, None)
                });
                match outcome {
                    Ok(()) => {}
                    Err(e) if e.kafka_error() == Some(ResponseError::RebalanceInProgress) => {
                        tracing::debug!(group = %group, "group is rebalancing");
                        rejoin.store(true, Ordering::SeqCst);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(group = %group, error = %e, "heartbeat failed");
                        rejoin.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        }))
    }

    /// Leaves the group, so its partitions move to the other members at once.
    pub(crate) async fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let coordinator = self.coordinator().await?;
        let version = coordinator.version(ApiKey::LeaveGroup)?;
        let request = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(self.group())
                .with_members(vec![
                    MemberIdentity::default().with_member_id(s(&self.member_id))
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(self.group())
                .with_member_id(s(&self.member_id))
        };
        let response = coordinator.send(&request).await?;
        ClientError::check(
            ApiKey::LeaveGroup,
            self.group_id.as_str(),
            response.error_code,
            None,
        )?;
        for member in &response.members {
            ClientError::check(
                ApiKey::LeaveGroup,
                member.member_id.as_str(),
                member.error_code,
                None,
            )?;
        }
        self.member_id.clear();
        self.generation = -1;
        Ok(())
    }

    /// Commits offsets (the next offset to read per partition) for this member's
    /// generation.
    pub(crate) async fn commit(&mut self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let coordinator = self.coordinator().await?;
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics.entry(topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_metadata(Some(StrBytes::default())),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(self.group())
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(s(&self.member_id))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(s(topic)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let outcome = coordinator.send(&request).await.and_then(|response| {
            for topic in &response.topics {
                for partition in &topic.partitions {
                    ClientError::check(
                        ApiKey::OffsetCommit,
                        format!("{}-{}", topic.name.0.as_str(), partition.partition_index),
                        partition.error_code,
                        None,
                    )?;
                }
            }
            Ok(())
        });
        if let Err(e) = &outcome {
            self.note_error(e);
        }
        outcome
    }

    /// The committed offsets of partitions; partitions without one are left out.
    pub(crate) async fn committed(
        &mut self,
        assignment: &Assignment,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        if assignment.is_empty() {
            return Ok(BTreeMap::new());
        }
        let coordinator = self.coordinator().await?;
        let request = OffsetFetchRequest::default()
            .with_group_id(self.group())
            .with_topics(Some(
                assignment
                    .iter()
                    .map(|(topic, partitions)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(s(topic)))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect(),
            ));
        let response = coordinator.send(&request).await;
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                self.note_error(&e);
                return Err(e);
            }
        };
        ClientError::check(
            ApiKey::OffsetFetch,
            self.group_id.as_str(),
            response.error_code,
            None,
        )?;
        let mut committed = BTreeMap::new();
        for topic in response.topics {
            let name = topic.name.0.as_str().to_owned();
            for partition in topic.partitions {
                ClientError::check(
                    ApiKey::OffsetFetch,
                    format!("{name}-{}", partition.partition_index),
                    partition.error_code,
                    None,
                )?;
                if partition.committed_offset >= 0 {
                    committed.insert(
                        (name.clone(), partition.partition_index),
                        partition.committed_offset,
                    );
                }
            }
        }
        Ok(committed)
    }
}
