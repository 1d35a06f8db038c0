//! A strict, bounded reader for JSON documents written by untrusted publishers (the mission
//! metadata and security label headers, and the objects configured for them), and the JSON
//! model the policy checks run on.
//!
//! What it guarantees:
//! - [`parse`] accepts exactly the text the reference's strict `json.loads` accepts: RFC 8259
//!   JSON with nothing before or after the value but JSON whitespace (no byte-order mark), no
//!   `NaN`/`Infinity`, no raw control characters in strings, no leading zeros, no trailing
//!   commas. It refuses as *ambiguous* a duplicate key in any object (reported when that
//!   object closes, as the reference does; escapes are decoded first, so `"a"` and `"\u0061"`
//!   are the same key) and an integer literal of more than 4300 digits (Python's integer
//!   conversion limit). Nesting stops at 128 levels, so recursion is bounded whatever the
//!   input.
//! - Parsing loses nothing the checks need: members stay in document order (the first
//!   failing field is the one reported, as in the reference), integers stay apart from
//!   floats, a number that overflows is kept as an infinite float (for [`check`] to refuse),
//!   and a lone surrogate escape (`"\ud800"`), which a Rust string cannot hold, becomes
//!   U+FFFD with [`Parsed::unencodable`] set, so the caller can refuse the document where the
//!   reference fails to encode it.
//! - [`check`] bounds the value: nesting depth ≤ [`MAX_DEPTH`] (the root is level 0), ≤
//!   [`MAX_OBJECT_FIELDS`] fields per object, ≤ [`MAX_ARRAY_ITEMS`] items per array, keys
//!   matching `^[A-Za-z][A-Za-z0-9_.:-]{0,127}$` and not secret-like ([`SECRET_KEY_PARTS`]),
//!   strings of ≤ [`MAX_STRING_LENGTH`] characters without control characters, integers
//!   within ±[`MAX_INTEGER_ABS`], floats finite.
//! - Every [`DocError`] says what is wrong ([`Problem`]), where (a path such as `.a.b[2]`)
//!   and which limit, and never repeats a value, nor a key that fails the key pattern.
//!
//! What a problem means for a message (its reason code) is the caller's business:
//! [`super::mission`] and [`super::labels`] map each [`Problem`] to their own codes.

use std::collections::HashSet;

use serde_json::Value;

use crate::pycompat;

/// Deepest accepted nesting (the root object is level 0).
pub const MAX_DEPTH: usize = 8;
/// Most fields in one object.
pub const MAX_OBJECT_FIELDS: usize = 128;
/// Most items in one array.
pub const MAX_ARRAY_ITEMS: usize = 256;
/// Longest key, in characters.
pub const MAX_KEY_LENGTH: usize = 128;
/// Longest string value, in characters.
pub const MAX_STRING_LENGTH: usize = 4096;
/// Largest integer magnitude (2^53 − 1, exact in every JSON reader).
pub const MAX_INTEGER_ABS: i128 = 9_007_199_254_740_991;
/// Key fragments (compared lowercase) that make a key look secret-like.
pub const SECRET_KEY_PARTS: [&str; 9] =
    ["password", "passwd", "pwd", "token", "secret", "private_key", "credential", "api_key", "key_material"];

/// Integer literals longer than this many digits are refused by the reference's parser
/// (Python's integer string conversion limit).
const MAX_INTEGER_DIGITS: usize = 4300;
/// Nesting at which parsing stops, bounding the parser's recursion (the reference's parser
/// hits Python's recursion limit near 1000; anything this deep is over [`MAX_DEPTH`] anyway).
const MAX_PARSE_NESTING: usize = 128;

// ---------------------------------------------------------------------------------------
// Problems.

/// What is wrong with a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Not strict JSON (syntax, `NaN`/`Infinity`, raw control characters).
    InvalidJson,
    /// A duplicate key, or an integer literal of more than 4300 digits.
    AmbiguousJson,
    /// Nested deeper than [`MAX_DEPTH`].
    DepthExceeded,
    /// An object with more than [`MAX_OBJECT_FIELDS`] fields.
    TooManyFields,
    /// An array with more than [`MAX_ARRAY_ITEMS`] items.
    TooManyItems,
    /// A key that is empty, padded, too long, has control characters or does not match the
    /// key pattern.
    InvalidKey,
    /// A key that looks secret-like.
    SecretKey,
    /// A string longer than [`MAX_STRING_LENGTH`] characters.
    StringTooLong,
    /// A string with control characters.
    ControlCharacters,
    /// An integer beyond ±[`MAX_INTEGER_ABS`].
    IntegerOutOfRange,
    /// A number that overflowed to infinity.
    NonFiniteNumber,
}

/// One problem with a document: what, where (a path relative to the value checked, such as
/// `.a.b[2]`, empty for the root) and a description naming limits only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocError {
    /// What is wrong.
    pub problem: Problem,
    /// Where: `.key` and `[index]` segments from the value checked.
    pub at: String,
    /// A lowercase description, e.g. `object exceeds 128 fields`.
    pub message: String,
}

impl DocError {
    fn new(problem: Problem, message: impl Into<String>) -> Self {
        Self { problem, at: String::new(), message: message.into() }
    }

    /// The same problem seen from the parent: `segment` (`.key` or `[i]`) prepended.
    fn under(mut self, segment: &str) -> Self {
        self.at.insert_str(0, segment);
        self
    }
}

// ---------------------------------------------------------------------------------------
// The JSON model.

/// A JSON value as the reference's checks see it: object members in document order (the
/// first failing field is reported, as the reference does) and integers kept apart from
/// floats (`1` and `1.0` are different types to a profile).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer literal (saturated beyond the `i128` range, which is over every limit).
    Int(i128),
    /// A number with a fraction or exponent (may be infinite after overflow: `1e400`).
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Self>),
    /// An object, members in order.
    Object(Vec<(String, Self)>),
}

impl Json {
    /// The JSON model of a config value (objects in key order).
    pub fn from_value(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Self::Int(i128::from(i)),
                (None, Some(u)) => Self::Int(i128::from(u)),
                _ => Self::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Self::Str(s.clone()),
            Value::Array(items) => Self::Array(items.iter().map(Self::from_value).collect()),
            Value::Object(map) => Self::Object(map.iter().map(|(k, v)| (k.clone(), Self::from_value(v))).collect()),
        }
    }

    /// The `serde_json` value, the document's strings and keys moved into it (callers have
    /// checked that numbers are finite and in range).
    pub fn into_value(self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(b) => Value::Bool(b),
            Self::Int(i) => i64::try_from(i).map(Value::from).unwrap_or(Value::Null),
            Self::Float(f) => serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null),
            Self::Str(s) => Value::String(s),
            Self::Array(items) => Value::Array(items.into_iter().map(Self::into_value).collect()),
            Self::Object(members) => Value::Object(members.into_iter().map(|(k, v)| (k, v.into_value())).collect()),
        }
    }

    /// Member `key` of an object (`None` for other values).
    pub fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Member `key`, treating `null` like an absent member (the reference's `dict.get`).
    pub fn get_some(&self, key: &str) -> Option<&Self> {
        self.get(key).filter(|v| !matches!(v, Self::Null))
    }

    /// The number as a float, for integers and floats (booleans are not numbers to the
    /// reference's profile checks).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Nesting depth as the reference's profiles count it: 0 for scalars, 1 for an empty
    /// container, else one more than the deepest member.
    pub fn depth(&self) -> usize {
        match self {
            Self::Array(items) => 1 + items.iter().map(Self::depth).max().unwrap_or(0),
            Self::Object(members) => 1 + members.iter().map(|(_, v)| v.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// Python's `==` between JSON values: numbers (booleans included) compare by value
    /// across integer and float, containers element by element.
    pub fn py_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Null, Self::Null) => true,
            (Self::Str(a), Self::Str(b)) => a == b,
            (Self::Array(a), Self::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.py_eq(y)),
            (Self::Object(a), Self::Object(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| other.get(k).is_some_and(|w| v.py_eq(w)))
            }
            (a, b) => match (a.numeric(), b.numeric()) {
                (Some(x), Some(y)) => x.eq_exact(y),
                _ => false,
            },
        }
    }

    fn numeric(&self) -> Option<PyNumber> {
        match self {
            Self::Bool(b) => Some(PyNumber::Int(i128::from(*b))),
            Self::Int(i) => Some(PyNumber::Int(*i)),
            Self::Float(f) => Some(PyNumber::Float(*f)),
            _ => None,
        }
    }
}

/// A value serializes as [`Json::into_value`] of it would (members in document order): what
/// [`crate::canonical::len_of`] measures. Only for values [`check`] accepts (integers within
/// ±2^53, finite floats), which `into_value` keeps as they are.
impl serde::Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Int(i) => match i64::try_from(*i) {
                Ok(i) => s.serialize_i64(i),
                Err(_) => s.serialize_unit(),
            },
            Self::Float(f) => s.serialize_f64(*f),
            Self::Str(text) => s.serialize_str(text),
            Self::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Self::Object(members) => {
                let mut map = s.serialize_map(Some(members.len()))?;
                for (key, member) in members {
                    map.serialize_entry(key, member)?;
                }
                map.end()
            }
        }
    }
}

#[derive(Clone, Copy)]
enum PyNumber {
    Int(i128),
    Float(f64),
}

impl PyNumber {
    /// Exact comparison, as Python compares `int` with `float`.
    fn eq_exact(self, other: Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a == b,
            (Self::Float(a), Self::Float(b)) => a == b,
            (Self::Int(i), Self::Float(f)) | (Self::Float(f), Self::Int(i)) => {
                f.is_finite() && f.fract() == 0.0 && f.abs() < 1.0e38 && f as i128 == i
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Strict parsing.

/// A document parsed.
#[derive(Debug)]
pub struct Parsed {
    /// The value, members in document order.
    pub json: Json,
    /// A string held a lone surrogate escape (replaced by U+FFFD in `json`).
    pub unencodable: bool,
}

/// Parses `text` the way the reference's strict `json.loads` does (see the module comment),
/// returning members in document order. The value is not checked against the bounds: that
/// is [`check`].
pub fn parse(text: &str) -> Result<Parsed, DocError> {
    let mut parser = Parser { text, pos: 0, nesting: 0, unencodable: false };
    parser.skip_ws();
    let json = parser.value()?;
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(invalid("extra data after the JSON value"));
    }
    Ok(Parsed { json, unencodable: parser.unencodable })
}

fn invalid(message: &str) -> DocError {
    DocError::new(Problem::InvalidJson, format!("not valid JSON: {message}"))
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    nesting: usize,
    unencodable: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.text.as_bytes().get(self.pos + offset).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Json, DocError> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(_) => Err(invalid("expecting a value (NaN and Infinity are not JSON)")),
            None => Err(invalid("expecting a value")),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, DocError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(invalid("expecting a value"))
        }
    }

    fn enter(&mut self) -> Result<(), DocError> {
        self.nesting += 1;
        if self.nesting > MAX_PARSE_NESTING {
            return Err(DocError::new(Problem::DepthExceeded, format!("exceeds nesting depth {MAX_DEPTH}")));
        }
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    fn object(&mut self) -> Result<Json, DocError> {
        self.enter()?;
        let mut members: Vec<(String, Json)> = Vec::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.nesting -= 1;
            return Ok(Json::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(invalid("expecting a property name in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(invalid("expecting `:`"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(invalid("expecting `,` or `}`")),
            }
        }
        self.nesting -= 1;
        // Like the reference, a duplicate is reported when its object closes.
        if repeats_a_key(&members) {
            return Err(DocError::new(Problem::AmbiguousJson, "an object repeats a key"));
        }
        Ok(Json::Object(members))
    }

    fn array(&mut self) -> Result<Json, DocError> {
        self.enter()?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.nesting -= 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(invalid("expecting `,` or `]`")),
            }
        }
        self.nesting -= 1;
        Ok(Json::Array(items))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Json, DocError> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(invalid("expecting a value")),
        }
        let int_end = self.pos;
        let mut float = false;
        if self.peek() == Some(b'.') && matches!(self.peek_at(1), Some(b'0'..=b'9')) {
            self.pos += 1;
            self.digits();
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let exponent_start = self.pos;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                // Not an exponent: the number ends before the `e` (and the `e` is then
                // unexpected), as in the reference's scanner.
                self.pos = exponent_start;
            } else {
                float = true;
            }
        }
        let literal = &self.text[start..self.pos];
        if float {
            return literal.parse::<f64>().map(Json::Float).map_err(|_| invalid("malformed number"));
        }
        let digits = &self.text[start + usize::from(negative)..int_end];
        if digits.len() > MAX_INTEGER_DIGITS {
            return Err(DocError::new(
                Problem::AmbiguousJson,
                format!("an integer literal has more than {MAX_INTEGER_DIGITS} digits"),
            ));
        }
        let magnitude =
            digits.bytes().fold(0i128, |acc, d| acc.saturating_mul(10).saturating_add(i128::from(d - b'0')));
        Ok(Json::Int(if negative { -magnitude } else { magnitude }))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let hex = self.text.get(at..at + 4)?;
        if hex.bytes().all(|b| b.is_ascii_hexdigit()) { u32::from_str_radix(hex, 16).ok() } else { None }
    }

    /// A string literal. A lone surrogate escape, which Rust strings cannot hold, becomes
    /// U+FFFD and is remembered: in a key the key pattern refuses it, as in the reference; in
    /// a value the object is refused once every other check has passed, where the reference
    /// fails to encode it.
    fn string(&mut self) -> Result<String, DocError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.pos..];
            let stop = rest.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20);
            let Some(stop) = stop else {
                return Err(invalid("unterminated string"));
            };
            out.push_str(&rest[..stop]);
            self.pos += stop;
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => self.escape(&mut out)?,
                _ => return Err(invalid("control character in a string")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), DocError> {
        let simple = match self.peek_at(1) {
            Some(b'"') => Some('"'),
            Some(b'\\') => Some('\\'),
            Some(b'/') => Some('/'),
            Some(b'b') => Some('\u{8}'),
            Some(b'f') => Some('\u{c}'),
            Some(b'n') => Some('\n'),
            Some(b'r') => Some('\r'),
            Some(b't') => Some('\t'),
            Some(b'u') => None,
            _ => return Err(invalid("invalid escape")),
        };
        if let Some(c) = simple {
            out.push(c);
            self.pos += 2;
            return Ok(());
        }
        let code = self.hex4(self.pos + 2).ok_or_else(|| invalid("invalid \\uXXXX escape"))?;
        self.pos += 6;
        let scalar = if (0xD800..0xDC00).contains(&code) && self.text[self.pos..].starts_with("\\u") {
            let low = self.hex4(self.pos + 2).ok_or_else(|| invalid("invalid \\uXXXX escape"))?;
            if (0xDC00..0xE000).contains(&low) {
                self.pos += 6;
                char::from_u32(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            } else {
                None
            }
        } else {
            char::from_u32(code)
        };
        match scalar {
            Some(c) => out.push(c),
            None => {
                out.push('\u{FFFD}');
                self.unencodable = true;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Bounds.

/// Checks `value` against the bounds (see the module comment), members in document order;
/// the first problem is returned.
pub fn check(value: &Json) -> Result<(), DocError> {
    check_value(value, 0)
}

fn check_value(value: &Json, depth: usize) -> Result<(), DocError> {
    if depth > MAX_DEPTH {
        return Err(DocError::new(Problem::DepthExceeded, format!("exceeds nesting depth {MAX_DEPTH}")));
    }
    match value {
        Json::Null | Json::Bool(_) => Ok(()),
        Json::Str(s) => check_string(s),
        Json::Int(i) if i.abs() > MAX_INTEGER_ABS => {
            Err(DocError::new(Problem::IntegerOutOfRange, format!("integer exceeds {MAX_INTEGER_ABS} in magnitude")))
        }
        Json::Int(_) => Ok(()),
        Json::Float(f) if !f.is_finite() => Err(DocError::new(Problem::NonFiniteNumber, "number must be finite")),
        Json::Float(_) => Ok(()),
        Json::Object(members) => {
            if members.len() > MAX_OBJECT_FIELDS {
                return Err(DocError::new(
                    Problem::TooManyFields,
                    format!("object exceeds {MAX_OBJECT_FIELDS} fields"),
                ));
            }
            for (key, member) in members {
                check_key(key)?;
                check_value(member, depth + 1).map_err(|v| v.under(&format!(".{key}")))?;
            }
            Ok(())
        }
        Json::Array(items) => {
            if items.len() > MAX_ARRAY_ITEMS {
                return Err(DocError::new(Problem::TooManyItems, format!("array exceeds {MAX_ARRAY_ITEMS} items")));
            }
            for (i, item) in items.iter().enumerate() {
                check_value(item, depth + 1).map_err(|v| v.under(&format!("[{i}]")))?;
            }
            Ok(())
        }
    }
}

fn check_string(s: &str) -> Result<(), DocError> {
    if over_chars(s, MAX_STRING_LENGTH) {
        return Err(DocError::new(Problem::StringTooLong, format!("string exceeds {MAX_STRING_LENGTH} characters")));
    }
    if has_control(s) {
        return Err(DocError::new(Problem::ControlCharacters, "string contains control characters"));
    }
    Ok(())
}

/// Checks one key in the reference's order. A refused key is not echoed unless it matches
/// the key pattern (a secret-looking key is named, as a field name, never with its value).
fn check_key(key: &str) -> Result<(), DocError> {
    let refuse = |why: &str| Err(DocError::new(Problem::InvalidKey, format!("contains a key that {why}")));
    if pycompat::strip(key) != key {
        return refuse("has leading or trailing whitespace");
    }
    if key.is_empty() {
        return refuse("is empty");
    }
    if over_chars(key, MAX_KEY_LENGTH) {
        return refuse(&format!("exceeds {MAX_KEY_LENGTH} characters"));
    }
    if has_control(key) {
        return refuse("contains control characters");
    }
    if !key_pattern_matches(key) {
        return refuse("does not start with a letter or has characters other than letters, digits, `_`, `.`, `:`, `-`");
    }
    if looks_secret(key) {
        return Err(
            DocError::new(Problem::SecretKey, "key looks secret-like and is not allowed").under(&format!(".{key}"))
        );
    }
    Ok(())
}

/// True when two members of an object share a key: compared pairwise in a small object
/// (most are), through a set of borrowed keys in a large one.
fn repeats_a_key(members: &[(String, Json)]) -> bool {
    if members.len() <= 16 {
        return members.iter().enumerate().any(|(i, (key, _))| members[..i].iter().any(|(k, _)| k == key));
    }
    let mut seen = HashSet::with_capacity(members.len());
    !members.iter().all(|(key, _)| seen.insert(key.as_str()))
}

/// `^[A-Za-z][A-Za-z0-9_.:-]{0,127}$`.
pub fn key_pattern_matches(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && key.len() <= MAX_KEY_LENGTH
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

/// True when `key` (lowercased) contains one of [`SECRET_KEY_PARTS`]. An ASCII key (every key
/// that passed the key pattern) is compared in place, without a lowercased copy.
pub fn looks_secret(key: &str) -> bool {
    if !key.is_ascii() {
        let lower = key.to_lowercase();
        return SECRET_KEY_PARTS.iter().any(|part| lower.contains(part));
    }
    // For each first letter (either case), the second letters (lowercase, one bit each) that
    // some part starts with: only where both match are the parts compared.
    const PAIRS: [u32; 256] = {
        let mut pairs = [0u32; 256];
        let mut i = 0;
        while i < SECRET_KEY_PARTS.len() {
            let part = SECRET_KEY_PARTS[i].as_bytes();
            let bit = 1u32 << (part[1] - b'a');
            pairs[part[0] as usize] |= bit;
            pairs[part[0].to_ascii_uppercase() as usize] |= bit;
            i += 1;
        }
        pairs
    };
    let key = key.as_bytes();
    key.windows(2).enumerate().any(|(at, pair)| {
        let second = pair[1].to_ascii_lowercase();
        second.is_ascii_lowercase()
            && PAIRS[usize::from(pair[0])] & (1 << (second - b'a')) != 0
            && SECRET_KEY_PARTS.iter().any(|part| {
                key.get(at..at + part.len()).is_some_and(|window| window.eq_ignore_ascii_case(part.as_bytes()))
            })
    })
}

/// True when `s` has more than `max` characters (counted only when it has more than `max`
/// bytes: a character is at least one).
pub(crate) fn over_chars(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().count() > max
}

/// True for characters below U+0020 and DEL, the reference's control characters.
pub fn has_control(s: &str) -> bool {
    s.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}')
}

#[cfg(test)]
mod tests {
    //! The syntax and bound cases of the mission metadata header table
    //! (`mission::tests::header_cases`, checked against the reference) seen from this module,
    //! plus the edges that table reaches only through a reason code: where a problem is
    //! reported, what a parsed value keeps, and the parser's own nesting guard.

    use serde_json::{Value, json};

    use super::*;

    /// A parse outcome: the value and whether it held a lone surrogate, or the problem.
    type Outcome = Result<(Value, bool), Problem>;

    /// A check outcome: the problem and where.
    type Checked = Result<(), (Problem, String)>;

    /// `text` parsed.
    fn parsed(text: &str) -> Outcome {
        parse(text).map(|p| (p.json.into_value(), p.unencodable)).map_err(|e| e.problem)
    }

    fn nested(depth: usize, inner: &str) -> String {
        format!("{{\"a\":{}{inner}{}}}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn parse_table() {
        use Problem::{AmbiguousJson, DepthExceeded, InvalidJson};
        let digits = |n: usize| "1".repeat(n);
        let table: Vec<(String, Outcome)> = vec![
            (r#" {"a":[1,2.5,"x",true,null]} "#.into(), Ok((json!({"a": [1, 2.5, "x", true, null]}), false))),
            ("\t\r\n{}\n".into(), Ok((json!({}), false))),
            ("[]".into(), Ok((json!([]), false))),
            (r#""x""#.into(), Ok((json!("x"), false))),
            // Duplicate keys, in any object, after escapes are decoded.
            (r#"{"a":1,"a":2}"#.into(), Err(AmbiguousJson)),
            (r#"{"a":[{"b":1,"b":1}]}"#.into(), Err(AmbiguousJson)),
            (r#"{"a":1,"\u0061":2}"#.into(), Err(AmbiguousJson)),
            (r#"{"a":{"b":1,"b":2},"c":}"#.into(), Err(AmbiguousJson)),
            // Objects past 16 members are checked through a set: the first and the last key.
            (
                format!("{{{},\"k0\":0}}", (0..17).map(|i| format!("\"k{i}\":{i}")).collect::<Vec<_>>().join(",")),
                Err(AmbiguousJson),
            ),
            (
                format!("{{{}}}", (0..18).map(|i| format!("\"k{i}\":{i}")).collect::<Vec<_>>().join(",")),
                Ok(((0..18).map(|i| (format!("k{i}"), json!(i))).collect::<serde_json::Map<_, _>>().into(), false)),
            ),
            (r#"{"a":1,"a":2"#.into(), Err(InvalidJson)),
            (r#"{"a":1,"A":2}"#.into(), Ok((json!({"a": 1, "A": 2}), false))),
            // Not JSON.
            ("".into(), Err(InvalidJson)),
            ("\u{feff}{}".into(), Err(InvalidJson)),
            ("\u{a0}{}".into(), Err(InvalidJson)),
            ("{} {}".into(), Err(InvalidJson)),
            (r#"{"a":NaN}"#.into(), Err(InvalidJson)),
            (r#"{"a":Infinity}"#.into(), Err(InvalidJson)),
            (r#"{"a":-Infinity}"#.into(), Err(InvalidJson)),
            (r#"{"a":[1,]}"#.into(), Err(InvalidJson)),
            (r#"{"a":01}"#.into(), Err(InvalidJson)),
            (r#"{"a":-}"#.into(), Err(InvalidJson)),
            (r#"{"a":1.}"#.into(), Err(InvalidJson)),
            (r#"{"a":1e}"#.into(), Err(InvalidJson)),
            (r#"{"a":tru}"#.into(), Err(InvalidJson)),
            (r#"{a:1}"#.into(), Err(InvalidJson)),
            ("{\"a\":\"x\ny\"}".into(), Err(InvalidJson)),
            (r#"{"a":"\x"}"#.into(), Err(InvalidJson)),
            (r#"{"a":"\u12"}"#.into(), Err(InvalidJson)),
            (r#"{"a":"open}"#.into(), Err(InvalidJson)),
            // Numbers: integers stay integers; overflow is kept for `check` to refuse.
            (r#"{"a":-0,"b":1E+2,"c":1e-400}"#.into(), Ok((json!({"a": 0, "b": 100.0, "c": 0.0}), false))),
            (format!("[{}]", digits(4301)), Err(AmbiguousJson)),
            (format!("[-{}]", digits(4301)), Err(AmbiguousJson)),
            // Escapes: pairs join, lone surrogates are flagged.
            (r#"{"a":"\ud83d\ude00\u00e9\/"}"#.into(), Ok((json!({"a": "😀é/"}), false))),
            (r#"{"a":"\ud800"}"#.into(), Ok((json!({"a": "\u{fffd}"}), true))),
            (r#"{"a":"\udc00x"}"#.into(), Ok((json!({"a": "\u{fffd}x"}), true))),
            (r#"{"a":"\ud800\u0041"}"#.into(), Ok((json!({"a": "\u{fffd}A"}), true))),
            (r#"{"a":"\ud800\ud800"}"#.into(), Ok((json!({"a": "\u{fffd}\u{fffd}"}), true))),
            (r#"{"a":"\ud800\u12"}"#.into(), Err(InvalidJson)),
            // The parser's own nesting guard (128 levels).
            (
                format!("{}{}", "[".repeat(128), "]".repeat(128)),
                Ok(((1..128).fold(json!([]), |v, _| json!([v])), false)),
            ),
            (format!("{}{}", "[".repeat(129), "]".repeat(129)), Err(DepthExceeded)),
            ("[".repeat(100_000), Err(DepthExceeded)),
            ("{\"a\":".repeat(100_000), Err(DepthExceeded)),
        ];
        for (text, want) in &table {
            let shown: String = text.chars().take(60).collect();
            assert_eq!(&parsed(text), want, "{shown:?}");
        }
    }

    #[test]
    fn parsed_values_keep_order_and_number_kinds() {
        let doc = parse(r#"{"b":1,"a":1.0,"c":1e400,"d":-1e400,"e":99999999999999999999999999999999999999999}"#)
            .unwrap()
            .json;
        let Json::Object(members) = &doc else { panic!("{doc:?}") };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c", "d", "e"]);
        assert_eq!(doc.get("b"), Some(&Json::Int(1)));
        assert_eq!(doc.get("a"), Some(&Json::Float(1.0)));
        assert_eq!(doc.get("c"), Some(&Json::Float(f64::INFINITY)));
        assert_eq!(doc.get("d"), Some(&Json::Float(f64::NEG_INFINITY)));
        assert_eq!(doc.get("e"), Some(&Json::Int(i128::MAX)), "saturated beyond i128");
    }

    /// `text` parsed and checked.
    fn checked(text: &str) -> Checked {
        check(&parse(text).unwrap().json).map_err(|e| (e.problem, e.at))
    }

    #[test]
    fn check_table() {
        use Problem::{
            ControlCharacters, DepthExceeded, IntegerOutOfRange, InvalidKey, NonFiniteNumber, SecretKey, StringTooLong,
            TooManyFields, TooManyItems,
        };
        let fields = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            format!("{{{}}}", members.join(","))
        };
        let items = |n: usize| format!("{{\"a\":[{}]}}", vec!["0"; n].join(","));
        let err = |p: Problem, at: &str| Err((p, at.to_owned()));
        let table: Vec<(String, Checked)> = vec![
            (r#"{"mission_id":"SYN-1","n":1,"f":2.5,"x":null,"t":[true]}"#.into(), Ok(())),
            // Depth: the root is level 0.
            (nested(7, "1"), Ok(())),
            (nested(8, "1"), err(DepthExceeded, ".a[0][0][0][0][0][0][0][0]")),
            (nested(8, ""), Ok(())),
            (nested(9, ""), err(DepthExceeded, ".a[0][0][0][0][0][0][0][0]")),
            // Sizes.
            (fields(128), Ok(())),
            (fields(129), err(TooManyFields, "")),
            (format!("{{\"a\":{}}}", fields(129)), err(TooManyFields, ".a")),
            (items(256), Ok(())),
            (items(257), err(TooManyItems, ".a")),
            (format!("{{\"a\":\"{}\"}}", "é".repeat(4096)), Ok(())),
            (format!("{{\"a\":[\"{}\"]}}", "a".repeat(4097)), err(StringTooLong, ".a[0]")),
            // Characters.
            (r#"{"a":["ok","\u001f"]}"#.into(), err(ControlCharacters, ".a[1]")),
            ("{\"a\":\"\u{7f}\"}".into(), err(ControlCharacters, ".a")),
            (r#"{"a":"\u0085 \u00a0"}"#.into(), Ok(())),
            // Numbers.
            (r#"{"a":9007199254740991,"b":-9007199254740991}"#.into(), Ok(())),
            (r#"{"a":{"b":9007199254740992}}"#.into(), err(IntegerOutOfRange, ".a.b")),
            (r#"{"a":-9007199254740992}"#.into(), err(IntegerOutOfRange, ".a")),
            (r#"{"a":9007199254740993.0}"#.into(), Ok(())),
            (r#"{"a":1e400}"#.into(), err(NonFiniteNumber, ".a")),
            // Integer literals up to 4300 digits parse (longer ones are ambiguous) and are
            // out of range; the digit limit is not a float's.
            (format!("[{}]", "1".repeat(4300)), err(IntegerOutOfRange, "[0]")),
            (format!("[{}.5]", "1".repeat(4301)), err(NonFiniteNumber, "[0]")),
            (r#"{"a":[-1e400]}"#.into(), err(NonFiniteNumber, ".a[0]")),
            // Keys: a refused key is reported at its object; a secret-like one by name.
            (r#"{" a":1}"#.into(), err(InvalidKey, "")),
            (r#"{"":1}"#.into(), err(InvalidKey, "")),
            (r#"{"a":{"1a":1}}"#.into(), err(InvalidKey, ".a")),
            (r#"{"a":[{"a b":1}]}"#.into(), err(InvalidKey, ".a[0]")),
            (r#"{"aé":1}"#.into(), err(InvalidKey, "")),
            (r#"{"a\u0001":1}"#.into(), err(InvalidKey, "")),
            (r#"{"a\ud800":1}"#.into(), err(InvalidKey, "")),
            (format!("{{\"{}\":1}}", "a".repeat(128)), Ok(())),
            (format!("{{\"{}\":1}}", "a".repeat(129)), err(InvalidKey, "")),
            (r#"{"A.b:c-d_e9":1}"#.into(), Ok(())),
            (r#"{"myToken":1}"#.into(), err(SecretKey, ".myToken")),
            (r#"{"a":{"DB.Pwd":1}}"#.into(), err(SecretKey, ".a.DB.Pwd")),
            (r#"{"keymaterial":1,"tokn":2}"#.into(), Ok(())),
            // The first problem in document order.
            (r#"{"a":"\u0001","b":1e400}"#.into(), err(ControlCharacters, ".a")),
            (r#"{"b":1e400,"a":"\u0001"}"#.into(), err(NonFiniteNumber, ".b")),
        ];
        for (text, want) in &table {
            let shown: String = text.chars().take(60).collect();
            assert_eq!(&checked(text), want, "{shown:?}");
        }
    }

    #[test]
    fn messages_name_limits_not_values() {
        let cases = [
            r#"{"a":"SECRET-VALUE\u0001"}"#,
            r#"{"SECRET-VALUE key":1}"#,
            r#"{"a":"SECRET-VALUE","api_key":1}"#,
            r#"{"a":["SECRET-VALUE",NaN]}"#,
            r#"{"SECRET-VALUE":1,"SECRET-VALUE":2}"#,
        ];
        for text in cases {
            let e = parse(text).and_then(|p| check(&p.json)).unwrap_err();
            assert!(!e.message.contains("SECRET-VALUE") && !e.at.contains("SECRET-VALUE"), "{e:?}");
            assert!(e.message.starts_with(|c: char| c.is_lowercase()), "{e:?}");
        }
    }

    #[test]
    fn key_rules() {
        for (key, pattern, secret) in [
            ("a", true, false),
            ("A.b:c-d_e9", true, false),
            ("9a", false, false),
            ("_a", false, false),
            ("a/b", false, false),
            ("apiKey", true, false),
            ("API_KEY", true, true),
            ("x_private_key_y", true, true),
            ("credentials", true, true),
        ] {
            assert_eq!((key_pattern_matches(key), looks_secret(key)), (pattern, secret), "{key}");
        }
        assert!(!key_pattern_matches(&"a".repeat(129)));
        assert!(has_control("a\u{7f}") && has_control("\u{0}") && !has_control("\u{85}é"));
    }

    #[test]
    fn python_equality_of_json_values() {
        let j = |v: Value| Json::from_value(&v);
        assert!(j(json!(1)).py_eq(&j(json!(1.0))));
        assert!(j(json!(true)).py_eq(&j(json!(1))));
        assert!(j(json!(false)).py_eq(&j(json!(0.0))));
        assert!(!j(json!("1")).py_eq(&j(json!(1))));
        assert!(!j(json!(null)).py_eq(&j(json!(0))));
        assert!(j(json!({"a": [1, 2.0]})).py_eq(&j(json!({"a": [1.0, 2]}))));
        assert!(!j(json!(9_007_199_254_740_993_i64)).py_eq(&j(json!(9_007_199_254_740_992.0))));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        #[test]
        fn secret_keys_are_found_as_by_a_lowercased_copy(
            key in proptest::prelude::prop_oneof![
                "[A-Za-z_.:-]{0,20}",
                "(?i)[a-z_]{0,6}(password|passwd|pwd|token|secret|private_key|credential|api_key|key_material)[a-z_]{0,6}",
                proptest::prelude::any::<String>(),
                "[\u{212a}\u{130}Kk]ey_material",
            ]
        ) {
            let lower = key.to_lowercase();
            let by_copy = SECRET_KEY_PARTS.iter().any(|part| lower.contains(part));
            proptest::prop_assert_eq!(looks_secret(&key), by_copy, "{:?}", key);
        }

        #[test]
        fn measured_size_is_the_rendered_value_size(value in crate::canonical::arbitrary::value()) {
            let json = Json::from_value(&value);
            let rendered = crate::canonical::to_vec(&json.clone().into_value()).unwrap();
            proptest::prop_assert_eq!(crate::canonical::len_of(&json), rendered.len() as u64);
        }

        #[test]
        fn an_attached_document_is_its_value_rendered(value in crate::canonical::arbitrary::value()) {
            // What mission metadata and security labels attach: the canonical text of the
            // checked document, its value parsed back from that text on demand.
            let json = Json::from_value(&value);
            let doc = crate::canonical::doc_of(&json).unwrap();
            let tree = json.into_value();
            let rendered = crate::canonical::to_vec(&tree).unwrap();
            proptest::prop_assert_eq!(doc.canonical().map(str::as_bytes), Some(&rendered[..]));
            proptest::prop_assert_eq!(doc.value(), &tree);
        }

        #[test]
        fn an_attached_parsed_document_is_its_value_rendered(text in crate::canonical::arbitrary::json_text()) {
            let Ok(text) = std::str::from_utf8(&text) else { return Ok(()) };
            let Ok(parsed) = parse(text) else { return Ok(()) };
            let doc = crate::canonical::doc_of(&parsed.json).unwrap();
            let tree = parsed.json.into_value();
            let rendered = crate::canonical::to_vec(&tree).unwrap();
            proptest::prop_assert_eq!(doc.canonical().map(str::as_bytes), Some(&rendered[..]));
            proptest::prop_assert_eq!(doc.value(), &tree);
        }

        #[test]
        fn measured_size_of_parsed_documents_is_the_rendered_size(text in crate::canonical::arbitrary::json_text()) {
            let Ok(text) = std::str::from_utf8(&text) else { return Ok(()) };
            let Ok(parsed) = parse(text) else { return Ok(()) };
            let rendered = crate::canonical::to_vec(&parsed.json.clone().into_value()).unwrap();
            proptest::prop_assert_eq!(crate::canonical::len_of(&parsed.json), rendered.len() as u64);
        }
    }
}
