//! Consumer group formation: two members subscribe at the same moment; the time runs until
//! each holds its final half of the partitions.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::bail;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::{client_config, create_topic};

/// One group-formation measurement.
#[derive(Debug, Clone, Copy)]
pub struct GroupSpec {
    pub partitions: i32,
    /// The members' `heartbeat.interval.ms`: a member already in the group learns of a
    /// rebalance from its next heartbeat.
    pub heartbeat_ms: u32,
    pub trials: u32,
}

impl GroupSpec {
    /// librdkafka's default heartbeat interval, and a short one.
    pub const HEARTBEATS: [u32; 2] = [3000, 100];
}

/// For each trial, a new group of two members over a new topic; returns the time from
/// the subscription until both members hold `partitions / 2` partitions.
pub fn group_assignment(bootstrap: &str, spec: &GroupSpec) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::new();
    for trial in 0..spec.trials {
        let topic = format!("bench-group-hb{}-{trial}", spec.heartbeat_ms);
        create_topic(bootstrap, &topic, spec.partitions)?;
        times.push(form_group(bootstrap, &topic, spec)?);
    }
    Ok(times)
}

fn form_group(bootstrap: &str, topic: &str, spec: &GroupSpec) -> anyhow::Result<Duration> {
    let half = spec.partitions as usize / 2;
    let held = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let mut members = Vec::new();
    for index in 0..2 {
        let consumer: BaseConsumer = client_config(bootstrap)
            .set("group.id", format!("{topic}-group"))
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", spec.heartbeat_ms.to_string())
            .set("partition.assignment.strategy", "range")
            .set("enable.auto.commit", "false")
            .create()?;
        let (held, done, start, topic) = (
            Arc::clone(&held),
            Arc::clone(&done),
            Arc::clone(&start),
            topic.to_owned(),
        );
        members.push(std::thread::spawn(move || -> anyhow::Result<()> {
            start.wait();
            consumer.subscribe(&[&topic])?;
            while !done.load(Ordering::Relaxed) {
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(5)) {
                    bail!("member {index}: {e}");
                }
                held[index].store(consumer.assignment()?.count(), Ordering::Relaxed);
            }
            consumer.unsubscribe();
            Ok(())
        }));
    }
    start.wait();
    let began = Instant::now();
    let formed = loop {
        if held.iter().all(|h| h.load(Ordering::Relaxed) == half) {
            break Some(began.elapsed());
        }
        if began.elapsed() > Duration::from_secs(60) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    done.store(true, Ordering::Relaxed);
    for member in members {
        member
            .join()
            .map_err(|_| anyhow::anyhow!("group member panicked"))??;
    }
    formed.ok_or_else(|| anyhow::anyhow!("the group of two did not split {topic} in 60 s"))
}
