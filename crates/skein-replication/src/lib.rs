//! The replication state machines of a Skein broker, without I/O: a leader's view of its
//! followers and its high watermark ([`Progress`]), and where a returning follower cuts
//! its log ([`truncation_point`]). The broker drives them from its request handlers and
//! replica fetcher; the replication simulation (in the control plane's tests) drives the
//! same code under a simulated clock and network. Time is `tokio::time::Instant`, so a
//! paused or simulated runtime controls it.

mod progress;
mod truncation;
mod wakers;

pub use progress::{LeaderView, Progress};
pub use truncation::{truncation_point, EpochAnswer, FollowerLog};
pub use wakers::{any_woken, Wakers};
