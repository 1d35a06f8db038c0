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
            if let Some(i) = n.as_i64() {
                out.extend_from_slice(i.to_string().as_bytes());
            } else if let Some(u) = n.as_u64() {
                out.extend_from_slice(u.to_string().as_bytes());
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
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(key, out);
                out.push(b':');
                write(&map[key.as_str()], out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
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

    #[test]
    fn documents_render_like_json_dumps_sorted_compact() {
        let v = serde_json::json!({"b": [1, 2.5, null, true], "a": "é\"\\\n\u{1}\u{7f}", "ä": {"z": -3, "y": 1e20}});
        let got = String::from_utf8(to_vec(&v).unwrap()).unwrap();
        assert_eq!(got, "{\"a\":\"é\\\"\\\\\\n\\u0001\u{7f}\",\"b\":[1,2.5,null,true],\"ä\":{\"y\":1e+20,\"z\":-3}}");
    }
}
