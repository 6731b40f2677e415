//! `skein log dump`: the batches of one segment file, as the log engine reads them.

use std::path::Path;

use anyhow::Context;
use skein_log::batch::{validate_batch, DecodedRecords};

pub(crate) fn run(path: &Path, records: bool) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))?;
    let mut position = 0usize;
    let mut batches = 0u64;
    while position < bytes.len() {
        let header = match validate_batch(&bytes[position..]) {
            Ok(h) => h,
            Err(e) => {
                println!("position {position}: invalid batch: {e}");
                anyhow::bail!("{} has an invalid batch at byte {position}", path.display());
            }
        };
        println!(
            "position {position} base_offset {} last_offset {} count {} size {} epoch {} codec {:?} \
             max_timestamp {} producer_id {} producer_epoch {} base_sequence {} transactional {} control {} crc {:#010x} (valid)",
            header.base_offset,
            header.last_offset(),
            header.records_count,
            header.size(),
            header.partition_leader_epoch,
            header.compression().context("unknown codec")?,
            header.max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.is_transactional(),
            header.is_control(),
            header.crc,
        );
        if records {
            let decoded = DecodedRecords::decode(
                &bytes[position..position + header.size()],
                skein_log::batch::MAX_DECOMPRESSED,
            )?;
            for record in decoded.iter() {
                let record = record?;
                println!(
                    "  offset {} timestamp {} key {} value_bytes {}",
                    header.record_offset(record.offset_delta),
                    decoded.timestamp_of(&record),
                    record.key.map_or_else(
                        || "null".to_owned(),
                        |k| String::from_utf8_lossy(k).into_owned()
                    ),
                    record.value.map_or(-1, |v| v.len() as i64),
                );
            }
        }
        position += header.size();
        batches += 1;
    }
    println!("{batches} batch(es), {} bytes, all CRCs valid", bytes.len());
    Ok(())
}
