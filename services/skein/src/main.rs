//! `skein`: runs Skein and its tools.

mod bench;
mod broker;
mod config;
mod control_plane;
mod controller_credentials;
mod dev;
mod dev_brokers;
mod dump;
mod gateway;
mod listener_args;
mod migrate;
mod ops;
mod rack;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "skein",
    version,
    about = "Skein: a Kafka-compatible messaging service"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run Skein locally with embedded defaults (data under ./skein-data)
    Dev(dev::DevArgs),
    /// Measure Skein against references taken in the same run
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Inspect log files
    #[command(subcommand)]
    Log(LogCommand),
    /// Run a broker that joins the cluster's controller (a control-plane replica)
    Broker(broker::BrokerArgs),
    /// Run the control plane (the admin REST API) on a PostgreSQL or SQLite catalog
    ControlPlane(control_plane::ControlPlaneArgs),
    /// Run the REST gateway in front of a cluster's brokers
    Gateway(gateway::GatewayArgs),
    /// Print a credential for a broker or a gateway to present to the controller
    ControllerToken(controller_credentials::ControllerTokenArgs),
    /// Apply the catalog's pending schema migrations (PostgreSQL or SQLite)
    Migrate(migrate::MigrateArgs),
    /// Write a broker configuration file whose broker.rack is a label (the zone) of the
    /// Kubernetes node this pod runs on
    RackFromNode(rack::RackArgs),
}

#[derive(Debug, Subcommand)]
enum LogCommand {
    /// Print the batches of a segment file (`<base offset>.log`) and check their CRCs
    Dump {
        /// The segment file
        path: PathBuf,
        /// Also print every record's key, value size and timestamp
        #[arg(long)]
        records: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SKEIN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dev(args) => dev::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Log(LogCommand::Dump { path, records }) => dump::run(&path, records),
        Command::Migrate(args) => migrate::run(args),
        Command::ControlPlane(args) => control_plane::run(args),
        Command::Broker(args) => broker::run(args),
        Command::Gateway(args) => gateway::run(args),
        Command::ControllerToken(args) => controller_credentials::run(args),
        Command::RackFromNode(args) => rack::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skein: {e:#}");
            ExitCode::FAILURE
        }
    }
}
