//! [`GroupSession`]: group membership without a long-lived consumer, for callers that keep
//! the member's identity elsewhere (a stateless HTTP gateway hands it to its client in a
//! cursor). Each call is one step of the classic protocol; the caller heartbeats by calling
//! [`GroupSession::heartbeat`] often enough for the session timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use super::assignor::Assignment;
use super::member::GroupMember;
use crate::error::Result;
use crate::Client;

/// One member of a consumer group, by identity.
#[derive(Debug)]
pub struct GroupSession {
    member: GroupMember,
}

impl GroupSession {
    /// A member of `group_id`: a new one (`member_id` empty, generation -1), or one that
    /// joined before.
    pub fn new(
        client: &Client,
        group_id: impl Into<String>,
        member_id: impl Into<String>,
        generation: i32,
        session_timeout: Duration,
        rebalance_timeout: Duration,
    ) -> Self {
        let member = GroupMember::new(
            client.clone(),
            group_id.into(),
            session_timeout,
            rebalance_timeout,
        )
        .resume(member_id.into(), generation);
        Self { member }
    }

    /// The member id (empty before the first join, and after the coordinator forgot it).
    pub fn member_id(&self) -> &str {
        self.member.member_id()
    }

    /// The generation last joined, or -1.
    pub fn generation(&self) -> i32 {
        self.member.generation()
    }

    /// Joins, or rejoins, and answers this member's assignment. Waits while the group
    /// rebalances (up to the rebalance timeout).
    pub async fn join(&mut self, topics: &[String]) -> Result<Assignment> {
        self.member.join_and_sync(topics).await
    }

    /// One heartbeat. REBALANCE_IN_PROGRESS means [`GroupSession::join`] again;
    /// UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION mean the group went on without this member.
    pub async fn heartbeat(&mut self) -> Result<()> {
        self.member.heartbeat().await
    }

    /// Commits offsets (the next offset to read, per topic and partition) for this
    /// member's generation; a stale generation is refused by the coordinator.
    pub async fn commit(&mut self, offsets: &BTreeMap<(String, i32), i64>) -> Result<()> {
        self.member.commit(offsets).await
    }

    /// The group's committed offsets of some partitions (those without one are left out).
    pub async fn committed(
        &mut self,
        partitions: &Assignment,
    ) -> Result<BTreeMap<(String, i32), i64>> {
        self.member.committed(partitions).await
    }

    /// Leaves the group, so its partitions move to the others at once.
    pub async fn leave(&mut self) -> Result<()> {
        self.member.leave().await
    }
}
