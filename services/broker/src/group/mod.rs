//! Consumer groups: the classic group protocol's coordinator and the committed-offset store.

mod coordinator;
mod offsets;
pub mod offsets_record;
mod tenant_groups;

pub(crate) use coordinator::{Coordinator, GroupState, JoinRequest};
pub(crate) use offsets::{Committed, OffsetStore, OffsetStoreError, TOPIC as OFFSETS_TOPIC};
pub(crate) use tenant_groups::{Groups, TenantGroups};

/// Whether a name the broker keeps is a tenant's offsets topic.
pub(crate) fn is_offsets_topic(tenancy: crate::scope::Tenancy, name: &str) -> bool {
    tenancy.split(name).1 == OFFSETS_TOPIC
}

/// Wall-clock milliseconds, as offsets and transaction records carry them.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
