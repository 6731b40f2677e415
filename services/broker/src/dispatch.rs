//! API key and version -> handler. The ApiVersions answer is derived from [`SUPPORTED`], so
//! it lists exactly what the handlers implement.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, FetchRequest,
    FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::connection::ConnectionError;
use crate::handler;
use crate::quota::{throttle_ms, Metered};
use crate::Broker;

/// What the connection sends back.
pub(crate) enum Reply {
    Response(Bytes),
    /// `acks=0` produce: no response at all.
    None,
}

/// Every API this broker answers, with the versions it implements.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
];

pub(crate) fn supported(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

pub(crate) async fn dispatch(
    broker: &Broker,
    api_key: i16,
    version: i16,
    frame: Bytes,
    peer: &str,
) -> Result<Reply, ConnectionError> {
    let key = ApiKey::try_from(api_key).map_err(|()| ConnectionError::UnknownApiKey { api_key })?;
    let in_range = supported(key).is_some_and(|(min, max)| (min..=max).contains(&version));
    if key == ApiKey::ApiVersions && !in_range {
        // Clients learn the supported range from this answer, in the v0 format every
        // client can read.
        let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let body = handler::api_versions::unsupported_version();
        return encode(ApiKey::ApiVersions, 0, correlation_id, &body);
    }
    if !in_range {
        return Err(ConnectionError::UnsupportedVersion { api_key, version });
    }
    let malformed = |e: anyhow::Error| ConnectionError::Malformed {
        api_key,
        version,
        reason: e.to_string(),
    };
    let mut buf = frame;
    let header =
        RequestHeader::decode(&mut buf, key.request_header_version(version)).map_err(malformed)?;
    let id = header.correlation_id;
    let client_id = header
        .client_id
        .as_ref()
        .map_or_else(String::new, |c| c.as_str().to_owned());
    // Over a byte quota, a produce or fetch waits here: that holds its connection back, as
    // Kafka mutes a throttled channel.
    let hold = match key {
        ApiKey::Produce => broker.quotas.debt(Metered::ProduceBytes),
        ApiKey::Fetch => broker.quotas.debt(Metered::FetchBytes),
        _ => Duration::ZERO,
    };
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    match key {
        ApiKey::ApiVersions => encode(key, version, id, &handler::api_versions::handle()),
        ApiKey::Metadata => {
            let request = MetadataRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::metadata::handle(broker, request, version).await,
            )
        }
        ApiKey::Produce => {
            let size = buf.len() as u64;
            let request = ProduceRequest::decode(&mut buf, version).map_err(malformed)?;
            let acks = request.acks;
            let mut response = handler::produce::handle(broker, request, version);
            // Written, then charged: the throttle applies to what comes next.
            let throttle = broker.quotas.charge(Metered::ProduceBytes, size);
            if acks == 0 {
                return Ok(Reply::None);
            }
            response.throttle_time_ms = throttle_ms(throttle);
            encode(key, version, id, &response)
        }
        ApiKey::Fetch => {
            let request = FetchRequest::decode(&mut buf, version).map_err(malformed)?;
            let mut response = handler::fetch::handle(broker, request, version).await;
            let size: usize = response
                .responses
                .iter()
                .flat_map(|topic| &topic.partitions)
                .filter_map(|partition| partition.records.as_ref().map(Bytes::len))
                .sum();
            let throttle = broker.quotas.charge(Metered::FetchBytes, size as u64);
            response.throttle_time_ms = throttle_ms(throttle);
            encode(key, version, id, &response)
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::list_offsets::handle(broker, request, version),
            )
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::admin::create_topics(broker, request, version).await,
            )
        }
        ApiKey::DeleteTopics => {
            let request = DeleteTopicsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::admin::delete_topics(broker, request, version).await,
            )
        }
        ApiKey::CreatePartitions => {
            let request = CreatePartitionsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::admin::create_partitions(broker, request).await,
            )
        }
        ApiKey::DeleteRecords => {
            let request = DeleteRecordsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::admin::delete_records(broker, request),
            )
        }
        ApiKey::DescribeCluster => {
            DescribeClusterRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(key, version, id, &handler::admin::describe_cluster(broker))
        }
        ApiKey::FindCoordinator => {
            let request = FindCoordinatorRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::find_coordinator(broker, request, version),
            )
        }
        ApiKey::JoinGroup => {
            let request = JoinGroupRequest::decode(&mut buf, version).map_err(malformed)?;
            let response =
                handler::group::join_group(broker, request, version, &client_id, peer).await;
            encode(key, version, id, &response)
        }
        ApiKey::SyncGroup => {
            let request = SyncGroupRequest::decode(&mut buf, version).map_err(malformed)?;
            let response = handler::group::sync_group(broker, request, version).await;
            encode(key, version, id, &response)
        }
        ApiKey::Heartbeat => {
            let request = HeartbeatRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::heartbeat(broker, request),
            )
        }
        ApiKey::LeaveGroup => {
            let request = LeaveGroupRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::leave_group(broker, request, version),
            )
        }
        ApiKey::OffsetCommit => {
            let request = OffsetCommitRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::offset_commit(broker, request, version),
            )
        }
        ApiKey::OffsetFetch => {
            let request = OffsetFetchRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::offset_fetch(broker, request, version),
            )
        }
        ApiKey::ListGroups => {
            ListGroupsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::list_groups(broker, version),
            )
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::describe_groups(broker, request, version),
            )
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::init_producer_id::handle(broker, request).await,
            )
        }
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::configs::describe(broker, request),
            )
        }
        ApiKey::IncrementalAlterConfigs => {
            let request =
                IncrementalAlterConfigsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::configs::incremental_alter(broker, request).await,
            )
        }
        ApiKey::DeleteGroups => {
            let request = DeleteGroupsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::delete_groups(broker, request),
            )
        }
        ApiKey::OffsetDelete => {
            let request = OffsetDeleteRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::group::offset_delete(broker, request),
            )
        }
        ApiKey::DescribeAcls => {
            let request = DescribeAclsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(key, version, id, &handler::acls::describe(broker, request))
        }
        ApiKey::CreateAcls => {
            let request = CreateAclsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::acls::create(broker, request).await,
            )
        }
        ApiKey::DeleteAcls => {
            let request = DeleteAclsRequest::decode(&mut buf, version).map_err(malformed)?;
            encode(
                key,
                version,
                id,
                &handler::acls::delete(broker, request).await,
            )
        }
        _ => Err(ConnectionError::UnsupportedVersion { api_key, version }),
    }
}

fn encode<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<Reply, ConnectionError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut out = BytesMut::new();
    let fail = |e: anyhow::Error| ConnectionError::Malformed {
        api_key: key as i16,
        version,
        reason: format!("response encoding failed: {e}"),
    };
    header
        .encode(&mut out, key.response_header_version(version))
        .map_err(fail)?;
    body.encode(&mut out, version).map_err(fail)?;
    Ok(Reply::Response(out.freeze()))
}
