//! Kafka `AclBindingFilter` semantics of [`skein_auth::AclBindingFilter::matches`].

mod support;

use skein_auth::ResourceType;
use skein_auth::{AclBindingFilter, Operation, PatternTypeFilter, Permission, Principal};
use support::bindings;

const STORED: [&str; 6] = [
    "ALLOW User:alice * READ TOPIC LITERAL orders",
    "ALLOW User:alice * WRITE TOPIC PREFIXED orders.",
    "DENY User:* 10.0.0.9 READ TOPIC LITERAL *",
    "ALLOW User:bob * READ GROUP LITERAL orders",
    "ALLOW User:alice * DESCRIBE TOPIC PREFIXED ord",
    "ALLOW User:bob * ALL TOPIC LITERAL orders.eu",
];

fn selected(filter: &AclBindingFilter) -> Vec<usize> {
    let acls = bindings(&STORED);
    (0..acls.len())
        .filter(|&i| filter.matches(&acls[i]))
        .collect()
}

fn by_pattern(pattern_type: PatternTypeFilter, name: Option<&str>) -> AclBindingFilter {
    AclBindingFilter {
        pattern_type,
        resource_name: name.map(str::to_owned),
        ..AclBindingFilter::ANY
    }
}

fn topics(filter: AclBindingFilter) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: Some(ResourceType::Topic),
        ..filter
    }
}

#[test]
fn pattern_type_filters() {
    use PatternTypeFilter::{Any, Literal, Match, Prefixed};
    let table: [(&str, AclBindingFilter, &[usize]); 16] = [
        (
            "ANY selects everything",
            AclBindingFilter::ANY,
            &[0, 1, 2, 3, 4, 5],
        ),
        (
            "default is ANY",
            AclBindingFilter::default(),
            &[0, 1, 2, 3, 4, 5],
        ),
        (
            "ANY with a name compares exactly",
            by_pattern(Any, Some("orders")),
            &[0, 3],
        ),
        (
            "ANY with a name and a type",
            topics(by_pattern(Any, Some("orders"))),
            &[0],
        ),
        (
            "ANY with * finds the wildcard binding only",
            by_pattern(Any, Some("*")),
            &[2],
        ),
        (
            "LITERAL without a name",
            by_pattern(Literal, None),
            &[0, 2, 3, 5],
        ),
        (
            "LITERAL with a name",
            by_pattern(Literal, Some("orders")),
            &[0, 3],
        ),
        (
            "LITERAL does not expand *",
            by_pattern(Literal, Some("orders.eu")),
            &[5],
        ),
        (
            "PREFIXED without a name",
            by_pattern(Prefixed, None),
            &[1, 4],
        ),
        (
            "PREFIXED with a name",
            by_pattern(Prefixed, Some("orders.")),
            &[1],
        ),
        (
            "PREFIXED compares the prefix exactly",
            by_pattern(Prefixed, Some("orders.eu")),
            &[],
        ),
        (
            "MATCH without a name",
            by_pattern(Match, None),
            &[0, 1, 2, 3, 4, 5],
        ),
        (
            "MATCH finds every binding that applies to a name",
            topics(by_pattern(Match, Some("orders.eu"))),
            &[1, 2, 4, 5],
        ),
        (
            "MATCH skips prefixes longer than the name",
            topics(by_pattern(Match, Some("orders"))),
            &[0, 2, 4],
        ),
        (
            "MATCH across resource types",
            by_pattern(Match, Some("orders")),
            &[0, 2, 3, 4],
        ),
        (
            "MATCH for an unrelated name finds the wildcard",
            by_pattern(Match, Some("audit")),
            &[2],
        ),
    ];
    for (case, filter, expected) in table {
        assert_eq!(selected(&filter), expected, "{case}");
    }
}

#[test]
fn entry_filters_compare_exactly() {
    let table: [(&str, AclBindingFilter, &[usize]); 10] = [
        (
            "principal",
            AclBindingFilter {
                principal: Some(Principal::user("alice")),
                ..AclBindingFilter::ANY
            },
            &[0, 1, 4],
        ),
        (
            "User:* selects only wildcard bindings",
            AclBindingFilter {
                principal: Some(Principal::wildcard()),
                ..AclBindingFilter::ANY
            },
            &[2],
        ),
        (
            "host",
            AclBindingFilter {
                host: Some("10.0.0.9".into()),
                ..AclBindingFilter::ANY
            },
            &[2],
        ),
        (
            "host * selects only any-host bindings",
            AclBindingFilter {
                host: Some("*".into()),
                ..AclBindingFilter::ANY
            },
            &[0, 1, 3, 4, 5],
        ),
        (
            "operation READ does not select ALL",
            AclBindingFilter {
                operation: Some(Operation::Read),
                ..AclBindingFilter::ANY
            },
            &[0, 2, 3],
        ),
        (
            "operation ALL",
            AclBindingFilter {
                operation: Some(Operation::All),
                ..AclBindingFilter::ANY
            },
            &[5],
        ),
        (
            "permission DENY",
            AclBindingFilter {
                permission: Some(Permission::Deny),
                ..AclBindingFilter::ANY
            },
            &[2],
        ),
        (
            "permission ALLOW",
            AclBindingFilter {
                permission: Some(Permission::Allow),
                ..AclBindingFilter::ANY
            },
            &[0, 1, 3, 4, 5],
        ),
        (
            "resource type",
            AclBindingFilter {
                resource_type: Some(ResourceType::Group),
                ..AclBindingFilter::ANY
            },
            &[3],
        ),
        (
            "every field together",
            AclBindingFilter {
                principal: Some(Principal::user("alice")),
                host: Some("*".into()),
                permission: Some(Permission::Allow),
                ..topics(by_pattern(PatternTypeFilter::Match, Some("orders.eu")))
            },
            &[1, 4],
        ),
    ];
    for (case, filter, expected) in table {
        assert_eq!(selected(&filter), expected, "{case}");
    }
}
