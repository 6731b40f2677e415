//! SASL/SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), as Kafka uses it (KIP-84):
//! the credential a server keeps, derived from a password or from a salted password (what
//! Kafka's AlterUserScramCredentials carries), and the server's side of the exchange.
//!
//! No I/O and no randomness: the caller supplies salts and server nonces, and keeps the
//! state between the two rounds.
//!
//! ```text
//! C: n,,n=<user>,r=<client nonce>                              ClientFirst::parse
//! S: r=<client nonce><server nonce>,s=<salt>,i=<iterations>    ClientFirst::reply
//! C: c=biws,r=<both nonces>,p=<proof>                          ServerFirst::finish
//! S: v=<server signature>
//! ```
//!
//! Every message a client sends is bounded by [`MAX_MESSAGE_BYTES`] before it is read, and
//! everything in it is checked before it is used; a refusal names its reason for the logs,
//! and the caller answers every one the same way.
#![warn(missing_docs)]

mod credential;
mod exchange;
mod mechanism;

pub use credential::{
    Credential, DEFAULT_ITERATIONS, MAX_ITERATIONS, MAX_SALT_BYTES, MIN_ITERATIONS,
};
pub use exchange::{ClientFirst, ServerFirst, MAX_MESSAGE_BYTES, MAX_NONCE_BYTES, MAX_USER_BYTES};
pub use mechanism::Mechanism;

/// Why a credential or a client message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramError {
    /// The message is longer than any SCRAM message a client needs.
    #[error("the SCRAM message is over {MAX_MESSAGE_BYTES} bytes")]
    TooLarge,
    /// The message does not follow the grammar of RFC 5802.
    #[error("the SCRAM message is malformed: {0}")]
    Malformed(&'static str),
    /// The client asked for channel binding, which SCRAM over Kafka does not offer.
    #[error("channel binding is not supported")]
    ChannelBinding,
    /// The client sent an extension (such as Kafka's `tokenauth` for delegation tokens).
    #[error("SCRAM extensions are not supported")]
    Extension,
    /// The authorization identity names someone other than the user.
    #[error("the authorization identity must be the user's own name")]
    OtherAuthzid,
    /// The final message's nonce is not the one the server sent.
    #[error("the nonce does not match the exchange")]
    NonceMismatch,
    /// The final message's channel binding is not the first message's GS2 header.
    #[error("the channel binding does not match the first message")]
    BindingMismatch,
    /// The proof is wrong: a wrong password, or an unknown user.
    #[error("invalid credentials")]
    BadProof,
    /// An iteration count outside the bounds this server accepts.
    #[error("{0} iterations is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}")]
    Iterations(u32),
    /// A salt that is empty or longer than [`MAX_SALT_BYTES`].
    #[error("a salt must be 1 to {MAX_SALT_BYTES} bytes")]
    Salt,
    /// A key or salted password of the wrong length for its mechanism.
    #[error("a {mechanism} key must be {expected} bytes")]
    KeyLength {
        /// The credential's mechanism.
        mechanism: Mechanism,
        /// The mechanism's hash length.
        expected: usize,
    },
    /// A server nonce that is empty, too long or not printable.
    #[error("the server nonce is not a printable nonce of at most {MAX_NONCE_BYTES} bytes")]
    ServerNonce,
    /// The credential is for another mechanism than the exchange.
    #[error("the credential is for {credential}, the exchange is {exchange}")]
    OtherMechanism {
        /// The credential's.
        credential: Mechanism,
        /// The exchange's.
        exchange: Mechanism,
    },
}
