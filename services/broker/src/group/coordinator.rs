//! Kafka's classic group protocol: the state machine
//! Empty -> PreparingRebalance -> CompletingRebalance -> Stable, member and session timeouts,
//! generations and static membership.
//!
//! Requests that must wait (a JoinGroup until the round completes, a SyncGroup until the
//! leader's assignment arrives) hold no lock while they wait: they watch the group's event
//! counter and re-check its state.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) protocols: Vec<(String, Bytes)>,
    pub(crate) assignment: Bytes,
    last_seen: Instant,
    /// Joined in the current (or last completed) round.
    joined: bool,
    /// The generation this member was part of when its round completed.
    generation: i32,
}

impl Member {
    pub(crate) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) state: GroupState,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pending: HashMap<String, Instant>,
    /// A round completes no earlier than this (the initial rebalance delay) ...
    round_min_end: Instant,
    /// ... and no later than this (the rebalance timeout).
    round_deadline: Instant,
    events: watch::Sender<u64>,
}

impl Group {
    fn new(now: Instant) -> Self {
        Self {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            round_min_end: now,
            round_deadline: now,
            events: watch::channel(0).0,
        }
    }

    fn bump(&self) {
        self.events.send_modify(|n| *n += 1);
    }

    fn start_round(&mut self, now: Instant, min_end: Instant) {
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        self.state = GroupState::PreparingRebalance;
        self.round_min_end = min_end;
        self.round_deadline = now + timeout;
        for member in self.members.values_mut() {
            member.joined = false;
        }
        self.bump();
    }

    /// Completes the round if everyone rejoined (and the initial delay is over) or the
    /// deadline passed; members that did not rejoin are removed.
    fn maybe_complete_round(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = self.members.values().all(|m| m.joined);
        if !(all_joined && now >= self.round_min_end) && now < self.round_deadline {
            return;
        }
        self.members.retain(|_, m| m.joined);
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            self.bump();
            return;
        }
        self.protocol = self.choose_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        let generation = self.generation;
        for member in self.members.values_mut() {
            member.generation = generation;
            member.assignment = Bytes::new();
            member.last_seen = now;
        }
        self.state = GroupState::CompletingRebalance;
        self.bump();
    }

    /// The protocol every member supports that gets the most first-preference votes.
    fn choose_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .collect();
        candidates
            .iter()
            .max_by_key(|name| {
                self.members
                    .values()
                    .filter(|m| {
                        m.protocols
                            .iter()
                            .find(|(n, _)| candidates.contains(&n))
                            .is_some_and(|(n, _)| n == **name)
                    })
                    .count()
            })
            .map(|n| (*n).clone())
    }

    fn remove_member(&mut self, id: &str, now: Instant) {
        if self.members.remove(id).is_none() {
            return;
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_round(now),
            GroupState::CompletingRebalance | GroupState::Stable if !self.members.is_empty() => {
                self.start_round(now, now)
            }
            _ => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.state = GroupState::Empty;
                    self.protocol = None;
                    self.leader = None;
                }
                self.bump();
            }
        }
    }
}

/// What a JoinGroup request asks.
#[derive(Debug, Clone)]
pub(crate) struct JoinRequest {
    pub(crate) group_id: String,
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) protocol_type: String,
    pub(crate) protocols: Vec<(String, Bytes)>,
    /// Whether the client understands MEMBER_ID_REQUIRED (JoinGroup v4+).
    pub(crate) requires_known_member_id: bool,
}

/// What a JoinGroup request gets back.
#[derive(Debug, Default)]
pub(crate) struct JoinOutcome {
    pub(crate) error: Option<ResponseError>,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: String,
    pub(crate) member_id: String,
    /// For the leader: every member with its metadata for the chosen protocol.
    pub(crate) members: Vec<(String, Option<String>, Bytes)>,
}

/// Every group of this broker.
#[derive(Debug)]
pub(crate) struct Coordinator {
    groups: Mutex<HashMap<String, Group>>,
    initial_rebalance_delay: Duration,
}

const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(1000);
const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

impl Coordinator {
    pub(crate) fn new(initial_rebalance_delay: Duration) -> Self {
        Self {
            groups: Mutex::new(HashMap::new()),
            initial_rebalance_delay,
        }
    }

    pub(crate) async fn join(&self, request: JoinRequest) -> JoinOutcome {
        let fail = |error: ResponseError, member_id: &str| JoinOutcome {
            error: Some(error),
            generation: -1,
            member_id: member_id.to_owned(),
            ..JoinOutcome::default()
        };
        if request.session_timeout < MIN_SESSION_TIMEOUT
            || request.session_timeout > MAX_SESSION_TIMEOUT
        {
            return fail(ResponseError::InvalidSessionTimeout, &request.member_id);
        }
        let now = Instant::now();
        let (member_id, mut events) = {
            let mut groups = self.groups.lock();
            if !groups.contains_key(&request.group_id)
                && groups.len() >= crate::limits::MAX_GROUPS_PER_TENANT
            {
                return fail(ResponseError::PolicyViolation, &request.member_id);
            }
            let group = groups
                .entry(request.group_id.clone())
                .or_insert_with(|| Group::new(now));
            let newcomer = request.member_id.is_empty()
                || !(group.members.contains_key(&request.member_id)
                    || group.pending.contains_key(&request.member_id));
            if newcomer
                && group.members.len() + group.pending.len() >= crate::limits::MAX_MEMBERS_PER_GROUP
            {
                return fail(ResponseError::GroupMaxSizeReached, &request.member_id);
            }
            if !group.members.is_empty()
                && group.protocol_type.as_deref() != Some(request.protocol_type.as_str())
            {
                return fail(ResponseError::InconsistentGroupProtocol, &request.member_id);
            }
            if !group.members.is_empty()
                && !request.protocols.iter().any(|(name, _)| {
                    group
                        .members
                        .values()
                        .all(|m| m.protocols.iter().any(|(n, _)| n == name))
                })
            {
                return fail(ResponseError::InconsistentGroupProtocol, &request.member_id);
            }
            let member_id = if request.member_id.is_empty() {
                let fresh = format!("{}-{}", request.client_id, uuid::Uuid::new_v4());
                if let Some(instance) = &request.instance_id {
                    // A static member coming back replaces (fences) its previous incarnation.
                    let old: Option<String> = group
                        .members
                        .values()
                        .find(|m| m.instance_id.as_ref() == Some(instance))
                        .map(|m| m.id.clone());
                    if let Some(old) = old {
                        if let Some(mut member) = group.members.remove(&old) {
                            member.id = fresh.clone();
                            group.members.insert(fresh.clone(), member);
                            if group.leader.as_deref() == Some(old.as_str()) {
                                group.leader = Some(fresh.clone());
                            }
                        }
                    }
                    fresh
                } else if request.requires_known_member_id {
                    group.pending.insert(fresh.clone(), now);
                    return fail(ResponseError::MemberIdRequired, &fresh);
                } else {
                    fresh
                }
            } else if group.members.contains_key(&request.member_id)
                || group.pending.remove(&request.member_id).is_some()
            {
                request.member_id.clone()
            } else {
                return fail(ResponseError::UnknownMemberId, &request.member_id);
            };
            let was_empty = group.members.is_empty();
            let member = group
                .members
                .entry(member_id.clone())
                .or_insert_with(|| Member {
                    id: member_id.clone(),
                    instance_id: None,
                    client_id: String::new(),
                    client_host: String::new(),
                    session_timeout: request.session_timeout,
                    rebalance_timeout: request.rebalance_timeout,
                    protocols: Vec::new(),
                    assignment: Bytes::new(),
                    last_seen: now,
                    joined: false,
                    generation: -1,
                });
            member.instance_id = request.instance_id.clone();
            member.client_id = request.client_id.clone();
            member.client_host = request.client_host.clone();
            member.session_timeout = request.session_timeout;
            member.rebalance_timeout = request.rebalance_timeout;
            member.protocols = request.protocols.clone();
            member.last_seen = now;
            group.protocol_type = Some(request.protocol_type.clone());
            if group.state != GroupState::PreparingRebalance {
                let min_end = if was_empty {
                    now + self.initial_rebalance_delay
                } else {
                    now
                };
                group.start_round(now, min_end);
            } else if was_empty {
                group.round_min_end = group.round_min_end.max(now + self.initial_rebalance_delay);
            }
            // Joining extends the deadline to this member's rebalance timeout.
            group.round_deadline = group.round_deadline.max(now + request.rebalance_timeout);
            if let Some(member) = group.members.get_mut(&member_id) {
                member.joined = true;
            }
            group.maybe_complete_round(now);
            (member_id, group.events.subscribe())
        };
        loop {
            let wake_at = {
                let mut groups = self.groups.lock();
                let now = Instant::now();
                let Some(group) = groups.get_mut(&request.group_id) else {
                    return fail(ResponseError::UnknownMemberId, &member_id);
                };
                group.maybe_complete_round(now);
                let Some(member) = group.members.get(&member_id) else {
                    return fail(ResponseError::UnknownMemberId, &member_id);
                };
                if group.state != GroupState::PreparingRebalance
                    && member.generation == group.generation
                {
                    let leader = group.leader.clone().unwrap_or_default();
                    let protocol = group.protocol.clone();
                    let members = if leader == member_id {
                        let chosen = protocol.clone().unwrap_or_default();
                        group
                            .members
                            .values()
                            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&chosen)))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    return JoinOutcome {
                        error: None,
                        generation: group.generation,
                        protocol_type: group.protocol_type.clone(),
                        protocol,
                        leader,
                        member_id,
                        members,
                    };
                }
                if group.members.values().all(|m| m.joined) {
                    group.round_min_end.min(group.round_deadline)
                } else {
                    group.round_deadline
                }
            };
            let _ = tokio::time::timeout_at(wake_at, events.changed()).await;
        }
    }

    /// SyncGroup: the leader hands in assignments; everyone gets their own.
    pub(crate) async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<(Bytes, Option<String>, Option<String>), ResponseError> {
        let (mut events, deadline) = {
            let mut groups = self.groups.lock();
            let group = groups
                .get_mut(group_id)
                .ok_or(ResponseError::UnknownMemberId)?;
            let member = group
                .members
                .get(member_id)
                .ok_or(ResponseError::UnknownMemberId)?;
            if member.generation != generation || group.generation != generation {
                return Err(ResponseError::IllegalGeneration);
            }
            let deadline = Instant::now() + member.rebalance_timeout;
            if group.state == GroupState::CompletingRebalance
                && group.leader.as_deref() == Some(member_id)
            {
                let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                for member in group.members.values_mut() {
                    member.assignment = given.remove(&member.id).unwrap_or_default();
                }
                group.state = GroupState::Stable;
                group.bump();
            }
            (group.events.subscribe(), deadline)
        };
        loop {
            {
                let groups = self.groups.lock();
                let group = groups.get(group_id).ok_or(ResponseError::UnknownMemberId)?;
                let member = group
                    .members
                    .get(member_id)
                    .ok_or(ResponseError::UnknownMemberId)?;
                if group.generation != generation {
                    return Err(ResponseError::RebalanceInProgress);
                }
                match group.state {
                    GroupState::Stable => {
                        return Ok((
                            member.assignment.clone(),
                            group.protocol_type.clone(),
                            group.protocol.clone(),
                        ))
                    }
                    GroupState::PreparingRebalance => {
                        return Err(ResponseError::RebalanceInProgress)
                    }
                    GroupState::Empty => return Err(ResponseError::UnknownMemberId),
                    GroupState::CompletingRebalance => {}
                }
            }
            if tokio::time::timeout_at(deadline, events.changed())
                .await
                .is_err()
            {
                return Err(ResponseError::RebalanceInProgress);
            }
        }
    }

    pub(crate) fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation: i32,
    ) -> Result<(), ResponseError> {
        let mut groups = self.groups.lock();
        let group = groups
            .get_mut(group_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        let state = group.state;
        let current = group.generation;
        let member = group
            .members
            .get_mut(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        member.last_seen = Instant::now();
        if state == GroupState::PreparingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        if generation != current {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Removes members; each answer is per member.
    pub(crate) fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Vec<Result<(), ResponseError>> {
        let mut groups = self.groups.lock();
        let now = Instant::now();
        let Some(group) = groups.get_mut(group_id) else {
            return members
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        members
            .iter()
            .map(|(member_id, instance)| {
                let id = if member_id.is_empty() {
                    instance.as_ref().and_then(|i| {
                        group
                            .members
                            .values()
                            .find(|m| m.instance_id.as_ref() == Some(i))
                            .map(|m| m.id.clone())
                    })
                } else {
                    Some(member_id.clone())
                };
                match id {
                    Some(id) if group.members.contains_key(&id) => {
                        group.remove_member(&id, now);
                        Ok(())
                    }
                    _ => Err(ResponseError::UnknownMemberId),
                }
            })
            .collect()
    }

    /// Expires members whose session timed out and completes rounds whose deadline passed.
    pub(crate) fn expire(&self) {
        let mut groups = self.groups.lock();
        let now = Instant::now();
        for group in groups.values_mut() {
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| {
                    let waiting_in_join = group.state == GroupState::PreparingRebalance && m.joined;
                    !waiting_in_join && m.last_seen + m.session_timeout < now
                })
                .map(|m| m.id.clone())
                .collect();
            for id in expired {
                tracing::info!(member = %id, "member session expired");
                group.remove_member(&id, now);
            }
            group.pending.retain(|_, since| {
                *since + MAX_SESSION_TIMEOUT.min(Duration::from_secs(300)) > now
            });
            group.maybe_complete_round(now);
        }
        // A group that never formed (only joins that were told to come back with their
        // member id, who never did) holds nothing: it goes, and gives back its place among
        // the tenant's groups. Groups that did form stay until their offsets expire.
        groups.retain(|_, group| {
            group.generation > 0 || !group.members.is_empty() || !group.pending.is_empty()
        });
    }

    /// Whether a commit by this member and generation may be accepted.
    pub(crate) fn check_commit(
        &self,
        group_id: &str,
        member_id: &str,
        generation: i32,
    ) -> Result<(), ResponseError> {
        let groups = self.groups.lock();
        let Some(group) = groups.get(group_id) else {
            return if generation < 0 {
                Ok(())
            } else {
                Err(ResponseError::IllegalGeneration)
            };
        };
        if generation < 0 {
            // A commit from outside the group (a simple consumer or a tool).
            return if group.members.is_empty() {
                Ok(())
            } else {
                Err(ResponseError::IllegalGeneration)
            };
        }
        if !group.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        if generation != group.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        // Members of the current generation may still commit while the group prepares a
        // rebalance (consumers commit what they processed before rejoining); between the
        // join and the sync the generation's assignment is not known yet.
        if group.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Whether the group has members now.
    pub(crate) fn has_members(&self, group_id: &str) -> bool {
        self.groups
            .lock()
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// Forgets an empty group; false if it has members.
    pub(crate) fn remove_if_empty(&self, group_id: &str) -> bool {
        let mut groups = self.groups.lock();
        match groups.get(group_id) {
            Some(g) if !g.members.is_empty() => false,
            _ => {
                groups.remove(group_id);
                true
            }
        }
    }

    /// Whether the group is known at all (members or state).
    pub(crate) fn exists(&self, group_id: &str) -> bool {
        self.groups.lock().contains_key(group_id)
    }

    /// (group id, protocol type, state) of every group.
    pub(crate) fn list(&self) -> Vec<(String, String, GroupState)> {
        self.groups
            .lock()
            .iter()
            .map(|(id, g)| {
                (
                    id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state,
                )
            })
            .collect()
    }

    /// A snapshot of one group: state, protocol type, protocol, members.
    pub(crate) fn describe(
        &self,
        group_id: &str,
    ) -> Option<(GroupState, String, String, Vec<Member>)> {
        let groups = self.groups.lock();
        let group = groups.get(group_id)?;
        Some((
            group.state,
            group.protocol_type.clone().unwrap_or_default(),
            group.protocol.clone().unwrap_or_default(),
            group.members.values().cloned().collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    fn join(group: &str, member: &str) -> JoinRequest {
        JoinRequest {
            group_id: group.to_owned(),
            member_id: member.to_owned(),
            instance_id: None,
            client_id: "test".to_owned(),
            client_host: "/127.0.0.1".to_owned(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            protocol_type: "consumer".to_owned(),
            protocols: vec![("range".to_owned(), Bytes::new())],
            requires_known_member_id: false,
        }
    }

    #[tokio::test]
    async fn members_commit_while_a_rebalance_is_prepared_but_not_while_it_completes() {
        let coordinator = Arc::new(Coordinator::new(Duration::ZERO));
        let first = coordinator.join(join("g", "")).await;
        assert_eq!(first.error, None);
        let a = first.member_id.clone();
        coordinator
            .sync("g", &a, first.generation, vec![(a.clone(), Bytes::new())])
            .await
            .unwrap();
        assert_eq!(coordinator.check_commit("g", &a, first.generation), Ok(()));

        // A second member asks to join: the group prepares a rebalance and waits for `a`.
        let joining = {
            let coordinator = Arc::clone(&coordinator);
            tokio::spawn(async move { coordinator.join(join("g", "")).await })
        };
        while coordinator.describe("g").unwrap().0 != GroupState::PreparingRebalance {
            tokio::task::yield_now().await;
        }
        // `a` commits what it processed before rejoining (Kafka accepts this).
        assert_eq!(coordinator.check_commit("g", &a, first.generation), Ok(()));

        // `a` rejoins; until the new generation's sync, commits wait for the assignment.
        let rejoined = coordinator.join(join("g", &a)).await;
        let b = joining.await.unwrap();
        assert_eq!(rejoined.generation, first.generation + 1);
        assert_eq!(b.generation, rejoined.generation);
        assert_eq!(
            coordinator.check_commit("g", &a, rejoined.generation),
            Err(ResponseError::RebalanceInProgress)
        );
        assert_eq!(
            coordinator.check_commit("g", &a, first.generation),
            Err(ResponseError::IllegalGeneration)
        );
    }

    #[tokio::test]
    async fn a_group_holds_a_bounded_number_of_members_and_a_tenant_of_groups() {
        let coordinator = Coordinator::new(Duration::ZERO);
        // KIP-394 joins without a member id each leave a pending member behind.
        let mut first = join("crowded", "");
        first.requires_known_member_id = true;
        for _ in 0..crate::limits::MAX_MEMBERS_PER_GROUP {
            let outcome = coordinator.join(first.clone()).await;
            assert_eq!(outcome.error, Some(ResponseError::MemberIdRequired));
        }
        let outcome = coordinator.join(first.clone()).await;
        assert_eq!(outcome.error, Some(ResponseError::GroupMaxSizeReached));

        let coordinator = Coordinator::new(Duration::ZERO);
        for i in 0..crate::limits::MAX_GROUPS_PER_TENANT {
            let mut request = join(&format!("g{i}"), "");
            request.requires_known_member_id = true;
            let outcome = coordinator.join(request).await;
            assert_eq!(outcome.error, Some(ResponseError::MemberIdRequired));
        }
        let mut request = join("one-more", "");
        request.requires_known_member_id = true;
        let outcome = coordinator.join(request).await;
        assert_eq!(outcome.error, Some(ResponseError::PolicyViolation));
    }
}
