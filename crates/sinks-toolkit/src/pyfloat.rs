//! Python's `repr(float)`, which `json.dumps` writes for a float: the one spelling of a
//! number the reference's canonical hashes (`sinks-policy`) and its review packages
//! (`sink-review-package`) hold, written here once.

use std::io::Write as _;

/// A NaN or an infinity: JSON has no spelling for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonFinite;

/// Appends Python's `repr(float)` of `x` to `out`, building no string on the way: the
/// shortest digits that read back as `x`, positional when the decimal exponent is in
/// `-4..16` (`.0` after a whole number), else `d.ddde±XX` with at least two exponent digits.
/// A non-finite `x` writes nothing and is refused (JSON has no spelling for it).
pub fn write_repr(x: f64, out: &mut Vec<u8>) -> Result<(), NonFinite> {
    if !x.is_finite() {
        return Err(NonFinite);
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() { b"-0.0" } else { b"0.0" });
        return Ok(());
    }
    // Shortest round-trip digits and the exponent, from Rust's own shortest formatting
    // (`d.ddde±x`, at most 17 digits and a three-digit exponent).
    let mut sci = Ascii::<32>::default();
    let _ = std::fmt::Write::write_fmt(&mut sci, format_args!("{:e}", x.abs()));
    let sci = sci.text();
    let split = sci.iter().position(|&b| b == b'e').unwrap_or(sci.len());
    let (mantissa, exp_text) = sci.split_at(split);
    let exp = parse_exponent(exp_text.get(1..).unwrap_or_default());
    let mut digits = Ascii::<24>::default();
    for &b in mantissa.iter().filter(|b| b.is_ascii_digit()) {
        digits.push(b);
    }
    let digits = digits.text();
    if x.is_sign_negative() {
        out.push(b'-');
    }
    if (-4..16).contains(&exp) {
        // Positional: the point goes after digit `exp + 1`.
        let point = exp + 1;
        if point <= 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', point.unsigned_abs() as usize));
            out.extend_from_slice(digits);
        } else if point as usize >= digits.len() {
            out.extend_from_slice(digits);
            out.extend(std::iter::repeat_n(b'0', point as usize - digits.len()));
            out.extend_from_slice(b".0");
        } else {
            let (int, frac) = digits.split_at(point as usize);
            out.extend_from_slice(int);
            out.push(b'.');
            out.extend_from_slice(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.extend_from_slice(first);
        if !rest.is_empty() {
            out.push(b'.');
            out.extend_from_slice(rest);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let magnitude = exp.unsigned_abs();
        if magnitude < 10 {
            out.push(b'0');
        }
        let _ = write!(out, "{magnitude}");
    }
    Ok(())
}

/// The exponent of Rust's `{:e}` output (`-5`, `16`).
fn parse_exponent(text: &[u8]) -> i32 {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let magnitude = digits.iter().fold(0i32, |n, &d| n * 10 + i32::from(d - b'0'));
    if negative { -magnitude } else { magnitude }
}

/// A few ASCII bytes on the stack (a float's text).
struct Ascii<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Ascii<N> {
    fn default() -> Self {
        Self { bytes: [0; N], len: 0 }
    }
}

impl<const N: usize> Ascii<N> {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    fn text(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<const N: usize> std::fmt::Write for Ascii<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.len + s.len() > N {
            return Err(std::fmt::Error);
        }
        for &b in s.as_bytes() {
            self.push(b);
        }
        Ok(())
    }
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
            (0.93, "0.93"),
            (123.456, "123.456"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (0.00001234, "1.234e-05"),
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
            let mut out = Vec::new();
            write_repr(*x, &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), *want, "{x:e}");
        }
        let mut out = Vec::new();
        assert_eq!(
            (write_repr(f64::NAN, &mut out), write_repr(f64::INFINITY, &mut out)),
            (Err(NonFinite), Err(NonFinite))
        );
        assert!(out.is_empty(), "nothing written for a non-finite number");
    }
}
