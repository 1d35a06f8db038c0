//! Strict JSON: what counts as JSON here, and how records are serialized.
//!
//! Strict means RFC 8259 and nothing more: `NaN` / `Infinity` are not JSON (serde_json never
//! accepts them) and an object with a duplicate key is not JSON either (serde_json would keep
//! the last value silently, so this module checks). Records are written with sorted keys and
//! compact separators; `serde_json::Value` keeps object keys in sorted order.

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Why a text is not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StrictJsonError(String);

/// Checks that `text` is one strict JSON value, without building it.
pub fn validate_strict(text: &str) -> Result<(), StrictJsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    StrictSeed.deserialize(&mut de).map_err(|e| StrictJsonError(e.to_string()))?;
    de.end().map_err(|e| StrictJsonError(e.to_string()))
}

/// Parses strict JSON into a `serde_json::Value`.
pub fn parse_strict(text: &str) -> Result<serde_json::Value, StrictJsonError> {
    validate_strict(text)?;
    serde_json::from_str(text).map_err(|e| StrictJsonError(e.to_string()))
}

/// Serializes a value compactly with sorted keys (the record form every sink writes).
pub fn to_canonical_vec<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Serializing plain data (maps with string keys, numbers that are finite) cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Deepest nesting of arrays and objects in a JSON text (0 for a scalar). Strings are
/// skipped, escapes included; the text is assumed to be valid JSON.
pub fn depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A JSON document the core attaches to an envelope: the mission metadata, the security label
/// profile, the custody object ([`crate::Envelope::mission_metadata_doc`] and its siblings).
///
/// The policy steps keep what they make as its canonical text (keys sorted, no whitespace,
/// the bytes custody hashes and authenticity signs), written once, and its `serde_json` value
/// is parsed from that text only the first time something asks for it ([`JsonDoc::value`]):
/// a sink that never reads the document (or writes its text as it is) builds no tree. A
/// document made from a value ([`JsonDoc::from_value`], what the value builders of the
/// envelope do) has no canonical text.
#[derive(Debug)]
pub struct JsonDoc {
    canonical: Option<Box<str>>,
    value: OnceLock<serde_json::Value>,
}

impl JsonDoc {
    /// A document made from its value (it has no canonical text).
    pub fn from_value(value: serde_json::Value) -> Self {
        Self { canonical: None, value: OnceLock::from(value) }
    }

    /// A document kept as `text`, which must be one JSON value in the canonical form of the
    /// policy steps (`sinks_policy::canonical`): keys sorted, no whitespace. The steps write it
    /// with their canonical writer; a text that is not JSON is a bug in its producer, which
    /// [`JsonDoc::value`] reports by panicking (checked here in debug builds).
    pub fn from_canonical(text: String) -> Self {
        debug_assert!(serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok(), "not json: {text}");
        Self { canonical: Some(text.into_boxed_str()), value: OnceLock::new() }
    }

    /// The canonical text, when the document was kept as one.
    pub fn canonical(&self) -> Option<&str> {
        self.canonical.as_deref()
    }

    /// The document's value, parsed from its canonical text the first time it is asked for.
    /// Floats come out as `serde_json` makes them from an `f64` (so a value parsed from the
    /// text equals the value the text was written from, also with serde_json's
    /// `arbitrary_precision`, which would otherwise keep the text's spelling of a float).
    pub fn value(&self) -> &serde_json::Value {
        self.value.get_or_init(|| {
            let text = self.canonical.as_deref().unwrap_or("null");
            let mut value = serde_json::from_str(text).expect("an attached document's canonical text is json");
            floats_from_f64(&mut value);
            value
        })
    }
}

impl serde::Serialize for JsonDoc {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

/// Every float in `value` rebuilt from its `f64` (integers are left as they are).
fn floats_from_f64(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(float) = n.as_f64().and_then(serde_json::Number::from_f64) {
                *n = float;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(floats_from_f64),
        Value::Object(members) => members.values_mut().for_each(floats_from_f64),
        _ => {}
    }
}

/// JSON equality by value, for read-backs from stores that keep JSON values rather than
/// text (a native JSON column, a document store): objects regardless of key order, arrays
/// in order, numbers by their decimal value (`2.50` is `2.5`, `1e3` is `1000`, `-0` is
/// `0`), with or without serde_json's `arbitrary_precision`.
pub fn same_value(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => decimal(&x.to_string()) == decimal(&y.to_string()),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// A JSON number in canonical decimal form: `(negative, significant digits, exponent)`, with
/// no leading or trailing zeros in the digits (zero is `(false, "", 0)`). `None` when the
/// text is not a number.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], unsigned[i + 1..].trim_start_matches('+').parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let all = format!("{int}{frac}");
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_matches('0');
    if digits.is_empty() {
        return Some((false, String::new(), 0));
    }
    // The value is 0.<digits> × 10^exp: the decimal point sits after the integer part.
    let exp = exponent.checked_add(i64::try_from(int.len()).ok()? - i64::try_from(leading).ok()?)?;
    Some((negative, digits.to_owned(), exp))
}

/// The one-entry map serde_json hands numbers over as when its `arbitrary_precision` feature
/// is on (the Oracle NoSQL SDK turns it on for the whole build).
const PRECISE_NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Visits any JSON value, rejecting objects that repeat a key and numbers that do not fit a
/// finite `f64` (what the reference's `json.loads` + `allow_nan=False` refuses), with or
/// without serde_json's `arbitrary_precision`.
struct StrictSeed;

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        if v.is_finite() { Ok(()) } else { Err(E::custom("non-finite number")) }
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(StrictSeed)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if seen.is_empty() && key == PRECISE_NUMBER_TOKEN {
                let text: String = map.next_value()?;
                return match text.parse::<f64>() {
                    Ok(v) => self.visit_f64(v),
                    Err(_) => Err(de::Error::custom("invalid number")),
                };
            }
            if !seen.insert(key.into_owned()) {
                return Err(de::Error::custom("duplicate object key"));
            }
            map.next_value_seed(StrictSeed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_by_value() {
        let v = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
        for (a, b, same) in [
            (r#"{"a":2.50,"b":[1e3,-0.1]}"#, r#"{"b":[1000,-0.10],"a":2.5}"#, true),
            ("12345678901234567890123", "1.2345678901234567890123e22", true),
            ("0.0012", "12e-4", true),
            ("0", "-0.0", true),
            ("100", "1E+2", true),
            ("0.5", "5", false),
            ("-1", "1", false),
            ("10", "1", false),
            (r#"{"a":2.5}"#, r#"{"a":2.51}"#, false),
            (r#"{"a":1}"#, r#"{"a":1,"b":1}"#, false),
            ("[1,2]", "[2,1]", false),
            (r#""1""#, "1", false),
            ("null", "false", false),
        ] {
            assert_eq!(same_value(&v(a), &v(b)), same, "{a} vs {b}");
            assert_eq!(same_value(&v(b), &v(a)), same, "{b} vs {a}");
        }
    }

    #[test]
    fn strictness_table() {
        for (text, ok) in [
            (r#"{"a":1,"b":[1,2,{"c":null}]}"#, true),
            ("  42 ", true),
            (r#""plain string""#, true),
            (r#"{"a":1,"a":2}"#, false),
            (r#"{"o":{"k":1,"k":1}}"#, false),
            ("NaN", false),
            ("[Infinity]", false),
            ("-Infinity", false),
            ("1e400", false),
            ("{} {}", false),
            ("", false),
            ("{'a':1}", false),
        ] {
            assert_eq!(validate_strict(text).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn escaped_keys_that_collide_are_duplicates() {
        assert!(validate_strict(r#"{"a":1,"\u0061":2}"#).is_err());
    }

    #[test]
    fn depth_table() {
        for (text, d) in [("1", 0), ("[]", 1), (r#"{"a":[{"b":1}]}"#, 3), (r#"["[[[\"]]]"]"#, 1), (r#"{"k\\":{}}"#, 2)]
        {
            assert_eq!(depth(text), d, "{text}");
        }
    }

    #[test]
    fn canonical_form_sorts_keys_and_is_compact() {
        let v = parse_strict(r#"{ "b": 1, "a": {"d": 2, "c": "é"} }"#).unwrap();
        assert_eq!(String::from_utf8(to_canonical_vec(&v)).unwrap(), r#"{"a":{"c":"é","d":2},"b":1}"#);
    }
}
