//! Client certificates as principals on SSL listeners, as Kafka maps them: the subject's
//! distinguished name in RFC 2253 form (`CN=alice,OU=payments,O=Acme`), turned into a
//! principal name by `ssl.principal.mapping.rules`, a list of
//! `RULE:pattern/replacement/[L|U]` entries and `DEFAULT` (the whole name), the first that
//! matches winning. A certificate whose name no rule maps is refused, as in Kafka.

use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use regex::Regex;
use skein_auth::Principal;

use crate::sasl::Authenticated;

/// The longest rule list read, and the longest pattern compiled.
const MAX_RULES_BYTES: usize = 16 * 1024;

/// The longest mapped principal name.
const MAX_NAME_BYTES: usize = 255;

/// Why a rule list or a certificate was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SslPrincipalError {
    #[error("ssl.principal.mapping.rules is malformed at {at:?}: {reason}")]
    Rules { at: String, reason: String },
    #[error("the client certificate does not parse: {0}")]
    Certificate(String),
    #[error("no ssl.principal.mapping.rules entry maps {0:?}")]
    Unmapped(String),
}

/// How a rule changes the case of what it produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Pattern {
        regex: Regex,
        replacement: String,
        case: Case,
    },
}

/// `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    /// Kafka's default: the whole distinguished name.
    fn default() -> Self {
        Self {
            rules: vec![Rule::Default],
        }
    }
}

/// Reads up to the next unescaped `/`; answers the text (escapes kept, for the pattern)
/// and the rest after the slash.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

impl FromStr for PrincipalMapper {
    type Err = SslPrincipalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |at: &str, reason: &str| SslPrincipalError::Rules {
            at: at.chars().take(40).collect(),
            reason: reason.to_owned(),
        };
        if text.len() > MAX_RULES_BYTES {
            return Err(refuse("", "the rules are over 16 KiB"));
        }
        let mut rules = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
                continue;
            }
            let Some(body) = rest.strip_prefix("RULE:") else {
                return Err(refuse(
                    rest,
                    "expected RULE:pattern/replacement/ or DEFAULT",
                ));
            };
            let (pattern, after) =
                until_slash(body).ok_or_else(|| refuse(rest, "the pattern has no closing /"))?;
            let (replacement, after) = until_slash(after)
                .ok_or_else(|| refuse(rest, "the replacement has no closing /"))?;
            let (case, after) = match after.chars().next() {
                Some('L') => (Case::Lower, &after[1..]),
                Some('U') => (Case::Upper, &after[1..]),
                _ => (Case::Keep, after),
            };
            // Kafka's rules match the whole name.
            let regex = Regex::new(&format!("^(?:{pattern})$"))
                .map_err(|e| refuse(rest, &e.to_string()))?;
            rules.push(Rule::Pattern {
                regex,
                replacement: java_replacement(replacement),
                case,
            });
            rest = after;
        }
        if rules.is_empty() {
            return Err(refuse(text, "no rule"));
        }
        Ok(Self { rules })
    }
}

/// A Java replacement (`$1`, `\$`) in the regex crate's syntax (`${1}`, `$$`).
fn java_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len() + 8);
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut group = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    group.push(*d);
                    chars.next();
                }
                if group.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{group}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

impl PrincipalMapper {
    /// The principal name of a distinguished name, by the first rule that matches it.
    pub fn name(&self, dn: &str) -> Result<String, SslPrincipalError> {
        for rule in &self.rules {
            let name = match rule {
                Rule::Default => dn.to_owned(),
                Rule::Pattern {
                    regex,
                    replacement,
                    case,
                } => {
                    let Some(captures) = regex.captures(dn) else {
                        continue;
                    };
                    let mut name = String::new();
                    captures.expand(replacement, &mut name);
                    match case {
                        Case::Keep => name,
                        Case::Lower => name.to_lowercase(),
                        Case::Upper => name.to_uppercase(),
                    }
                }
            };
            if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control)
            {
                return Err(SslPrincipalError::Unmapped(dn.to_owned()));
            }
            return Ok(name);
        }
        Err(SslPrincipalError::Unmapped(dn.to_owned()))
    }
}

/// The short names RFC 2253 (and Java's `X500Principal`) give attribute types.
fn attribute_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        _ => return None,
    })
}

/// A value escaped as RFC 2253 section 2.4 asks.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subject of a DER certificate in RFC 2253 form (most specific first), and when the
/// certificate stops being valid.
pub fn subject(der: &[u8]) -> Result<(String, SystemTime), SslPrincipalError> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| SslPrincipalError::Certificate(e.to_string()))?;
    let mut parts = Vec::new();
    for rdn in certificate
        .subject()
        .iter_rdn()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let attributes: Vec<String> = rdn
            .iter()
            .map(|attribute| {
                let oid = attribute.attr_type().to_id_string();
                let value = match attribute.as_str() {
                    Ok(text) => escape(text),
                    Err(_) => format!(
                        "#{}",
                        attribute
                            .attr_value()
                            .data
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    ),
                };
                format!("{}={value}", attribute_name(&oid).unwrap_or(&oid))
            })
            .collect();
        parts.push(attributes.join("+"));
    }
    let not_after = certificate.validity().not_after.timestamp();
    let expires = UNIX_EPOCH
        .checked_add(Duration::from_secs(u64::try_from(not_after).unwrap_or(0)))
        .unwrap_or(UNIX_EPOCH);
    Ok((parts.join(","), expires))
}

/// The session of a client that presented `certificate` (its leaf, DER) on an SSL listener:
/// the principal its subject maps to, until the certificate expires.
pub(crate) fn authenticate(
    mapper: &PrincipalMapper,
    certificate: &[u8],
) -> Result<Authenticated, SslPrincipalError> {
    let (dn, expires_at) = subject(certificate)?;
    Ok(Authenticated {
        principal: Principal::user(mapper.name(&dn)?),
        tenant: None,
        trusted: false,
        key_id: String::new(),
        verified_at: Instant::now(),
        expires_at: Some(expires_at),
        node: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn rules_map_names_as_kafkas_do() {
        let mapper: PrincipalMapper =
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT"
                .parse()
                .unwrap();
        // Kafka's own examples (SslPrincipalMapperTest).
        for (dn, name) in [
            ("CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
            (
                "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US",
                "duke@javasoft",
            ),
            ("cn=Duke,ou=JavaSoft,o=Sun Microsystems", "duke"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(mapper.name(dn).unwrap(), name, "{dn}");
        }
        let upper: PrincipalMapper = "RULE:^CN=(.*?),OU=(.*)$/$1-$2/U".parse().unwrap();
        assert_eq!(upper.name("CN=alice,OU=eng").unwrap(), "ALICE-ENG");
        // No DEFAULT: an unmatched name maps to no one.
        assert_eq!(
            upper.name("O=acme"),
            Err(SslPrincipalError::Unmapped("O=acme".to_owned()))
        );
        assert_eq!(
            PrincipalMapper::default().name("CN=a,O=b").unwrap(),
            "CN=a,O=b"
        );
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            "",
            "RULE:^CN=(.*)$",
            "RULE:^CN=(.*)$/$1",
            "NOPE",
            "RULE:(unclosed/$1/",
            "DEFAULT,RULE:x",
        ] {
            assert!(bad.parse::<PrincipalMapper>().is_err(), "{bad:?}");
        }
        // A slash inside a pattern is escaped.
        let slashed: PrincipalMapper = r"RULE:^CN=a\/(.*)$/$1/".parse().unwrap();
        assert_eq!(slashed.name("CN=a/b").unwrap(), "b");
    }

    #[test]
    fn java_replacements_become_the_regex_crates() {
        assert_eq!(java_replacement("$1"), "${1}");
        assert_eq!(java_replacement("$1abc$2"), "${1}abc${2}");
        assert_eq!(java_replacement(r"\$1"), "$$1");
        assert_eq!(java_replacement("a$"), "a$$");
    }

    #[test]
    fn values_are_escaped_as_rfc_2253_asks() {
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
        assert_eq!(escape(" lead"), r"\ lead");
        assert_eq!(escape("#x"), r"\#x");
        assert_eq!(escape("trail "), r"trail\ ");
    }
}
