//! `skein-bench sink`: a sink's rows per second into PostgreSQL beside a plain batched
//! `COPY` of the same rows into the same database, measured in the same run. The records
//! (JSON values of about `--record-bytes`) are produced to a Skein broker in this process
//! first; the sink maps them to `(id bigint, body text)` and runs until its stored
//! positions reach the log end; COPY writes the same rows in batches of the same size.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use skein_client::{
    Client, ClientConfig, NewTopic, OffsetSpec, ProduceRecord, Producer, ProducerConfig,
};
use skein_sink::{ColumnMapping, Mode, SinkSpec, SinkStats, SinkWorker};
use sqlx::postgres::PgPool;

use crate::brokers::{BrokerUnderTest, SkeinBroker};

/// The ratio of sink to COPY rows per second aimed for.
pub const SINK_TARGET: f64 = 0.5;

/// Rows in one COPY, about what one sink round applies.
const COPY_BATCH: usize = 1000;

/// `skein-bench sink` options.
#[derive(Debug, Clone, Args)]
pub struct SinkArgs {
    /// The PostgreSQL database both write into (tables `bench_copy` and `bench_sink` are
    /// dropped and made again)
    #[arg(long, env = "SKEIN_BENCH_DATABASE_URL")]
    pub database_url: String,
    /// Records produced, then applied by each side
    #[arg(long, default_value_t = 200_000)]
    pub records: u64,
    /// About this many bytes of JSON per record
    #[arg(long, default_value_t = 1024)]
    pub record_bytes: usize,
    /// Partitions of the topic (one worker owns them all)
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
}

/// Both sides' rows per second.
#[derive(Debug, Clone, Copy)]
pub struct SinkReport {
    pub records: u64,
    pub sink: Duration,
    pub copy: Duration,
}

impl SinkReport {
    pub fn sink_rows_per_sec(&self) -> f64 {
        self.records as f64 / self.sink.as_secs_f64()
    }

    pub fn copy_rows_per_sec(&self) -> f64 {
        self.records as f64 / self.copy.as_secs_f64()
    }

    pub fn ratio(&self) -> f64 {
        self.sink_rows_per_sec() / self.copy_rows_per_sec()
    }
}

impl std::fmt::Display for SinkReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let met = if self.ratio() >= SINK_TARGET {
            "met"
        } else {
            "NOT met"
        };
        writeln!(
            f,
            "sink into PostgreSQL, {} rows: sink {:.0} rows/s, batched COPY {:.0} rows/s, \
             ratio {:.2} (target >= {SINK_TARGET}: {met})",
            self.records,
            self.sink_rows_per_sec(),
            self.copy_rows_per_sec(),
            self.ratio()
        )
    }
}

fn value(n: u64, bytes: usize) -> String {
    let body: String = std::iter::repeat_n('x', bytes.saturating_sub(40)).collect();
    serde_json::json!({"id": n, "body": body}).to_string()
}

/// Runs the sink benchmark and prints the report.
pub fn run_sink(args: &SinkArgs) -> anyhow::Result<()> {
    let report = measure_sink(args)?;
    print!("{report}");
    Ok(())
}

/// Produces the records, then times COPY and the sink.
pub fn measure_sink(args: &SinkArgs) -> anyhow::Result<SinkReport> {
    let dir = tempfile::Builder::new()
        .prefix("skein-bench-sink")
        .tempdir()?;
    let broker = SkeinBroker::start(dir.path())?;
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let pool = PgPool::connect(&args.database_url).await?;
        for table in ["bench_copy", "bench_sink"] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                .execute(&pool)
                .await?;
            sqlx::query(&format!("CREATE TABLE {table} (id bigint, body text)"))
                .execute(&pool)
                .await?;
        }
        sqlx::query("DROP TABLE IF EXISTS skein_offsets")
            .execute(&pool)
            .await?;
        let client = Client::connect(ClientConfig::new([bootstrap.clone()])).await?;
        client
            .create_topics(&[NewTopic::new("bench-sink", args.partitions)])
            .await?;
        eprintln!("sink: producing {} records", args.records);
        let producer = Producer::new(client.clone(), ProducerConfig::default());
        let mut next = 0;
        while next < args.records {
            let end = (next + 500).min(args.records);
            let batch: Vec<ProduceRecord> = (next..end)
                .map(|n| ProduceRecord::new(value(n, args.record_bytes)))
                .collect();
            producer.send("bench-sink", batch).await?;
            next = end;
        }

        eprintln!("sink: COPY of the same rows");
        let copy = {
            let start = Instant::now();
            let mut n = 0;
            while n < args.records {
                let end = (n + COPY_BATCH as u64).min(args.records);
                let mut text = String::new();
                for i in n..end {
                    // What the sink reads from each value, as COPY's text format.
                    let parsed: serde_json::Value =
                        serde_json::from_str(&value(i, args.record_bytes))?;
                    text.push_str(&format!(
                        "{}\t{}\n",
                        parsed["id"],
                        parsed["body"].as_str().unwrap_or_default()
                    ));
                }
                let mut connection = pool.acquire().await?;
                let mut copy = connection
                    .copy_in_raw("COPY bench_copy (id, body) FROM STDIN")
                    .await?;
                copy.send(text.as_bytes()).await?;
                copy.finish().await?;
                n = end;
            }
            start.elapsed()
        };

        eprintln!("sink: the sink");
        let spec = SinkSpec {
            name: "bench".to_owned(),
            topics: vec!["bench-sink".to_owned()],
            table: "bench_sink".to_owned(),
            mode: Mode::Columns {
                columns: ["id", "body"]
                    .iter()
                    .map(|c| ColumnMapping {
                        field: (*c).to_owned(),
                        column: (*c).to_owned(),
                    })
                    .collect(),
                key_column: None,
            },
            dead_letter_topic: None,
            skip: Vec::new(),
        };
        let stats = Arc::new(SinkStats::default());
        let partitions = BTreeMap::from([(
            "bench-sink".to_owned(),
            (0..args.partitions).collect::<Vec<_>>(),
        )]);
        let mut worker = SinkWorker::start(
            client.clone(),
            pool.clone(),
            spec,
            &partitions,
            Arc::clone(&stats),
        )
        .await?;
        let mut ends = BTreeMap::new();
        for partition in 0..args.partitions {
            let end = client
                .list_offset("bench-sink", partition, OffsetSpec::Latest)
                .await?
                .map_or(0, |l| l.offset);
            ends.insert(("bench-sink".to_owned(), partition), end);
        }
        let start = Instant::now();
        while *stats.positions.lock() != ends {
            worker.step().await?;
        }
        let sink = start.elapsed();
        let (copied, sunk): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM bench_copy), (SELECT count(*) FROM bench_sink)",
        )
        .fetch_one(&pool)
        .await?;
        anyhow::ensure!(
            copied == args.records as i64 && sunk == args.records as i64,
            "COPY wrote {copied} rows and the sink {sunk}, of {}",
            args.records
        );
        Ok(SinkReport {
            records: args.records,
            sink,
            copy,
        })
    })
}
