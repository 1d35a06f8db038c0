//! The streaming writers against the value-tree route ([`super::to_vec`] of the value): any
//! value, any map order, members left out by path, any JSON text read strictly.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::ser::{remove_path, stream_into};
use super::{CanonicalBuf, arbitrary, serialize_into, strict_text_into, to_vec};

fn streamed<T: serde::Serialize + ?Sized>(value: &T, omit: &[&[&str]]) -> Vec<u8> {
    let mut buf = CanonicalBuf::new();
    serialize_into(value, omit, &mut buf).unwrap();
    buf.bytes().to_vec()
}

/// What the value route makes of `text`: `None` when strict reading refuses it.
fn tree_of_text(text: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(text).ok()?;
    sinks_contract::json::validate_strict(text).ok()?;
    Some(to_vec(&serde_json::from_str::<Value>(text).unwrap()).unwrap())
}

fn read(text: &[u8]) -> Option<Vec<u8>> {
    let mut buf = CanonicalBuf::new();
    strict_text_into(text, &mut buf).ok().map(|()| buf.bytes().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn any_value_streams_as_its_tree_renders(value in arbitrary::value()) {
        prop_assert_eq!(streamed(&value, &[]), to_vec(&value).unwrap());
    }

    #[test]
    fn any_value_counts_as_long_as_its_tree_renders(value in arbitrary::value()) {
        prop_assert_eq!(super::len_of(&value), to_vec(&value).unwrap().len() as u64);
    }

    #[test]
    fn any_metadata_document_counts_as_long_as_its_tree_renders(e in arbitrary::envelope()) {
        let doc = sinks_toolkit::metadata::MetadataDoc::new(&e, e.received_at());
        let tree = to_vec(&serde_json::to_value(&doc).unwrap()).unwrap();
        prop_assert_eq!(super::len_of(&doc), tree.len() as u64);
        prop_assert_eq!(super::metadata_len(&doc), tree.len() as u64, "counted by the document's own writer");
    }

    #[test]
    fn unsorted_maps_with_repeated_keys_stream_as_their_trees_render(doc in arbitrary::doc()) {
        // Members come in document order; the tree keeps the last of repeated keys.
        let tree = serde_json::to_value(&doc).unwrap();
        prop_assert_eq!(streamed(&doc, &[]), to_vec(&tree).unwrap());
    }

    #[test]
    fn members_left_out_by_path_are_those_removed_from_the_tree(
        value in arbitrary::value(),
        paths in prop::collection::vec(prop::collection::vec("[a-d]{0,2}", 1..4), 1..4),
    ) {
        let paths: Vec<Vec<&str>> = paths.iter().map(|p| p.iter().map(String::as_str).collect()).collect();
        let omit: Vec<&[&str]> = paths.iter().map(Vec::as_slice).collect();
        let mut tree = value.clone();
        for path in &omit {
            remove_path(&mut tree, path);
        }
        prop_assert_eq!(streamed(&value, &omit), to_vec(&tree).unwrap());
    }

    #[test]
    fn any_text_reads_as_strict_reading_and_the_tree_render_it(text in arbitrary::json_text()) {
        prop_assert_eq!(read(&text), tree_of_text(&text), "{}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn any_rendered_value_reads_as_the_tree_renders_it(value in arbitrary::value()) {
        // serde_json's own text: always strict JSON, so always read (the number parser is
        // serde_json's in both routes, so a float it reads one ulp off is off in both).
        let text = serde_json::to_vec(&value).unwrap();
        let ours = read(&text);
        prop_assert!(ours.is_some());
        prop_assert_eq!(ours, tree_of_text(&text));
    }
}

#[test]
fn text_edges_agree_with_the_tree() {
    let texts: &[&[u8]] = &[
        br#"{"b":1,"a":{"d":[3,{"z":1,"y":2}],"c":-0,"e":1.50,"f":1E+2}}"#,
        br#"{"a":1,"a":2}"#,
        br#"{"a":{"x":1,"x":1}}"#,
        br#"{"a":1,"\u0061":2}"#,
        br#"{"\u00e9":1,"e":2,"\ud83d\ude00":3,"\u007f":4}"#,
        br#"{"$serde_json::private::Number":"5"}"#,
        br#"{"$serde_json::private::Number":"x"}"#,
        br#"{"$serde_json::private::Number":"5","a":1}"#,
        br#"{"a":1,"$serde_json::private::Number":"5"}"#,
        b"123456789012345678901234567890",
        b"-0",
        b"1e400",
        b"[1e-400, 5e-324]",
        b" \t\r\n{}\n ",
        b"\"\\ud800\"",
        b"{} {}",
        b"",
        b"\xff",
        b"\"\xc3\xa9\"",
        b"\"\xc3\"",
        b"[1,]",
        b"NaN",
    ];
    for text in texts {
        assert_eq!(read(text), tree_of_text(text), "{}", String::from_utf8_lossy(text));
    }
}

#[test]
fn structs_and_maps_of_every_shape_stream_as_their_trees_render() {
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
        none: Option<u8>,
        unit: (),
        shapes: Vec<Shape>,
        int_keys: std::collections::BTreeMap<i32, &'static str>,
        bool_keys: std::collections::BTreeMap<bool, u8>,
        bytes: serde_bytes_like::Bytes,
        chars: Vec<char>,
        big: (i128, u128),
        raw: Box<serde_json::value::RawValue>,
        a_first: u8,
    }
    mod serde_bytes_like {
        /// Serialized with `serialize_bytes`.
        pub(super) struct Bytes(pub(super) Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }
    let doc = Doc {
        z_last: "tab\tquote\"back\\slash\u{1}\u{1f}é\u{2028}\u{7f}/",
        floats: vec![1.0, 0.5, 1e16, 1.5e-5, -0.0, 1e300, f64::NAN, f64::INFINITY, 0.1 + 0.2],
        none: None,
        unit: (),
        shapes: vec![Shape::Unit, Shape::New(2.5), Shape::Pair(-7, "x"), Shape::Named { b: Some(10), a: [0, 65535] }],
        int_keys: [(-1, "m"), (10, "b"), (9, "a")].into(),
        bool_keys: [(true, 1), (false, 0)].into(),
        bytes: serde_bytes_like::Bytes(vec![0, 255, 7]),
        chars: vec!['a', '"', '\n', '€'],
        big: (-5, 7),
        raw: serde_json::value::RawValue::from_string(r#"{ "b" : 1.0e1, "a" : [ 1 ] }"#.into()).unwrap(),
        a_first: 1,
    };
    let tree = serde_json::to_value(&doc).unwrap();
    assert_eq!(streamed(&doc, &[]), to_vec(&tree).unwrap(), "through the value route (raw, 128-bit)");
    let mut plain = tree.clone();
    plain.as_object_mut().unwrap().remove("raw");
    plain.as_object_mut().unwrap().remove("big");
    assert_eq!(streamed(&plain, &[&["shapes"], &["int_keys", "10"]]), {
        let mut t = plain.clone();
        t.as_object_mut().unwrap().remove("shapes");
        t["int_keys"].as_object_mut().unwrap().remove("10");
        to_vec(&t).unwrap()
    });
    #[derive(serde::Serialize)]
    struct Streamed {
        z: Vec<Shape>,
        m: std::collections::BTreeMap<i64, Shape>,
        c: char,
        b: serde_bytes_like::Bytes,
        a: (Option<()>, bool, f64),
    }
    let pure = Streamed {
        z: vec![Shape::Unit, Shape::New(-0.5), Shape::Pair(3, "\\"), Shape::Named { b: None, a: [1, 2] }],
        m: [(-3, Shape::Unit), (12, Shape::New(1e21)), (2, Shape::Pair(0, ""))].into(),
        c: '\u{1}',
        b: serde_bytes_like::Bytes(vec![1, 2]),
        a: (None, true, f64::NAN),
    };
    let mut buf = CanonicalBuf::new();
    assert!(stream_into(&pure, &[], &mut buf).is_ok(), "written without the value route");
    assert_eq!(buf.bytes(), to_vec(&serde_json::to_value(&pure).unwrap()).unwrap());
    assert!(stream_into(&pure, &[&["z"][..], &["m", "12"][..]], &mut buf).is_ok());
    let mut tree = serde_json::to_value(&pure).unwrap();
    tree.as_object_mut().unwrap().remove("z");
    tree["m"].as_object_mut().unwrap().remove("12");
    assert_eq!(buf.bytes(), to_vec(&tree).unwrap());
    assert!(stream_into(&12_u128, &[], &mut buf).is_err(), "a 128-bit integer takes the value route");
    assert_eq!(streamed(&json!({}), &[]), b"{}");
    assert_eq!(streamed(&json!([]), &[]), b"[]");
    assert_eq!(streamed(&json!({"only": 1}), &[&["only"]]), b"{}");
    assert_eq!(streamed(&json!({"a": 1, "b": 2, "c": 3}), &[&["a"], &["c"]]), br#"{"b":2}"#);
}

#[test]
fn strings_escape_as_json_dumps_does_at_every_offset() {
    // The escaping rule one character at a time, as `json.dumps(ensure_ascii=False)` states
    // it, against the eight-bytes-at-a-time writer, with each character at every offset of a
    // word.
    let rule = |s: &str| {
        let mut out = String::new();
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
        out
    };
    let specials = (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]).filter_map(char::from_u32);
    for c in specials {
        for pad in 0..17 {
            let s = format!("{}{c}{}", "x".repeat(pad), "é".repeat(pad % 3));
            let mut out = Vec::new();
            super::buf::escape_into(&s, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), rule(&s), "{s:?}");
        }
    }
}
