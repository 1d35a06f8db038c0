//! Canonical JSON: the exact bytes the reference hashes and signs.
//!
//! The reference renders documents with Python's `json.dumps(value, sort_keys=True,
//! separators=(",", ":"), ensure_ascii=False, allow_nan=False)`. Signatures and custody
//! hashes made by one implementation verify in the other only if both produce the same
//! bytes, so this module reproduces that rendering:
//! - object keys sorted by code point (UTF-8 byte order is the same order);
//! - no whitespace;
//! - strings: `"` and `\` escaped, `\b \f \n \r \t` as such, other characters below U+0020 as
//!   `\u00XX` (lowercase hex), everything else (DEL, non-ASCII, U+2028) written raw;
//! - integers as decimal; floats as Python's `repr`: the shortest round-trip digits, in
//!   positional notation when the decimal exponent is in `-4..16` (with `.0` for whole
//!   numbers), else as `d.ddde±XX` (at least two exponent digits); NaN and infinities are
//!   refused.

use std::io::Write as _;

use serde_json::Value;

#[cfg(test)]
pub(crate) mod arbitrary;
mod buf;
mod ser;
#[cfg(test)]
mod stream_tests;
mod text;

pub use buf::CanonicalBuf;
pub use ser::serialize_into;
#[cfg(test)]
pub(crate) use ser::stream_into;
pub use text::{NotStrict, strict_text_into};

/// A value the canonical form cannot represent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// NaN or an infinity (JSON has neither).
    #[error("canonical JSON cannot hold NaN or infinity")]
    NonFinite,
}

/// The canonical bytes of `value`.
pub fn to_vec(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out)?;
    Ok(out)
}

fn write(value: &Value, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // Sorted by key (a map without `preserve_order` iterates sorted already, which
            // the sort finds at once), each value taken with its key, not looked up again.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(key, out);
                out.push(b':');
                write(value, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// A number as the reference renders it: an integer in decimal, anything else as Python's
/// `repr` of the float. With serde_json's `arbitrary_precision` (which another crate of a build
/// may turn on) a number keeps the text it was parsed from (`1e16`, `1.50`); it is rendered
/// from its value all the same.
pub(crate) fn write_number<W: std::io::Write + ?Sized>(
    n: &serde_json::Number,
    out: &mut W,
) -> Result<(), CanonicalError> {
    // Writing into a Vec or a counter cannot fail.
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else {
        let mut text = Vec::with_capacity(24);
        write_python_float(n.as_f64().unwrap_or(f64::NAN), &mut text)?;
        let _ = out.write_all(&text);
    }
    Ok(())
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Only ASCII bytes are ever escaped (`"`, `\` and controls), and no byte of a multi-byte
    // UTF-8 sequence is ASCII: runs of other bytes are copied as they are, in one go.
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..0x20 => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[run..i]);
        run = i + 1;
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.extend_from_slice(escape);
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// The length of the canonical bytes of `value` turned into a [`Value`] (what
/// `to_vec(&serde_json::to_value(value)?)` would return), counted while `value` serializes:
/// no tree is built and no byte is written (the serializer of [`serialize_into`] with a
/// counter for its output; key order changes no length). As in `to_value`, a NaN or infinite
/// float counts as `null`. A map that repeats a key counts each entry (a [`Value`] keeps one);
/// the documents measured here never repeat one. 128-bit integers, `f32`, `RawValue` and float
/// map keys are measured through a [`Value`].
pub fn len_of<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    match ser::count(value) {
        Ok(len) => len,
        Err(_) => serde_json::to_value(value).ok().and_then(|v| to_vec(&v).ok()).map_or(u64::MAX, |b| b.len() as u64),
    }
}

/// The length of the canonical bytes of the whole metadata document `doc` (what [`len_of`]
/// counts for it), counted as the document's own writer writes it
/// ([`MetadataDoc::write_in_key_order`](sinks_toolkit::metadata::MetadataDoc::write_in_key_order)),
/// without the serde route's member tracking.
pub fn metadata_len(doc: &sinks_toolkit::metadata::MetadataDoc<'_>) -> u64 {
    let mut counter = buf::Counter::default();
    match doc.write_in_key_order(&mut counter, sinks_toolkit::metadata::LeftOut::default()) {
        Ok(()) => counter.len(),
    }
}

/// `value` as a document to attach to an envelope: its canonical text (the bytes of
/// [`serialize_into`]), its value left to be parsed from that text when a sink asks for it.
pub fn doc_of<T: serde::Serialize + ?Sized>(value: &T) -> Result<sinks_contract::json::JsonDoc, CanonicalError> {
    with_buf(|buf| {
        serialize_into(value, &[], buf)?;
        Ok(doc_from(buf))
    })
}

/// The canonical length of an attached document: its text's, or its value's rendering when
/// it was attached as a value.
pub fn doc_len(doc: &sinks_contract::json::JsonDoc) -> u64 {
    doc.canonical().map_or_else(|| len_of(doc.value()), |text| text.len() as u64)
}

/// For tests: the value of an attached document, after checking that its canonical text, when
/// it has one, is the canonical rendering of that value.
#[cfg(test)]
pub(crate) fn checked_value(doc: &sinks_contract::json::JsonDoc) -> serde_json::Value {
    if let Some(text) = doc.canonical() {
        assert_eq!(text.as_bytes(), to_vec(doc.value()).unwrap(), "canonical text of {}", doc.value());
    }
    doc.value().clone()
}

/// The bytes in `buf` (canonical JSON, written from Rust strings: always UTF-8) as a
/// document to attach.
pub(crate) fn doc_from(buf: &CanonicalBuf) -> sinks_contract::json::JsonDoc {
    let text = match std::str::from_utf8(buf.bytes()) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(buf.bytes()).into_owned(),
    };
    sinks_contract::json::JsonDoc::from_canonical(text)
}

/// Buffers larger than this (a large document's rendering) are not kept for the next message.
const KEPT_BUFFER_BYTES: usize = 256 * 1024;

thread_local! {
    /// This thread's rendering buffer, reused from message to message by the policy steps.
    static BUF: std::cell::RefCell<CanonicalBuf> = std::cell::RefCell::new(CanonicalBuf::new());
}

/// Calls `f` with this thread's rendering buffer (cleared after; dropped when it grew past
/// 256 KiB). Not for use inside `f`.
pub(crate) fn with_buf<R>(f: impl FnOnce(&mut CanonicalBuf) -> R) -> R {
    BUF.with_borrow_mut(|buf| {
        let result = f(buf);
        buf.clear();
        if buf.capacity() > KEPT_BUFFER_BYTES {
            *buf = CanonicalBuf::new();
        }
        result
    })
}

/// Lowercase hex of `bytes` (a digest as the reference writes it), two table lookups a byte,
/// written as bytes and made a string once.
pub(crate) fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let hex: Vec<u8> =
        bytes.iter().flat_map(|&b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]).collect();
    // Only ASCII digits and letters were written.
    String::from_utf8(hex).unwrap_or_default()
}

/// Python's `repr(float)`.
pub fn python_float(x: f64) -> Result<String, CanonicalError> {
    let mut out = Vec::with_capacity(24);
    write_python_float(x, &mut out)?;
    // Only ASCII digits, signs, `.` and `e` are written.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Appends Python's `repr(float)` of `x` to `out` (`sinks_toolkit::pyfloat`), refusing a
/// non-finite one as the canonical form does.
pub(crate) fn write_python_float(x: f64, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    sinks_toolkit::pyfloat::write_repr(x, out).map_err(|_| CanonicalError::NonFinite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_kept_as_text_parses_its_value_once_on_demand() {
        let doc = sinks_contract::json::JsonDoc::from_canonical(r#"{"a":[1,null,true],"b":"x\u0001y"}"#.to_owned());
        assert_eq!(doc.canonical(), Some(r#"{"a":[1,null,true],"b":"x\u0001y"}"#));
        let first: *const serde_json::Value = doc.value();
        assert_eq!(doc.value(), &serde_json::json!({"a": [1, null, true], "b": "x\u{1}y"}));
        assert!(std::ptr::eq(first, doc.value()), "parsed once");
        assert_eq!(serde_json::to_string(&doc).unwrap(), r#"{"a":[1,null,true],"b":"x\u0001y"}"#);

        let made = sinks_contract::json::JsonDoc::from_value(serde_json::json!({"k": 2}));
        assert_eq!((made.canonical(), made.value()), (None, &serde_json::json!({"k": 2})));
    }

    #[test]
    fn floats_parsed_from_the_text_are_the_floats_it_was_written_from() {
        // The canonical text spells floats as Python does (`1e-07`, `1e+16`); the value must
        // be the one made from the `f64`, spelled as serde_json spells it (with
        // `arbitrary_precision`, which the Oracle NoSQL SDK turns on in the full build, a
        // parsed number would otherwise keep the text's spelling).
        let doc = sinks_contract::json::JsonDoc::from_canonical(
            r#"{"a":1e-07,"b":1e+16,"c":5,"d":-0.5,"e":[2.0]}"#.to_owned(),
        );
        let want = serde_json::json!({"a": 1e-7, "b": 1e16, "c": 5, "d": -0.5, "e": [2.0]});
        assert_eq!(doc.value(), &want);
        assert_eq!(serde_json::to_string(doc.value()).unwrap(), serde_json::to_string(&want).unwrap());
        assert!(doc.value()["c"].is_u64(), "integers stay integers");
        assert_eq!(doc_of(&want).unwrap().canonical(), doc.canonical(), "the text this module writes");
    }

    #[test]
    fn digests_print_as_lowercase_hex() {
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa5, 0xff, 0x10]), "000fa5ff10");
        assert_eq!(lower_hex(&[]), "");
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower_hex(&every), expected);
    }

    #[test]
    fn a_non_finite_float_has_no_canonical_form() {
        assert_eq!(python_float(1.5e-5).unwrap(), "1.5e-05");
        assert_eq!(python_float(f64::NAN), Err(CanonicalError::NonFinite));
    }

    /// The escaping rule, one character at a time (how `json.dumps(ensure_ascii=False)`
    /// states it), to hold the byte-run writer to.
    fn escaped_char_by_char(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn strings_escape_exactly_the_ascii_controls_quote_and_backslash() {
        // Every code point up to U+0800 and a few beyond, alone, in runs and between others.
        let mut samples: Vec<String> = (0u32..0x800)
            .chain([0x2028, 0x2029, 0xfeff, 0x1f600])
            .filter_map(char::from_u32)
            .map(String::from)
            .collect();
        let all: String = samples.concat();
        samples.push(all.clone());
        samples.push(format!("plain {all} text \"quoted\" \\ end\n"));
        samples.push(String::new());
        for s in &samples {
            let mut out = Vec::new();
            write_str(s, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), escaped_char_by_char(s), "{s:?}");
        }
    }

    /// What `len_of` must equal: the length of the rendered `Value`.
    fn rendered_len<T: serde::Serialize>(value: &T) -> u64 {
        to_vec(&serde_json::to_value(value).unwrap()).unwrap().len() as u64
    }

    #[test]
    fn len_of_counts_what_the_value_route_renders() {
        #[derive(serde::Serialize)]
        enum Shape {
            Unit,
            New(f64),
            Pair(i8, &'static str),
            Named { b: Option<u32>, a: [u16; 2] },
        }
        #[derive(serde::Serialize)]
        struct Doc {
            z_last: &'static str,
            floats: Vec<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            skipped: Option<u8>,
            none: Option<u8>,
            unit: (),
            shapes: Vec<Shape>,
            map: std::collections::BTreeMap<String, serde_json::Value>,
            chars: Vec<char>,
            signed: (i64, i64, u64),
        }
        let doc = Doc {
            z_last: "tab\tquote\"back\\slash\u{1}\u{1f}é\u{2028}\u{7f}",
            floats: vec![1.0, 0.5, 1e16, 1.5e-5, -0.0, 1e300, 5e-324, f64::NAN, f64::INFINITY, 0.1 + 0.2],
            skipped: None,
            none: None,
            unit: (),
            shapes: vec![
                Shape::Unit,
                Shape::New(2.5),
                Shape::Pair(-7, "x"),
                Shape::Named { b: Some(10), a: [0, 65535] },
            ],
            map: serde_json::from_str(
                r#"{"ä":{"y":1e20,"z":-3},"a":[[],{}],"n":null,"t":true,"f":false,"big":18446744073709551615}"#,
            )
            .unwrap(),
            chars: vec!['a', '"', '\n', '€'],
            signed: (i64::MIN, -1, u64::MAX),
        };
        assert_eq!(len_of(&doc), rendered_len(&doc));
        let value: serde_json::Value = serde_json::to_value(&doc).unwrap();
        assert_eq!(len_of(&value), rendered_len(&value), "a Value measured as it serializes");
        assert_eq!(len_of(&serde_json::json!({})), 2);
        assert_eq!(len_of(&serde_json::json!([])), 2);
        assert_eq!(len_of(&f64::NAN), 4, "to_value makes NaN null");
    }

    /// A number as serde_json hands a [`Value`]'s number over under `arbitrary_precision`: a
    /// struct of that name whose one field is the number's text.
    struct PreciseNumber(&'static str);

    impl serde::Serialize for PreciseNumber {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct as _;
            let mut number = s.serialize_struct("$serde_json::private::Number", 1)?;
            number.serialize_field("$serde_json::private::Number", self.0)?;
            number.end()
        }
    }

    #[test]
    fn a_numbers_own_text_renders_from_its_value() {
        // serde_json's `arbitrary_precision` (on in any build that links the NoSQL SDK) hands a
        // Value's number over as the text it was parsed from; rendered and counted, it must be
        // what `to_vec` renders of the number, in builds with the feature and without it.
        for text in [
            "1e16",
            "1.50",
            "-0",
            "-0.0",
            "12.5",
            "1.5e-5",
            "1E+2",
            "18446744073709551615",
            "-9223372036854775808",
            "7",
        ] {
            let mut want = Vec::new();
            write_number(&text.parse().unwrap(), &mut want).unwrap();
            let mut buf = CanonicalBuf::new();
            assert!(stream_into(&PreciseNumber(text), &[], &mut buf).is_ok(), "{text}");
            assert_eq!(buf.bytes(), want, "{text}");
            assert_eq!(ser::count(&PreciseNumber(text)).ok(), Some(want.len() as u64), "{text}");
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(len_of(&value), to_vec(&value).unwrap().len() as u64, "{text}");
        }
        assert!(stream_into(&PreciseNumber("not a number"), &[], &mut CanonicalBuf::new()).is_err());
    }

    #[test]
    fn len_of_takes_the_value_route_for_shapes_it_does_not_count() {
        let raw = serde_json::value::RawValue::from_string(r#"{ "b" : 1.0e1, "a" : [ 1 ] }"#.into()).unwrap();
        assert_eq!(len_of(&raw), rendered_len(&raw), "a RawValue is parsed, then rendered");
        assert_eq!(len_of(&raw), r#"{"a":[1],"b":10.0}"#.len() as u64);
        let int_keys: std::collections::BTreeMap<u32, &str> = [(1, "a"), (22, "b")].into();
        assert_eq!(len_of(&int_keys), rendered_len(&int_keys));
        assert_eq!(len_of(&12_345_u128), rendered_len(&12_345_u128));
    }

    #[test]
    fn documents_render_like_json_dumps_sorted_compact() {
        let v = serde_json::json!({"b": [1, 2.5, null, true], "a": "é\"\\\n\u{1}\u{7f}", "ä": {"z": -3, "y": 1e20}});
        let got = String::from_utf8(to_vec(&v).unwrap()).unwrap();
        assert_eq!(got, "{\"a\":\"é\\\"\\\\\\n\\u0001\u{7f}\",\"b\":[1,2.5,null,true],\"ä\":{\"y\":1e+20,\"z\":-3}}");
    }
}
