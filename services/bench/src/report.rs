//! The figures of one run, printed with the ratios the targets are stated in.

use std::fmt;
use std::time::Duration;

use crate::workload::{
    record_size, GatewayApi, GatewayRun, GatewaySpec, GroupSpec, Latency, ProduceSpec, Throughput,
    TxnSpec,
};

/// The ratio of gateway to native gRPC streaming produce throughput aimed for.
pub const GRPC_PRODUCE_TARGET: f64 = 0.5;

/// The ratio of transactional to idempotent produce throughput aimed for.
pub const TRANSACTIONAL_TARGET: f64 = 0.7;

/// Transactional produce beside idempotent produce of the same records, same run.
#[derive(Debug, Clone, Copy)]
pub struct TxnRow {
    pub broker: &'static str,
    pub spec: TxnSpec,
    pub transactional: Throughput,
    pub idempotent: Throughput,
}

impl TxnRow {
    pub fn ratio(&self) -> f64 {
        self.transactional.records_per_sec() / self.idempotent.records_per_sec()
    }
}

impl fmt::Display for TxnRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cell =
            |t: &Throughput| format!("{:.1} MiB/s {:.0}/s", t.mib_per_sec(), t.records_per_sec());
        let met = if self.ratio() >= TRANSACTIONAL_TARGET {
            "met"
        } else {
            "NOT met"
        };
        writeln!(
            f,
            "{} on {}: transactional {}, idempotent {}, ratio {:.2} \
             (target >= {TRANSACTIONAL_TARGET}: {met})",
            self.spec,
            self.broker,
            cell(&self.transactional),
            cell(&self.idempotent),
            self.ratio()
        )
    }
}

/// One gateway run beside librdkafka moving the same records.
#[derive(Debug, Clone, Copy)]
pub struct GatewayRow {
    pub broker: &'static str,
    pub api: GatewayApi,
    pub spec: GatewaySpec,
    pub gateway: GatewayRun,
    /// librdkafka producing (acks=all) or consuming the same records (timed as the gateway
    /// run is).
    pub native: Throughput,
    /// For consume, librdkafka's time from assignment to the first record.
    pub native_to_first: Option<Duration>,
}

impl GatewayRow {
    /// Gateway throughput over native throughput.
    pub fn ratio(&self) -> f64 {
        self.gateway.throughput.records_per_sec() / self.native.records_per_sec()
    }
}

/// What a CPU row measured the broker doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Produce,
    Consume,
    ReplayProduce,
    ReplayFetch,
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Produce => "librdkafka produce",
            Self::Consume => "librdkafka consume",
            Self::ReplayProduce => "replayed produce",
            Self::ReplayFetch => "replayed fetch",
        })
    }
}

/// The broker's CPU time (user and system, from `/proc`) over one run.
#[derive(Debug, Clone, Copy)]
pub struct CpuRow {
    pub broker: &'static str,
    pub work: Work,
    pub spec: ProduceSpec,
    pub cpu: Duration,
    pub moved: Throughput,
}

impl CpuRow {
    /// CPU seconds per GiB of record values.
    pub fn per_gib(&self) -> f64 {
        self.cpu.as_secs_f64() / (self.moved.bytes as f64 / f64::from(1u32 << 30))
    }

    /// CPU seconds per million records.
    pub fn per_million(&self) -> f64 {
        self.cpu.as_secs_f64() / (self.moved.records as f64 / 1e6)
    }
}

/// Everything one `skein-bench broker` run measured.
#[derive(Debug)]
pub struct Report {
    pub loopback: Throughput,
    /// (record bytes, the log engine appending them).
    pub raw_append: Vec<(usize, Throughput)>,
    pub produced: Vec<(&'static str, ProduceSpec, Throughput)>,
    pub consumed: Vec<(&'static str, ProduceSpec, Throughput)>,
    /// The replayed load generator's produce and fetch.
    pub replay_produced: Vec<(&'static str, ProduceSpec, Throughput)>,
    pub replay_fetched: Vec<(&'static str, ProduceSpec, Throughput)>,
    pub cpu: Vec<CpuRow>,
    pub latencies: Vec<(&'static str, Latency)>,
    pub groups: Vec<(&'static str, GroupSpec, Vec<Duration>)>,
    pub gateway: Vec<GatewayRow>,
    pub secured: Vec<crate::secured::SecuredRow>,
    pub transactions: Vec<TxnRow>,
}

impl Report {
    pub(crate) fn new(loopback: Throughput, raw_append: Vec<(usize, Throughput)>) -> Self {
        Self {
            loopback,
            raw_append,
            produced: Vec::new(),
            consumed: Vec::new(),
            replay_produced: Vec::new(),
            replay_fetched: Vec::new(),
            cpu: Vec::new(),
            latencies: Vec::new(),
            groups: Vec::new(),
            gateway: Vec::new(),
            secured: Vec::new(),
            transactions: Vec::new(),
        }
    }

    pub(crate) fn transactions(&mut self, row: TxnRow) {
        self.transactions.push(row);
    }

    pub(crate) fn secured(&mut self, row: crate::secured::SecuredRow) {
        self.secured.push(row);
    }

    pub(crate) fn gateway(&mut self, row: GatewayRow) {
        self.gateway.push(row);
    }

    pub(crate) fn produce(&mut self, broker: &'static str, spec: &ProduceSpec, t: Throughput) {
        self.produced.push((broker, *spec, t));
    }

    pub(crate) fn consume(&mut self, broker: &'static str, spec: &ProduceSpec, t: Throughput) {
        self.consumed.push((broker, *spec, t));
    }

    pub(crate) fn replayed_produce(
        &mut self,
        broker: &'static str,
        spec: &ProduceSpec,
        t: Throughput,
    ) {
        self.replay_produced.push((broker, *spec, t));
    }

    pub(crate) fn replayed_fetch(
        &mut self,
        broker: &'static str,
        spec: &ProduceSpec,
        t: Throughput,
    ) {
        self.replay_fetched.push((broker, *spec, t));
    }

    /// The broker's CPU time since `before`, where it can be read, for moving `moved`.
    pub(crate) fn cpu(
        &mut self,
        broker: &dyn crate::BrokerUnderTest,
        before: Option<Duration>,
        work: Work,
        spec: &ProduceSpec,
        moved: &Throughput,
    ) {
        if let (Some(before), Some(after)) = (before, broker.cpu_time()) {
            self.cpu.push(CpuRow {
                broker: broker.name(),
                work,
                spec: *spec,
                cpu: after.saturating_sub(before),
                moved: *moved,
            });
        }
    }

    pub(crate) fn latency(&mut self, broker: &'static str, latency: Latency) {
        self.latencies.push((broker, latency));
    }

    pub(crate) fn group(&mut self, broker: &'static str, spec: GroupSpec, times: Vec<Duration>) {
        self.groups.push((broker, spec, times));
    }

    fn brokers(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for (name, _, _) in self.produced.iter().chain(&self.replay_produced) {
            if !names.contains(name) {
                names.push(name);
            }
        }
        names
    }

    fn raw_append_for(&self, record_bytes: usize) -> Option<&Throughput> {
        self.raw_append
            .iter()
            .find(|(bytes, _)| *bytes == record_bytes)
            .map(|(_, t)| t)
    }
}

fn find<'a>(
    rows: &'a [(&'static str, ProduceSpec, Throughput)],
    broker: &str,
    spec: &ProduceSpec,
) -> Option<&'a Throughput> {
    rows.iter()
        .find(|(name, s, _)| *name == broker && s == spec)
        .map(|(_, _, t)| t)
}

/// One line per spec Skein ran in `rows`: its label, Skein's figure, the other broker's and
/// their ratio, and Skein's ratio to the reference `line` names.
fn fmt_rows<'r>(
    f: &mut fmt::Formatter<'_>,
    rows: &[(&'static str, ProduceSpec, Throughput)],
    specs: &[&ProduceSpec],
    other: Option<&str>,
    line: impl Fn(&ProduceSpec) -> (String, Option<&'r Throughput>),
) -> fmt::Result {
    let cell = |t: Option<&Throughput>| {
        t.map_or("-".to_owned(), |t| {
            format!("{:.1} MiB/s {:.0}/s", t.mib_per_sec(), t.records_per_sec())
        })
    };
    for spec in specs {
        let Some(skein) = find(rows, "skein", spec) else {
            continue;
        };
        let other_cells = other.map_or(String::new(), |o| {
            let theirs = find(rows, o, spec);
            format!(" {:>22} {:>12}", cell(theirs), ratio(Some(skein), theirs))
        });
        let (label, reference) = line(spec);
        writeln!(
            f,
            "  {label:<22} {:>22}{other_cells} {:>16}",
            cell(Some(skein)),
            ratio(Some(skein), reference)
        )?;
    }
    Ok(())
}

fn ratio(a: Option<&Throughput>, b: Option<&Throughput>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.mib_per_sec() / b.mib_per_sec()),
        _ => "-".to_owned(),
    }
}

impl Report {
    /// Broker CPU seconds per GiB and per million records, beside the other broker's.
    fn fmt_cpu(&self, f: &mut fmt::Formatter<'_>, other: Option<&str>) -> fmt::Result {
        if self.cpu.is_empty() {
            return Ok(());
        }
        let other_header = other.map_or(String::new(), |o| {
            format!(
                " {:>19} {:>18}",
                format!("{o} s/GiB s/Mrec"),
                format!("skein/{o} per rec")
            )
        });
        writeln!(
            f,
            "broker CPU (user+system)                  {:>19}{other_header}",
            "skein s/GiB s/Mrec"
        )?;
        let find_cpu = |broker: &str, row: &CpuRow| {
            self.cpu
                .iter()
                .find(|r| r.broker == broker && r.work == row.work && r.spec == row.spec)
        };
        let cells = |r: &CpuRow| format!("{:.2} {:.2}", r.per_gib(), r.per_million());
        for row in self.cpu.iter().filter(|r| r.broker == "skein") {
            let other_cells = other.map_or(String::new(), |o| match find_cpu(o, row) {
                Some(theirs) => format!(
                    " {:>19} {:>18.2}",
                    cells(theirs),
                    row.per_million() / theirs.per_million()
                ),
                None => format!(" {:>19} {:>18}", "-", "-"),
            });
            writeln!(
                f,
                "  {:<40} {:>19}{other_cells}",
                format!("{} {}", row.work, row.spec),
                cells(row)
            )?;
        }
        writeln!(f)
    }

    /// The gateway section: each API beside librdkafka, then the gRPC produce target.
    fn fmt_gateway(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.gateway.is_empty() {
            return Ok(());
        }
        let cell =
            |t: &Throughput| format!("{:.1} MiB/s {:.0}/s", t.mib_per_sec(), t.records_per_sec());
        let broker = self.gateway[0].broker;
        writeln!(
            f,
            "gateway of {broker}, 1 partition, acks=all {:>13} {:>22} {:>8}  latency",
            "gateway", "native (librdkafka)", "ratio"
        )?;
        for row in &self.gateway {
            let latency = match (row.gateway.latency, row.gateway.to_first) {
                (Some(l), _) => format!(
                    "p50 {}  p99 {}  max {} per {}",
                    ms(l.p50),
                    ms(l.p99),
                    ms(l.max),
                    row.api.latency_unit()
                ),
                (None, Some(first)) => format!(
                    "first record after {} (native {}); rates from the first record on",
                    ms(first),
                    row.native_to_first.map_or("-".to_owned(), ms)
                ),
                (None, None) => "-".to_owned(),
            };
            writeln!(
                f,
                "  {:<12} {:<13} {:>22} {:>22} {:>8.2}  {latency}",
                row.api.to_string(),
                row.spec.to_string(),
                cell(&row.gateway.throughput),
                cell(&row.native),
                row.ratio()
            )?;
        }
        let produce: Vec<&GatewayRow> = self
            .gateway
            .iter()
            .filter(|r| r.api == GatewayApi::GrpcProduce)
            .collect();
        if !produce.is_empty() {
            let verdicts: Vec<String> = produce
                .iter()
                .map(|r| {
                    let met = if r.ratio() >= GRPC_PRODUCE_TARGET {
                        "met"
                    } else {
                        "NOT met"
                    };
                    format!(
                        "{} {:.2} {met}",
                        record_size(r.spec.record_bytes),
                        r.ratio()
                    )
                })
                .collect();
            writeln!(
                f,
                "  target gRPC streaming produce >= {GRPC_PRODUCE_TARGET}x native: {}",
                verdicts.join(", ")
            )?;
        }
        writeln!(f)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let brokers = self.brokers();
        let other = brokers.iter().copied().find(|b| *b != "skein");
        writeln!(f, "references (same run)")?;
        writeln!(
            f,
            "  loopback TCP, one connection      {:>9.1} MiB/s",
            self.loopback.mib_per_sec()
        )?;
        for (bytes, t) in &self.raw_append {
            writeln!(
                f,
                "  log engine append, {bytes:>4} B records {:>8.1} MiB/s {:>11.0} records/s",
                t.mib_per_sec(),
                t.records_per_sec()
            )?;
        }
        writeln!(f)?;
        let other_header = other.map_or(String::new(), |o| {
            format!(" {o:>22} {:>12}", format!("skein/{o}"))
        });
        writeln!(
            f,
            "produce (record values)  {:>22}{other_header} {:>16}",
            "skein", "skein/raw append"
        )?;
        let mut specs: Vec<&ProduceSpec> = Vec::new();
        for (_, spec, _) in self.produced.iter().chain(&self.replay_produced) {
            if !specs.contains(&spec) {
                specs.push(spec);
            }
        }
        for (how, rows) in [("", &self.produced), ("replay ", &self.replay_produced)] {
            fmt_rows(f, rows, &specs, other, |spec| {
                (
                    format!("{how}{spec}"),
                    self.raw_append_for(spec.record_bytes),
                )
            })?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "consume from the start  {:>23}{other_header} {:>16}",
            "skein", "skein/loopback"
        )?;
        let consumed: Vec<&ProduceSpec> = specs.iter().copied().filter(|s| s.consumed()).collect();
        for (how, rows) in [("", &self.consumed), ("replay ", &self.replay_fetched)] {
            fmt_rows(f, rows, &consumed, other, |spec| {
                (
                    format!("{how}{} B x{}p", spec.record_bytes, spec.partitions),
                    Some(&self.loopback),
                )
            })?;
        }
        writeln!(f)?;
        self.fmt_cpu(f, other)?;
        for row in &self.secured {
            writeln!(f, "{row}")?;
        }
        for row in &self.transactions {
            writeln!(f, "{row}")?;
        }
        self.fmt_gateway(f)?;
        for (broker, l) in &self.latencies {
            writeln!(
                f,
                "latency {broker:<6} {} records/s of {} B, acks=1, {} samples: p50 {}  p99 {}  p999 {}  max {}",
                l.spec.rate,
                l.spec.record_bytes,
                l.samples,
                ms(l.p50),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            )?;
        }
        writeln!(f)?;
        for (broker, spec, times) in &self.groups {
            let mut sorted = times.clone();
            sorted.sort();
            let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
            let max = sorted.last().copied().unwrap_or_default();
            writeln!(
                f,
                "group of two {broker:<6} {} partitions, heartbeat.interval.ms={}: median {} max {} over {} groups",
                spec.partitions,
                spec.heartbeat_ms,
                ms(median),
                ms(max),
                times.len()
            )?;
        }
        Ok(())
    }
}
