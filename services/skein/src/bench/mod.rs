//! `skein bench`: measurements printed beside references taken in the same run.

mod log;
mod page_cache;
mod stats;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum BenchCommand {
    /// The log engine: append, cold read, lookups and recovery of one large partition
    Log(log::LogBenchArgs),
}

pub(crate) fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Log(args) => log::run(args),
    }
}
