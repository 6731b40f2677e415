//! confluent-kafka's view of a cluster of brokers, through `tests/clients/cluster_placement.py`:
//! topics created with a replication factor, partition leaders and ISRs, and a partition's
//! records read back through its leader.

use super::processes::{script, wait_for};

/// The comma-separated addresses of the brokers still running.
pub fn addresses<P>(brokers: &[Option<(P, String)>]) -> String {
    let live: Vec<&str> = brokers.iter().flatten().map(|(_, b)| b.as_str()).collect();
    live.join(",")
}

/// Creates `topic` (CreateTopics, with `configs` as `key=value`), retrying until the
/// cluster accepts it (brokers may still be registering).
pub fn create_topic(
    python: &str,
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    replicas: u32,
    configs: &[&str],
) {
    let (partitions, replicas) = (partitions.to_string(), replicas.to_string());
    let mut args = vec!["create", topic, &partitions, &replicas];
    args.extend_from_slice(configs);
    wait_for(|| {
        let out = script(python, "cluster_placement.py", bootstrap, &args);
        out.contains(r#""error": "ok""#).then_some(())
    });
}

/// A partition's (leader, ISR size) as `bootstrap` answers; leader 0 while it has none
/// (broker ids here start at 1). `None` when the cluster does not answer.
pub fn leader_of(
    python: &str,
    bootstrap: &str,
    topic: &str,
    partition: u32,
) -> Option<(usize, usize)> {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["describe", topic],
    );
    let described: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    let partition = &described["partitions"][partition.to_string()];
    Some((
        usize::try_from(partition["leader"].as_i64()?).unwrap_or(0),
        partition["isr"].as_array()?.len(),
    ))
}

/// Every record value of a partition, from its start to its high watermark.
pub fn values(python: &str, bootstrap: &str, topic: &str, partition: u32) -> Vec<String> {
    let out = script(
        python,
        "cluster_placement.py",
        bootstrap,
        &["values", topic, &partition.to_string()],
    );
    let read: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    read["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}
