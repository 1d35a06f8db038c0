//! Checks of config values that several sinks' sections share: bounded text, tokens
//! (names, prefixes, profiles) and durations in seconds.
//!
//! Each check returns the problem in words (`Err("must not be empty")`) and leaves the field
//! path to the caller, which pushes it into its [`Issues`](sinks_contract::config::Issues)
//! under `sink.<field>`: the same wording for the same problem in every sink.

/// Bounded, unpadded text without control characters: not empty, no leading or trailing
/// whitespace, at most `max` characters.
pub fn check_text(value: &str, max: usize) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.trim() != value {
        return Err("must not have surrounding whitespace".into());
    }
    if value.chars().count() > max {
        return Err(format!("must be at most {max} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// [`check_text`], and a first character that is an ASCII letter or digit and others that
/// satisfy `allowed`.
pub fn check_token(value: &str, max: usize, allowed: impl Fn(char) -> bool) -> Result<(), String> {
    check_text(value, max)?;
    let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !value.chars().all(allowed) {
        return Err("contains unsupported characters".into());
    }
    Ok(())
}

/// A finite number of seconds, at most `max`, and above zero (`zero_ok`: zero or above).
pub fn check_seconds(value: f64, zero_ok: bool, max: f64) -> Result<(), String> {
    let low_ok = if zero_ok { value >= 0.0 } else { value > 0.0 };
    if value.is_finite() && low_ok && value <= max {
        return Ok(());
    }
    let low = if zero_ok { "≥ 0" } else { "> 0" };
    Err(format!("must be {low} and ≤ {max} (got {value})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_bounded_unpadded_and_printable() {
        let rows: [(&str, usize, Result<(), &str>); 7] = [
            ("events", 8, Ok(())),
            ("ab", 2, Ok(())),
            ("é€", 2, Ok(())),
            ("", 8, Err("must not be empty")),
            (" events", 8, Err("must not have surrounding whitespace")),
            ("events\n", 8, Err("must not have surrounding whitespace")),
            ("abc", 2, Err("must be at most 2 characters")),
        ];
        for (value, max, want) in rows {
            assert_eq!(check_text(value, max), want.map_err(str::to_owned), "{value:?}");
        }
        assert_eq!(check_text("a\u{7}b", 8), Err("must not contain control characters".into()));
    }

    #[test]
    fn tokens_start_with_a_letter_or_digit_and_use_the_allowed_characters() {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
        for ok in ["a", "9a", "a_b.c-d"] {
            assert_eq!(check_token(ok, 16, allowed), Ok(()), "{ok}");
        }
        for bad in ["_a", ".a", "a b", "a:b", "ä"] {
            assert_eq!(check_token(bad, 16, allowed), Err("contains unsupported characters".into()), "{bad}");
        }
        // The text checks come first, with their own words.
        assert_eq!(check_token("", 16, allowed), Err("must not be empty".into()));
        assert_eq!(check_token("abc", 2, allowed), Err("must be at most 2 characters".into()));
    }

    #[test]
    fn seconds_are_finite_and_within_their_bounds() {
        assert_eq!(check_seconds(10.0, false, 300.0), Ok(()));
        assert_eq!(check_seconds(300.0, false, 300.0), Ok(()));
        assert_eq!(check_seconds(0.0, true, 300.0), Ok(()));
        assert_eq!(check_seconds(0.0, false, 300.0), Err("must be > 0 and ≤ 300 (got 0)".into()));
        assert_eq!(check_seconds(-1.0, true, 300.0), Err("must be ≥ 0 and ≤ 300 (got -1)".into()));
        assert_eq!(check_seconds(300.5, true, 300.0), Err("must be ≥ 0 and ≤ 300 (got 300.5)".into()));
        assert_eq!(check_seconds(f64::NAN, true, 300.0), Err("must be ≥ 0 and ≤ 300 (got NaN)".into()));
        assert_eq!(check_seconds(f64::INFINITY, false, 300.0), Err("must be > 0 and ≤ 300 (got inf)".into()));
    }
}
