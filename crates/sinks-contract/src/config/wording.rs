//! Deserialization errors in the user's words.
//!
//! serde speaks Rust (`invalid type: string "5", expected usize`) and lists every field of a
//! section after a typo (`unknown field `directry`, expected one of `directory`, `mode`, …`).
//! [`rephrase`] turns those into what an operator can act on: the types as a config file
//! spells them (a whole number, a number, true/false, a string, a list, a section), and, for
//! an unknown field, the closest known field (`did you mean `directory`?`, by edit distance)
//! instead of the whole list. Anything else passes through unchanged.

/// A Rust type name in serde's messages, in a config file's words.
fn type_words(rust: &str) -> Option<&'static str> {
    Some(match rust.trim() {
        "usize" | "u8" | "u16" | "u32" | "u64" | "u128" => "a whole number (0 or more)",
        "isize" | "i8" | "i16" | "i32" | "i64" | "i128" => "a whole number",
        "f32" | "f64" => "a number",
        "a boolean" | "bool" => "true or false",
        "a string" | "a borrowed string" | "string" | "a character" | "char" => "a string",
        "a sequence" | "sequence" => "a list",
        "a map" | "map" => "a section (a table or object of fields)",
        "unit" | "null" => "nothing (null)",
        "an integer" | "integer" => "a whole number",
        "a floating point" | "floating point" => "a number",
        _ => return None,
    })
}

/// What serde found, in a config file's words (`string "5"` → `the string "5"`).
fn found_words(found: &str) -> String {
    let found = found.trim();
    for (prefix, words) in [
        ("string ", "the string "),
        ("integer ", "the whole number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
        ("sequence", "a list"),
        ("map", "a section"),
        ("unit value", "null"),
    ] {
        if let Some(rest) = found.strip_prefix(prefix) {
            return format!("{words}{}", rest.trim_matches('`'));
        }
    }
    found.trim_matches('`').to_owned()
}

/// The expected part of serde's message in a config file's words: a type (`usize`), `struct
/// X` (a section), or a description serde's derive wrote (kept).
fn expected_words(expected: &str) -> String {
    let expected = expected.trim();
    // A whole number with its range, as config loading adds it (`usize in 1..=10000`).
    for marker in [" in ", " at least "] {
        if let Some((rust, bound)) = expected.split_once(marker)
            && let Some(words) = type_words(rust)
        {
            return format!("{}{marker}{bound}", words.trim_end_matches(" (0 or more)"));
        }
    }
    if let Some(words) = type_words(expected) {
        return words.to_owned();
    }
    if expected.starts_with("struct ") || expected.starts_with("a struct") {
        return "a section (a table or object of fields)".to_owned();
    }
    if let Some(rest) = expected.strip_prefix("one of ") {
        return format!("one of {rest}");
    }
    expected.to_owned()
}

/// The known names inside serde's list: `` `a`, `b`, `c` `` (also `` `a` or `b` ``).
fn names(list: &str) -> Vec<&str> {
    list.split('`').skip(1).step_by(2).collect()
}

/// The known name closest to `typo` by edit distance, if one is close enough to be a typo.
pub fn closest<'a>(typo: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typo_lower = typo.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(&typo_lower, &k.to_ascii_lowercase()), k))
        .filter(|(d, k)| *d <= (k.len().max(typo.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// What [`ConfigIssue`](super::ConfigIssue) messages end with when an environment variable
/// set the field (appended by the runtime's config loading).
pub const SET_BY: &str = " (set by the environment variable ";

/// What [`ConfigIssue`](super::ConfigIssue) messages end with when the field's key was found
/// in the config file: ` (at orders.toml:12:5)` (appended by the runtime's config loading).
pub const AT: &str = " (at ";

/// serde's message for a bad field, in the user's words (see the module documentation).
pub fn rephrase(message: &str) -> String {
    // A note naming the environment variable, or the place in the file, stays at the end.
    if let Some(at) = [SET_BY, AT].iter().filter_map(|m| message.find(m)).min() {
        return format!("{}{}", rephrase_serde(&message[..at]), &message[at..]);
    }
    rephrase_serde(message)
}

fn rephrase_serde(message: &str) -> String {
    if message.starts_with("missing field `") {
        return "required".to_owned();
    }
    // unknown field `x`, expected one of `a`, `b`  /  expected `a` or `b`  /  there are no fields
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, tail)) = rest.split_once('`')
    {
        let known = names(tail);
        return match closest(field, known.iter().copied()) {
            Some(best) => format!("unknown field `{field}`; did you mean `{best}`?"),
            None if known.is_empty() => format!("unknown field `{field}`: this section has no fields"),
            None => format!(
                "unknown field `{field}` (not a field of this section; its fields are listed in docs/config-reference.md)"
            ),
        };
    }
    // unknown variant `x`, expected one of `a`, `b`
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((value, tail)) = rest.split_once('`')
    {
        let known = names(tail);
        let list = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        return match closest(value, known.iter().copied()) {
            Some(best) => format!("unknown value `{value}`; did you mean `{best}`? (one of {list})"),
            None => format!("unknown value `{value}` (one of {list})"),
        };
    }
    // invalid type: string "5", expected usize   /   invalid value: integer `-1`, expected u64
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.split_once(", expected ")
        {
            return format!("expected {}, got {}", expected_words(expected), found_words(found));
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_in_the_users_words() {
        let table = [
            (
                "unknown field `directry`, expected one of `directory`, `mode`, `fsync`, `create_directory`",
                "unknown field `directry`; did you mean `directory`?",
            ),
            (
                "unknown field `batch_siz`, expected one of `batch_size`, `batch_timeout_ms`, `max_in_flight_batches`",
                "unknown field `batch_siz`; did you mean `batch_size`?",
            ),
            (
                "unknown field `zzz`, expected one of `directory`, `mode`",
                "unknown field `zzz` (not a field of this section; its fields are listed in docs/config-reference.md)",
            ),
            ("unknown field `x`, there are no fields", "unknown field `x`: this section has no fields"),
            (
                "unknown variant `jsn_only`, expected one of `json_only`, `raw`, `auto`",
                "unknown value `jsn_only`; did you mean `json_only`? (one of `json_only`, `raw`, `auto`)",
            ),
            ("invalid type: string \"5\", expected usize", "expected a whole number (0 or more), got the string \"5\""),
            ("invalid type: integer `1`, expected a boolean", "expected true or false, got the whole number 1"),
            ("invalid type: sequence, expected a string", "expected a string, got a list"),
            (
                "invalid value: integer `-1`, expected u64",
                "expected a whole number (0 or more), got the whole number -1",
            ),
            (
                "invalid type: string \"x\", expected struct NatsConfig",
                "expected a section (a table or object of fields), got the string \"x\"",
            ),
            ("invalid type: floating point `1.5`, expected i64", "expected a whole number, got the number 1.5"),
            ("missing field `stream`", "required"),
            (
                "unknown field `batch_siz`, expected one of `batch_size`, `batch_timeout_ms` (set by the environment variable NATS_SINKS__DELIVERY__BATCH_SIZ)",
                "unknown field `batch_siz`; did you mean `batch_size`? (set by the environment variable NATS_SINKS__DELIVERY__BATCH_SIZ)",
            ),
            ("must be at least 1 (got 0)", "must be at least 1 (got 0)"),
            (
                "invalid type: string \"x\", expected u64 in 1..=300",
                "expected a whole number in 1..=300, got the string \"x\"",
            ),
        ];
        for (serde, ours) in table {
            assert_eq!(rephrase(serde), ours, "{serde}");
        }
    }

    #[test]
    fn only_close_names_are_suggested() {
        assert_eq!(closest("directroy", ["directory", "mode"]), Some("directory"));
        assert_eq!(closest("URL", ["url", "urls"]), Some("url"));
        assert_eq!(closest("color", ["directory", "mode"]), None);
        assert_eq!(closest("a", ["b"]), Some("b"), "one letter off a one-letter name");
    }
}
