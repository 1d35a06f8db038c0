//! Arbitrary JSON and envelopes for the property tests of the streaming writers: documents as
//! values, and as texts the way publishers write them (members in any order, repeated keys,
//! escapes, whitespace, every spelling of a number, and broken texts); envelopes carrying them.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Keys: mostly from a small alphabet (so objects repeat keys and share prefixes), some
/// arbitrary text (escapes, non-ASCII, astral characters).
pub(crate) fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-d]{0,3}",
        1 => "[ -~]{0,6}",
        1 => any::<String>().prop_map(|s| s.chars().take(8).collect()),
        1 => prop::sample::select(vec!["ä", "é", "\u{1f600}", "A", "_", "\"", "\\", "\u{7f}", "\u{1}", "\u{2028}"]).prop_map(str::to_owned),
    ]
}

/// String values, control characters and quotes included.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z ]{0,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(24).collect()),
        1 => "[\u{0}-\u{7f}]{0,8}",
    ]
}

/// Finite floats, whole ones and extremes included.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (-1_000_000i64..1_000_000).prop_map(|i| i as f64),
        (-1_000i64..1_000).prop_map(|i| i as f64 / 100.0),
        prop::sample::select(vec![0.0, -0.0, 1e16, 1e-5, 5e-324, 1.7976931348623157e308, 0.1 + 0.2]),
    ]
}

/// Any JSON value (objects built from member lists, so a repeated key keeps its last value,
/// as when a value is deserialized).
pub(crate) fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..7)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON document as a publisher might write it: members in document order (repeats
/// possible), numbers as spelled.
#[derive(Debug, Clone)]
pub(crate) enum Doc {
    Null,
    Bool(bool),
    /// A number token as written: `-0`, `1.50`, `1E+2`, 30-digit integers, `1e400`.
    Number(String),
    Str(String),
    Array(Vec<Self>),
    Object(Vec<(String, Self)>),
}

fn number_token() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<u64>().prop_map(|u| u.to_string()),
        float().prop_map(|f| format!("{f:?}")),
        float().prop_map(|f| format!("{f:e}")),
        "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,18})?([eE][+-]?[0-9]{1,3})?",
    ]
}

/// Any document.
pub(crate) fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        number_token().prop_map(Doc::Number),
        text().prop_map(Doc::Str),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Doc::Array),
            prop::collection::vec((key(), inner), 0..7).prop_map(Doc::Object),
        ]
    })
}

/// How a document is spelled: whitespace between tokens and escapes in strings, each chosen
/// by the next byte of `style`.
pub(crate) struct Spelling<'a> {
    style: &'a [u8],
    at: usize,
}

impl<'a> Spelling<'a> {
    pub(crate) fn new(style: &'a [u8]) -> Self {
        Self { style, at: 0 }
    }

    fn next(&mut self) -> u8 {
        let b = self.style.get(self.at % self.style.len().max(1)).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn space(&mut self, out: &mut String) {
        match self.next() % 8 {
            0 => out.push(' '),
            1 => out.push_str("\n\t "),
            2 => out.push('\r'),
            _ => {}
        }
    }

    fn string(&mut self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let escape = self.next().is_multiple_of(5);
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' if !escape => out.push_str("\\n"),
                c if (c as u32) < 0x20 || escape => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                '/' => out.push_str("\\/"),
                c => out.push(c),
            }
        }
        out.push('"');
    }

    /// The text of `doc`.
    pub(crate) fn write(&mut self, doc: &Doc, out: &mut String) {
        self.space(out);
        match doc {
            Doc::Null => out.push_str("null"),
            Doc::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Doc::Number(n) => out.push_str(n),
            Doc::Str(s) => self.string(s, out),
            Doc::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.write(item, out);
                }
                self.space(out);
                out.push(']');
            }
            Doc::Object(members) => {
                out.push('{');
                for (i, (key, member)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.space(out);
                    self.string(key, out);
                    self.space(out);
                    out.push(':');
                    self.write(member, out);
                }
                self.space(out);
                out.push('}');
            }
        }
        self.space(out);
    }
}

/// A JSON text: a spelled document, sometimes broken (cut short, or with a stray byte).
pub(crate) fn json_text() -> impl Strategy<Value = Vec<u8>> {
    (doc(), prop::collection::vec(any::<u8>(), 1..16), 0u8..12, any::<usize>(), any::<u8>()).prop_map(
        |(doc, style, damage, at, byte)| {
            let mut text = String::new();
            Spelling::new(&style).write(&doc, &mut text);
            let mut bytes = text.into_bytes();
            match damage {
                0 if !bytes.is_empty() => bytes.truncate(at % bytes.len()),
                1 => {
                    let at = at % (bytes.len() + 1);
                    bytes.insert(at, byte);
                }
                _ => {}
            }
            bytes
        },
    )
}

/// A document serializes with its members in document order, repeats included (a map that
/// comes unsorted, as a struct or a hash map may).
impl serde::Serialize for Doc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Number(n) => match (n.parse::<i64>(), n.parse::<u64>()) {
                (Ok(i), _) => s.serialize_i64(i),
                (_, Ok(u)) => s.serialize_u64(u),
                _ => s.serialize_f64(n.parse().unwrap_or(f64::NAN)),
            },
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

/// Header names: the ones the policies and the metadata document read, in any case, and others
/// (printable ASCII without `:`, all async-nats lets through).
fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "Nats-Msg-Id",
            "nats-msg-id",
            "Nats-Time-Stamp",
            "Nats-Msg-Size",
            "Nats-Expected-Stream",
            "traceparent",
            "Accept-Encoding",
            "Nats-Sinks-Previous-Custody-Hash",
            "Nats-Custom",
            "X-Other",
            "nats-",
        ])
        .prop_map(str::to_owned),
        "[A-Za-z][A-Za-z0-9-]{0,10}",
        "[!-9;-~]{1,8}",
    ]
}

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "2026-11-30T10:00:00Z",
            "2026-11-30T10:00:00.123456789+02:00",
            "not a time",
            "12",
            " 7 ",
            "-1",
            "",
            "m-1",
            "ABCDEFabcdef0123456789abcdef0123456789ABCDEF0123456789abcdef0123",
        ])
        .prop_map(str::to_owned),
        text(),
    ]
}

/// A payload: JSON texts (well-formed or not), text, bytes, nothing.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => json_text(),
        1 => value().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        1 => text().prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..40),
        1 => Just(Vec::new()),
    ]
}

/// Any envelope the policies may see: headers of every kind, resolved application metadata,
/// mission metadata and security labels of any shape, any delivery, a stream in its first
/// epoch or a later one.
pub(crate) fn envelope() -> impl Strategy<Value = sinks_contract::envelope::Envelope> {
    use sinks_contract::envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
    let headers = prop::collection::vec((header_name(), header_value()), 0..8)
        .prop_map(|pairs| pairs.iter().fold(Headers::new(), |h, (n, v)| h.with(n, v.clone())));
    let app = (prop::option::of(text()), prop::option::of(text()), prop::collection::vec(text(), 0..4))
        .prop_map(|(priority, classification, labels)| AppMetadata { priority, classification, labels });
    let js = (
        text(),
        text(),
        any::<u64>(),
        any::<u64>(),
        0u64..4,
        any::<u64>(),
        prop::option::of(0i64..4_000_000_000),
        prop::option::of(text()),
    )
        .prop_map(|(stream, consumer, stream_sequence, consumer_sequence, delivered, pending, at, domain)| {
            JetStreamInfo {
                stream,
                consumer,
                stream_sequence,
                consumer_sequence,
                delivered,
                pending,
                timestamp: at.and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok()),
                domain,
            }
        });
    let extras = (
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
        0i64..4_000_000_000,
        0u32..1_000_000_000,
        prop::option::of("[a-z0-9-]{1,8}"),
        any::<[bool; 3]>(),
    );
    ("[a-z.>*]{1,12}", payload(), headers, js, app, extras).prop_map(
        |(subject, payload, headers, js, app, (mission, labels, custody, seconds, nanos, epoch, as_text))| {
            let received = time::OffsetDateTime::from_unix_timestamp(seconds)
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
                + time::Duration::nanoseconds(i64::from(nanos));
            // Each document attached as its value or, as the policy steps attach them, as
            // its canonical text.
            let attach = |value: Option<Value>, text: bool| {
                value.map(|v| {
                    std::sync::Arc::new(if text {
                        super::doc_of(&v).unwrap()
                    } else {
                        sinks_contract::json::JsonDoc::from_value(v)
                    })
                })
            };
            Envelope::new(subject, payload, headers, js)
                .with_app_metadata(app)
                .with_mission_metadata_doc(attach(mission, as_text[0]))
                .with_security_labels_doc(attach(labels, as_text[1]))
                .with_custody_doc(attach(custody, as_text[2]))
                .with_received_at(received)
                .with_stream_epoch(epoch.map(std::sync::Arc::from))
        },
    )
}
