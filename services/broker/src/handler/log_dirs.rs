//! DescribeLogDirs: this broker's one log directory (`<data>/logs`), the partitions of the
//! tenant's topics it holds there, led or followed, with their sizes on disk, and the
//! volume's total and free bytes. A partition asked for that this broker does not hold is
//! left out, as Kafka does; the cluster's internal topics are never shown.

use std::collections::{BTreeMap, BTreeSet};

use crate::router::{Api, Call};
use crate::scope::Scope;
use crate::Broker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::protocol::StrBytes;
use skein_log::TopicPartition;

/// The log directory's name as a tenant of a broker serving every tenant is told it.
const TENANT_LOG_DIR: &str = "logs";

/// Kafka's value for a volume size that could not be read.
const UNKNOWN_BYTES: i64 = -1;

pub(crate) fn describe_log_dirs(
    broker: &Broker,
    scope: &Scope,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let dir = broker.config.data_dir.join("logs");
    // `None`: every partition.
    let asked: Option<BTreeMap<String, BTreeSet<i32>>> = request.topics.map(|topics| {
        let mut asked: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for topic in topics {
            asked
                .entry(topic.topic.0.as_str().to_owned())
                .or_default()
                .extend(topic.partitions);
        }
        asked
    });
    let mut held: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    let logs = broker.replicas.logs();
    let node = broker.config.node_id;
    // The tenant's topics as this broker knows them (internal ones are not listed), and of
    // each the partitions placed on this broker; a replica that has not been written yet
    // has no files and 0 bytes.
    for info in broker.topics.list_in(scope) {
        let Some(shown) = scope.strip(&info.name) else {
            continue;
        };
        let wanted_here = asked.as_ref().map(|a| a.get(shown));
        if wanted_here.is_some_and(|p| p.is_none()) {
            continue;
        }
        for index in 0..info.partitions {
            if wanted_here.is_some_and(|p| p.is_some_and(|p| !p.contains(&index))) {
                continue;
            }
            let hosted = info
                .placement_of(index, node)
                .is_some_and(|p| p.replicas.contains(&node));
            if !hosted {
                continue;
            }
            let tp = TopicPartition::new(&info.name, index);
            let size = logs
                .get_for(&tp, info.id)
                .map_or(0, |log| log.read().size_bytes());
            held.entry(shown.to_owned()).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(index)
                    .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
    }
    let (total, usable) = match rustix::fs::statvfs(&dir) {
        Ok(fs) => {
            let bytes =
                |blocks: u64| i64::try_from(blocks.saturating_mul(fs.f_frsize)).unwrap_or(i64::MAX);
            (bytes(fs.f_blocks), bytes(fs.f_bavail))
        }
        Err(_) => (UNKNOWN_BYTES, UNKNOWN_BYTES),
    };
    let topics = held
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                    name,
                )))
                .with_partitions(partitions)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(vec![DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(match scope.tenant() {
            // A tenant of a broker serving every tenant is not shown the broker's paths.
            Some(_) => TENANT_LOG_DIR.to_owned(),
            None => dir.display().to_string(),
        }))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable)])
}

/// DescribeLogDirs versions 1 to 4.
pub(crate) struct DescribeLogDirs;

impl Api for DescribeLogDirs {
    type Request = DescribeLogDirsRequest;
    type Response = DescribeLogDirsResponse;
    const KEY: ApiKey = ApiKey::DescribeLogDirs;
    const VERSIONS: (i16, i16) = (1, 4);

    async fn handle(call: &Call<'_>, request: Self::Request) -> Option<Self::Response> {
        // DESCRIBE on the cluster; older versions have no error field, and get nothing.
        if !call.access().cluster(skein_auth::Operation::Describe) {
            let refused = kafka_protocol::messages::DescribeLogDirsResponse::default();
            return Some(if call.version >= 3 {
                refused.with_error_code(
                    kafka_protocol::ResponseError::ClusterAuthorizationFailed.code(),
                )
            } else {
                refused
            });
        }
        Some(describe_log_dirs(call.broker, &call.scope, request))
    }
}
