//! Kafka `StandardAuthorizer` semantics of [`skein_auth::authorize`], one table row per rule.

mod support;

use skein_auth::{authorize, AclBinding, Decision, DenyReason, Operation, Principal, Resource};
use support::{binding, bindings};

/// What a row expects, with `DeniedBy` naming the index of the DENY binding that must be
/// reported.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Allowed,
    DeniedBy(usize),
    NoAllow,
}

impl Expect {
    fn decision(self, acls: &[AclBinding]) -> Decision<'_> {
        match self {
            Expect::Allowed => Decision::Allowed,
            Expect::DeniedBy(index) => Decision::Denied(DenyReason::DenyBinding(&acls[index])),
            Expect::NoAllow => Decision::Denied(DenyReason::NoAllowBinding),
        }
    }
}

/// Runs `authorize` for a request spelled `"<principal> <host> <operation> <type> <name>"`.
fn decide<'a>(acls: &'a [AclBinding], request: &str) -> Decision<'a> {
    let fields: Vec<&str> = request.split(' ').collect();
    let [principal, host, operation, resource_type, name] = fields[..] else {
        panic!("request spec needs 5 fields: {request:?}");
    };
    let principal: Principal = principal.parse().expect("principal");
    let resource = Resource::new(resource_type.parse().expect("resource type"), name);
    let operation = operation.parse().expect("operation");
    authorize(acls, &principal, host, operation, &resource)
}

fn check(table: &[(&str, &[&str], &str, Expect)]) {
    for &(case, specs, request, expect) in table {
        let acls = bindings(specs);
        assert_eq!(
            decide(&acls, request),
            expect.decision(&acls),
            "{case}: {request}"
        );
    }
}

use Expect::{Allowed, DeniedBy, NoAllow};

const ALICE_READ_ORDERS: &str = "ALLOW User:alice * READ TOPIC LITERAL orders";

#[test]
fn literal_and_prefixed_patterns() {
    check(&[
        (
            "literal equal name",
            &[ALICE_READ_ORDERS],
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "literal longer name",
            &[ALICE_READ_ORDERS],
            "User:alice 10.0.0.1 READ TOPIC orders.eu",
            NoAllow,
        ),
        (
            "literal is case-sensitive",
            &[ALICE_READ_ORDERS],
            "User:alice 10.0.0.1 READ TOPIC Orders",
            NoAllow,
        ),
        (
            "prefixed covers longer names",
            &["ALLOW User:alice * READ TOPIC PREFIXED orders."],
            "User:alice 10.0.0.1 READ TOPIC orders.eu",
            Allowed,
        ),
        (
            "prefixed covers the prefix itself",
            &["ALLOW User:alice * READ TOPIC PREFIXED orders."],
            "User:alice 10.0.0.1 READ TOPIC orders.",
            Allowed,
        ),
        (
            "prefixed does not cover shorter names",
            &["ALLOW User:alice * READ TOPIC PREFIXED orders."],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "prefixed is anchored at the start",
            &["ALLOW User:alice * READ TOPIC PREFIXED orders."],
            "User:alice 10.0.0.1 READ TOPIC xorders.eu",
            NoAllow,
        ),
    ]);
}

#[test]
fn wildcard_resource() {
    check(&[
        (
            "literal * covers every name",
            &["ALLOW User:alice * READ TOPIC LITERAL *"],
            "User:alice 10.0.0.1 READ TOPIC anything-at-all",
            Allowed,
        ),
        (
            "literal * covers only its resource type",
            &["ALLOW User:alice * READ TOPIC LITERAL *"],
            "User:alice 10.0.0.1 READ GROUP anything-at-all",
            NoAllow,
        ),
        (
            "prefixed * is a prefix, not a wildcard",
            &["ALLOW User:alice * READ TOPIC PREFIXED *"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
    ]);
}

#[test]
fn wildcard_principal() {
    let everyone_reads = "ALLOW User:* * READ TOPIC LITERAL orders";
    check(&[
        (
            "User:* covers any user",
            &[everyone_reads],
            "User:bob 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "User:* covers other principal types",
            &[everyone_reads],
            "ServiceAccount:billing 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "another user's binding",
            &[ALICE_READ_ORDERS],
            "User:bob 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "principal type must match",
            &[ALICE_READ_ORDERS],
            "ServiceAccount:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "principal name is case-sensitive",
            &[ALICE_READ_ORDERS],
            "User:Alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "only User:* is a wildcard",
            &["ALLOW ServiceAccount:* * READ TOPIC LITERAL orders"],
            "ServiceAccount:billing 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
    ]);
}

#[test]
fn host_matching() {
    let from_one_host = "ALLOW User:alice 10.0.0.1 READ TOPIC LITERAL orders";
    let allow_any_deny_one = [
        "ALLOW User:alice * READ TOPIC LITERAL orders",
        "DENY User:alice 10.0.0.9 READ TOPIC LITERAL orders",
    ];
    check(&[
        (
            "exact host",
            &[from_one_host],
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "other host",
            &[from_one_host],
            "User:alice 10.0.0.2 READ TOPIC orders",
            NoAllow,
        ),
        (
            "* covers IPv6 hosts",
            &[ALICE_READ_ORDERS],
            "User:alice ::1 READ TOPIC orders",
            Allowed,
        ),
        (
            "deny from the denied host",
            &allow_any_deny_one,
            "User:alice 10.0.0.9 READ TOPIC orders",
            DeniedBy(1),
        ),
        (
            "deny does not reach other hosts",
            &allow_any_deny_one,
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
    ]);
}

#[test]
fn deny_beats_allow() {
    check(&[
        (
            "deny after allow",
            &[
                ALICE_READ_ORDERS,
                "DENY User:alice * READ TOPIC LITERAL orders",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(1),
        ),
        (
            "deny before allow",
            &[
                "DENY User:alice * READ TOPIC LITERAL orders",
                ALICE_READ_ORDERS,
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(0),
        ),
        (
            "prefixed deny beats literal allow",
            &[
                "ALLOW User:alice * READ TOPIC LITERAL orders.eu",
                "DENY User:alice * READ TOPIC PREFIXED orders.",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders.eu",
            DeniedBy(1),
        ),
        (
            "wildcard principal deny beats a user's allow",
            &[ALICE_READ_ORDERS, "DENY User:* * READ TOPIC LITERAL orders"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(1),
        ),
        (
            "wildcard resource deny beats a literal allow",
            &[ALICE_READ_ORDERS, "DENY User:alice * READ TOPIC LITERAL *"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(1),
        ),
        (
            "the first matching deny is reported",
            &[
                "DENY User:alice * READ TOPIC LITERAL orders",
                "DENY User:alice * ALL TOPIC LITERAL orders",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(0),
        ),
        (
            "a deny for another operation does not apply",
            &[
                ALICE_READ_ORDERS,
                "DENY User:alice * WRITE TOPIC LITERAL orders",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "a deny for another principal does not apply",
            &[
                ALICE_READ_ORDERS,
                "DENY User:bob * READ TOPIC LITERAL orders",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
    ]);
}

#[test]
fn allow_all_grants_every_operation() {
    let acls = bindings(&["ALLOW User:alice * ALL TOPIC LITERAL orders"]);
    for operation in every_operation() {
        let request = format!("User:alice 10.0.0.1 {operation} TOPIC orders");
        assert_eq!(decide(&acls, &request), Decision::Allowed, "{request}");
    }
}

#[test]
fn deny_all_denies_every_operation() {
    let acls = bindings(&[
        "ALLOW User:alice * ALL TOPIC LITERAL orders",
        "ALLOW User:alice * READ TOPIC LITERAL orders",
        "DENY User:alice * ALL TOPIC LITERAL orders",
    ]);
    for operation in every_operation() {
        let request = format!("User:alice 10.0.0.1 {operation} TOPIC orders");
        assert_eq!(
            decide(&acls, &request),
            DeniedBy(2).decision(&acls),
            "{request}"
        );
    }
}

#[test]
fn allow_covers_only_its_own_operation_otherwise() {
    check(&[
        (
            "read does not grant write",
            &[ALICE_READ_ORDERS],
            "User:alice 10.0.0.1 WRITE TOPIC orders",
            NoAllow,
        ),
        (
            "describe does not grant read",
            &["ALLOW User:alice * DESCRIBE TOPIC LITERAL orders"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "write does not grant idempotent write",
            &["ALLOW User:alice * WRITE CLUSTER LITERAL kafka-cluster"],
            "User:alice 10.0.0.1 IDEMPOTENT_WRITE CLUSTER kafka-cluster",
            NoAllow,
        ),
        (
            "create on the cluster",
            &["ALLOW User:alice * CREATE CLUSTER LITERAL kafka-cluster"],
            "User:alice 10.0.0.1 CREATE CLUSTER kafka-cluster",
            Allowed,
        ),
    ]);
}

#[test]
fn implied_describe() {
    for (granted, expect) in [
        ("READ", Allowed),
        ("WRITE", Allowed),
        ("DELETE", Allowed),
        ("ALTER", Allowed),
        ("DESCRIBE", Allowed),
        ("ALL", Allowed),
        ("CREATE", NoAllow),
        ("CLUSTER_ACTION", NoAllow),
        ("DESCRIBE_CONFIGS", NoAllow),
        ("ALTER_CONFIGS", NoAllow),
        ("IDEMPOTENT_WRITE", NoAllow),
    ] {
        let acls = bindings(&[&format!(
            "ALLOW User:alice * {granted} TOPIC LITERAL orders"
        )]);
        assert_eq!(
            decide(&acls, "User:alice 10.0.0.1 DESCRIBE TOPIC orders"),
            expect.decision(&acls),
            "ALLOW {granted} for DESCRIBE"
        );
    }
}

#[test]
fn implied_describe_configs() {
    for (granted, expect) in [
        ("ALTER_CONFIGS", Allowed),
        ("DESCRIBE_CONFIGS", Allowed),
        ("ALL", Allowed),
        ("READ", NoAllow),
        ("ALTER", NoAllow),
        ("DESCRIBE", NoAllow),
    ] {
        let acls = bindings(&[&format!(
            "ALLOW User:alice * {granted} TOPIC LITERAL orders"
        )]);
        assert_eq!(
            decide(&acls, "User:alice 10.0.0.1 DESCRIBE_CONFIGS TOPIC orders"),
            expect.decision(&acls),
            "ALLOW {granted} for DESCRIBE_CONFIGS"
        );
    }
    let acls = bindings(&["ALLOW User:alice * DESCRIBE_CONFIGS TOPIC LITERAL orders"]);
    assert_eq!(
        decide(&acls, "User:alice 10.0.0.1 ALTER_CONFIGS TOPIC orders"),
        NoAllow.decision(&acls),
        "implication does not run backwards"
    );
}

/// Kafka applies the implications to ALLOW bindings only (StandardAuthorizerData.findResult).
#[test]
fn deny_does_not_imply() {
    let allow_and_deny_read = [
        "ALLOW User:alice * READ TOPIC LITERAL orders",
        "DENY User:alice * READ TOPIC LITERAL orders",
    ];
    let allow_read_deny_describe = [
        "ALLOW User:alice * READ TOPIC LITERAL orders",
        "DENY User:alice * DESCRIBE TOPIC LITERAL orders",
    ];
    let alter_configs = [
        "ALLOW User:alice * ALTER_CONFIGS TOPIC LITERAL orders",
        "DENY User:alice * ALTER_CONFIGS TOPIC LITERAL orders",
    ];
    check(&[
        (
            "deny read denies read",
            &allow_and_deny_read,
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(1),
        ),
        (
            "deny read leaves describe allowed",
            &allow_and_deny_read,
            "User:alice 10.0.0.1 DESCRIBE TOPIC orders",
            Allowed,
        ),
        (
            "deny describe denies describe",
            &allow_read_deny_describe,
            "User:alice 10.0.0.1 DESCRIBE TOPIC orders",
            DeniedBy(1),
        ),
        (
            "deny describe leaves read allowed",
            &allow_read_deny_describe,
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "deny alter configs leaves describe configs allowed",
            &alter_configs,
            "User:alice 10.0.0.1 DESCRIBE_CONFIGS TOPIC orders",
            Allowed,
        ),
        (
            "deny alter configs denies alter configs",
            &alter_configs,
            "User:alice 10.0.0.1 ALTER_CONFIGS TOPIC orders",
            DeniedBy(1),
        ),
    ]);
}

#[test]
fn default_deny() {
    check(&[
        (
            "no bindings at all",
            &[],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "bindings only for other resources",
            &[
                "ALLOW User:alice * READ TOPIC LITERAL payments",
                "DENY User:alice * READ TOPIC LITERAL audit",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "a deny alone is still a deny by binding",
            &["DENY User:alice * READ TOPIC LITERAL orders"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            DeniedBy(0),
        ),
    ]);
}

#[test]
fn resource_type_must_match() {
    check(&[
        (
            "group binding does not cover a topic",
            &["ALLOW User:alice * READ GROUP LITERAL orders"],
            "User:alice 10.0.0.1 READ TOPIC orders",
            NoAllow,
        ),
        (
            "group deny does not deny a topic",
            &[
                ALICE_READ_ORDERS,
                "DENY User:alice * READ GROUP LITERAL orders",
            ],
            "User:alice 10.0.0.1 READ TOPIC orders",
            Allowed,
        ),
        (
            "topic binding does not cover a transactional id",
            &["ALLOW User:alice * WRITE TOPIC PREFIXED tx-"],
            "User:alice 10.0.0.1 WRITE TRANSACTIONAL_ID tx-1",
            NoAllow,
        ),
        (
            "transactional id binding",
            &["ALLOW User:alice * WRITE TRANSACTIONAL_ID PREFIXED tx-"],
            "User:alice 10.0.0.1 WRITE TRANSACTIONAL_ID tx-1",
            Allowed,
        ),
    ]);
}

#[test]
fn empty_prefix_matches_nothing() {
    let mut allow_everything = binding("ALLOW User:alice * READ TOPIC PREFIXED x");
    allow_everything.resource_name.clear();
    let acls = [allow_everything];
    assert_eq!(
        decide(&acls, "User:alice 10.0.0.1 READ TOPIC orders"),
        NoAllow.decision(&acls)
    );
}

#[test]
fn accepts_any_iterator_of_bindings() {
    let acls = bindings(&[
        ALICE_READ_ORDERS,
        "DENY User:alice * READ TOPIC LITERAL orders",
    ]);
    let alice = Principal::user("alice");
    let orders = Resource::new("TOPIC".parse().unwrap(), "orders");
    let allows_only = acls
        .iter()
        .filter(|b| b.permission == skein_auth::Permission::Allow);
    assert_eq!(
        authorize(allows_only, &alice, "10.0.0.1", Operation::Read, &orders),
        Decision::Allowed
    );
    assert_eq!(
        authorize(&acls, &alice, "10.0.0.1", Operation::Read, &orders),
        Decision::Denied(DenyReason::DenyBinding(&acls[1]))
    );
}

#[test]
fn decisions_print_their_reason() {
    let acls = bindings(&["DENY User:alice * READ TOPIC LITERAL orders"]);
    let table = [
        (Decision::Allowed, true, "allowed"),
        (
            Decision::Denied(DenyReason::DenyBinding(&acls[0])),
            false,
            "denied by binding User:alice DENY READ on TOPIC:LITERAL:orders from host *",
        ),
        (
            Decision::Denied(DenyReason::NoAllowBinding),
            false,
            "denied: no ALLOW binding matched",
        ),
    ];
    for (decision, allowed, text) in table {
        assert_eq!(decision.is_allowed(), allowed, "{text}");
        assert_eq!(decision.to_string(), text);
    }
}

fn every_operation() -> impl Iterator<Item = Operation> {
    (i8::MIN..=i8::MAX).filter_map(|code| Operation::from_code(code).ok())
}

#[test]
fn every_operation_lists_all_eleven() {
    assert_eq!(every_operation().count(), 11);
}
