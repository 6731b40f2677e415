//! Consumer groups with Kafka's classic protocol.
//!
//! - `assignor.rs`: the "consumer" protocol's subscription and assignment formats and the
//!   "range" assignor, compatible with Java and librdkafka members;
//! - `member.rs`: one member's requests to the group coordinator;
//! - `consumer.rs`: [`Consumer`], which polls the partitions its group assigns it;
//! - `session.rs`: [`GroupSession`], membership by identity for stateless callers.

mod assignor;
mod consumer;
mod member;
mod session;

pub use assignor::{range_assign, Assignment};
pub use consumer::{Consumer, ConsumerConfig, OffsetReset};
pub use session::GroupSession;
