//! Canonical JSON from JSON text, read once ([`strict_text_into`]): the payload route of the
//! custody hash, which used to parse the payload into a value tree, then render the tree.

use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::buf::{CanonicalBuf, Repeats, push_integer};
use super::write_number;
use super::write_python_float;

/// The key serde_json hands a number over as, in a one-entry map, when its `arbitrary_precision`
/// feature is on (another crate of a build may turn it on).
pub(super) const PRECISE_NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Not strict JSON (what [`sinks_contract::json::validate_strict`] refuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotStrict;

/// Writes the canonical bytes of the strict JSON text `text` (those of [`super::to_vec`] on
/// the [`serde_json::Value`] parsed from it) into `buf`, reading the text once. `Err` exactly
/// when [`sinks_contract::json::validate_strict`] refuses the text (not JSON, a repeated key, a
/// number no finite float holds), or when it is not UTF-8; `buf` then holds nothing useful.
pub fn strict_text_into(text: &[u8], buf: &mut CanonicalBuf) -> Result<(), NotStrict> {
    buf.clear();
    let mut de = serde_json::Deserializer::from_slice(text);
    TextSeed { buf }.deserialize(&mut de).map_err(|_| NotStrict)?;
    de.end().map_err(|_| NotStrict)
}

/// True when this build's serde_json keeps numbers as text (`arbitrary_precision`).
fn precise_numbers() -> bool {
    static PRECISE: OnceLock<bool> = OnceLock::new();
    // Without the feature, `1e2` is read into an `f64` and shown as `100.0`; with it, the text
    // is kept (serde_json writes the exponent as `1e+2`).
    *PRECISE.get_or_init(|| serde_json::from_str::<serde_json::Number>("1e2").is_ok_and(|n| n.to_string() != "100.0"))
}

struct TextSeed<'s> {
    buf: &'s mut CanonicalBuf,
}

impl<'de> DeserializeSeed<'de> for TextSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// An array item: its comma, then the value.
struct ItemSeed<'s> {
    buf: &'s mut CanonicalBuf,
}

impl<'de> DeserializeSeed<'de> for ItemSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.buf.item();
        d.deserialize_any(TextSeed { buf: self.buf })
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.buf.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        push_integer(v, &mut self.buf.out);
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        push_integer(v, &mut self.buf.out);
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        write_python_float(v, &mut self.buf.out).map_err(|_| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.buf.string(v);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.buf.out.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.buf.begin(false, None);
        while seq.next_element_seed(ItemSeed { buf: self.buf })?.is_some() {}
        self.buf.end_array();
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let duplicate = |_| de::Error::custom("duplicate object key");
        match map.next_key_seed(KeySeed { buf: self.buf, first: true })? {
            None => {
                self.buf.begin(true, None);
                return self.buf.end_object(Repeats::Refuse).map_err(duplicate);
            }
            Some(Key::Number) => {
                // A number under `arbitrary_precision` (or, without it, an object whose only key
                // is that token, which strict reading takes for a number too).
                let text: String = map.next_value()?;
                if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err(de::Error::custom("invalid number"));
                }
                if precise_numbers() {
                    let number: serde_json::Number = text.parse().map_err(|_| de::Error::custom("invalid number"))?;
                    return write_number(&number, &mut self.buf.out).map_err(|_| de::Error::custom("invalid number"));
                }
                self.buf.begin(true, None);
                self.buf.key(PRECISE_NUMBER_TOKEN);
                self.buf.string(&text);
                self.buf.end_member();
                return self.buf.end_object(Repeats::Refuse).map_err(duplicate);
            }
            Some(Key::Written) => {
                map.next_value_seed(TextSeed { buf: self.buf })?;
                self.buf.end_member();
            }
        }
        while map.next_key_seed(KeySeed { buf: self.buf, first: false })?.is_some() {
            map.next_value_seed(TextSeed { buf: self.buf })?;
            self.buf.end_member();
        }
        self.buf.end_object(Repeats::Refuse).map_err(duplicate)
    }
}

/// What a key read from text turned out to be.
enum Key {
    /// The token of a number under `arbitrary_precision`, as the first key (not written).
    Number,
    /// An ordinary key, written (the object opened first if it is the first key).
    Written,
}

/// Reads one key into the buffer, borrowing it from the text when it has no escape.
struct KeySeed<'s> {
    buf: &'s mut CanonicalBuf,
    first: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, key: &str) -> Result<Key, E> {
        if self.first {
            if key == PRECISE_NUMBER_TOKEN {
                return Ok(Key::Number);
            }
            self.buf.begin(true, None);
        }
        self.buf.key(key);
        Ok(Key::Written)
    }
}
