//! Names checked before they reach the database, with messages that say what is wrong.

use crate::{CatalogError, Result};

/// Tenant names: 1-63 of `a-z`, `0-9` and `-`, starting with a letter (they prefix topic and
/// group names inside the cluster, so they stay short and unambiguous).
pub fn validate_tenant_name(name: &str) -> Result<()> {
    let invalid = |reason: String| CatalogError::Invalid {
        what: "tenant name",
        reason,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(invalid(format!("{name:?} must be 1 to 63 characters long")));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid(format!(
            "{name:?} must start with a lowercase letter"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(invalid(format!(
            "{name:?} contains {c:?}; only a-z, 0-9 and '-' are allowed"
        )));
    }
    Ok(())
}

/// The internal topic of a tenant's committed offsets, made by the controller
/// ([`Catalog::create_internal_topic`](crate::Catalog::create_internal_topic)).
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// The internal topic of a tenant's transactions, made by the controller like
/// [`CONSUMER_OFFSETS`].
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// The internal topics a tenant has: made by the controller when a broker first needs them.
pub const INTERNAL_TOPICS: [&str; 2] = [CONSUMER_OFFSETS, TRANSACTION_STATE];

/// Whether a topic name belongs to the cluster (`__` first) rather than to a tenant.
pub fn is_internal_topic(name: &str) -> bool {
    name.starts_with("__")
}

/// Refuses a change to an internal topic by a tenant's request.
pub fn refuse_internal_topic(name: &str) -> Result<()> {
    if is_internal_topic(name) {
        return Err(CatalogError::Invalid {
            what: "topic name",
            reason: format!("{name:?} is one of the cluster's internal topics"),
        });
    }
    Ok(())
}

/// The longest a tenant's name and a topic's, joined by a `.`, may be: Kafka's topic name
/// limit. A broker serving every tenant keeps topic `orders` of tenant `acme` as
/// `acme.orders`, in its log directory names too, so every topic must fit that way whichever
/// brokers serve it.
pub const MAX_QUALIFIED_TOPIC_NAME: usize = 249;

/// [`validate_topic_name`], and the name fits beside its tenant's
/// ([`MAX_QUALIFIED_TOPIC_NAME`]).
pub fn validate_tenant_topic_name(tenant: &str, name: &str) -> Result<()> {
    validate_topic_name(name)?;
    let room = MAX_QUALIFIED_TOPIC_NAME.saturating_sub(tenant.len() + 1);
    if name.len() > room {
        return Err(CatalogError::Invalid {
            what: "topic name",
            reason: format!(
                "{name:?} is {} characters long; tenant {tenant:?}'s topic names may have at most {room}",
                name.len()
            ),
        });
    }
    Ok(())
}

/// Kafka's topic name rules: 1-249 of `a-zA-Z0-9._-`, and not `.` or `..`; names starting
/// with `__` (`__consumer_offsets`, `__transaction_state`, ...) belong to the cluster.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let invalid = |reason: String| CatalogError::Invalid {
        what: "topic name",
        reason,
    };
    if name.starts_with("__") {
        return Err(invalid(format!(
            "{name:?} starts with '__', which is reserved for the cluster's internal topics"
        )));
    }
    if name.is_empty() || name.len() > 249 {
        return Err(invalid(format!(
            "{name:?} must be 1 to 249 characters long"
        )));
    }
    if name == "." || name == ".." {
        return Err(invalid(format!("{name:?} is reserved")));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(invalid(format!(
            "{name:?} contains {c:?}; only a-z, A-Z, 0-9, '.', '_' and '-' are allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names() {
        for ok in ["acme", "a", "team-7", &"a".repeat(63)] {
            assert!(validate_tenant_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "7up", "Acme", "a_b", "a.b", &"a".repeat(64), "-x"] {
            assert!(validate_tenant_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn topic_names() {
        for ok in ["orders", "a.b_c-D9", &"t".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "a/b",
            "ü",
            &"t".repeat(250),
            "__consumer_offsets",
            "__x",
        ] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
        // Beside its tenant's name, a topic's fits Kafka's 249.
        assert!(validate_tenant_topic_name("acme", &"t".repeat(244)).is_ok());
        assert!(validate_tenant_topic_name("acme", &"t".repeat(245)).is_err());
        assert!(validate_tenant_topic_name(&"a".repeat(63), &"t".repeat(185)).is_ok());
        assert!(validate_tenant_topic_name(&"a".repeat(63), &"t".repeat(186)).is_err());
        assert!(validate_tenant_topic_name("acme", "__x").is_err());
    }
}
