//! What the broker figures are compared to: bytes through loopback TCP, and batches
//! appended by the log engine with no network or protocol in between.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use skein_log::batch::{build_batch, Compression, NewRecord, ProducerFields};
use skein_log::{HandleCache, Log, LogConfig, SystemClock};

use crate::workload::Throughput;

/// One sender and one receiver thread moving `bytes` through a 127.0.0.1 connection in
/// 256 KiB writes.
pub(crate) fn loopback_tcp(bytes: u64) -> anyhow::Result<Throughput> {
    const CHUNK: usize = 256 * 1024;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut stream, _) = listener.accept()?;
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut stream = TcpStream::connect(addr)?;
    let chunk = vec![0x5au8; CHUNK];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        stream.write_all(&chunk)?;
        sent += CHUNK as u64;
    }
    drop(stream);
    let received = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("loopback receiver panicked"))??;
    let elapsed = start.elapsed();
    anyhow::ensure!(
        received == sent,
        "loopback lost bytes: {received} of {sent}"
    );
    Ok(Throughput {
        records: sent / CHUNK as u64,
        bytes: sent,
        elapsed,
    })
}

/// Appends about `bytes` of `record_bytes`-sized records to a fresh partition in batches of
/// about 1 MB (what librdkafka sends at full speed: `batch.size` is 1,000,000), under the
/// log's default flush policy, as the broker's produce path would.
pub(crate) fn raw_append(record_bytes: usize, bytes: u64) -> anyhow::Result<Throughput> {
    let per_batch = (1_000_000 / (record_bytes + 20)).max(1);
    let value = crate::workload::payload(record_bytes);
    let records: Vec<NewRecord> = (0..per_batch)
        .map(|_| NewRecord {
            key: None,
            value: Some(value.clone()),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000,
        })
        .collect();
    let template = build_batch(&records, Compression::None, ProducerFields::NONE)?;
    let batches = (bytes / (per_batch * record_bytes) as u64).max(1);
    let dir = tempfile::Builder::new()
        .prefix("skein-bench-append")
        .tempdir()?;
    let mut log = Log::open(
        dir.path(),
        LogConfig::default(),
        Arc::new(SystemClock),
        HandleCache::new(64),
    )?;
    let mut buf = template.clone();
    let start = Instant::now();
    for _ in 0..batches {
        buf.copy_from_slice(&template);
        log.append(&mut buf, 0)?;
    }
    let elapsed = start.elapsed();
    log.close()?;
    let records = batches * per_batch as u64;
    Ok(Throughput {
        records,
        bytes: records * record_bytes as u64,
        elapsed,
    })
}
