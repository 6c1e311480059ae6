//! Object name validation as the real server's (apimachinery `validation`): most types take an
//! RFC 1123 subdomain, Namespaces an RFC 1123 label, Services an RFC 1035 label. Returns the
//! message of the `metadata.name` cause on failure.

/// Which rule a type's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, at most 253.
    Subdomain,
    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63.
    Label1123,
    /// `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63.
    Label1035,
}

fn label_ok(s: &str, first_alpha: bool) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.chars().all(|c| alnum(c) || c == '-')
        && s.starts_with(|c: char| if first_alpha { c.is_ascii_lowercase() } else { alnum(c) })
        && s.ends_with(alnum)
}

/// `Err(message)` (`Invalid value: "X": a lowercase RFC 1123 subdomain must consist of …`) when
/// `name` breaks `rule`.
pub fn validate(name: &str, rule: NameRule) -> Result<(), String> {
    let (ok, max, what) = match rule {
        NameRule::Subdomain => (
            name.split('.').all(|l| label_ok(l, false)),
            253,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        NameRule::Label1123 => (
            label_ok(name, false),
            63,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        NameRule::Label1035 => (
            label_ok(name, true),
            63,
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
    };
    if name.len() > max {
        return Err(format!("Invalid value: {name:?}: must be no more than {max} characters"));
    }
    if !ok {
        return Err(format!("Invalid value: {name:?}: {what}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_their_rule() {
        assert!(validate("a.b-c", NameRule::Subdomain).is_ok());
        assert!(validate("A", NameRule::Subdomain).unwrap_err().contains("RFC 1123 subdomain"));
        assert!(validate("a.b", NameRule::Label1123).is_err());
        assert!(validate("1abc", NameRule::Label1123).is_ok());
        assert!(validate("1abc", NameRule::Label1035).is_err());
        assert!(validate(&"a".repeat(64), NameRule::Label1123).unwrap_err().contains("no more than 63"));
        assert!(validate("x-", NameRule::Subdomain).is_err());
    }
}
