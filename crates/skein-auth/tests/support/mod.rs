//! Compact spellings for ACL tables, so each row reads like `kafka-acls` output.

use skein_auth::AclBinding;

/// Parses `"<permission> <principal> <host> <operation> <resource type> <pattern type> <name>"`,
/// for example `"ALLOW User:alice * READ TOPIC LITERAL orders"`.
pub(crate) fn binding(spec: &str) -> AclBinding {
    let fields: Vec<&str> = spec.split(' ').collect();
    let [permission, principal, host, operation, resource_type, pattern_type, name] = fields[..]
    else {
        panic!("binding spec needs 7 fields: {spec:?}");
    };
    AclBinding {
        principal: principal.parse().expect("principal"),
        host: host.to_owned(),
        resource_type: resource_type.parse().expect("resource type"),
        resource_name: name.to_owned(),
        pattern_type: pattern_type.parse().expect("pattern type"),
        operation: operation.parse().expect("operation"),
        permission: permission.parse().expect("permission"),
    }
}

pub(crate) fn bindings(specs: &[&str]) -> Vec<AclBinding> {
    specs.iter().map(|spec| binding(spec)).collect()
}
