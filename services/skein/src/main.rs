//! `skein`: runs Skein and its tools.

mod bench;
mod broker;
mod config;
mod control_plane;
mod controller_credentials;
mod data_lock;
mod dev;
mod dev_brokers;
mod dump;
mod gateway;
mod grpc_tls;
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
    /// How log lines are written to stderr: `text` for people, `json` (one object a line)
    /// for log collectors
    #[arg(long, global = true, env = "SKEIN_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
    let cli = Cli::parse();
    // Spans go to an OTLP collector when the OTEL_* variables ask for it (kept until exit,
    // when what is left is sent).
    let _telemetry = match logging(&cli) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("skein: {e:#}");
            return ExitCode::FAILURE;
        }
    };
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

/// Log lines on stderr (SKEIN_LOG filters them; `info` by default), as text or JSON, and
/// spans exported over OTLP for the services when the environment asks for it.
fn logging(cli: &Cli) -> anyhow::Result<Option<skein_ops::telemetry::Telemetry>> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = tracing_subscriber::EnvFilter::try_from_env("SKEIN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = cli.log_format == LogFormat::Json;
    let service = match cli.command {
        Command::Dev(_) => Some("skein-dev"),
        Command::Broker(_) => Some("skein-broker"),
        Command::ControlPlane(_) => Some("skein-control-plane"),
        Command::Gateway(_) => Some("skein-gateway"),
        _ => None,
    };
    let (traces, telemetry) = match service {
        Some(service) => skein_ops::telemetry::layer(service)?.unzip(),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(json.then(|| {
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr)
        }))
        .with((!json).then(|| tracing_subscriber::fmt::layer().with_writer(std::io::stderr)))
        .with(traces)
        .init();
    Ok(telemetry)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// What runs in a deployment takes every setting from the environment too (the chart
    /// sets variables, never flags, on the services).
    #[test]
    fn every_flag_of_a_deployed_command_has_an_environment_variable() {
        let cli = Cli::command();
        for name in [
            "broker",
            "control-plane",
            "gateway",
            "migrate",
            "dev",
            "controller-token",
            "rack-from-node",
        ] {
            let Some(command) = cli.find_subcommand(name) else {
                panic!("no command {name}");
            };
            let mut flags = 0;
            for arg in command.get_arguments() {
                if arg.is_positional() || ["help", "version"].contains(&arg.get_id().as_str()) {
                    continue;
                }
                flags += 1;
                assert!(
                    arg.get_env().is_some(),
                    "skein {name} --{} has no environment variable",
                    arg.get_long().unwrap_or_default()
                );
            }
            assert!(flags > 0, "skein {name} has no flags?");
        }
    }
}
