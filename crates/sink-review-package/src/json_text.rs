//! Pure: JSON text exactly as the reference's `json.dumps(value, sort_keys=True,
//! ensure_ascii=False, allow_nan=False)` spells it, compact (`separators=(",", ":")`) or
//! indented (`indent=2`), so that a package file written here hashes like the reference's.
//!
//! - **Compact** ([`Compact`]): object keys sorted by code point, no whitespace; strings with
//!   `"` and `\` escaped, `\b \f \n \r \t` as such, other characters below U+0020 as `\u00XX`
//!   (lowercase), everything else raw (serde_json's string escaping is exactly this);
//!   integers as decimal, big ones as spelled; floats as Python's `repr` ([`python_float`]).
//!   A document the policy steps attached keeps its canonical text, which is already this
//!   form (`sinks_contract::json::JsonDoc::canonical`), so its floats are spelled as the
//!   reference spelled them.
//! - **Indented** ([`indent`]): the compact text re-laid out the way `indent=2` lays it out:
//!   every member and item on its own line, two spaces per level, `": "` after a key, an
//!   empty object or array as `{}` / `[]`. The tokens themselves are unchanged, so the
//!   indented form of the canonical text is the reference's indented text.
//!
//! Python's float `repr` is also in `sinks_policy::canonical`; a sink crate may not depend
//! on the policy crate, so this module has its own, held to the same table of Python's
//! answers.

use std::io::Write as _;

use serde_json::Value;
use sinks_contract::json::JsonDoc;
use sinks_toolkit::metadata::DocWriter;

/// Compact JSON text in the reference's spelling, written through the metadata document's
/// [`DocWriter`] or from a value.
#[derive(Debug, Default)]
pub(crate) struct Compact(pub(crate) Vec<u8>);

impl Compact {
    /// The text of `value`.
    pub(crate) fn of_value(value: &Value) -> Vec<u8> {
        let mut out = Self::default();
        out.write_value(value);
        out.0
    }

    /// The text of an attached document: its canonical text when it has one, else its value.
    pub(crate) fn of_doc(doc: &JsonDoc) -> Vec<u8> {
        match doc.canonical() {
            Some(text) => text.as_bytes().to_vec(),
            None => Self::of_value(doc.value()),
        }
    }

    fn write_value(&mut self, value: &Value) {
        match value {
            Value::Null => self.0.extend_from_slice(b"null"),
            Value::Bool(b) => self.0.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Number(n) => self.write_number(n),
            Value::String(s) => self.write_string(s),
            Value::Array(items) => {
                self.0.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.0.push(b',');
                    }
                    self.write_value(item);
                }
                self.0.push(b']');
            }
            Value::Object(members) => {
                // serde_json's map is sorted unless a crate of the build turns on
                // `preserve_order`: sort here either way.
                let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
                sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
                self.0.push(b'{');
                for (i, (key, item)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        self.0.push(b',');
                    }
                    self.write_string(key);
                    self.0.push(b':');
                    self.write_value(item);
                }
                self.0.push(b'}');
            }
        }
    }

    fn write_number(&mut self, n: &serde_json::Number) {
        if let Some(i) = n.as_i64() {
            let _ = write!(self.0, "{i}");
        } else if let Some(u) = n.as_u64() {
            let _ = write!(self.0, "{u}");
        } else {
            let text = n.to_string();
            // An integer beyond 64 bits (serde_json's `arbitrary_precision`, which another
            // crate of a build may turn on) keeps its digits, as Python's int does.
            let integer = text.strip_prefix('-').unwrap_or(&text).bytes().all(|b| b.is_ascii_digit());
            if integer && !text.is_empty() {
                self.0.extend_from_slice(text.as_bytes());
            } else {
                match n.as_f64() {
                    Some(x) if x.is_finite() => write_python_float(x, &mut self.0),
                    _ => self.0.extend_from_slice(b"null"),
                }
            }
        }
    }

    fn write_string(&mut self, text: &str) {
        // serde_json escapes exactly what `json.dumps(ensure_ascii=False)` escapes, the same way.
        let _ = serde_json::to_writer(&mut self.0, text);
    }
}

impl DocWriter for Compact {
    type Error = std::convert::Infallible;

    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, text: &str) {
        self.write_string(text);
    }

    fn integer(&mut self, value: i64) {
        let _ = write!(self.0, "{value}");
    }

    fn unsigned(&mut self, value: u64) {
        let _ = write!(self.0, "{value}");
    }

    fn float(&mut self, value: f64) {
        write_python_float(value, &mut self.0);
    }

    fn value(&mut self, value: &Value) -> Result<(), Self::Error> {
        self.write_value(value);
        Ok(())
    }

    fn doc(&mut self, doc: &JsonDoc) -> Result<(), Self::Error> {
        match doc.canonical() {
            Some(text) => self.0.extend_from_slice(text.as_bytes()),
            None => self.write_value(doc.value()),
        }
        Ok(())
    }
}

/// Python's `repr(float)` of `x` (`sinks_toolkit::pyfloat`). A non-finite `x` writes `null`
/// (the reference refuses it; nothing this sink computes is one).
pub(crate) fn write_python_float(x: f64, out: &mut Vec<u8>) {
    if sinks_toolkit::pyfloat::write_repr(x, out).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// `compact` (one JSON value in the compact form above) laid out as `json.dumps(indent=2)`
/// lays it out. Strings are copied as they are (their escapes included); the text is assumed
/// to be valid JSON.
pub(crate) fn indent(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut i = 0;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 2));
    };
    while i < compact.len() {
        let b = compact[i];
        match b {
            b'"' => {
                let start = i;
                i += 1;
                while i < compact.len() {
                    match compact[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                out.extend_from_slice(&compact[start..(i + 1).min(compact.len())]);
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                if compact.get(i + 1) == Some(&close) {
                    out.extend_from_slice(&[b, close]);
                    i += 1;
                } else {
                    out.push(b);
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// A package file's bytes: the document's compact text, indented when `pretty`, and a
/// newline (the reference writes `f"{rendered}\n"`).
pub(crate) fn file_bytes(compact: Vec<u8>, pretty: bool) -> Vec<u8> {
    let mut out = if pretty { indent(&compact) } else { compact };
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(x: f64) -> String {
        let mut out = Vec::new();
        write_python_float(x, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_print_as_python_repr_and_a_non_finite_one_as_null() {
        // Python 3's repr() (the table is sinks_toolkit::pyfloat's).
        assert_eq!((float(0.93), float(1.5e-5), float(1e16)), ("0.93".into(), "1.5e-05".into(), "1e+16".into()));
        assert_eq!(float(f64::NAN), "null");
    }

    #[test]
    fn values_are_written_compact_with_sorted_keys_and_python_spellings() {
        let value = serde_json::json!({"z": [1, -2, 1.5e-7, null, true], "a": "é\u{1}\"\n", "m": {}, "e": []});
        let text = String::from_utf8(Compact::of_value(&value)).unwrap();
        assert_eq!(text, r#"{"a":"é\u0001\"\n","e":[],"m":{},"z":[1,-2,1.5e-07,null,true]}"#);
    }

    /// What `json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)` prints for
    /// this value (checked with Python 3.11): strings with punctuation inside stay as they are.
    #[test]
    fn indentation_is_pythons() {
        let compact = r#"{"a":"é ,:{[\"x","e":[],"m":{},"z":[1,{"k":[2]},null]}"#.as_bytes();
        let want = "{\n  \"a\": \"é ,:{[\\\"x\",\n  \"e\": [],\n  \"m\": {},\n  \"z\": [\n    1,\n    {\n      \"k\": [\n        2\n      ]\n    },\n    null\n  ]\n}";
        assert_eq!(String::from_utf8(indent(compact)).unwrap(), want);
        assert_eq!(indent(b"\"plain\""), b"\"plain\"");
        assert_eq!(indent(b"{}"), b"{}");
        assert_eq!(file_bytes(b"[1]".to_vec(), false), b"[1]\n");
    }
}
