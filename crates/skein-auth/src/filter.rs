//! Selecting bindings, as Kafka's DescribeAcls and DeleteAcls (and the REST API) do.

use crate::ResourceType;
use crate::{AclBinding, Operation, PatternType, PatternTypeFilter, Permission, Principal};

/// Kafka's `AclBindingFilter`: every field either constrains the binding or is `ANY`.
///
/// `None` stands for `ANY`. Principal and host compare exactly: a filter for `User:alice` does
/// not select `User:*` bindings, and a filter for `User:*` selects only those.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    /// The binding's principal, or any.
    pub principal: Option<Principal>,
    /// The binding's host, or any.
    pub host: Option<String>,
    /// The binding's resource type, or any.
    pub resource_type: Option<ResourceType>,
    /// A resource name, or any; how it is compared depends on
    /// [`pattern_type`](Self::pattern_type).
    pub resource_name: Option<String>,
    /// Which pattern types are selected, and how [`resource_name`](Self::resource_name) is
    /// compared with the binding's name.
    pub pattern_type: PatternTypeFilter,
    /// The binding's operation, or any.
    pub operation: Option<Operation>,
    /// The binding's permission, or any.
    pub permission: Option<Permission>,
}

impl AclBindingFilter {
    /// The filter that selects every binding.
    pub const ANY: AclBindingFilter = AclBindingFilter {
        principal: None,
        host: None,
        resource_type: None,
        resource_name: None,
        pattern_type: PatternTypeFilter::Any,
        operation: None,
        permission: None,
    };

    /// Whether the filter selects `binding`.
    ///
    /// With [`PatternTypeFilter::Match`] and a resource name, this selects the bindings that
    /// would apply to a resource of that name: `LITERAL` bindings with that name or `*`, and
    /// `PREFIXED` bindings whose prefix starts the name. With any other pattern type filter, a
    /// resource name must equal the binding's name exactly.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding)
            && self
                .principal
                .as_ref()
                .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    fn matches_pattern(&self, binding: &AclBinding) -> bool {
        if self
            .resource_type
            .is_some_and(|t| t != binding.resource_type)
        {
            return false;
        }
        let pattern_type_selected = match self.pattern_type {
            PatternTypeFilter::Any | PatternTypeFilter::Match => true,
            PatternTypeFilter::Literal => binding.pattern_type == PatternType::Literal,
            PatternTypeFilter::Prefixed => binding.pattern_type == PatternType::Prefixed,
        };
        if !pattern_type_selected {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match self.pattern_type {
            PatternTypeFilter::Match => binding.pattern_type.matches(&binding.resource_name, name),
            PatternTypeFilter::Any | PatternTypeFilter::Literal | PatternTypeFilter::Prefixed => {
                *name == binding.resource_name
            }
        }
    }
}
