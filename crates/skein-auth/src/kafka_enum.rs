//! Kafka's small ACL enums share one shape: an `i8` wire code, an upper-case name, and codes
//! (`ANY`, `MATCH`) that only make sense in a filter. One macro keeps the tables in one place.

/// The wire code Kafka uses for `ANY` in every ACL enum.
pub(crate) const ANY_CODE: i8 = 1;

/// Defines a Kafka ACL enum with `code`, `from_code`, `as_str`, `Display` and a
/// case-insensitive `FromStr`.
///
/// `filter_only` lists the codes and names that decode to [`crate::AclError::FilterOnly`]
/// rather than to [`crate::AclError::UnknownCode`] or [`crate::AclError::UnknownName`].
macro_rules! kafka_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($kind:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal, $text:literal; )+
        }
        filter_only { $( $fcode:literal, $ftext:literal; )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant, in wire-code order.
            #[cfg(test)]
            pub(crate) const VARIANTS: &'static [Self] = &[$(Self::$variant),+];

            /// The Kafka wire code.
            pub const fn code(self) -> i8 {
                match self {
                    $( Self::$variant => $code, )+
                }
            }

            /// Kafka's upper-case name, as the admin tools, the REST API and the catalog spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
                }
            }

            #[doc = concat!("Decodes a Kafka ", $kind, " wire code.")]
            ///
            /// # Errors
            ///
            /// [`AclError::FilterOnly`](crate::AclError::FilterOnly) for a code that is only
            /// valid in a filter, [`AclError::UnknownCode`](crate::AclError::UnknownCode) for
            /// any other code this enum does not define.
            pub fn from_code(code: i8) -> Result<Self, $crate::AclError> {
                match code {
                    $( $code => Ok(Self::$variant), )+
                    $( $fcode => Err($crate::AclError::FilterOnly { kind: $kind, name: $ftext }), )*
                    _ => Err($crate::AclError::UnknownCode { kind: $kind, code }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Parses Kafka's name, ignoring ASCII case (`READ`, `read` and `Read` are the same).
        impl ::std::str::FromStr for $name {
            type Err = $crate::AclError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $( if s.eq_ignore_ascii_case($text) { return Ok(Self::$variant); } )+
                $(
                    if s.eq_ignore_ascii_case($ftext) {
                        return Err($crate::AclError::FilterOnly { kind: $kind, name: $ftext });
                    }
                )*
                Err($crate::AclError::UnknownName { kind: $kind, name: s.to_owned() })
            }
        }
    };
}

/// Adds the filter side to an enum whose filter form is `Option<Self>`, `None` being `ANY`.
macro_rules! any_filter {
    ($name:ident) => {
        impl $name {
            /// Encodes a filter field: `None` is `ANY` (code 1).
            pub const fn filter_code(filter: Option<Self>) -> i8 {
                match filter {
                    None => $crate::kafka_enum::ANY_CODE,
                    Some(value) => value.code(),
                }
            }

            /// Decodes a filter field: code 1 (`ANY`) is `None`.
            ///
            /// # Errors
            ///
            /// [`AclError::UnknownCode`](crate::AclError::UnknownCode) for a code this enum
            /// does not define.
            pub fn filter_from_code(code: i8) -> Result<Option<Self>, $crate::AclError> {
                if code == $crate::kafka_enum::ANY_CODE {
                    Ok(None)
                } else {
                    Self::from_code(code).map(Some)
                }
            }

            /// Parses a filter field by Kafka's name, ignoring ASCII case: `ANY` is `None`.
            ///
            /// # Errors
            ///
            /// [`AclError::UnknownName`](crate::AclError::UnknownName) for any other name this
            /// enum does not define.
            pub fn filter_from_str(s: &str) -> Result<Option<Self>, $crate::AclError> {
                if s.eq_ignore_ascii_case("ANY") {
                    Ok(None)
                } else {
                    s.parse().map(Some)
                }
            }
        }
    };
}
