//! The log engine benchmark. Every figure is printed beside a reference measured in the same
//! run on the same disk, and as a ratio to it:
//!
//! - append: 1 KiB records in 16 KiB batches appended to one partition, against plain
//!   `write` calls of the same bytes; both under the log's default flush policy (no fsync per
//!   append; a new file every `segment.bytes`, the finished one fsynced in the background),
//!   both followed by one fsync of everything;
//! - sequential read: the partition read back from the start through the file regions the
//!   log returns, against reading the segment files directly; cold (page cache dropped) and
//!   warm;
//! - lookups: random offsets and random timestamps in the partition (median, p99, bytes of
//!   log passed over after the index);
//! - recovery: opening the partition after a clean shutdown, after a kill with the recovery
//!   point at the last roll, and after a kill with no recovery point at all.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::{Rng, SeedableRng};
use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};
use skein_log::{Clock, HandleCache, Log, LogConfig, SystemClock};

use super::page_cache;
use super::stats::{mib_per_sec, quantile};

#[derive(Debug, clap::Args)]
pub(crate) struct LogBenchArgs {
    /// Directory to write in (on the disk to measure); removed afterwards
    #[arg(long, default_value = "./skein-bench")]
    dir: PathBuf,
    /// Size of the partition in MiB
    #[arg(long, default_value_t = 2048)]
    size_mib: u64,
    /// Random lookups of each kind
    #[arg(long, default_value_t = 20_000)]
    lookups: usize,
    /// Seed of the random lookups
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds of the append comparison (each writes the partition twice: raw and log)
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Passes of each read comparison (cold and warm)
    #[arg(long, default_value_t = 5)]
    read_passes: usize,
}

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;

pub(crate) fn run(args: LogBenchArgs) -> anyhow::Result<()> {
    if args.dir.try_exists()? {
        anyhow::bail!(
            "{} exists; pass a new directory with --dir",
            args.dir.display()
        );
    }
    fs::create_dir_all(&args.dir)?;
    let result = bench(&args);
    let cleanup = fs::remove_dir_all(&args.dir);
    result?;
    cleanup.with_context(|| format!("failed to remove {}", args.dir.display()))
}

fn template_batch() -> anyhow::Result<Vec<u8>> {
    let records: Vec<NewRecord> = (0..RECORDS_PER_BATCH)
        .map(|i| NewRecord {
            key: Some(format!("key-{i:04}").into_bytes()),
            value: Some(vec![b'v'; RECORD_BYTES]),
            headers: Vec::new(),
            timestamp: 0,
        })
        .collect();
    Ok(build_batch(
        &records,
        Compression::None,
        ProducerFields::NONE,
    )?)
}

/// Sets the batch's base and max timestamps (the records carry deltas of 0) and its CRC.
fn stamp(batch: &mut [u8], timestamp: i64) {
    batch[27..35].copy_from_slice(&timestamp.to_be_bytes());
    batch[35..43].copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn bench(args: &LogBenchArgs) -> anyhow::Result<()> {
    let template = template_batch()?;
    let batch_len = template.len() as u64;
    let batches = args.size_mib * 1024 * 1024 / batch_len;
    let total = batches * batch_len;
    let t0: i64 = SystemClock.now_ms();
    println!(
        "skein bench log: {} batches of {} records x {} B ({} B per batch), {:.0} MiB, in {}",
        batches,
        RECORDS_PER_BATCH,
        RECORD_BYTES,
        batch_len,
        total as f64 / 1048576.0,
        args.dir.display()
    );
    // --- append --------------------------------------------------------------------------
    let raw_path = args.dir.join("raw");
    let log_dir = args.dir.join("bench-0");
    // On this machine (a virtual one) the speed of writing into freshly allocated page cache
    // swings by 2x from one run to the next, whatever writes. So the two writers alternate
    // which goes first, each deletes its files before the other runs, and the medians and
    // bests over all rounds are compared.
    let mut raw_runs: Vec<(Duration, Duration)> = Vec::new();
    let mut log_runs: Vec<(Duration, Duration)> = Vec::new();
    for round in 0..args.rounds {
        let raw_first = round % 2 == 0;
        for raw_turn in [raw_first, !raw_first] {
            let _ = fs::remove_dir_all(&raw_path);
            let _ = fs::remove_dir_all(&log_dir);
            if raw_turn {
                raw_runs.push(raw_write(&raw_path, &template, batches)?);
                fs::remove_dir_all(&raw_path)?;
            } else {
                log_runs.push(log_append(&log_dir, &template, batches, t0)?);
            }
        }
        println!(
            "  round {round} ({} first): raw {:.0} MiB/s, log {:.0} MiB/s (to page cache)",
            if raw_first { "raw" } else { "log" },
            mib_per_sec(total, raw_runs[round].0),
            mib_per_sec(total, log_runs[round].0)
        );
    }
    // The read, lookup and recovery phases use the log written last.
    if !log_dir.try_exists()? {
        log_append(&log_dir, &template, batches, t0)?;
    }
    let rate = |runs: &[(Duration, Duration)], q: f64, durable: bool| {
        let mut rates: Vec<f64> = runs
            .iter()
            .map(|(w, s)| mib_per_sec(total, if durable { *w + *s } else { *w }))
            .collect();
        quantile(&mut rates, q)
    };
    println!();
    println!(
        "append (1 KiB records, 16 KiB batches), MiB/s over {} rounds",
        args.rounds
    );
    println!("                            median     best   median with final fsync");
    for (name, runs) in [("raw write():", &raw_runs), ("log append:", &log_runs)] {
        println!(
            "  {name:<24} {:>8.0} {:>8.0}   {:>8.0}",
            rate(runs, 0.5, false),
            rate(runs, 1.0, false),
            rate(runs, 0.5, true)
        );
    }
    println!(
        "  {:<24} {:>8.2} {:>8.2}   {:>8.2}",
        "ratio log/raw:",
        rate(&log_runs, 0.5, false) / rate(&raw_runs, 0.5, false),
        rate(&log_runs, 1.0, false) / rate(&raw_runs, 1.0, false),
        rate(&log_runs, 0.5, true) / rate(&raw_runs, 0.5, true)
    );

    // --- sequential read ----------------------------------------------------------------------
    // The two readers alternate, each pass on the same files: cold (page cache dropped before
    // every pass) and warm (everything cached, which shows the log's own overhead). Medians
    // over the passes, since a cache below the guest's (a virtual disk's host cache) makes
    // single cold passes swing.
    let files = segment_files(&log_dir)?;
    let mut read_bytes = 0;
    let mut cold = (Vec::new(), Vec::new());
    for _ in 0..args.read_passes {
        page_cache::drop_dir(&log_dir)?;
        cold.0.push(read_files(&files)?);
        page_cache::drop_dir(&log_dir)?;
        let (elapsed, bytes) = read_log(&log_dir)?;
        cold.1.push(elapsed);
        read_bytes = bytes;
    }
    let mut warm = (Vec::new(), Vec::new());
    for _ in 0..args.read_passes {
        warm.0.push(read_files(&files)?);
        warm.1.push(read_log(&log_dir)?.0);
    }
    let median_rate = |passes: &[Duration]| {
        let mut rates: Vec<f64> = passes.iter().map(|d| mib_per_sec(read_bytes, *d)).collect();
        quantile(&mut rates, 0.5)
    };
    println!();
    println!(
        "sequential read, 1 MiB reads, median of {} alternating passes (MiB/s)",
        args.read_passes
    );
    println!("                            cold (cache dropped)   warm (page cache)");
    let (raw_cold, log_cold) = (median_rate(&cold.0), median_rate(&cold.1));
    let (raw_warm, log_warm) = (median_rate(&warm.0), median_rate(&warm.1));
    println!("  segment files directly:  {raw_cold:>12.0} {raw_warm:>19.0}");
    println!("  log read (file regions): {log_cold:>12.0} {log_warm:>19.0}");
    println!(
        "  ratio log/raw:           {:>12.2} {:>19.2}",
        log_cold / raw_cold,
        log_warm / raw_warm
    );
    let raw_read = cold.0.iter().copied().min().unwrap_or_default();

    // --- lookups ------------------------------------------------------------------------------
    let log = open(&log_dir)?;
    let end = log.log_end_offset();
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut offset_us = Vec::with_capacity(args.lookups);
    let mut offset_scanned = Vec::with_capacity(args.lookups);
    for _ in 0..args.lookups {
        let offset = rng.gen_range(0..end);
        let start = Instant::now();
        let found = log.locate(offset)?.context("offset not found")?;
        offset_us.push(start.elapsed().as_secs_f64() * 1e6);
        offset_scanned.push(found.2 as f64);
    }
    let last_ts = t0 + batches as i64 - 1;
    let mut time_us = Vec::with_capacity(args.lookups);
    let mut time_scanned = Vec::with_capacity(args.lookups);
    for _ in 0..args.lookups {
        let ts = rng.gen_range(t0..=last_ts);
        let before = log
            .stats()
            .lookup_bytes_scanned
            .load(std::sync::atomic::Ordering::Relaxed);
        let start = Instant::now();
        let found = log
            .offset_for_timestamp(ts)?
            .context("timestamp not found")?;
        time_us.push(start.elapsed().as_secs_f64() * 1e6);
        let after = log
            .stats()
            .lookup_bytes_scanned
            .load(std::sync::atomic::Ordering::Relaxed);
        time_scanned.push((after - before) as f64);
        anyhow::ensure!(found.1 == ts, "timestamp lookup for {ts} found {}", found.1);
    }
    println!();
    println!(
        "lookups in a {:.1} GiB partition ({} segments, warm page cache, {} each)",
        total as f64 / 1073741824.0,
        log.segment_count(),
        args.lookups
    );
    println!(
        "  random offset:    median {:>7.1} us   p99 {:>7.1} us   bytes scanned after the index: mean {:>7.0}, max {:>7.0}",
        quantile(&mut offset_us.clone(), 0.5),
        quantile(&mut offset_us, 0.99),
        offset_scanned.iter().sum::<f64>() / offset_scanned.len() as f64,
        quantile(&mut offset_scanned, 1.0),
    );
    println!(
        "  random timestamp: median {:>7.1} us   p99 {:>7.1} us   bytes scanned after the index: mean {:>7.0}, max {:>7.0}",
        quantile(&mut time_us.clone(), 0.5),
        quantile(&mut time_us, 0.99),
        time_scanned.iter().sum::<f64>() / time_scanned.len() as f64,
        quantile(&mut time_scanned, 1.0),
    );

    // --- recovery -----------------------------------------------------------------------------
    log.close()?;
    page_cache::drop_dir(&log_dir)?;
    let start = Instant::now();
    let log = open(&log_dir)?;
    let clean = start.elapsed();
    let clean_report = log.recovery_report();
    drop(log); // killed: no clean-shutdown marker
    page_cache::drop_dir(&log_dir)?;
    let start = Instant::now();
    let log = open(&log_dir)?;
    let killed = start.elapsed();
    let killed_report = log.recovery_report();
    drop(log);
    fs::remove_file(log_dir.join("recovery-point-offset-checkpoint"))?;
    page_cache::drop_dir(&log_dir)?;
    let start = Instant::now();
    let log = open(&log_dir)?;
    let full = start.elapsed();
    let full_report = log.recovery_report();
    log.close()?;
    println!();
    println!("recovery of the partition (page cache dropped)");
    println!(
        "  after clean shutdown:              {:>9.1} ms   data scanned {:>6.0} MiB",
        clean.as_secs_f64() * 1e3,
        clean_report.bytes_scanned as f64 / 1048576.0
    );
    println!(
        "  after kill, recovery point intact: {:>9.1} ms   data scanned {:>6.0} MiB",
        killed.as_secs_f64() * 1e3,
        killed_report.bytes_scanned as f64 / 1048576.0
    );
    println!(
        "  after kill, no recovery point:     {:>9.1} ms   data scanned {:>6.0} MiB ({:.0} MiB/s)",
        full.as_secs_f64() * 1e3,
        full_report.bytes_scanned as f64 / 1048576.0,
        mib_per_sec(full_report.bytes_scanned, full)
    );
    println!(
        "  reference, cold read of the files: {:>9.1} ms",
        raw_read.as_secs_f64() * 1e3
    );
    Ok(())
}

fn open(dir: &Path) -> anyhow::Result<Log> {
    Ok(Log::open(
        dir,
        LogConfig::default(),
        Arc::new(SystemClock),
        HandleCache::new(64),
    )?)
}

/// Writes `batches` copies of `template` with one `write` each, under the log's flush policy:
/// a new file every `segment.bytes`, the finished one fsynced by a background thread, and one
/// fsync of everything at the end. `path` is a directory.
fn raw_write(path: &Path, template: &[u8], batches: u64) -> anyhow::Result<(Duration, Duration)> {
    let segment_bytes = LogConfig::default().segment_bytes;
    fs::create_dir_all(path)?;
    let mut buf = template.to_vec();
    let mut files = 0u32;
    let mut file = File::create(path.join(format!("{files}.bin")))?;
    let mut written = 0u64;
    let mut flushers = Vec::new();
    let start = Instant::now();
    for i in 0..batches {
        if written + buf.len() as u64 > segment_bytes {
            let full = std::mem::replace(&mut file, {
                files += 1;
                File::create(path.join(format!("{files}.bin")))?
            });
            flushers.push(std::thread::spawn(move || full.sync_all()));
            written = 0;
        }
        // The same per-batch header work the log does (offset field), so only the log's own
        // bookkeeping differs.
        buf[0..8].copy_from_slice(&(i as i64).to_be_bytes());
        file.write_all(&buf)?;
        written += buf.len() as u64;
    }
    let write = start.elapsed();
    let start = Instant::now();
    for flusher in flushers {
        flusher
            .join()
            .map_err(|_| anyhow::anyhow!("flush thread panicked"))??;
    }
    file.sync_all()?;
    Ok((write, start.elapsed()))
}

/// Appends `batches` batches (timestamps 1 ms apart) to a fresh log, then closes it (fsync).
fn log_append(
    dir: &Path,
    template: &[u8],
    batches: u64,
    t0: i64,
) -> anyhow::Result<(Duration, Duration)> {
    let mut log = open(dir)?;
    let mut buf = template.to_vec();
    // Each batch gets its own timestamp (for the lookups) the way a producer would set it:
    // outside the timed append.
    let mut appending = Duration::ZERO;
    for i in 0..batches {
        stamp(&mut buf, t0 + i as i64);
        let start = Instant::now();
        log.append(&mut buf, 0)?;
        appending += start.elapsed();
    }
    let start = Instant::now();
    log.close()?;
    Ok((appending, start.elapsed()))
}

fn segment_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "log"));
    files.sort();
    Ok(files)
}

fn read_files(files: &[PathBuf]) -> anyhow::Result<Duration> {
    let mut buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    for path in files {
        let mut file = File::open(path)?;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
        }
    }
    Ok(start.elapsed())
}

fn read_log(dir: &Path) -> anyhow::Result<(Duration, u64)> {
    let start = Instant::now();
    let log = open(dir)?;
    let mut buf = vec![0u8; 2 << 20];
    let mut offset = log.log_start_offset();
    let mut bytes = 0u64;
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1 << 20, None)?;
        let Some(region) = &slice.region else { break };
        let len = region.len() as usize;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        region
            .file()
            .read_exact_at(&mut buf[..len], region.position())?;
        bytes += len as u64;
        offset = slice.last_offset + 1;
    }
    Ok((start.elapsed(), bytes))
}
