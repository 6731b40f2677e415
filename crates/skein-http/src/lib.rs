//! What Skein's HTTP APIs (the admin API and the gateway) share: every error as an RFC 9457
//! problem details body, and request extractors whose rejections are such problems.

mod extract;
mod problem;

pub use extract::{ApiJson, ApiPath, ApiQuery};
pub use problem::Problem;
