//! Who is asking: Kafka principals such as `User:alice`.

use std::fmt;
use std::str::FromStr;

use crate::AclError;

const USER_TYPE: &str = "User";
const WILDCARD_NAME: &str = "*";

/// An authenticated identity, written `<type>:<name>` as in Kafka (`User:alice`).
///
/// Type and name compare case-sensitively, as in Kafka. The name may itself contain `:`
/// (only the first `:` separates the parts).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// The principal type, such as `User`.
    pub principal_type: String,
    /// The name within the type, such as `alice`.
    pub name: String,
}

impl Principal {
    /// The principal `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        Principal {
            principal_type: USER_TYPE.to_owned(),
            name: name.into(),
        }
    }

    /// `User:*`, which in a binding stands for every principal, whatever its type.
    pub fn wildcard() -> Self {
        Principal::user(WILDCARD_NAME)
    }

    /// Whether this is `User:*`.
    pub fn is_wildcard(&self) -> bool {
        self.principal_type == USER_TYPE && self.name == WILDCARD_NAME
    }

    /// Whether both parts are non-empty, as [`FromStr`] requires.
    pub(crate) fn is_well_formed(&self) -> bool {
        !self.principal_type.is_empty() && !self.name.is_empty()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

impl FromStr for Principal {
    type Err = AclError;

    /// Parses `<type>:<name>`, splitting at the first `:`; both parts must be non-empty.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || AclError::InvalidPrincipal {
            principal: s.to_owned(),
        };
        let (principal_type, name) = s.split_once(':').ok_or_else(invalid)?;
        let principal = Principal {
            principal_type: principal_type.to_owned(),
            name: name.to_owned(),
        };
        if principal.is_well_formed() {
            Ok(principal)
        } else {
            Err(invalid())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_kafka_principals() {
        let table = [
            ("User:alice", "User", "alice"),
            ("User:*", "User", "*"),
            ("ServiceAccount:billing", "ServiceAccount", "billing"),
            (
                "User:CN=alice,O=Example:Org",
                "User",
                "CN=alice,O=Example:Org",
            ),
            ("user:Alice", "user", "Alice"),
        ];
        for (text, principal_type, name) in table {
            let principal: Principal = text.parse().unwrap();
            assert_eq!(principal.principal_type, principal_type, "{text}");
            assert_eq!(principal.name, name, "{text}");
            assert_eq!(principal.to_string(), text);
        }
    }

    #[test]
    fn rejects_principals_without_type_or_name() {
        for text in ["", "alice", ":alice", "User:", ":", "User"] {
            assert_eq!(
                text.parse::<Principal>(),
                Err(AclError::InvalidPrincipal {
                    principal: text.to_owned()
                }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn only_user_star_is_the_wildcard() {
        assert!(Principal::wildcard().is_wildcard());
        assert_eq!(Principal::wildcard().to_string(), "User:*");
        assert!("User:*".parse::<Principal>().unwrap().is_wildcard());
        for text in ["User:alice", "user:*", "ServiceAccount:*", "User:**"] {
            assert!(!text.parse::<Principal>().unwrap().is_wildcard(), "{text}");
        }
    }

    #[test]
    fn user_builds_a_user_principal() {
        assert_eq!(Principal::user("alice"), "User:alice".parse().unwrap());
    }
}

/// Whether `name` is a tenant name: 1 to 63 of `a-z`, `0-9` and `-`, starting with a
/// letter (the catalog's rule). A name that is not one (`acme.eu`, say) would name another
/// tenant's namespace once the broker prefixes names with it, so a token claiming one is
/// refused wherever a claim names the tenant.
pub fn is_tenant_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tenant_name_tests {
    use super::is_tenant_name;

    #[test]
    fn tenant_names_follow_the_catalogs_grammar() {
        for good in ["acme", "a", "acme-eu-2", &"a".repeat(63)] {
            assert!(is_tenant_name(good), "{good}");
        }
        for bad in [
            "",
            "acme.eu",
            "Acme",
            "1acme",
            "-acme",
            "acme_eu",
            &"a".repeat(64),
            "acmé",
        ] {
            assert!(!is_tenant_name(bad), "{bad}");
        }
    }
}
