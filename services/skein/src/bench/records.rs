//! The cost of checking what producers send, per batch, in memory: what the broker does to a
//! produced batch before it is stored (header, length and CRC; then every record's lengths,
//! counts and offset deltas, decompressing a compressed batch within its limit), and what a
//! reader does to decode one. Each figure is printed beside references measured in the same
//! run on the same batches: the CRC check the broker made before record validation existed,
//! and a plain copy of the batch's bytes.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use skein_log::batch::{
    build_batch, decompression_limit, validate_batch, validate_records, Compression,
    DecodedRecords, NewRecord, ProducerFields, MAX_DECOMPRESSED,
};

use super::stats::{mib_per_sec, quantile};

#[derive(Debug, clap::Args)]
pub(crate) struct RecordsBenchArgs {
    /// Bytes of batches checked per measurement, in MiB
    #[arg(long, default_value_t = 256)]
    mib: u64,
    /// Rounds of each measurement; medians are reported
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seed of the record contents
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Kafka's default `max.message.bytes`, which sets the broker's decompression limit.
const MAX_MESSAGE_BYTES: u64 = 1_048_588;

/// One shape of batch: how many records of how many bytes, compressed how.
struct Shape {
    name: &'static str,
    records: usize,
    value_bytes: usize,
    compression: Compression,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "16 x 1 KiB, none",
        records: 16,
        value_bytes: 1024,
        compression: Compression::None,
    },
    Shape {
        name: "100 x 100 B, none",
        records: 100,
        value_bytes: 100,
        compression: Compression::None,
    },
    Shape {
        name: "16 x 1 KiB, lz4",
        records: 16,
        value_bytes: 1024,
        compression: Compression::Lz4,
    },
    Shape {
        name: "16 x 1 KiB, zstd",
        records: 16,
        value_bytes: 1024,
        compression: Compression::Zstd,
    },
    Shape {
        name: "16 x 1 KiB, gzip",
        records: 16,
        value_bytes: 1024,
        compression: Compression::Gzip,
    },
];

/// Record values that compress about as well as JSON does: words from a small vocabulary.
fn value(rng: &mut rand::rngs::StdRng, bytes: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "\"id\":",
        "\"user\":",
        "\"amount\":",
        "\"currency\":\"EUR\"",
        "\"items\":[",
        "],",
        "\"ok\":true",
        "\"ts\":",
        "{",
        "}",
        ",",
    ];
    let mut out = Vec::with_capacity(bytes + 32);
    while out.len() < bytes {
        if rng.gen_bool(0.4) {
            out.extend_from_slice(rng.gen_range(0..1_000_000u32).to_string().as_bytes());
        } else {
            out.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
        }
    }
    out.truncate(bytes);
    out
}

fn batch(shape: &Shape, rng: &mut rand::rngs::StdRng) -> anyhow::Result<Vec<u8>> {
    let records: Vec<NewRecord> = (0..shape.records)
        .map(|i| NewRecord {
            key: Some(format!("key-{i:04}").into_bytes()),
            value: Some(value(rng, shape.value_bytes)),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000,
        })
        .collect();
    Ok(build_batch(
        &records,
        shape.compression,
        ProducerFields::NONE,
    )?)
}

/// Times `check` over `passes` passes of `batches`; answers the median time of `rounds`.
fn median(
    rounds: usize,
    passes: usize,
    batches: &[Vec<u8>],
    mut check: impl FnMut(&[u8]) -> anyhow::Result<usize>,
) -> anyhow::Result<Duration> {
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let mut seen = 0usize;
        for _ in 0..passes {
            for batch in batches {
                seen = seen.wrapping_add(check(std::hint::black_box(batch))?);
            }
        }
        std::hint::black_box(seen);
        samples.push(started.elapsed().as_secs_f64());
    }
    Ok(Duration::from_secs_f64(quantile(&mut samples, 0.5)))
}

pub(crate) fn run(args: RecordsBenchArgs) -> anyhow::Result<()> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let limit = decompression_limit(MAX_MESSAGE_BYTES);
    println!(
        "record batch checks, in memory: {} MiB of batches per measurement, median of {} rounds",
        args.mib, args.rounds
    );
    println!(
        "{:<20} {:>9} {:>11} {:>11} {:>11} {:>11} {:>15} {:>15}",
        "batch",
        "bytes",
        "copy MiB/s",
        "crc MiB/s",
        "store MiB/s",
        "read MiB/s",
        "store/crc time",
        "store/copy time"
    );
    for shape in SHAPES {
        // Distinct batches, so the CPU's caches do not hold one batch for every check.
        let batches: Vec<Vec<u8>> = (0..64)
            .map(|_| batch(shape, &mut rng))
            .collect::<anyhow::Result<_>>()?;
        let bytes: usize = batches.iter().map(Vec::len).sum();
        let passes = usize::try_from(args.mib * 1024 * 1024)?
            .div_ceil(bytes)
            .max(1);
        let total = (bytes * passes) as u64;
        let mut copy_to = vec![0u8; batches.iter().map(Vec::len).max().unwrap_or(0)];
        let copy = median(args.rounds, passes, &batches, |b| {
            copy_to[..b.len()].copy_from_slice(b);
            Ok(copy_to[b.len() / 2] as usize)
        })?;
        let crc = median(args.rounds, passes, &batches, |b| {
            Ok(validate_batch(b)?.records_count as usize)
        })?;
        let store = median(args.rounds, passes, &batches, |b| {
            let header = validate_batch(b)?;
            validate_records(b, &header, limit)?;
            Ok(header.records_count as usize)
        })?;
        let read = median(args.rounds, passes, &batches, |b| {
            validate_batch(b)?;
            let decoded = DecodedRecords::decode(b, MAX_DECOMPRESSED)?;
            let mut value_bytes = 0;
            for record in decoded.iter() {
                value_bytes += record?.value.map_or(0, <[u8]>::len);
            }
            Ok(value_bytes)
        })?;
        println!(
            "{:<20} {:>9} {:>11.0} {:>11.0} {:>11.0} {:>11.0} {:>15.2} {:>15.2}",
            shape.name,
            bytes / batches.len(),
            mib_per_sec(total, copy),
            mib_per_sec(total, crc),
            mib_per_sec(total, store),
            mib_per_sec(total, read),
            store.as_secs_f64() / crc.as_secs_f64(),
            store.as_secs_f64() / copy.as_secs_f64(),
        );
    }
    println!(
        "store: header, CRC and every record checked as the broker does before storing \
         (compressed batches decompressed within {} MiB); read: CRC, decompression and every \
         record decoded as skein-client does; bytes: one batch as sent",
        limit >> 20
    );
    Ok(())
}
