//! What an ACL protects: resource types, name patterns, and the resource being accessed.

/// The only name the `CLUSTER` resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The literal resource name that matches every name of its resource type.
pub(crate) const WILDCARD_NAME: &str = "*";

kafka_enum! {
    /// The kind of resource an ACL protects.
    ///
    /// Kafka's `DELEGATION_TOKEN` (6) and `USER` (7) are not supported and decode as unknown.
    pub enum ResourceType ("resource type") {
        /// A topic, named by the topic name.
        Topic = 2, "TOPIC";
        /// A consumer group, named by the group id.
        Group = 3, "GROUP";
        /// The cluster itself, always named [`CLUSTER_NAME`].
        Cluster = 4, "CLUSTER";
        /// A transactional producer, named by its transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
    }
    filter_only { 1, "ANY"; }
}
any_filter!(ResourceType);

kafka_enum! {
    /// How a binding's resource name is compared with the name of the resource being accessed.
    pub enum PatternType ("pattern type") {
        /// The names are equal, or the binding's name is `*` (every name).
        Literal = 3, "LITERAL";
        /// The accessed name starts with the binding's name.
        Prefixed = 4, "PREFIXED";
    }
    filter_only { 1, "ANY"; 2, "MATCH"; }
}

impl PatternType {
    /// Whether a binding with this pattern type and `pattern` covers the resource `name`.
    ///
    /// An empty prefix matches nothing: validation refuses it, and a binding that slipped past
    /// validation must not grant access to every name.
    pub(crate) fn matches(self, pattern: &str, name: &str) -> bool {
        match self {
            PatternType::Literal => pattern == name || pattern == WILDCARD_NAME,
            PatternType::Prefixed => !pattern.is_empty() && name.starts_with(pattern),
        }
    }
}

kafka_enum! {
    /// How a filter (DescribeAcls, DeleteAcls, the REST API) selects bindings by pattern.
    #[derive(Default)]
    pub enum PatternTypeFilter ("pattern type") {
        /// Any pattern type; a filter name must equal the binding's name exactly.
        #[default]
        Any = 1, "ANY";
        /// Every binding that would apply to the filter's name: `LITERAL` bindings with that
        /// name or `*`, and `PREFIXED` bindings whose prefix starts the name.
        Match = 2, "MATCH";
        /// `LITERAL` bindings only; a filter name must equal the binding's name exactly.
        Literal = 3, "LITERAL";
        /// `PREFIXED` bindings only; a filter name must equal the binding's name exactly.
        Prefixed = 4, "PREFIXED";
    }
    filter_only {}
}

impl From<PatternType> for PatternTypeFilter {
    fn from(pattern_type: PatternType) -> Self {
        match pattern_type {
            PatternType::Literal => PatternTypeFilter::Literal,
            PatternType::Prefixed => PatternTypeFilter::Prefixed,
        }
    }
}

/// The resource a request touches, as handed to [`authorize`](crate::authorize).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resource<'a> {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// Its full name, such as the topic name.
    pub name: &'a str,
}

impl<'a> Resource<'a> {
    /// The resource of type `resource_type` called `name`.
    pub const fn new(resource_type: ResourceType, name: &'a str) -> Self {
        Resource {
            resource_type,
            name,
        }
    }

    /// The cluster resource, `CLUSTER` named [`CLUSTER_NAME`].
    pub const fn cluster() -> Resource<'static> {
        Resource {
            resource_type: ResourceType::Cluster,
            name: CLUSTER_NAME,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AclError;

    #[test]
    fn resource_type_codes_and_names_match_kafka() {
        let table = [
            (ResourceType::Topic, 2, "TOPIC"),
            (ResourceType::Group, 3, "GROUP"),
            (ResourceType::Cluster, 4, "CLUSTER"),
            (ResourceType::TransactionalId, 5, "TRANSACTIONAL_ID"),
        ];
        assert_eq!(table.len(), ResourceType::VARIANTS.len());
        for (variant, code, name) in table {
            assert_eq!(variant.code(), code, "{variant:?}");
            assert_eq!(ResourceType::from_code(code), Ok(variant));
            assert_eq!(variant.to_string(), name);
            assert_eq!(name.parse::<ResourceType>(), Ok(variant));
            assert_eq!(
                name.to_ascii_lowercase().parse::<ResourceType>(),
                Ok(variant)
            );
            assert_eq!(ResourceType::filter_code(Some(variant)), code);
            assert_eq!(ResourceType::filter_from_code(code), Ok(Some(variant)));
            assert_eq!(ResourceType::filter_from_str(name), Ok(Some(variant)));
        }
        for &variant in ResourceType::VARIANTS {
            assert_eq!(ResourceType::from_code(variant.code()), Ok(variant));
            assert_eq!(variant.as_str().parse::<ResourceType>(), Ok(variant));
        }
    }

    #[test]
    fn resource_type_any_is_filter_only() {
        let filter_only = Err(AclError::FilterOnly {
            kind: "resource type",
            name: "ANY",
        });
        assert_eq!(ResourceType::from_code(1), filter_only);
        assert_eq!("any".parse::<ResourceType>(), filter_only);
        assert_eq!(ResourceType::filter_code(None), 1);
        assert_eq!(ResourceType::filter_from_code(1), Ok(None));
        assert_eq!(ResourceType::filter_from_str("Any"), Ok(None));
    }

    #[test]
    fn resource_type_rejects_unknown_codes_and_names() {
        // 0 is Kafka's UNKNOWN; 6 and 7 are DELEGATION_TOKEN and USER, which Skein does not have.
        for code in [i8::MIN, -1, 0, 6, 7, i8::MAX] {
            let unknown = Err(AclError::UnknownCode {
                kind: "resource type",
                code,
            });
            assert_eq!(ResourceType::from_code(code), unknown);
            assert_eq!(
                ResourceType::filter_from_code(code).map(|_| ()),
                unknown.map(|_| ())
            );
        }
        for name in [
            "",
            "TOPICS",
            "TransactionalId",
            "DELEGATION_TOKEN",
            " TOPIC",
        ] {
            let unknown = Err(AclError::UnknownName {
                kind: "resource type",
                name: name.into(),
            });
            assert_eq!(name.parse::<ResourceType>(), unknown);
            assert_eq!(
                ResourceType::filter_from_str(name).map(|_| ()),
                unknown.map(|_| ())
            );
        }
    }

    #[test]
    fn pattern_type_codes_and_names_match_kafka() {
        let table = [
            (PatternType::Literal, 3, "LITERAL"),
            (PatternType::Prefixed, 4, "PREFIXED"),
        ];
        assert_eq!(table.len(), PatternType::VARIANTS.len());
        for (variant, code, name) in table {
            assert_eq!(variant.code(), code, "{variant:?}");
            assert_eq!(PatternType::from_code(code), Ok(variant));
            assert_eq!(variant.to_string(), name);
            assert_eq!(
                name.to_ascii_lowercase().parse::<PatternType>(),
                Ok(variant)
            );
            assert_eq!(PatternTypeFilter::from(variant).code(), code);
        }
    }

    #[test]
    fn pattern_type_any_and_match_are_filter_only() {
        for (code, name) in [(1, "ANY"), (2, "MATCH")] {
            let filter_only = Err(AclError::FilterOnly {
                kind: "pattern type",
                name,
            });
            assert_eq!(PatternType::from_code(code), filter_only);
            assert_eq!(
                name.to_ascii_lowercase().parse::<PatternType>(),
                filter_only
            );
        }
        for code in [0, 5, -1] {
            let unknown = Err(AclError::UnknownCode {
                kind: "pattern type",
                code,
            });
            assert_eq!(PatternType::from_code(code), unknown);
        }
        assert_eq!(
            "WILDCARD".parse::<PatternType>(),
            Err(AclError::UnknownName {
                kind: "pattern type",
                name: "WILDCARD".into()
            })
        );
    }

    #[test]
    fn pattern_type_filter_codes_and_names_match_kafka() {
        let table = [
            (PatternTypeFilter::Any, 1, "ANY"),
            (PatternTypeFilter::Match, 2, "MATCH"),
            (PatternTypeFilter::Literal, 3, "LITERAL"),
            (PatternTypeFilter::Prefixed, 4, "PREFIXED"),
        ];
        assert_eq!(table.len(), PatternTypeFilter::VARIANTS.len());
        for (variant, code, name) in table {
            assert_eq!(variant.code(), code, "{variant:?}");
            assert_eq!(PatternTypeFilter::from_code(code), Ok(variant));
            assert_eq!(variant.to_string(), name);
            assert_eq!(
                name.to_ascii_lowercase().parse::<PatternTypeFilter>(),
                Ok(variant)
            );
        }
        assert_eq!(PatternTypeFilter::default(), PatternTypeFilter::Any);
        for code in [0, 5] {
            let unknown = Err(AclError::UnknownCode {
                kind: "pattern type",
                code,
            });
            assert_eq!(PatternTypeFilter::from_code(code), unknown);
        }
    }

    #[test]
    fn pattern_matching_follows_kafka() {
        use PatternType::{Literal, Prefixed};
        let table = [
            (Literal, "orders", "orders", true),
            (Literal, "orders", "orders.eu", false),
            (Literal, "orders", "Orders", false),
            (Literal, "*", "orders", true),
            (Literal, "*", "*", true),
            (Prefixed, "orders.", "orders.eu", true),
            (Prefixed, "orders.", "orders.", true),
            (Prefixed, "orders.", "orders", false),
            (Prefixed, "orders.", "xorders.eu", false),
            (Prefixed, "*", "orders", false),
            (Prefixed, "", "orders", false),
        ];
        for (pattern_type, pattern, name, expected) in table {
            assert_eq!(
                pattern_type.matches(pattern, name),
                expected,
                "{pattern_type} {pattern:?} against {name:?}"
            );
        }
    }

    #[test]
    fn cluster_resource_is_named_kafka_cluster() {
        assert_eq!(
            Resource::cluster(),
            Resource::new(ResourceType::Cluster, "kafka-cluster")
        );
    }
}
