//! Consumer groups: the classic group protocol's coordinator and the committed-offset store.

mod coordinator;
mod offsets;
mod tenant_groups;

pub(crate) use coordinator::{Coordinator, GroupState, JoinRequest};
pub(crate) use offsets::{Committed, OffsetStore, OffsetStoreError, TOPIC as OFFSETS_TOPIC};
pub(crate) use tenant_groups::{Groups, TenantGroups};
