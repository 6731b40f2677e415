//! `skein-bench`: Kafka workloads driven by librdkafka against Skein, each figure printed
//! beside references measured in the same run (loopback TCP, the log engine's raw append
//! rate, and optionally Tansu on another port); and Skein's REST and gRPC gateway beside
//! librdkafka moving the same records.
//!
//! A separate binary so that the `skein` product binary does not link librdkafka.

use clap::{Parser, Subcommand};

use skein_bench::{
    run, run_cluster, run_recovery, run_sink, BrokerArgs, ClusterArgs, RecoveryArgs, SinkArgs,
};

#[derive(Debug, Parser)]
#[command(name = "skein-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Produce and consume throughput, end-to-end latency, group assignment time, and the
    /// gateway's REST and gRPC throughput beside librdkafka
    Broker(BrokerArgs),
    /// A three-broker cluster (`skein dev --brokers 3`): acks=all on three replicas beside
    /// acks=1 on one, and failover time over repeated leader kills
    Cluster(ClusterArgs),
    /// A sink into PostgreSQL beside a batched COPY of the same rows into the same database
    Sink(SinkArgs),
    /// A broker killed with many partitions: how soon every partition takes writes again,
    /// and its memory before the kill
    Recovery(RecoveryArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Broker(args) => run(&args),
        Command::Cluster(args) => run_cluster(&args),
        Command::Sink(args) => run_sink(&args),
        Command::Recovery(args) => run_recovery(&args),
    }
}
