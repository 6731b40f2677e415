//! What a request does to a resource, and whether a binding allows or denies it.

kafka_enum! {
    /// An operation on a resource.
    ///
    /// Kafka's `CREATE_TOKENS` (13), `DESCRIBE_TOKENS` (14) and `TWO_PHASE_COMMIT` (15) are not
    /// supported and decode as unknown.
    pub enum Operation ("operation") {
        /// In a binding, every operation. A request never asks for it.
        All = 2, "ALL";
        /// Fetch from a topic, join or commit in a group.
        Read = 3, "READ";
        /// Produce to a topic, use a transactional id.
        Write = 4, "WRITE";
        /// Create topics.
        Create = 5, "CREATE";
        /// Delete topics, groups or records.
        Delete = 6, "DELETE";
        /// Change partitions or ACLs.
        Alter = 7, "ALTER";
        /// Read metadata, offsets or ACLs.
        Describe = 8, "DESCRIBE";
        /// Broker-to-broker and controller requests.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Read configuration.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Change configuration.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce without a transactional id.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
    }
    filter_only { 1, "ANY"; }
}
any_filter!(Operation);

impl Operation {
    /// Whether an `ALLOW` binding for `self` grants `requested`.
    ///
    /// `ALL` grants everything; `READ`, `WRITE`, `DELETE` and `ALTER` also grant `DESCRIBE`;
    /// `ALTER_CONFIGS` also grants `DESCRIBE_CONFIGS`. `DENY` bindings use plain equality
    /// (or `ALL`) instead: denying `READ` does not deny `DESCRIBE`.
    pub fn allow_grants(self, requested: Operation) -> bool {
        use Operation::{All, Alter, AlterConfigs, Delete, Describe, DescribeConfigs, Read, Write};
        self == All
            || self == requested
            || match requested {
                Describe => matches!(self, Read | Write | Delete | Alter),
                DescribeConfigs => self == AlterConfigs,
                _ => false,
            }
    }
}

kafka_enum! {
    /// Whether a binding allows or denies. A matching `DENY` always wins.
    pub enum Permission ("permission") {
        /// The binding denies the operation.
        Deny = 2, "DENY";
        /// The binding allows the operation.
        Allow = 3, "ALLOW";
    }
    filter_only { 1, "ANY"; }
}
any_filter!(Permission);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AclError;

    #[test]
    fn operation_codes_and_names_match_kafka() {
        let table = [
            (Operation::All, 2, "ALL"),
            (Operation::Read, 3, "READ"),
            (Operation::Write, 4, "WRITE"),
            (Operation::Create, 5, "CREATE"),
            (Operation::Delete, 6, "DELETE"),
            (Operation::Alter, 7, "ALTER"),
            (Operation::Describe, 8, "DESCRIBE"),
            (Operation::ClusterAction, 9, "CLUSTER_ACTION"),
            (Operation::DescribeConfigs, 10, "DESCRIBE_CONFIGS"),
            (Operation::AlterConfigs, 11, "ALTER_CONFIGS"),
            (Operation::IdempotentWrite, 12, "IDEMPOTENT_WRITE"),
        ];
        assert_eq!(table.len(), Operation::VARIANTS.len());
        for (variant, code, name) in table {
            assert_eq!(variant.code(), code, "{variant:?}");
            assert_eq!(Operation::from_code(code), Ok(variant));
            assert_eq!(variant.to_string(), name);
            assert_eq!(name.parse::<Operation>(), Ok(variant));
            assert_eq!(name.to_ascii_lowercase().parse::<Operation>(), Ok(variant));
            assert_eq!(Operation::filter_code(Some(variant)), code);
            assert_eq!(Operation::filter_from_code(code), Ok(Some(variant)));
            assert_eq!(Operation::filter_from_str(name), Ok(Some(variant)));
        }
        for &variant in Operation::VARIANTS {
            assert_eq!(Operation::from_code(variant.code()), Ok(variant));
            assert_eq!(variant.as_str().parse::<Operation>(), Ok(variant));
        }
    }

    #[test]
    fn operation_any_is_filter_only() {
        let filter_only = Err(AclError::FilterOnly {
            kind: "operation",
            name: "ANY",
        });
        assert_eq!(Operation::from_code(1), filter_only);
        assert_eq!("ANY".parse::<Operation>(), filter_only);
        assert_eq!(Operation::filter_code(None), 1);
        assert_eq!(Operation::filter_from_code(1), Ok(None));
        assert_eq!(Operation::filter_from_str("any"), Ok(None));
    }

    #[test]
    fn operation_rejects_unknown_codes_and_names() {
        // 13..=15 are CREATE_TOKENS, DESCRIBE_TOKENS and TWO_PHASE_COMMIT.
        for code in [i8::MIN, -1, 0, 13, 14, 15, i8::MAX] {
            let unknown = Err(AclError::UnknownCode {
                kind: "operation",
                code,
            });
            assert_eq!(Operation::from_code(code), unknown);
            assert_eq!(
                Operation::filter_from_code(code).map(|_| ()),
                unknown.map(|_| ())
            );
        }
        for name in ["", "READS", "ClusterAction", "CREATE_TOKENS", "READ "] {
            let unknown = Err(AclError::UnknownName {
                kind: "operation",
                name: name.into(),
            });
            assert_eq!(name.parse::<Operation>(), unknown);
            assert_eq!(
                Operation::filter_from_str(name).map(|_| ()),
                unknown.map(|_| ())
            );
        }
    }

    #[test]
    fn permission_codes_and_names_match_kafka() {
        let table = [
            (Permission::Deny, 2, "DENY"),
            (Permission::Allow, 3, "ALLOW"),
        ];
        assert_eq!(table.len(), Permission::VARIANTS.len());
        for (variant, code, name) in table {
            assert_eq!(variant.code(), code, "{variant:?}");
            assert_eq!(Permission::from_code(code), Ok(variant));
            assert_eq!(variant.to_string(), name);
            assert_eq!(name.to_ascii_lowercase().parse::<Permission>(), Ok(variant));
            assert_eq!(Permission::filter_code(Some(variant)), code);
            assert_eq!(Permission::filter_from_code(code), Ok(Some(variant)));
        }
        let filter_only = Err(AclError::FilterOnly {
            kind: "permission",
            name: "ANY",
        });
        assert_eq!(Permission::from_code(1), filter_only);
        assert_eq!("Any".parse::<Permission>(), filter_only);
        assert_eq!(Permission::filter_code(None), 1);
        assert_eq!(Permission::filter_from_code(1), Ok(None));
        assert_eq!(Permission::filter_from_str("ANY"), Ok(None));
        for code in [0, 4, -1] {
            let unknown = Err(AclError::UnknownCode {
                kind: "permission",
                code,
            });
            assert_eq!(Permission::from_code(code), unknown);
        }
        assert_eq!(
            "GRANT".parse::<Permission>(),
            Err(AclError::UnknownName {
                kind: "permission",
                name: "GRANT".into()
            })
        );
    }

    #[test]
    fn allow_grants_follows_kafka_implications() {
        use Operation::*;
        // Every (granted, requested) pair that an ALLOW binding covers besides equality and ALL.
        let implied = [
            (Read, Describe),
            (Write, Describe),
            (Delete, Describe),
            (Alter, Describe),
            (AlterConfigs, DescribeConfigs),
        ];
        for &granted in Operation::VARIANTS {
            for &requested in Operation::VARIANTS {
                let expected = granted == All
                    || granted == requested
                    || implied.contains(&(granted, requested));
                assert_eq!(
                    granted.allow_grants(requested),
                    expected,
                    "ALLOW {granted} for requested {requested}"
                );
            }
        }
    }
}
