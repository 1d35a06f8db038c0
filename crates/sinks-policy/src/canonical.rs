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
        Value::Number(n) => {
            // Writing into a Vec cannot fail.
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                out.extend_from_slice(python_float(n.as_f64().unwrap_or(f64::NAN))?.as_bytes());
            }
        }
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
/// no tree is built and no byte is written. As in `to_value`, a NaN or infinite float counts
/// as `null`. A map that repeats a key counts each entry (a [`Value`] keeps one); the
/// documents measured here never repeat one. Shapes this counter does not take (byte arrays,
/// 128-bit integers, `RawValue`, non-string map keys) are measured through a [`Value`].
pub fn len_of<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    match value.serialize(Len) {
        Ok(n) => n,
        Err(_) => serde_json::to_value(value).ok().and_then(|v| to_vec(&v).ok()).map_or(u64::MAX, |b| b.len() as u64),
    }
}

/// Canonical length of a string: the quotes and each byte, escapes counted as written.
fn str_len(s: &str) -> u64 {
    let escapes: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
            0..0x20 => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + escapes + 2
}

/// Decimal digits of an integer, with its sign.
fn int_len(i: i128) -> u64 {
    let mut digits = 1;
    let mut n = i.unsigned_abs();
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits + u64::from(i < 0)
}

/// A shape [`Len`] leaves to the [`Value`] route.
#[derive(Debug)]
struct Unsupported;

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not counted directly")
    }
}

impl std::error::Error for Unsupported {}

impl serde::ser::Error for Unsupported {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Self
    }
}

/// Counts canonical bytes ([`len_of`]).
struct Len;

/// A container being counted: bytes so far, whether an element was counted yet, the
/// `{"variant":…}` around an enum variant's content and a map's pending key.
struct Counting {
    len: u64,
    first: bool,
    wrap: u64,
    key: Option<u64>,
}

impl Counting {
    fn open() -> Self {
        Self { len: 1, first: true, wrap: 0, key: None }
    }

    fn variant(variant: &str) -> Self {
        Self { wrap: variant_wrap(variant), ..Self::open() }
    }

    fn separator(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.len += 1;
        }
    }

    fn element<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.separator();
        self.len += value.serialize(Len)?;
        Ok(())
    }

    fn entry<T: serde::Serialize + ?Sized>(&mut self, key: u64, value: &T) -> Result<(), Unsupported> {
        self.separator();
        self.len += key + 1 + value.serialize(Len)?;
        Ok(())
    }

    /// The closing bracket, and the variant's wrapping.
    fn close(self) -> u64 {
        self.len + 1 + self.wrap
    }
}

/// `{"variant":` and `}` around a variant's content.
fn variant_wrap(variant: &str) -> u64 {
    2 + str_len(variant) + 1
}

impl serde::Serializer for Len {
    type Ok = u64;
    type Error = Unsupported;
    type SerializeSeq = Counting;
    type SerializeTuple = Counting;
    type SerializeTupleStruct = Counting;
    type SerializeTupleVariant = Counting;
    type SerializeMap = Counting;
    type SerializeStruct = Counting;
    type SerializeStructVariant = Counting;

    fn serialize_bool(self, v: bool) -> Result<u64, Unsupported> {
        Ok(if v { 4 } else { 5 })
    }
    fn serialize_i8(self, v: i8) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_u8(self, v: u8) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<u64, Unsupported> {
        Ok(int_len(v.into()))
    }
    fn serialize_i128(self, _: i128) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u128(self, _: u128) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f32(self, v: f32) -> Result<u64, Unsupported> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<u64, Unsupported> {
        // `to_value` makes a non-finite float `null`.
        Ok(python_float(v).map_or(4, |s| s.len() as u64))
    }
    fn serialize_char(self, v: char) -> Result<u64, Unsupported> {
        Ok(str_len(v.encode_utf8(&mut [0; 4])))
    }
    fn serialize_str(self, v: &str) -> Result<u64, Unsupported> {
        Ok(str_len(v))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<u64, Unsupported> {
        Ok(4)
    }
    fn serialize_some<T: serde::Serialize + ?Sized>(self, value: &T) -> Result<u64, Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<u64, Unsupported> {
        Ok(4)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<u64, Unsupported> {
        Ok(4)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<u64, Unsupported> {
        Ok(str_len(variant))
    }
    fn serialize_newtype_struct<T: serde::Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<u64, Unsupported> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: serde::Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<u64, Unsupported> {
        Ok(variant_wrap(variant) + value.serialize(self)?)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Counting, Unsupported> {
        Ok(Counting::open())
    }
    fn serialize_tuple(self, _: usize) -> Result<Counting, Unsupported> {
        Ok(Counting::open())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Counting, Unsupported> {
        Ok(Counting::open())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Counting, Unsupported> {
        Ok(Counting::variant(variant))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Counting, Unsupported> {
        Ok(Counting::open())
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Counting, Unsupported> {
        // serde_json's RawValue travels as a struct of this name: leave it to `to_value`.
        if name.starts_with("$serde_json") {
            return Err(Unsupported);
        }
        Ok(Counting::open())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Counting, Unsupported> {
        Ok(Counting::variant(variant))
    }
}

/// The four sequence-like containers count their elements alike: `$trait` with its element
/// method `$method`.
macro_rules! counting_sequence {
    ($($trait:ident :: $method:ident),+ $(,)?) => {$(
        impl serde::ser::$trait for Counting {
            type Ok = u64;
            type Error = Unsupported;
            fn $method<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
                self.element(value)
            }
            fn end(self) -> Result<u64, Unsupported> {
                Ok(self.close())
            }
        }
    )+};
}

counting_sequence!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl serde::ser::SerializeMap for Counting {
    type Ok = u64;
    type Error = Unsupported;
    fn serialize_key<T: serde::Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        self.key = Some(key.serialize(KeyLen)?);
        Ok(())
    }
    fn serialize_value<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        let key = self.key.take().ok_or(Unsupported)?;
        self.entry(key, value)
    }
    fn end(self) -> Result<u64, Unsupported> {
        Ok(self.close())
    }
}

/// The two struct-like containers count their fields alike.
macro_rules! counting_struct {
    ($($trait:ident),+) => {$(
        impl serde::ser::$trait for Counting {
            type Ok = u64;
            type Error = Unsupported;
            fn serialize_field<T: serde::Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Unsupported> {
                self.entry(str_len(key), value)
            }
            fn end(self) -> Result<u64, Unsupported> {
                Ok(self.close())
            }
        }
    )+};
}

counting_struct!(SerializeStruct, SerializeStructVariant);

/// A map key that is not a string: each `$method` taking a `$ty` refuses it, so the key's map
/// is measured through a [`Value`].
macro_rules! refuse_scalars {
    ($($method:ident : $ty:ty),+ $(,)?) => {$(
        fn $method(self, _: $ty) -> Result<u64, Unsupported> {
            Err(Unsupported)
        }
    )+};
}

/// Counts a map key: strings (and chars) only; anything else goes the [`Value`] route.
struct KeyLen;

impl serde::Serializer for KeyLen {
    type Ok = u64;
    type Error = Unsupported;
    type SerializeSeq = serde::ser::Impossible<u64, Unsupported>;
    type SerializeTuple = serde::ser::Impossible<u64, Unsupported>;
    type SerializeTupleStruct = serde::ser::Impossible<u64, Unsupported>;
    type SerializeTupleVariant = serde::ser::Impossible<u64, Unsupported>;
    type SerializeMap = serde::ser::Impossible<u64, Unsupported>;
    type SerializeStruct = serde::ser::Impossible<u64, Unsupported>;
    type SerializeStructVariant = serde::ser::Impossible<u64, Unsupported>;

    fn serialize_str(self, v: &str) -> Result<u64, Unsupported> {
        Ok(str_len(v))
    }
    fn serialize_char(self, v: char) -> Result<u64, Unsupported> {
        Ok(str_len(v.encode_utf8(&mut [0; 4])))
    }
    fn serialize_newtype_struct<T: serde::Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<u64, Unsupported> {
        value.serialize(self)
    }
    refuse_scalars!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f32: f32,
        serialize_f64: f64,
    );
    fn serialize_bytes(self, _: &[u8]) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_some<T: serde::Serialize + ?Sized>(self, _: &T) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit(self) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_variant<T: serde::Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<u64, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        Err(Unsupported)
    }
}

/// Python's `repr(float)`.
pub fn python_float(x: f64) -> Result<String, CanonicalError> {
    if !x.is_finite() {
        return Err(CanonicalError::NonFinite);
    }
    if x == 0.0 {
        return Ok(if x.is_sign_negative() { "-0.0" } else { "0.0" }.into());
    }
    // Shortest round-trip digits and the exponent, from Rust's own shortest formatting.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let body = if (-4..16).contains(&exp) {
        // Positional: the point goes after digit `exp + 1`.
        let point = exp + 1;
        if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() { first.to_owned() } else { format!("{first}.{rest}") };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{exp_sign}{:02}", exp.unsigned_abs())
    };
    Ok(format!("{sign}{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        // Expected strings are Python 3's repr() of the same numbers.
        let table: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.5, "0.5"),
            (123.456, "123.456"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-2.5, "-2.5"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            (1234567890123456.0, "1234567890123456.0"),
        ];
        for (x, want) in table {
            assert_eq!(python_float(*x).unwrap(), *want, "{x:e}");
        }
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
