//! SASL_SSL beside PLAINTEXT: the same workloads through one `skein dev`'s two listeners,
//! in rounds that alternate which listener goes first, each round's topics deleted after it
//! so that neither listener inherits the other's dirty pages. Each figure is the median of
//! the rounds, with the broker's CPU time per GiB beside it: what TLS costs the broker,
//! apart from what it costs the client sharing the machine.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::brokers::{BrokerUnderTest, ChildBroker};
use crate::workload::{self, ProduceSpec, Throughput};

/// The ratio of SASL_SSL to PLAINTEXT throughput aimed for, at 1 KiB records.
pub const SASL_SSL_TARGET: f64 = 0.7;

/// Producers sending at once in the comparison's second produce run.
pub const SECURED_PRODUCERS: u64 = 3;

/// Rounds over both listeners; the figures are their medians.
pub const SECURED_ROUNDS: usize = 3;

/// The workloads compared, in the order each round runs them.
const WORKLOADS: [&str; 4] = [
    "produce, librdkafka",
    "produce, librdkafka x3",
    "produce, skein-client",
    "consume, librdkafka",
];

/// One run of a workload: its throughput and the broker's CPU time (user and system, all
/// threads) while it ran.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub throughput: Throughput,
    pub broker_cpu: Option<Duration>,
}

impl Measured {
    /// Broker CPU milliseconds per GiB of record values moved.
    fn cpu_ms_per_gib(&self) -> Option<f64> {
        let gib = self.throughput.bytes as f64 / f64::from(1u32 << 30);
        self.broker_cpu
            .filter(|_| gib > 0.0)
            .map(|cpu| cpu.as_secs_f64() * 1000.0 / gib)
    }
}

/// One workload's runs on each listener, one per round.
#[derive(Debug, Clone)]
pub struct SecuredWorkload {
    pub label: &'static str,
    pub plain: Vec<Measured>,
    pub secured: Vec<Measured>,
}

/// The comparison's figures.
#[derive(Debug, Clone)]
pub struct SecuredRow {
    pub spec: ProduceSpec,
    pub workloads: Vec<SecuredWorkload>,
}

/// Runs the comparison with `--mib` of 1 KiB records per run (acks=all, 4 partitions).
pub(crate) fn measure_secured(binary: &Path, dir: &Path, bytes: u64) -> anyhow::Result<SecuredRow> {
    let dir = dir.join("secured");
    let (broker, secured) = ChildBroker::skein_secured(binary, &dir)?;
    let plain = broker.bootstrap();
    let spec = ProduceSpec {
        acks: -1,
        record_bytes: 1024,
        partitions: 4,
        records: bytes / 1024,
        replication: 1,
    };
    let mut workloads: Vec<SecuredWorkload> = WORKLOADS
        .iter()
        .map(|&label| SecuredWorkload {
            label,
            plain: Vec::new(),
            secured: Vec::new(),
        })
        .collect();
    for round in 0..SECURED_ROUNDS {
        let listeners = [("PLAINTEXT", &plain, false), ("SASL_SSL", &secured, true)];
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for (label, bootstrap, is_secured) in order.map(|i| listeners[i]) {
            let topic = format!("bench-{}-r{round}", label.to_lowercase().replace('_', "-"));
            let parallel = format!("{topic}-parallel");
            let native = format!("{topic}-native");
            let measure = |run: &dyn Fn() -> anyhow::Result<Throughput>| {
                let before = broker.cpu_time();
                let throughput = run()?;
                let broker_cpu = broker
                    .cpu_time()
                    .zip(before)
                    .map(|(after, before)| after.saturating_sub(before));
                anyhow::Ok(Measured {
                    throughput,
                    broker_cpu,
                })
            };
            eprintln!("skein: round {round}, {label}: produce {spec}");
            let produced = measure(&|| workload::produce(bootstrap, &topic, &spec))?;
            eprintln!("skein: round {round}, {label}: produce, {SECURED_PRODUCERS} producers");
            let spread = measure(&|| {
                workload::produce_with(bootstrap, &parallel, &spec, SECURED_PRODUCERS)
            })?;
            eprintln!("skein: round {round}, {label}: produce with skein-client");
            let own = measure(&|| workload::produce_native(bootstrap, &native, &spec))?;
            eprintln!("skein: round {round}, {label}: consume");
            let consumed =
                measure(&|| workload::consume(bootstrap, &topic, spec.partitions, spec.records))?;
            for (workload, run) in workloads.iter_mut().zip([produced, spread, own, consumed]) {
                if is_secured {
                    workload.secured.push(run);
                } else {
                    workload.plain.push(run);
                }
            }
            workload::delete_topics(&plain, &[&topic, &parallel, &native])?;
        }
    }
    Ok(SecuredRow { spec, workloads })
}

/// The median of `values` (the upper one of an even count); `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

impl fmt::Display for SecuredRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "SASL_SSL (TLS 1.3, SASL/PLAIN) beside PLAINTEXT, same broker, {}, median of {} \
             rounds (target >= {SASL_SSL_TARGET})",
            self.spec, SECURED_ROUNDS
        )?;
        writeln!(
            f,
            "  {:<24} {:>11} {:>11} {:>6} {:>11}   {:>9} {:>9} {:>6}",
            "MiB/s", "PLAINTEXT", "SASL_SSL", "ratio", "per round", "cpu/GiB", "TLS", "ratio"
        )?;
        for workload in &self.workloads {
            let rate = |runs: &[Measured]| {
                median(runs.iter().map(|r| r.throughput.mib_per_sec()).collect())
            };
            let cpu = |runs: &[Measured]| {
                median(runs.iter().filter_map(Measured::cpu_ms_per_gib).collect())
            };
            let (plain, secured) = (rate(&workload.plain), rate(&workload.secured));
            let rounds: Vec<String> = workload
                .plain
                .iter()
                .zip(&workload.secured)
                .map(|(p, s)| {
                    format!(
                        "{:.2}",
                        s.throughput.mib_per_sec() / p.throughput.mib_per_sec()
                    )
                })
                .collect();
            let (plain_cpu, secured_cpu) = (cpu(&workload.plain), cpu(&workload.secured));
            let shown = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
            let ratio = |a: Option<f64>, b: Option<f64>| {
                a.zip(b)
                    .map_or("-".to_owned(), |(a, b)| format!("{:.2}", a / b))
            };
            writeln!(
                f,
                "  {:<24} {:>11} {:>11} {:>6} {:>11}   {:>9} {:>9} {:>6}",
                workload.label,
                shown(plain),
                shown(secured),
                ratio(secured, plain),
                rounds.join(" "),
                shown(plain_cpu),
                shown(secured_cpu),
                // Broker CPU per GiB, PLAINTEXT over SASL_SSL: the share of its plaintext
                // capacity a TLS-bound broker keeps.
                ratio(plain_cpu, secured_cpu),
            )?;
        }
        writeln!(
            f,
            "  (cpu/GiB: the broker's CPU ms per GiB of record values, PLAINTEXT then SASL_SSL; \
             its ratio is PLAINTEXT/SASL_SSL)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(4.0));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn cpu_per_gib_scales_by_the_bytes_moved() {
        let run = Measured {
            throughput: Throughput {
                records: 1,
                bytes: 1 << 29,
                elapsed: Duration::from_secs(1),
            },
            broker_cpu: Some(Duration::from_millis(250)),
        };
        assert_eq!(run.cpu_ms_per_gib(), Some(500.0));
    }
}
