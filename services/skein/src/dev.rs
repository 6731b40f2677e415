//! `skein dev`: everything Skein has, in one process, with embedded defaults.
//!
//! Today that is the log engine: it opens (and recovers) every partition under the data
//! directory, runs retention, compaction and time-based flushes, and closes every log
//! cleanly on Ctrl-C (SIGINT) or SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use skein_log::{LogManager, LogManagerConfig, SystemClock};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// Where partition logs live
    #[arg(long, env = "SKEIN_DATA_DIR", default_value = "./skein-data")]
    data_dir: PathBuf,
    /// Seconds between retention and compaction runs
    #[arg(long, default_value_t = 30)]
    maintenance_interval_secs: u64,
}

pub(crate) fn run(args: DevArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: DevArgs) -> anyhow::Result<()> {
    println!("skein dev: data directory {}", args.data_dir.display());
    let dir = args.data_dir.clone();
    let manager = tokio::task::spawn_blocking(move || {
        LogManager::open(&dir, LogManagerConfig::default(), Arc::new(SystemClock))
    })
    .await?
    .with_context(|| format!("failed to open the logs in {}", args.data_dir.display()))?;
    let reports = manager.recovery_reports();
    let recovered = reports.iter().filter(|(_, r)| !r.clean_shutdown).count();
    println!(
        "log engine: {} partition(s) opened, {} recovered after an unclean shutdown",
        reports.len(),
        recovered
    );
    for (tp, report) in reports.iter().filter(|(_, r)| !r.clean_shutdown) {
        println!(
            "  {tp}: scanned {} segment(s), {} bytes; cut {} bytes of damaged tail",
            report.segments_recovered, report.bytes_scanned, report.bytes_truncated
        );
    }
    // Listen before saying so: a Ctrl-C that arrives in between must not kill the process
    // before the logs are closed.
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to listen for SIGTERM")?;
    println!("this build contains the log engine only; the Kafka listener, gateway and control plane are not part of it yet");
    println!(
        "running retention and compaction every {}s; press Ctrl-C to stop",
        args.maintenance_interval_secs
    );
    let manager = Arc::new(manager);
    let mut ticks =
        tokio::time::interval(Duration::from_secs(args.maintenance_interval_secs.max(1)));
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = ticks.tick() => {
                let m = Arc::clone(&manager);
                match tokio::task::spawn_blocking(move || m.maintain()).await? {
                    Ok(report) if report.retention.segments_deleted > 0 || report.compaction.segments_rewritten > 0 => {
                        tracing::info!(
                            deleted_segments = report.retention.segments_deleted,
                            compacted_segments = report.compaction.segments_rewritten,
                            "maintenance"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "maintenance failed"),
                }
            }
        }
    }
    println!("shutting down: flushing and closing every log");
    let manager =
        Arc::try_unwrap(manager).map_err(|_| anyhow::anyhow!("the log manager is still in use"))?;
    tokio::task::spawn_blocking(move || manager.close())
        .await?
        .context("failed to close the logs cleanly")?;
    println!("closed cleanly");
    Ok(())
}
