//! The group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, ListGroups and DescribeGroups.

use crate::listeners::ListenerInfo;
use kafka_protocol::messages::ApiKey;
use skein_auth::Operation;

use crate::router::{Api, Call};

use std::time::Duration;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator as CoordinatorEntry;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_log::Clock;

use crate::group::{Committed, GroupState, JoinRequest, TenantGroups};
use crate::scope::Scope;
use crate::Broker;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// FindCoordinator's key type of a consumer group (1 is a transactional id).
const GROUP_KEY: i8 = 0;

/// The broker that coordinates the tenant's groups (`internal` is `__consumer_offsets`) or
/// transactions (`__transaction_state`): this one on its own; in a cluster the leader of
/// that internal topic, made by the controller on the first request.
async fn coordinator_of(
    broker: &Broker,
    scope: &Scope,
    listener: &ListenerInfo,
    internal: &str,
) -> Result<(i32, String, i32), ResponseError> {
    let this = (
        broker.config.node_id,
        listener.advertised_host.clone(),
        i32::from(listener.advertised_port),
    );
    if !broker.topics.is_controlled() {
        return Ok(this);
    }
    let leader = broker
        .topics
        .internal_topic(scope, internal)
        .await
        .and_then(|info| info.placement_of(0, broker.config.node_id))
        .map(|p| p.leader)
        .filter(|leader| *leader >= 0)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    if leader == broker.config.node_id {
        return Ok(this);
    }
    broker
        .topics
        .brokers_for(scope)
        .into_iter()
        .find(|b| b.node_id == leader)
        .and_then(|b| b.on(&listener.name))
        .map(|b| (b.node_id, b.host, b.port))
        .ok_or(ResponseError::CoordinatorNotAvailable)
}

pub(crate) async fn find_coordinator(
    broker: &Broker,
    scope: &Scope,
    listener: &ListenerInfo,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let groups = if version >= 4 {
        request.coordinator_keys.is_empty() || request.key_type == GROUP_KEY
    } else {
        request.key_type == GROUP_KEY
    };
    let internal = if groups {
        crate::group::OFFSETS_TOPIC
    } else {
        crate::txn::TOPIC
    };
    let found = coordinator_of(broker, scope, listener, internal).await;
    let (node, host, port, error) = match found {
        Ok((node, host, port)) => (node, host, port, 0),
        Err(e) => (-1, String::new(), -1, e.code()),
    };
    let message = (error != 0).then(|| s("the coordinator is not available yet"));
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                CoordinatorEntry::default()
                    .with_key(key)
                    .with_node_id(BrokerId(node))
                    .with_host(s(&host))
                    .with_port(port)
                    .with_error_code(error)
                    .with_error_message(message.clone())
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let response = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node))
            .with_host(s(&host))
            .with_port(port)
            .with_error_code(error);
        if version >= 1 {
            response.with_error_message(message)
        } else {
            response
        }
    }
}

pub(crate) async fn join_group(
    tenant: &TenantGroups,
    request: JoinGroupRequest,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> JoinGroupResponse {
    let session = Duration::from_millis(request.session_timeout_ms.max(0) as u64);
    // v0 has no rebalance timeout: it is the session timeout.
    let rebalance = if version >= 1 {
        Duration::from_millis(request.rebalance_timeout_ms.max(0) as u64)
    } else {
        session
    };
    // A member id the broker made is far shorter; an instance id is the client's own.
    let max = crate::limits::MAX_MEMBER_ID_BYTES;
    if request.member_id.len() > max
        || request
            .group_instance_id
            .as_ref()
            .is_some_and(|id| id.len() > max)
    {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_generation_id(-1);
    }
    let outcome = tenant
        .coordinator()
        .join(JoinRequest {
            group_id: request.group_id.0.as_str().to_owned(),
            member_id: request.member_id.as_str().to_owned(),
            instance_id: request.group_instance_id.map(|i| i.as_str().to_owned()),
            client_id: crate::limits::cut(client_id, crate::limits::MAX_CLIENT_ID_BYTES).to_owned(),
            client_host: client_host.to_owned(),
            session_timeout: session,
            rebalance_timeout: rebalance,
            protocol_type: request.protocol_type.as_str().to_owned(),
            protocols: request
                .protocols
                .into_iter()
                .map(|p| (p.name.as_str().to_owned(), p.metadata))
                .collect(),
            requires_known_member_id: version >= 4,
        })
        .await;
    let response = JoinGroupResponse::default()
        .with_error_code(outcome.error.map_or(0, |e| e.code()))
        .with_generation_id(outcome.generation)
        .with_protocol_name(outcome.protocol.as_deref().map(s))
        .with_leader(s(&outcome.leader))
        .with_member_id(s(&outcome.member_id))
        .with_members(
            outcome
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    let member = JoinGroupResponseMember::default()
                        .with_member_id(s(&id))
                        .with_metadata(metadata);
                    if version >= 5 {
                        member.with_group_instance_id(instance.as_deref().map(s))
                    } else {
                        member
                    }
                })
                .collect(),
        );
    if version >= 7 {
        response.with_protocol_type(outcome.protocol_type.as_deref().map(s))
    } else {
        response
    }
}

pub(crate) async fn sync_group(
    tenant: &TenantGroups,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let result = tenant
        .coordinator()
        .sync(
            request.group_id.0.as_str(),
            request.member_id.as_str(),
            request.generation_id,
            request
                .assignments
                .into_iter()
                .map(|a| (a.member_id.as_str().to_owned(), a.assignment))
                .collect(),
        )
        .await;
    match result {
        Ok((assignment, protocol_type, protocol)) => {
            let response = SyncGroupResponse::default().with_assignment(assignment);
            if version >= 5 {
                response
                    .with_protocol_type(protocol_type.as_deref().map(s))
                    .with_protocol_name(protocol.as_deref().map(s))
            } else {
                response
            }
        }
        Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
    }
}

pub(crate) fn heartbeat(tenant: &TenantGroups, request: HeartbeatRequest) -> HeartbeatResponse {
    let result = tenant.coordinator().heartbeat(
        request.group_id.0.as_str(),
        request.member_id.as_str(),
        request.generation_id,
    );
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}

pub(crate) fn leave_group(
    tenant: &TenantGroups,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group = request.group_id.0.as_str();
    if version < 3 {
        let result = tenant
            .coordinator()
            .leave(group, &[(request.member_id.as_str().to_owned(), None)]);
        let code = result.first().and_then(|r| r.err()).map_or(0, |e| e.code());
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let members: Vec<(String, Option<String>)> = request
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str().to_owned(),
                m.group_instance_id.as_ref().map(|i| i.as_str().to_owned()),
            )
        })
        .collect();
    let results = tenant.coordinator().leave(group, &members);
    LeaveGroupResponse::default().with_members(
        members
            .into_iter()
            .zip(results)
            .map(|((id, instance), result)| {
                MemberResponse::default()
                    .with_member_id(s(&id))
                    .with_group_instance_id(instance.as_deref().map(s))
                    .with_error_code(result.err().map_or(0, |e| e.code()))
            })
            .collect(),
    )
}

pub(crate) async fn offset_commit(
    broker: &Broker,
    tenant: &TenantGroups,
    scope: &Scope,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group = request.group_id.0.as_str();
    let allowed = tenant
        .coordinator()
        .check_commit(
            group,
            request.member_id.as_str(),
            request.generation_id_or_member_epoch,
        )
        .and_then(|()| {
            // A group new to the tenant's offsets takes a place among its groups.
            let (groups, known) = tenant.offsets.group_count(group);
            if known || groups < crate::limits::MAX_GROUPS_PER_TENANT {
                Ok(())
            } else {
                Err(ResponseError::PolicyViolation)
            }
        });
    let mut commits = Vec::new();
    let mut topics = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let known = broker.topics.get(&scope.qualify(name));
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let metadata = p.committed_metadata.as_ref().map_or("", |m| m.as_str());
                let code = match (&allowed, &known) {
                    (Err(e), _) => e.code(),
                    (Ok(()), _) if metadata.len() > crate::limits::OFFSET_METADATA_MAX_BYTES => {
                        ResponseError::OffsetMetadataTooLarge.code()
                    }
                    (Ok(()), Some(info))
                        if p.partition_index >= 0 && p.partition_index < info.partitions =>
                    {
                        commits.push((
                            name.to_owned(),
                            p.partition_index,
                            Committed {
                                offset: p.committed_offset,
                                leader_epoch: if version >= 6 {
                                    p.committed_leader_epoch
                                } else {
                                    -1
                                },
                                metadata: metadata.to_owned(),
                            },
                        ));
                        0
                    }
                    (Ok(()), _) => ResponseError::UnknownTopicOrPartition.code(),
                };
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect::<Vec<_>>();
        topics.push((topic.name.clone(), partitions));
    }
    let now = skein_log::SystemClock.now_ms();
    if let Err(e) = tenant
        .offsets
        .commit(&broker.replicas, group, &commits, now)
        .await
    {
        tracing::warn!(group, error = %e, "failed to store committed offsets");
        for (_, partitions) in &mut topics {
            for p in partitions.iter_mut() {
                if p.error_code == 0 {
                    p.error_code = e.code().code();
                }
            }
        }
    }
    OffsetCommitResponse::default().with_topics(
        topics
            .into_iter()
            .map(|(name, partitions)| {
                OffsetCommitResponseTopic::default()
                    .with_name(name)
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

/// OffsetFetch: one group per request before v8, any number of groups from v8 on. With
/// `require_stable` (v7 on, sent by read_committed consumers), a partition whose offset a
/// transaction not yet decided holds answers UNSTABLE_OFFSET_COMMIT, as Kafka does.
pub(crate) fn offset_fetch(
    tenant: &TenantGroups,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let stable = request.require_stable;
    if version < 8 {
        let topics = committed_offsets(
            tenant,
            request.group_id.0.as_str(),
            request.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|t| (t.name, t.partition_indexes))
                    .collect()
            }),
            stable,
        );
        let topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(partition, answer)| {
                                let (offset, epoch, metadata, code) = answer_fields(answer);
                                let answer = OffsetFetchResponsePartition::default()
                                    .with_partition_index(partition)
                                    .with_committed_offset(offset)
                                    .with_metadata(Some(metadata))
                                    .with_error_code(code);
                                if version >= 5 {
                                    answer.with_committed_leader_epoch(epoch)
                                } else {
                                    answer
                                }
                            })
                            .collect(),
                    )
            })
            .collect();
        return OffsetFetchResponse::default().with_topics(topics);
    }
    let groups = request
        .groups
        .into_iter()
        .map(|group| {
            let topics = committed_offsets(
                tenant,
                group.group_id.0.as_str(),
                group.topics.map(|topics| {
                    topics
                        .into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                }),
                stable,
            );
            let topics = topics
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(name)
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(partition, answer)| {
                                    let (offset, epoch, metadata, code) = answer_fields(answer);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(partition)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(metadata))
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(group.group_id)
                .with_topics(topics)
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// What OffsetFetch answers for one partition.
enum Answer {
    Committed(Option<Committed>),
    /// A transaction not yet decided holds its offset (asked with `require_stable`).
    Unstable,
}

/// A group's answers for the asked partitions (`None`: every partition it has committed,
/// or, asked with `require_stable`, has pending in a transaction), by topic.
type CommittedByTopic = Vec<(TopicName, Vec<(i32, Answer)>)>;

fn committed_offsets(
    tenant: &TenantGroups,
    group: &str,
    asked: Option<Vec<(TopicName, Vec<i32>)>>,
    stable: bool,
) -> CommittedByTopic {
    let answer = |topic: &str, partition: i32| {
        if stable && tenant.offsets.is_pending(group, topic, partition) {
            Answer::Unstable
        } else {
            Answer::Committed(tenant.offsets.get(group, topic, partition))
        }
    };
    match asked {
        Some(topics) => topics
            .into_iter()
            .map(|(name, partitions)| {
                let answers = partitions
                    .into_iter()
                    .map(|p| (p, answer(name.0.as_str(), p)))
                    .collect();
                (name, answers)
            })
            .collect(),
        None => {
            let mut by_topic: std::collections::BTreeMap<String, std::collections::BTreeSet<i32>> =
                std::collections::BTreeMap::new();
            let committed = tenant
                .offsets
                .all(group)
                .into_iter()
                .map(|(topic, partition, _)| (topic, partition));
            let pending = if stable {
                tenant.offsets.pending_of(group)
            } else {
                Vec::new()
            };
            for (topic, partition) in committed.chain(pending) {
                by_topic.entry(topic).or_default().insert(partition);
            }
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    let answers = partitions
                        .into_iter()
                        .map(|p| (p, answer(&topic, p)))
                        .collect();
                    (TopicName(s(&topic)), answers)
                })
                .collect()
        }
    }
}

/// (offset, leader epoch, metadata, error code) as OffsetFetch reports them; -1 for no
/// commit.
fn answer_fields(answer: Answer) -> (i64, i32, StrBytes, i16) {
    match answer {
        Answer::Committed(committed) => {
            let (offset, epoch, metadata) = committed_fields(committed);
            (offset, epoch, metadata, 0)
        }
        Answer::Unstable => (-1, -1, s(""), ResponseError::UnstableOffsetCommit.code()),
    }
}

/// (offset, leader epoch, metadata) as OffsetFetch reports them; -1 for no commit.
fn committed_fields(committed: Option<Committed>) -> (i64, i32, StrBytes) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, s(&c.metadata)),
        None => (-1, -1, s("")),
    }
}

pub(crate) fn list_groups(tenant: &TenantGroups, version: i16) -> ListGroupsResponse {
    let mut groups: Vec<(String, String, GroupState)> = tenant.coordinator().list();
    for g in tenant.offsets.groups() {
        if !groups.iter().any(|(id, _, _)| *id == g) {
            groups.push((g, "consumer".to_owned(), GroupState::Empty));
        }
    }
    ListGroupsResponse::default().with_groups(
        groups
            .into_iter()
            .map(|(id, protocol_type, state)| {
                let listed = ListedGroup::default()
                    .with_group_id(GroupId(s(&id)))
                    .with_protocol_type(s(&protocol_type));
                let listed = if version >= 4 {
                    listed.with_group_state(s(state.name()))
                } else {
                    listed
                };
                if version >= 5 {
                    listed.with_group_type(s("classic"))
                } else {
                    listed
                }
            })
            .collect(),
    )
}

pub(crate) fn describe_groups(
    tenant: &TenantGroups,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    DescribeGroupsResponse::default().with_groups(
        request
            .groups
            .into_iter()
            .map(|id| match tenant.coordinator().describe(id.0.as_str()) {
                Some((state, protocol_type, protocol, members)) => DescribedGroup::default()
                    .with_group_id(id)
                    .with_group_state(s(state.name()))
                    .with_protocol_type(s(&protocol_type))
                    .with_protocol_data(s(&protocol))
                    .with_members(
                        members
                            .into_iter()
                            .map(|m| {
                                let described = DescribedGroupMember::default()
                                    .with_member_id(s(&m.id))
                                    .with_client_id(s(&m.client_id))
                                    .with_client_host(s(&m.client_host))
                                    .with_member_metadata(m.metadata_for(&protocol))
                                    .with_member_assignment(m.assignment.clone());
                                if version >= 4 {
                                    described
                                        .with_group_instance_id(m.instance_id.as_deref().map(s))
                                } else {
                                    described
                                }
                            })
                            .collect(),
                    ),
                // Kafka describes an unknown group as Dead with no members.
                None => DescribedGroup::default()
                    .with_group_id(id)
                    .with_group_state(s("Dead")),
            })
            .collect(),
    )
}

pub(crate) async fn delete_groups(
    broker: &Broker,
    tenant: &TenantGroups,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let now = skein_log::SystemClock.now_ms();
    let mut results = Vec::with_capacity(request.groups_names.len());
    for id in request.groups_names {
        results.push({
            let group = id.0.as_str().to_owned();
            let committed = tenant.offsets.all(&group);
            let known = tenant.coordinator().exists(&group) || !committed.is_empty();
            let code = if !known {
                ResponseError::GroupIdNotFound.code()
            } else if !tenant.coordinator().remove_if_empty(&group) {
                ResponseError::NonEmptyGroup.code()
            } else {
                let keys: Vec<(String, i32)> =
                    committed.into_iter().map(|(t, p, _)| (t, p)).collect();
                match tenant
                    .offsets
                    .delete(&broker.replicas, &group, &keys, now)
                    .await
                {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::warn!(group, error = %e, "failed to delete group offsets");
                        e.code().code()
                    }
                }
            };
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code)
        });
    }
    DeleteGroupsResponse::default().with_results(results)
}

pub(crate) async fn offset_delete(
    broker: &Broker,
    tenant: &TenantGroups,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.as_str();
    if tenant.offsets.all(group).is_empty() && !tenant.coordinator().exists(group) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    }
    // A group with members may be reading these partitions: Kafka refuses while it is.
    let busy = tenant.coordinator().has_members(group);
    let mut keys = Vec::new();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.as_str().to_owned();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = if busy {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        keys.push((name.clone(), p.partition_index));
                        0
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    let now = skein_log::SystemClock.now_ms();
    if let Err(e) = tenant
        .offsets
        .delete(&broker.replicas, group, &keys, now)
        .await
    {
        tracing::warn!(group, error = %e, "failed to delete offsets");
        return OffsetDeleteResponse::default().with_error_code(e.code().code());
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

/// GROUP_AUTHORIZATION_FAILED's code unless the principal may READ `group` (what joining,
/// syncing, heartbeats, leaving and commits need).
fn group_refusal(call: &Call<'_>, group: &str) -> Option<i16> {
    if !call.access().group(Operation::Read, group) {
        return Some(ResponseError::GroupAuthorizationFailed.code());
    }
    (!crate::limits::valid_group_id(group)).then(|| ResponseError::InvalidGroupId.code())
}

/// A refusal's code, or else whether this broker coordinates the groups.
async fn checked(call: &Call<'_>, refused: Option<i16>) -> Result<(), i16> {
    match refused {
        Some(code) => Err(code),
        None => coordinating(call).await,
    }
}

/// Every partition of `topics` answered with `code`.
fn commit_errors(
    topics: Vec<kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic>,
    code: i16,
) -> Vec<OffsetCommitResponseTopic> {
    topics
        .into_iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Whether this broker coordinates the groups of the call's tenant
/// ([`Broker::coordinate`]); else the error code to answer with (NOT_COORDINATOR,
/// COORDINATOR_NOT_AVAILABLE).
async fn coordinating(call: &Call<'_>) -> Result<(), i16> {
    let groups = call.broker.groups_of(&call.scope);
    call.broker.coordinate(&call.scope, &groups).await.map_err(|e| {
        tracing::debug!(error = %e, "a group request reached a broker that does not coordinate");
        e.code().code()
    })
}

/// FindCoordinator versions 0 to 6.
pub(crate) struct FindCoordinator;

impl Api for FindCoordinator {
    type Request = kafka_protocol::messages::FindCoordinatorRequest;
    type Response = kafka_protocol::messages::FindCoordinatorResponse;
    const KEY: ApiKey = ApiKey::FindCoordinator;
    const VERSIONS: (i16, i16) = (0, 6);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // DESCRIBE on the group (or transactional id) the key names.
        let access = call.access();
        let allowed = |key: &str, key_type: i8| {
            if key_type == GROUP_KEY {
                access.group(Operation::Describe, key)
            } else {
                access.transactional_id(Operation::Describe, key)
            }
        };
        let denied = |key_type: i8| {
            if key_type == GROUP_KEY {
                ResponseError::GroupAuthorizationFailed
            } else {
                ResponseError::TransactionalIdAuthorizationFailed
            }
        };
        let key_type = request.key_type;
        if call.version < 4 && !allowed(request.key.as_str(), key_type) {
            return Some(
                FindCoordinatorResponse::default()
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(denied(key_type).code()),
            );
        }
        let refused: Vec<StrBytes> = request
            .coordinator_keys
            .iter()
            .filter(|key| !allowed(key.as_str(), key_type))
            .cloned()
            .collect();
        let mut request = request;
        request
            .coordinator_keys
            .retain(|key| !refused.contains(key));
        let nothing_left = call.version >= 4 && request.coordinator_keys.is_empty();
        let mut response = if nothing_left {
            FindCoordinatorResponse::default()
        } else {
            find_coordinator(
                call.broker,
                &call.scope,
                &call.session.listener,
                request,
                call.version,
            )
            .await
        };
        response.coordinators.extend(refused.into_iter().map(|key| {
            CoordinatorEntry::default()
                .with_key(key)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(denied(key_type).code())
        }));
        Some(response)
    }
}

/// JoinGroup versions 0 to 9.
pub(crate) struct JoinGroup;

impl Api for JoinGroup {
    type Request = kafka_protocol::messages::JoinGroupRequest;
    type Response = kafka_protocol::messages::JoinGroupResponse;
    const KEY: ApiKey = ApiKey::JoinGroup;
    const VERSIONS: (i16, i16) = (0, 9);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let refused = group_refusal(call, request.group_id.as_str());
        if let Err(code) = checked(call, refused).await {
            return Some(
                JoinGroupResponse::default()
                    .with_error_code(code)
                    .with_generation_id(-1)
                    .with_member_id(request.member_id),
            );
        }
        Some(
            join_group(
                &call.broker.groups_of(&call.scope),
                request,
                call.version,
                &call.client_id,
                call.peer,
            )
            .await,
        )
    }
}

/// SyncGroup versions 0 to 5.
pub(crate) struct SyncGroup;

impl Api for SyncGroup {
    type Request = kafka_protocol::messages::SyncGroupRequest;
    type Response = kafka_protocol::messages::SyncGroupResponse;
    const KEY: ApiKey = ApiKey::SyncGroup;
    const VERSIONS: (i16, i16) = (0, 5);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let refused = group_refusal(call, request.group_id.as_str());
        if let Err(code) = checked(call, refused).await {
            return Some(SyncGroupResponse::default().with_error_code(code));
        }
        Some(sync_group(&call.broker.groups_of(&call.scope), request, call.version).await)
    }
}

/// Heartbeat versions 0 to 4.
pub(crate) struct Heartbeat;

impl Api for Heartbeat {
    type Request = kafka_protocol::messages::HeartbeatRequest;
    type Response = kafka_protocol::messages::HeartbeatResponse;
    const KEY: ApiKey = ApiKey::Heartbeat;
    const VERSIONS: (i16, i16) = (0, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let refused = group_refusal(call, request.group_id.as_str());
        if let Err(code) = checked(call, refused).await {
            return Some(HeartbeatResponse::default().with_error_code(code));
        }
        Some(heartbeat(&call.broker.groups_of(&call.scope), request))
    }
}

/// LeaveGroup versions 0 to 5.
pub(crate) struct LeaveGroup;

impl Api for LeaveGroup {
    type Request = kafka_protocol::messages::LeaveGroupRequest;
    type Response = kafka_protocol::messages::LeaveGroupResponse;
    const KEY: ApiKey = ApiKey::LeaveGroup;
    const VERSIONS: (i16, i16) = (0, 5);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        let refused = group_refusal(call, request.group_id.as_str());
        if let Err(code) = checked(call, refused).await {
            return Some(LeaveGroupResponse::default().with_error_code(code));
        }
        Some(leave_group(
            &call.broker.groups_of(&call.scope),
            request,
            call.version,
        ))
    }
}

/// OffsetCommit versions 2 to 9.
pub(crate) struct OffsetCommit;

impl Api for OffsetCommit {
    type Request = kafka_protocol::messages::OffsetCommitRequest;
    type Response = kafka_protocol::messages::OffsetCommitResponse;
    const KEY: ApiKey = ApiKey::OffsetCommit;
    const VERSIONS: (i16, i16) = (2, 9);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // READ on the group, and on each topic: a denied topic's offsets are not written.
        let refused = group_refusal(call, request.group_id.as_str());
        if let Err(code) = checked(call, refused).await {
            let topics = commit_errors(request.topics, code);
            return Some(OffsetCommitResponse::default().with_topics(topics));
        }
        let access = call.access();
        let mut request = request;
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| access.topic(Operation::Read, t.name.as_str()));
        request.topics = allowed;
        let mut response = offset_commit(
            call.broker,
            &call.broker.groups_of(&call.scope),
            &call.scope,
            request,
            call.version,
        )
        .await;
        response.topics.extend(commit_errors(
            denied,
            ResponseError::TopicAuthorizationFailed.code(),
        ));
        Some(response)
    }
}

/// OffsetFetch versions 1 to 9.
pub(crate) struct OffsetFetch;

impl Api for OffsetFetch {
    type Request = kafka_protocol::messages::OffsetFetchRequest;
    type Response = kafka_protocol::messages::OffsetFetchResponse;
    const KEY: ApiKey = ApiKey::OffsetFetch;
    const VERSIONS: (i16, i16) = (1, 9);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // DESCRIBE on each group; topics the principal may not describe are refused when
        // named and left out when the request asks for every topic.
        let access = call.access();
        let mut request = request;
        if call.version < 8 && !access.group(Operation::Describe, request.group_id.as_str()) {
            return Some(
                OffsetFetchResponse::default()
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
            );
        }
        let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.groups)
            .into_iter()
            .partition(|g| access.group(Operation::Describe, g.group_id.as_str()));
        request.groups = allowed;
        let refused = refused.into_iter().map(|g| {
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_error_code(ResponseError::GroupAuthorizationFailed.code())
        });
        let all_topics = request.topics.is_none();
        let all_topics_of: Vec<(GroupId, bool)> = request
            .groups
            .iter()
            .map(|g| (g.group_id.clone(), g.topics.is_none()))
            .collect();
        if let Err(code) = coordinating(call).await {
            if call.version < 8 {
                return Some(OffsetFetchResponse::default().with_error_code(code));
            }
            let groups = request
                .groups
                .into_iter()
                .map(|g| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(code)
                })
                .collect();
            let mut response = OffsetFetchResponse::default().with_groups(groups);
            response.groups.extend(refused);
            return Some(response);
        }
        let mut response = offset_fetch(&call.broker.groups_of(&call.scope), request, call.version);
        let denied = ResponseError::TopicAuthorizationFailed.code();
        response
            .topics
            .retain(|t| !all_topics || access.topic(Operation::Describe, t.name.as_str()));
        for topic in &mut response.topics {
            if !access.topic(Operation::Describe, topic.name.as_str()) {
                for p in &mut topic.partitions {
                    p.committed_offset = -1;
                    p.metadata = None;
                    p.error_code = denied;
                }
            }
        }
        for group in &mut response.groups {
            let all = all_topics_of
                .iter()
                .any(|(id, all)| *id == group.group_id && *all);
            group
                .topics
                .retain(|t| !all || access.topic(Operation::Describe, t.name.as_str()));
            for topic in &mut group.topics {
                if !access.topic(Operation::Describe, topic.name.as_str()) {
                    for p in &mut topic.partitions {
                        p.committed_offset = -1;
                        p.metadata = None;
                        p.error_code = denied;
                    }
                }
            }
        }
        response.groups.extend(refused);
        Some(response)
    }
}

/// ListGroups versions 0 to 5.
pub(crate) struct ListGroups;

impl Api for ListGroups {
    type Request = kafka_protocol::messages::ListGroupsRequest;
    type Response = kafka_protocol::messages::ListGroupsResponse;
    const KEY: ApiKey = ApiKey::ListGroups;
    const VERSIONS: (i16, i16) = (0, 5);

    async fn handle(call: &Call<'_>, _request: Self::Request) -> Option<Self::Response> {
        // Each broker lists the groups it coordinates (Kafka's admin clients ask them all).
        if coordinating(call).await.is_err() {
            return Some(ListGroupsResponse::default());
        }
        // DESCRIBE on the cluster lists every group; otherwise those the principal may
        // describe.
        let access = call.access();
        let mut response = list_groups(&call.broker.groups_of(&call.scope), call.version);
        if !access.cluster(Operation::Describe) {
            response
                .groups
                .retain(|g| access.group(Operation::Describe, g.group_id.as_str()));
        }
        Some(response)
    }
}

/// DescribeGroups versions 0 to 5.
pub(crate) struct DescribeGroups;

impl Api for DescribeGroups {
    type Request = kafka_protocol::messages::DescribeGroupsRequest;
    type Response = kafka_protocol::messages::DescribeGroupsResponse;
    const KEY: ApiKey = ApiKey::DescribeGroups;
    const VERSIONS: (i16, i16) = (0, 5);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        if let Err(code) = coordinating(call).await {
            let groups = request
                .groups
                .into_iter()
                .map(|id| {
                    DescribedGroup::default()
                        .with_group_id(id)
                        .with_error_code(code)
                })
                .collect();
            return Some(DescribeGroupsResponse::default().with_groups(groups));
        }
        let access = call.access();
        let mut response =
            describe_groups(&call.broker.groups_of(&call.scope), request, call.version);
        for group in &mut response.groups {
            if !access.group(Operation::Describe, group.group_id.as_str()) {
                *group = DescribedGroup::default()
                    .with_group_id(group.group_id.clone())
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
        }
        Some(response)
    }
}

/// DeleteGroups versions 0 to 2.
pub(crate) struct DeleteGroups;

impl Api for DeleteGroups {
    type Request = kafka_protocol::messages::DeleteGroupsRequest;
    type Response = kafka_protocol::messages::DeleteGroupsResponse;
    const KEY: ApiKey = ApiKey::DeleteGroups;
    const VERSIONS: (i16, i16) = (0, 2);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        if let Err(code) = coordinating(call).await {
            let results = request
                .groups_names
                .into_iter()
                .map(|id| {
                    DeletableGroupResult::default()
                        .with_group_id(id)
                        .with_error_code(code)
                })
                .collect();
            return Some(DeleteGroupsResponse::default().with_results(results));
        }
        let access = call.access();
        let mut request = request;
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.groups_names)
            .into_iter()
            .partition(|id| access.group(Operation::Delete, id.as_str()));
        request.groups_names = allowed;
        let mut response =
            delete_groups(call.broker, &call.broker.groups_of(&call.scope), request).await;
        response.results.extend(denied.into_iter().map(|id| {
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(ResponseError::GroupAuthorizationFailed.code())
        }));
        Some(response)
    }
}

/// OffsetDelete versions 0 to 0.
pub(crate) struct OffsetDelete;

impl Api for OffsetDelete {
    type Request = kafka_protocol::messages::OffsetDeleteRequest;
    type Response = kafka_protocol::messages::OffsetDeleteResponse;
    const KEY: ApiKey = ApiKey::OffsetDelete;
    const VERSIONS: (i16, i16) = (0, 0);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // DELETE on the group, READ on each topic: a denied topic's offsets stay.
        let access = call.access();
        if !access.group(Operation::Delete, request.group_id.as_str()) {
            return Some(
                OffsetDeleteResponse::default()
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
            );
        }
        if let Err(code) = coordinating(call).await {
            return Some(OffsetDeleteResponse::default().with_error_code(code));
        }
        let mut request = request;
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| access.topic(Operation::Read, t.name.as_str()));
        request.topics = allowed;
        let mut response =
            offset_delete(call.broker, &call.broker.groups_of(&call.scope), request).await;
        if response.error_code == 0 {
            response.topics.extend(denied.into_iter().map(|t| {
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            })
                            .collect(),
                    )
            }));
        }
        Some(response)
    }
}
