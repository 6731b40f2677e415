use thiserror::Error;

/// Why an ACL value could not be decoded, parsed or accepted.
///
/// Every variant maps to Kafka's `INVALID_REQUEST` on the wire and to a `400` in the REST API.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AclError {
    /// A wire code that Kafka does not define for this field, or that Skein does not support
    /// (for example the `DELEGATION_TOKEN` resource type).
    #[error("unknown {kind} code {code}")]
    UnknownCode {
        /// The field being decoded, such as `"operation"`.
        kind: &'static str,
        /// The code that was received.
        code: i8,
    },
    /// A name that is not one of Kafka's names for this field.
    #[error("unknown {kind} {name:?}")]
    UnknownName {
        /// The field being parsed, such as `"operation"`.
        kind: &'static str,
        /// The text that was received.
        name: String,
    },
    /// `ANY` or `MATCH`, which select bindings in a filter but cannot be part of a binding.
    #[error("{kind} {name} is only valid in a filter")]
    FilterOnly {
        /// The field being decoded or parsed, such as `"pattern type"`.
        kind: &'static str,
        /// Kafka's name of the filter-only value.
        name: &'static str,
    },
    /// A principal, host or resource name longer than a binding may hold (metadata
    /// snapshots carry every binding, so their size is bounded here).
    #[error("the {field} is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// The field: `"principal"`, `"host"` or `"resource name"`.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// A principal that is not `<type>:<name>` with both parts non-empty.
    #[error("principal {principal:?} is not of the form <type>:<name>")]
    InvalidPrincipal {
        /// The principal as received.
        principal: String,
    },
    /// A binding with an empty host; `*` is the spelling for any host.
    #[error("host is empty; use \"*\" for any host")]
    EmptyHost,
    /// A binding with an empty resource name.
    #[error("resource name is empty")]
    EmptyResourceName,
    /// A `PREFIXED` pattern `*`, which would look like a wildcard but only match names starting
    /// with `*`.
    #[error("PREFIXED pattern \"*\" is not allowed; use LITERAL \"*\" to match every name")]
    PrefixedWildcard,
    /// A `CLUSTER` binding whose resource name is not `kafka-cluster`.
    #[error("cluster resource name must be \"kafka-cluster\", not {name:?}")]
    InvalidClusterName {
        /// The resource name as received.
        name: String,
    },
}
