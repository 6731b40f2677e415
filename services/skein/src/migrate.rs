//! `skein migrate`: brings the catalog's schema up to date.

use anyhow::Context;
use clap::Args;
use skein_catalog::Catalog;

#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The catalog's database: postgres://user@host/db, or sqlite:path (created if missing)
    #[arg(long, env = "SKEIN_DATABASE_URL")]
    database_url: String,
}

pub(crate) fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let catalog = Catalog::connect(&args.database_url)
            .await
            .context("failed to connect to the catalog's database")?;
        let migrations = catalog.migrate().await?;
        println!(
            "skein migrate: {:?} catalog is up to date ({migrations} migrations)",
            catalog.backend()
        );
        catalog.close().await;
        Ok(())
    })
}
