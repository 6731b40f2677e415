//! The replica fetcher: how a follower copies its leaders' logs, with the Fetch API and a
//! replica id as Kafka's followers do, over `skein-client` connections.
//!
//! One task per leader broker fetches every partition this broker follows from it. Before
//! it fetches a partition in a leader epoch it has not reconciled, it asks the leader where
//! its own latest epoch ends (OffsetForLeaderEpoch) and truncates its log there, so a tail
//! the leader does not share is removed before anything is copied after it. A supervisor
//! starts and stops the tasks as leadership moves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_client::{ClientConfig, Connection};
use skein_replication::{truncation_point, EpochAnswer};
use tokio::task::JoinHandle;

use crate::replica::PartitionError;
use crate::Broker;

/// How long a leader may hold a follower's fetch when it has nothing new.
const MAX_WAIT: Duration = Duration::from_millis(500);
/// How often the supervisor looks for leadership changes, and a task with nothing to fetch
/// looks again.
const RECHECK: Duration = Duration::from_millis(200);
/// The most bytes one fetch copies, and from one partition.
const MAX_BYTES: i32 = 16 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 4 * 1024 * 1024;

/// Runs the fetchers until the returned task is aborted.
pub(crate) fn spawn(broker: Arc<Broker>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut fetchers: HashMap<i32, (String, AbortOnDrop)> = HashMap::new();
        loop {
            let followed = broker.replicas.followed();
            let addresses: BTreeMap<i32, String> = broker
                .topics
                .brokers()
                .into_iter()
                .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
                .collect();
            fetchers.retain(|leader, (address, _)| {
                followed.contains_key(leader) && addresses.get(leader) == Some(address)
            });
            for leader in followed.keys() {
                if fetchers.contains_key(leader) {
                    continue;
                }
                // A leader that is not live has no address: nothing to fetch until the
                // controller names another.
                let Some(address) = addresses.get(leader) else {
                    continue;
                };
                let task = tokio::spawn(follow(Arc::clone(&broker), *leader, address.clone()));
                fetchers.insert(*leader, (address.clone(), AbortOnDrop(task)));
            }
            tokio::time::sleep(RECHECK).await;
        }
    })
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A client of another broker's inter-broker listener at `address`, as this broker.
pub(crate) fn inter_broker_client(
    broker: &Broker,
    address: &str,
    client_id: String,
) -> ClientConfig {
    let mut config = ClientConfig::new([address.to_owned()]);
    config.client_id = client_id;
    // Brokers present their controller credential to each other on every inter-broker
    // listener, SASL or not: the inter-broker APIs are served to a proven broker alone.
    config.sasl_plain = broker
        .controller
        .as_ref()
        .and_then(|link| link.credential_token())
        .map(|token| skein_client::SaslPlain {
            authorization_id: String::new(),
            username: crate::sasl::BROKER_USER.to_owned(),
            password: token.to_owned(),
        });
    // Over SASL_SSL the leader's certificate is checked against the inter-broker authorities
    // and the address the leader registered.
    config.tls = broker
        .config
        .inter_broker_tls
        .as_ref()
        .map(|tls| tls.trust.clone());
    config
}

/// Copies every partition this broker follows from `leader`, reconnecting after failures.
async fn follow(broker: Arc<Broker>, leader: i32, address: String) {
    let node = broker.config.node_id;
    let mut config = inter_broker_client(&broker, &address, format!("skein-replica-{node}"));
    // An answer holds at most MAX_BYTES, plus one batch over for its first partition.
    config.max_response_bytes = 2 * MAX_BYTES as usize;
    loop {
        let connection = match Connection::connect(&address, &config).await {
            Ok(connection) => connection,
            Err(e) => {
                tracing::debug!(leader, %address, error = %e, "replica fetcher cannot connect");
                tokio::time::sleep(MAX_WAIT).await;
                continue;
            }
        };
        // (topic, partition) -> the leader epoch its log was reconciled in.
        let mut reconciled: HashMap<(String, i32), i32> = HashMap::new();
        loop {
            let partitions = broker
                .replicas
                .followed()
                .remove(&leader)
                .unwrap_or_default();
            if partitions.is_empty() {
                tokio::time::sleep(RECHECK).await;
                continue;
            }
            let result = async {
                reconcile(&broker, leader, &connection, &partitions, &mut reconciled).await?;
                fetch(&broker, leader, &connection, &partitions, &mut reconciled).await
            }
            .await;
            if let Err(e) = result {
                tracing::debug!(leader, %address, error = %e, "replica fetch failed; reconnecting");
                break;
            }
        }
        tokio::time::sleep(MAX_WAIT).await;
    }
}

/// Truncates each partition not yet reconciled in its current leader epoch to where the
/// leader says its latest epoch ends (KIP-101, KIP-279).
async fn reconcile(
    broker: &Broker,
    leader: i32,
    connection: &Connection,
    partitions: &[(String, i32)],
    reconciled: &mut HashMap<(String, i32), i32>,
) -> skein_client::Result<()> {
    let mut asked = Vec::new();
    for (topic, index) in partitions {
        let Ok(partition) = broker.replicas.follower(topic, *index) else {
            continue;
        };
        let (now_leader, epoch) = partition.leader();
        if now_leader != leader || reconciled.get(&(topic.clone(), *index)) == Some(&epoch) {
            continue;
        }
        match partition.latest_epoch() {
            // An empty log has nothing to disagree about.
            None => {
                reconciled.insert((topic.clone(), *index), epoch);
            }
            Some(latest) => asked.push((topic.clone(), *index, epoch, latest)),
        }
    }
    if asked.is_empty() {
        return Ok(());
    }
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for (topic, index, epoch, latest) in &asked {
        let partition = OffsetForLeaderPartition::default()
            .with_partition(*index)
            .with_current_leader_epoch(*epoch)
            .with_leader_epoch(*latest);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                OffsetForLeaderTopic::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(broker.config.node_id))
        .with_topics(topics);
    let response = connection.send(&request).await?;
    for (topic, index, epoch, latest) in asked {
        let answer = response
            .topics
            .iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition == index);
        let Some(answer) = answer else { continue };
        if answer.error_code != 0 {
            // The metadata may be behind the leader's; asked again next round.
            continue;
        }
        let Ok(partition) = broker.replicas.follower(&topic, index) else {
            continue;
        };
        let log_end = partition.log_end();
        let answer = EpochAnswer {
            leader_epoch: answer.leader_epoch,
            end_offset: answer.end_offset,
        };
        let point = truncation_point(answer, latest, log_end, &partition);
        if point < log_end {
            tracing::info!(%topic, partition = index, from = log_end, to = point, epoch,
                "truncating a divergent tail to the leader's epoch boundary");
        }
        if let Err(e) = partition.truncate_to(point, (leader, epoch)) {
            if !matches!(e, PartitionError::LeaderMoved { .. }) {
                tracing::warn!(%topic, partition = index, error = %e, "truncation failed");
            }
            continue;
        }
        reconciled.insert((topic, index), epoch);
    }
    Ok(())
}

/// One fetch of every reconciled partition from the leader, appended as it came.
async fn fetch(
    broker: &Broker,
    leader: i32,
    connection: &Connection,
    partitions: &[(String, i32)],
    reconciled: &mut HashMap<(String, i32), i32>,
) -> skein_client::Result<()> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    // (topic, partition) -> the leader epoch it was fetched in.
    let mut asked: HashMap<(String, i32), i32> = HashMap::new();
    // Over `follower.replication.throttled.rate`, throttled partitions sit out this fetch.
    let throttle_spent = broker.follower_throttle.available() == Some(0);
    let mut throttled: Vec<(String, i32)> = Vec::new();
    for (topic, index) in partitions {
        let Ok(partition) = broker.replicas.follower(topic, *index) else {
            continue;
        };
        let (now_leader, epoch) = partition.leader();
        if now_leader != leader || reconciled.get(&(topic.clone(), *index)) != Some(&epoch) {
            continue;
        }
        if partition.throttled() {
            if throttle_spent {
                continue;
            }
            throttled.push((topic.clone(), *index));
        }
        asked.insert((topic.clone(), *index), epoch);
        let wanted = FetchPartition::default()
            .with_partition(*index)
            .with_current_leader_epoch(epoch)
            .with_fetch_offset(partition.log_end())
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(wanted),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(vec![wanted]),
            ),
        }
    }
    if topics.is_empty() {
        tokio::time::sleep(RECHECK).await;
        return Ok(());
    }
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(broker.config.node_id))
        .with_max_wait_ms(i32::try_from(MAX_WAIT.as_millis()).unwrap_or(500))
        .with_min_bytes(1)
        .with_max_bytes(MAX_BYTES)
        .with_session_epoch(-1)
        .with_topics(topics);
    let timeout = MAX_WAIT + Duration::from_secs(30);
    let response: FetchResponse = connection.send_with_timeout(&request, timeout).await?;
    for topic in &response.responses {
        let name = topic.topic.0.as_str();
        for data in &topic.partitions {
            let Ok(partition) = broker.replicas.follower(name, data.partition_index) else {
                continue;
            };
            let key = (name.to_owned(), data.partition_index);
            let Some(&epoch) = asked.get(&key) else {
                continue;
            };
            match ResponseError::try_from_code(data.error_code) {
                None => {
                    let records = data.records.as_deref().unwrap_or_default();
                    if throttled.contains(&key) {
                        broker.follower_throttle.spend(records.len());
                    }
                    match partition.append(records, data.high_watermark, (leader, epoch)) {
                        Ok(()) => {}
                        // Leadership moved while the fetch was out: the answer is dropped.
                        Err(PartitionError::LeaderMoved { .. }) => {}
                        Err(e) => {
                            tracing::warn!(topic = %name, partition = data.partition_index,
                                error = %e, "replicated batches refused; reconciling again");
                            reconciled.remove(&key);
                        }
                    }
                }
                Some(ResponseError::OffsetOutOfRange)
                    if partition.log_end() < data.log_start_offset =>
                {
                    // The leader's log starts after ours ends (retention): start over there.
                    match partition.restart_at(data.log_start_offset, (leader, epoch)) {
                        Ok(()) | Err(PartitionError::LeaderMoved { .. }) => {}
                        Err(e) => tracing::warn!(topic = %name,
                            partition = data.partition_index, error = %e,
                            "could not restart the replica at the leader's log start"),
                    }
                }
                Some(ResponseError::OffsetOutOfRange) => {
                    // Ours ends past the leader's end: a tail the leader does not have, cut
                    // by reconciling again (never by emptying a log that may hold committed
                    // records).
                    reconciled.remove(&key);
                }
                Some(error) => {
                    tracing::debug!(topic = %name, partition = data.partition_index, ?error,
                        "leader refused a replica fetch");
                    reconciled.remove(&key);
                }
            }
        }
    }
    Ok(())
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}
