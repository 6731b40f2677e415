//! [`Partitioner`]: which partition a record goes to, as the Java client decides it for
//! keyed records.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit
/// value like the Java client returns.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(first) = tail.first() {
        h ^= u32::from(*first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a key among `partitions`: `toPositive(murmur2(key)) % partitions`, as
/// the Java client's default partitioner computes it. `partitions` must be positive.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Chooses partitions: the record's own, else by key hash, else round-robin per topic.
#[derive(Debug, Default)]
pub struct Partitioner {
    next: Mutex<HashMap<String, u32>>,
}

impl Partitioner {
    /// The partition for a record of `topic` with `partitions` partitions.
    pub fn partition(
        &self,
        topic: &str,
        partitions: i32,
        explicit: Option<i32>,
        key: Option<&[u8]>,
    ) -> i32 {
        if let Some(partition) = explicit {
            return partition;
        }
        if let Some(key) = key {
            return partition_for_key(key, partitions);
        }
        let mut next = self.next.lock();
        let counter = next.entry(topic.to_owned()).or_insert(0);
        let partition = (*counter % partitions.max(1) as u32) as i32;
        *counter = counter.wrapping_add(1);
        partition
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From Apache Kafka's `UtilsTest.testMurmur2`.
    const JAVA_VECTORS: &[(&[u8], i32)] = &[
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        (b"abc", 479_470_107),
        (b"", 275_646_681),
    ];

    #[test]
    fn murmur2_matches_the_java_client() {
        for (key, hash) in JAVA_VECTORS {
            assert_eq!(murmur2(key), *hash, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn keyed_partition_is_the_positive_hash_modulo_the_count() {
        // toPositive(-790332482) = 1357151166, and 1357151166 % 50 = 16.
        assert_eq!(partition_for_key(b"foobar", 50), 16);
        assert_eq!(partition_for_key(b"21", 1), 0);
    }

    #[test]
    fn explicit_partition_wins_and_unkeyed_records_rotate() {
        let partitioner = Partitioner::default();
        assert_eq!(partitioner.partition("t", 3, Some(2), Some(b"foobar")), 2);
        let rotated: Vec<i32> = (0..6)
            .map(|_| partitioner.partition("t", 3, None, None))
            .collect();
        assert_eq!(rotated, [0, 1, 2, 0, 1, 2]);
        assert_eq!(partitioner.partition("other", 3, None, None), 0);
    }
}
