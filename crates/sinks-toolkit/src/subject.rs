//! NATS subject patterns: validation, matching and containment.
//!
//! Tokens are separated by `.`; `*` matches exactly one token; `>` matches one or more
//! trailing tokens and may only be the last token. Empty tokens, whitespace and wildcard
//! characters embedded in a token (`a*`, `>b`) are rejected.

/// Why a subject pattern is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid subject pattern: {0}")]
pub struct SubjectError(&'static str);

/// Validates a subject pattern (wildcards allowed).
pub fn validate_pattern(pattern: &str) -> Result<(), SubjectError> {
    if pattern.is_empty() {
        return Err(SubjectError("empty"));
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(SubjectError("contains whitespace or control characters"));
    }
    let tokens: Vec<&str> = pattern.split('.').collect();
    for (i, token) in tokens.iter().enumerate() {
        if token.is_empty() {
            return Err(SubjectError("contains an empty token"));
        }
        if *token == ">" && i + 1 != tokens.len() {
            return Err(SubjectError("`>` must be the last token"));
        }
        if token.len() > 1 && (token.contains('*') || token.contains('>')) {
            return Err(SubjectError("wildcard embedded in a token"));
        }
    }
    Ok(())
}

/// Validates a literal subject (no wildcards), e.g. a publish subject.
pub fn validate_literal(subject: &str) -> Result<(), SubjectError> {
    validate_pattern(subject)?;
    if subject.split('.').any(|t| t == "*" || t == ">") {
        return Err(SubjectError("wildcards are not allowed here"));
    }
    Ok(())
}

/// True when the literal `subject` matches `pattern`.
pub fn matches(pattern: &str, subject: &str) -> bool {
    let mut p = pattern.split('.');
    let mut s = subject.split('.');
    loop {
        match (p.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(pt), Some(st)) if pt == st => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// True when every subject matched by `inner` is also matched by `outer` (conservative:
/// may say false for exotic overlaps, never says true wrongly).
pub fn contains(outer: &str, inner: &str) -> bool {
    let mut o = outer.split('.');
    let mut i = inner.split('.');
    loop {
        match (o.next(), i.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(it)) if it != ">" => {}
            (Some(ot), Some(it)) if ot == it => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// True when some literal subject is matched by both `a` and `b` (wildcards on both sides):
/// what nats-server asks of a consumer filter against its stream's subjects (`>` over a stream
/// of `secure.>` and `public.>` is accepted: it overlaps both).
pub fn overlaps(a: &str, b: &str) -> bool {
    let mut x = a.split('.');
    let mut y = b.split('.');
    loop {
        match (x.next(), y.next()) {
            (Some(">"), Some(_)) | (Some(_), Some(">")) | (None, None) => return true,
            (Some(p), Some(q)) if p == q || p == "*" || q == "*" => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        for (p, ok) in [
            ("orders.*", true),
            ("orders.>", true),
            (">", true),
            ("a.*.c", true),
            ("a..b", false),
            (".a", false),
            ("a.", false),
            ("a b", false),
            ("a*", false),
            (">b", false),
            ("a.>.b", false),
            ("", false),
        ] {
            assert_eq!(validate_pattern(p).is_ok(), ok, "{p}");
        }
        assert!(validate_literal("orders.created").is_ok());
        assert!(validate_literal("orders.*").is_err());
    }

    #[test]
    fn matching_table() {
        for (p, s, m) in [
            ("orders.*", "orders.created", true),
            ("orders.*", "orders.a.b", false),
            ("orders.>", "orders.a.b", true),
            ("orders.>", "orders", false),
            ("orders.created", "orders.created", true),
            ("*.created", "orders.created", true),
            ("orders.*", "orders", false),
        ] {
            assert_eq!(matches(p, s), m, "{p} {s}");
        }
    }

    #[test]
    fn containment_table() {
        for (o, i, c) in [
            ("orders.>", "orders.*", true),
            ("orders.>", "orders.a.>", true),
            ("orders.*", "orders.>", false),
            ("orders.*", "orders.x", true),
            ("orders.*", "orders.*", true),
            ("orders.x", "orders.*", false),
            (">", "anything.>", true),
        ] {
            assert_eq!(contains(o, i), c, "{o} ⊇ {i}");
        }
    }

    #[test]
    fn overlap_table() {
        for (a, b, o) in [
            (">", "secure.>", true),
            ("secure.>", ">", true),
            ("secure.*", "secure.>", true),
            ("secure.>", "secure.*", true),
            ("*.created", "orders.*", true),
            ("orders.*", "orders", false),
            ("orders.>", "orders", false),
            ("orders", "orders", true),
            ("a.*.c", "a.b.>", true),
            ("a.*.c", "a.b.d", false),
            ("public.>", "secure.>", false),
            ("*", "a.b", false),
            ("*.*", "a.>", true),
            ("a.b.c", "a.b", false),
        ] {
            assert_eq!(overlaps(a, b), o, "{a} ∩ {b}");
            assert_eq!(overlaps(b, a), o, "overlap is symmetric: {b} ∩ {a}");
            // Containment implies overlap.
            if contains(a, b) {
                assert!(o, "{a} ⊇ {b} but no overlap");
            }
        }
    }
}
