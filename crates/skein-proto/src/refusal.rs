//! The controller's refusals as typed reasons: [`status`] makes a gRPC status that carries a
//! [`Reason`] in its details, and [`reason`] reads it back (`Unspecified` from a status that
//! has none, such as one made by tonic itself), so each caller maps reasons to its own errors
//! once.

use prost::Message;

use crate::controller as pb;

pub use pb::refusal::Reason;

/// A status of `code` with `message`, carrying `reason`.
pub fn status(code: tonic::Code, message: impl Into<String>, reason: Reason) -> tonic::Status {
    let details = pb::Refusal {
        reason: reason as i32,
    }
    .encode_to_vec();
    tonic::Status::with_details(code, message, details.into())
}

/// The reason `status` carries.
pub fn reason(status: &tonic::Status) -> Reason {
    pb::Refusal::decode(status.details())
        .ok()
        .and_then(|refusal| Reason::try_from(refusal.reason).ok())
        .unwrap_or(Reason::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_survives_the_status_and_its_absence_is_unspecified() {
        let refused = status(
            tonic::Code::InvalidArgument,
            "too many partitions",
            Reason::InvalidPartitions,
        );
        assert_eq!(reason(&refused), Reason::InvalidPartitions);
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            reason(&tonic::Status::unavailable("connection refused")),
            Reason::Unspecified
        );
        let garbled =
            tonic::Status::with_details(tonic::Code::Internal, "x", vec![0xff, 0xff, 0xff].into());
        assert_eq!(reason(&garbled), Reason::Unspecified);
    }
}
