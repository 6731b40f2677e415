//! ISR changes, made by each partition's leader as Kafka's are: a follower that has not
//! caught up within `replica.lag.time.max.ms` leaves the ISR, and a replica whose log has
//! reached the high watermark joins it. The change goes to the controller (AlterPartition),
//! which applies it only while this broker still leads the partition in the epochs it
//! names; once stored, the leader uses it at once (a shrunk ISR may let the high watermark,
//! and the `acks=all` writes waiting on it, move on).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::controller_link::{ControllerLink, Reason};
use crate::Broker;

/// How often the leader looks for ISR changes.
const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How long a refused or failed change waits before it is asked again for the same
/// partition epoch.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Runs until the returned task is aborted.
pub(crate) fn spawn(broker: Arc<Broker>, link: ControllerLink) -> JoinHandle<()> {
    tokio::spawn(async move {
        // (topic, partition) -> (partition epoch asked at, when).
        let mut asked: HashMap<(String, i32), (i32, Instant)> = HashMap::new();
        let lag_max = broker.config.replica_lag_time_max;
        loop {
            tokio::time::sleep(CHECK_EVERY.min(lag_max / 2)).await;
            let led = broker.replicas.led();
            // Partitions no longer led here (moved, deleted) are forgotten.
            asked.retain(|key, _| led.contains(key));
            for (topic, index) in led {
                let Ok(partition) = broker.replicas.leader_of_any(&topic, index, -1) else {
                    continue;
                };
                let Some(isr) = partition.wanted_isr(lag_max) else {
                    continue;
                };
                let placement = partition.placement().clone();
                let key = (topic.clone(), index);
                if asked.get(&key).is_some_and(|(epoch, at)| {
                    *epoch == placement.partition_epoch && at.elapsed() < RETRY_AFTER
                }) {
                    continue;
                }
                asked.insert(key, (placement.partition_epoch, Instant::now()));
                let topic_id = partition.topic_id();
                drop(partition);
                let changed = link
                    .alter_partition(
                        &topic,
                        index,
                        placement.leader_epoch,
                        placement.partition_epoch,
                        isr.clone(),
                    )
                    .await;
                match changed {
                    Ok(stored) => {
                        broker
                            .metrics
                            .isr_changed(placement.isr.len(), stored.isr.len());
                        tracing::info!(%topic, partition = index, from = ?placement.isr, to = ?stored.isr, "ISR changed");
                        broker.topics.set_partition(&topic, topic_id, index, stored);
                        if let Ok(partition) = broker.replicas.leader_of_any(&topic, index, -1) {
                            partition.recompute_high_watermark();
                        }
                    }
                    Err(e) if e.reason == Reason::Conflict => {
                        tracing::debug!(%topic, partition = index, error = %e, "ISR change fenced; waiting for newer metadata");
                    }
                    Err(e) => {
                        tracing::warn!(%topic, partition = index, error = %e, "ISR change failed");
                    }
                }
            }
        }
    })
}
