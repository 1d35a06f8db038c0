//! Canonical JSON from anything that serializes ([`serialize_into`]), written as serde walks
//! the value: no value tree, and members left out by path as they come (the custody metadata
//! hash leaves out the per-delivery fields this way, where it used to build the document as a
//! value tree and remove them).
//!
//! The bytes are those of [`super::to_vec`] on `serde_json::to_value` of the same value: the
//! same mapping of serde's data model (unit and `None` as `null`, a non-finite float as `null`,
//! bytes as an array of numbers, enums tagged externally, map keys turned into strings, the
//! last of repeated keys kept). What this writer does not render itself (a 128-bit integer, an
//! `f32`, a float map key, a raw JSON fragment) is rendered through a [`serde_json::Value`].

use std::fmt;

use serde::ser::{self, Impossible, Serialize};

use super::buf::{CanonicalBuf, Counter, Omit, Out, Repeats, push_integer};
use super::text::PRECISE_NUMBER_TOKEN;
use super::{CanonicalError, write_number};

/// The struct name serde_json gives a `RawValue`.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Writes the canonical bytes of `value` (those of [`super::to_vec`] on
/// `serde_json::to_value(value)`) into `buf`, leaving out every member whose path from the
/// root (keys through objects) is in `omit`, as removing it from the value would. An error
/// only when the value cannot be rendered at all.
pub fn serialize_into<T: Serialize + ?Sized>(
    value: &T,
    omit: &[&[&str]],
    buf: &mut CanonicalBuf,
) -> Result<(), CanonicalError> {
    if stream_into(value, omit, buf).is_ok() {
        return Ok(());
    }
    let mut tree = serde_json::to_value(value).map_err(|_| CanonicalError::NonFinite)?;
    for path in omit {
        remove_path(&mut tree, path);
    }
    buf.clear();
    buf.out = super::to_vec(&tree)?;
    Ok(())
}

/// [`serialize_into`] without the value route: `Err` for what it leaves to that route.
pub(crate) fn stream_into<T: Serialize + ?Sized>(
    value: &T,
    omit: &[&[&str]],
    buf: &mut CanonicalBuf,
) -> Result<(), Fallback> {
    buf.clear();
    if omit.len() > Omit::MAX_PATHS {
        return Err(Fallback);
    }
    value.serialize(&mut Ser { out: buf, omit: Omit::new(omit), number: false, skip_value: false })
}

/// The length of the canonical bytes of `value` (what [`serialize_into`] would write with
/// nothing left out), counted as it serializes: nothing is written, and objects are not put in
/// order (a length does not depend on it). A key repeated in one map counts each time (a
/// [`serde_json::Value`] keeps one); `Err` for what the value route must measure.
pub(crate) fn count<T: Serialize + ?Sized>(value: &T) -> Result<u64, Fallback> {
    let mut counter = Counter::default();
    value.serialize(&mut Ser { out: &mut counter, omit: Omit::new(&[]), number: false, skip_value: false })?;
    Ok(counter.len())
}

/// Removes the member at `path` (keys from the root) from `value`, if it is there.
pub(super) fn remove_path(value: &mut serde_json::Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = value;
    for key in parents {
        match at.get_mut(*key) {
            Some(inner) => at = inner,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(*last);
    }
}

/// What sends [`serialize_into`] to the value route.
#[derive(Debug)]
pub(crate) struct Fallback;

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rendered through a value")
    }
}

impl std::error::Error for Fallback {}

impl ser::Error for Fallback {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self
    }
}

/// The serializer: the output, the paths left out, and two states of the value being written.
struct Ser<'a, 'p, O: Out> {
    out: &'a mut O,
    omit: Omit<'p>,
    /// Inside the struct serde_json makes of a [`serde_json::Value`]'s number under
    /// `arbitrary_precision`: its one field is the number's text.
    number: bool,
    /// The map key just written is left out: so is its value.
    skip_value: bool,
}

impl<O: Out> Ser<'_, '_, O> {
    /// One member: its key, then its value, unless its path is left out.
    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Fallback> {
        self.out.key(key);
        if self.out.key_is_omitted(&self.omit) {
            self.out.drop_member();
            return Ok(());
        }
        value.serialize(&mut *self)?;
        self.out.end_member();
        Ok(())
    }

    /// The key of an enum variant's object (`{"Variant": ...}`); a path through a variant is
    /// left to the value route.
    fn variant_key(&mut self, variant: &str) -> Result<(), Fallback> {
        self.out.begin(true, Some(&self.omit));
        self.out.key(variant);
        if self.out.key_is_omitted(&self.omit) { Err(Fallback) } else { Ok(()) }
    }

    /// Closes an enum variant's object after its value.
    fn end_variant(&mut self) -> Result<(), Fallback> {
        self.out.end_member();
        self.out.end_object(Repeats::KeepLast).map_err(|_| Fallback)
    }
}

impl<O: Out> ser::Serializer for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> Result<(), Fallback> {
        self.out.raw(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Fallback> {
        self.out.integer(v);
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Fallback> {
        Err(Fallback)
    }
    /// A [`serde_json::Value`] keeps an `f32` differently with and without
    /// `arbitrary_precision`: the value route decides.
    fn serialize_f32(self, _: f32) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Fallback> {
        if v.is_finite() {
            self.out.float(v).map_err(|_| Fallback)
        } else {
            // A value holds no NaN or infinity: `to_value` makes them null.
            self.serialize_unit()
        }
    }
    fn serialize_char(self, v: char) -> Result<(), Fallback> {
        self.out.string(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Fallback> {
        self.out.string(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Fallback> {
        self.out.begin(false, None);
        for b in v {
            self.out.item();
            self.out.integer(*b);
        }
        self.out.end_array();
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Fallback> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Fallback> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Fallback> {
        self.out.raw(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Fallback> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Fallback> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<(), Fallback> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Fallback> {
        self.variant_key(variant)?;
        value.serialize(&mut *self)?;
        self.end_variant()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Fallback> {
        self.out.begin(false, None);
        Ok(self)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self, Fallback> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self, Fallback> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, Fallback> {
        self.variant_key(variant)?;
        self.out.begin(false, None);
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Fallback> {
        self.out.begin(true, Some(&self.omit));
        Ok(self)
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Self, Fallback> {
        match name {
            PRECISE_NUMBER_TOKEN => self.number = true,
            RAW_VALUE_TOKEN => return Err(Fallback),
            _ => self.out.begin(true, Some(&self.omit)),
        }
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, Fallback> {
        self.variant_key(variant)?;
        self.out.begin(true, Some(&self.omit));
        Ok(self)
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> Result<(), Fallback> {
        self.serialize_str(&value.to_string())
    }
}

impl<O: Out> ser::SerializeSeq for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Fallback> {
        self.out.item();
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Fallback> {
        self.out.end_array();
        Ok(())
    }
}

impl<O: Out> ser::SerializeTuple for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Fallback> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Fallback> {
        ser::SerializeSeq::end(self)
    }
}

impl<O: Out> ser::SerializeTupleStruct for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Fallback> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Fallback> {
        ser::SerializeSeq::end(self)
    }
}

impl<O: Out> ser::SerializeTupleVariant for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Fallback> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Fallback> {
        self.out.end_array();
        self.end_variant()
    }
}

impl<O: Out> ser::SerializeMap for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Fallback> {
        key.serialize(KeySer { out: &mut *self.out })?;
        self.skip_value = self.out.key_is_omitted(&self.omit);
        if self.skip_value {
            self.out.drop_member();
        }
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Fallback> {
        if std::mem::take(&mut self.skip_value) {
            return Ok(());
        }
        value.serialize(&mut **self)?;
        self.out.end_member();
        Ok(())
    }
    fn end(self) -> Result<(), Fallback> {
        // A value's map keeps the last of repeated keys.
        self.out.end_object(Repeats::KeepLast).map_err(|_| Fallback)
    }
}

impl<O: Out> ser::SerializeStruct for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Fallback> {
        if self.number {
            return value.serialize(NumberText { out: &mut *self.out });
        }
        self.member(key, value)
    }
    fn end(self) -> Result<(), Fallback> {
        if std::mem::take(&mut self.number) {
            return Ok(());
        }
        self.out.end_object(Repeats::KeepLast).map_err(|_| Fallback)
    }
}

impl<O: Out> ser::SerializeStructVariant for &mut Ser<'_, '_, O> {
    type Ok = ();
    type Error = Fallback;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Fallback> {
        self.member(key, value)
    }
    fn end(self) -> Result<(), Fallback> {
        self.out.end_object(Repeats::KeepLast).map_err(|_| Fallback)?;
        self.end_variant()
    }
}

/// Writes a map key as `to_value` turns it into a string: strings and characters as they are,
/// integers and booleans in decimal or as `true`/`false`, a unit variant as its name.
struct KeySer<'a, O: Out> {
    out: &'a mut O,
}

impl<O: Out> KeySer<'_, O> {
    fn text(self, text: &str) -> Result<(), Fallback> {
        self.out.key(text);
        Ok(())
    }
    fn integer(self, value: impl Into<i128>) -> Result<(), Fallback> {
        let mut digits = Vec::with_capacity(40);
        push_integer(value, &mut digits);
        // Decimal digits and a sign are ASCII.
        self.text(std::str::from_utf8(&digits).unwrap_or_default())
    }
}

impl<O: Out> ser::Serializer for KeySer<'_, O> {
    type Ok = ();
    type Error = Fallback;
    type SerializeSeq = Impossible<(), Fallback>;
    type SerializeTuple = Impossible<(), Fallback>;
    type SerializeTupleStruct = Impossible<(), Fallback>;
    type SerializeTupleVariant = Impossible<(), Fallback>;
    type SerializeMap = Impossible<(), Fallback>;
    type SerializeStruct = Impossible<(), Fallback>;
    type SerializeStructVariant = Impossible<(), Fallback>;

    fn serialize_bool(self, v: bool) -> Result<(), Fallback> {
        self.text(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Fallback> {
        self.integer(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Fallback> {
        self.text(&v.to_string())
    }
    fn serialize_f32(self, _: f32) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_f64(self, _: f64) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_char(self, v: char) -> Result<(), Fallback> {
        self.text(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Fallback> {
        self.text(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_none(self) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit(self) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Fallback> {
        self.text(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<(), Fallback> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Fallback> {
        Err(Fallback)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Fallback> {
        Err(Fallback)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Fallback> {
        Err(Fallback)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Fallback> {
        Err(Fallback)
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> Result<(), Fallback> {
        self.text(&value.to_string())
    }
}

/// The text of a [`serde_json::Value`]'s number under `arbitrary_precision`, rendered as
/// [`super::to_vec`] renders the number.
struct NumberText<'a, O: Out> {
    out: &'a mut O,
}

impl<O: Out> ser::Serializer for NumberText<'_, O> {
    type Ok = ();
    type Error = Fallback;
    type SerializeSeq = Impossible<(), Fallback>;
    type SerializeTuple = Impossible<(), Fallback>;
    type SerializeTupleStruct = Impossible<(), Fallback>;
    type SerializeTupleVariant = Impossible<(), Fallback>;
    type SerializeMap = Impossible<(), Fallback>;
    type SerializeStruct = Impossible<(), Fallback>;
    type SerializeStructVariant = Impossible<(), Fallback>;

    fn serialize_str(self, v: &str) -> Result<(), Fallback> {
        let number: serde_json::Number = v.parse().map_err(|_| Fallback)?;
        let mut text = Vec::with_capacity(24);
        write_number(&number, &mut text).map_err(|_| Fallback)?;
        self.out.raw(&text);
        Ok(())
    }
    fn serialize_bool(self, _: bool) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_i8(self, _: i8) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_i16(self, _: i16) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_i32(self, _: i32) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_i64(self, _: i64) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_u8(self, _: u8) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_u16(self, _: u16) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_u32(self, _: u32) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_u64(self, _: u64) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_f64(self, _: f64) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_char(self, _: char) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_none(self) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit(self) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Fallback> {
        Err(Fallback)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Fallback> {
        Err(Fallback)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Fallback> {
        Err(Fallback)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Fallback> {
        Err(Fallback)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Fallback> {
        Err(Fallback)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Fallback> {
        Err(Fallback)
    }
}
