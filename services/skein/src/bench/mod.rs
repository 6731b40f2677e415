//! `skein bench`: measurements printed beside references taken in the same run.

mod log;
mod page_cache;
mod records;
mod stats;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum BenchCommand {
    /// The log engine: append, cold read, lookups and recovery of one large partition
    Log(log::LogBenchArgs),
    /// Record batch checks in memory: what the broker validates before storing a batch and
    /// what a reader decodes, against the CRC check and a plain copy
    Records(records::RecordsBenchArgs),
}

pub(crate) fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Log(args) => log::run(args),
        BenchCommand::Records(args) => records::run(args),
    }
}
