//! What each tenant's logs take on this broker's volume, for the tenant's `storage_bytes`
//! quota: the bytes of its partitions' segments (leaders' and followers' alike) and, for
//! each segment, [`FILE_CHARGE`] per file, so that many tiny segments count as what they
//! cost a file system. The sums are refreshed by the broker's housekeeping (every second),
//! so a tenant may overshoot its quota by what it writes between two refreshes. Produce to a
//! partition of a tenant at or past its quota is refused with POLICY_VIOLATION until
//! retention or deletion gives bytes back; followers keep replicating, since what a leader
//! took was acknowledged.

use std::collections::HashMap;

use parking_lot::RwLock;
use skein_log::LogManager;

use crate::scope::Tenancy;

/// What one segment file is charged beyond its bytes: a file system block.
pub const FILE_CHARGE: u64 = 4096;

/// The files of one segment: its log, offset index, time index and transaction index.
const FILES_PER_SEGMENT: u64 = 4;

/// Each tenant's charge on this broker's volume.
#[derive(Debug)]
pub(crate) struct Storage {
    tenancy: Tenancy,
    /// By tenant ("" for a broker serving one, or a name outside every namespace: tenant
    /// names are never empty).
    held: RwLock<HashMap<String, u64>>,
}

impl Storage {
    pub(crate) fn new(tenancy: Tenancy) -> Self {
        Self {
            tenancy,
            held: RwLock::default(),
        }
    }

    /// Sums each tenant's logs in `logs` again.
    pub(crate) fn refresh(&self, logs: &LogManager) {
        let mut held: HashMap<String, u64> = HashMap::new();
        for tp in logs.partitions() {
            let Some(log) = logs.get(&tp) else { continue };
            let (bytes, segments) = {
                let log = log.read();
                (log.size_bytes(), log.segment_count() as u64)
            };
            let tenant = self.tenancy.split(&tp.topic).0.unwrap_or("").to_owned();
            *held.entry(tenant).or_default() += charge(bytes, segments);
        }
        *self.held.write() = held;
    }

    /// What the tenant of the kept topic name `topic` holds here, as last refreshed.
    pub(crate) fn held(&self, topic: &str) -> u64 {
        let tenant = self.tenancy.split(topic).0.unwrap_or("");
        self.held.read().get(tenant).copied().unwrap_or(0)
    }
}

/// The charge of `bytes` in `segments` segments.
fn charge(bytes: u64, segments: u64) -> u64 {
    bytes.saturating_add(segments.saturating_mul(FILES_PER_SEGMENT * FILE_CHARGE))
}

/// Why a produce to a tenant holding `held` against `quota` is refused, if it is.
pub(crate) fn refusal(held: u64, quota: Option<i64>) -> Option<String> {
    let quota = u64::try_from(quota?).ok()?;
    (held >= quota).then(|| {
        format!(
            "the tenant's storage quota of {quota} bytes on this broker is used ({held} bytes \
             held); retention or deleting records gives bytes back"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_segments_are_charged_as_files() {
        assert_eq!(charge(0, 0), 0);
        assert_eq!(charge(100, 1), 100 + 4 * 4096);
        // A thousand one-record segments cost far more than their bytes.
        assert!(charge(70_000, 1000) > 16_000_000);
    }

    #[test]
    fn a_tenant_is_refused_at_its_quota_and_not_before() {
        assert_eq!(refusal(10, None), None);
        assert_eq!(refusal(10, Some(11)), None);
        assert!(refusal(11, Some(11)).is_some());
        // A negative quota is no quota.
        assert_eq!(refusal(10, Some(-1)), None);
    }
}
