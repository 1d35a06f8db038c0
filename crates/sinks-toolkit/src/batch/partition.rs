//! The partition template: where a batch object goes, evaluated per message.
//!
//! A template is `/`-separated segments of literal text and tokens: `{stream}` (the
//! stream's name, `{stream}.{epoch}` in a later epoch of it: `Envelope::keyed_stream`),
//! `{subject}`, `{subject_token[N]}` (the Nth `.`-separated token of the subject, from 0),
//! `{yyyy}` `{mm}` `{dd}` `{hh}` (the JetStream timestamp, UTC) and `{field:path}` (a scalar
//! of the JSON payload at a dotted path). Hive-style segments such as `year={yyyy}` work.
//!
//! Every message is evaluated on its own, so two messages of one batch can land in
//! different partitions (bento #659 evaluated the path once per batch). The result depends
//! only on the message (its JetStream timestamp, never the clock), so a redelivery always
//! lands in the partition of its first delivery, where the exactly-once check looks for it.
//! A token without a value (a payload without the field, a subject with fewer tokens, no
//! timestamp) becomes the configured fallback name: a named fallback partition, never an
//! error. Values are reduced to `[A-Za-z0-9._=-]` (anything else becomes `_`, at most 100
//! bytes, `.` and `..` become `_`): a partition groups objects, it does not identify
//! messages, so two values sharing a partition is harmless (each row carries its own).

use std::fmt::Write as _;

use time::OffsetDateTime;

use sinks_contract::envelope::Envelope;

/// Longest rendered value of one token, in bytes.
const MAX_VALUE_BYTES: usize = 100;
/// Longest template, in bytes.
const MAX_TEMPLATE_BYTES: usize = 512;

/// One piece of a template segment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Stream,
    Subject,
    SubjectToken(usize),
    Year,
    Month,
    Day,
    Hour,
    Field(String),
}

/// A parsed partition template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Vec<Piece>>,
}

/// Checks literal text used in a template or as the fallback: one or more path-safe
/// characters, no `/`.
pub fn check_literal(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    if text == "." || text == ".." {
        return Err("must not be `.` or `..`".into());
    }
    if let Some(c) = text.chars().find(|c| !allowed(*c)) {
        return Err(format!("may only use [A-Za-z0-9._=-] (found {c:?})"));
    }
    Ok(())
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '=' | '-')
}

impl Template {
    /// Parses `text`, refusing unknown tokens, unbalanced braces, empty segments and unsafe
    /// literal text.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        if text.len() > MAX_TEMPLATE_BYTES {
            return Err(format!("must be at most {MAX_TEMPLATE_BYTES} bytes"));
        }
        let mut segments = Vec::new();
        for segment in text.split('/') {
            if segment.is_empty() {
                return Err("must not have empty segments (a leading, trailing or double `/`)".into());
            }
            let mut pieces = Vec::new();
            let mut rest = segment;
            while !rest.is_empty() {
                match rest.find('{') {
                    Some(0) => {
                        let close = rest.find('}').ok_or("has a `{` without its `}`")?;
                        pieces.push(token(&rest[1..close])?);
                        rest = &rest[close + 1..];
                    }
                    found => {
                        let end = found.unwrap_or(rest.len());
                        let literal = &rest[..end];
                        if literal.contains('}') {
                            return Err("has a `}` without its `{`".into());
                        }
                        check_literal(literal).map_err(|e| format!("text `{literal}` {e}"))?;
                        pieces.push(Piece::Text(literal.to_owned()));
                        rest = &rest[end..];
                    }
                }
            }
            segments.push(pieces);
        }
        Ok(Self { segments })
    }

    /// True when rendering reads the payload (a `{field:…}` token).
    pub fn reads_payload(&self) -> bool {
        self.segments.iter().flatten().any(|p| matches!(p, Piece::Field(_)))
    }

    /// The partition of `envelope` (a missing value is `fallback`).
    pub fn render(&self, envelope: &Envelope, fallback: &str) -> String {
        let payload = self.reads_payload().then(|| {
            std::str::from_utf8(envelope.payload()).ok().and_then(|text| sinks_contract::json::parse_strict(text).ok())
        });
        let payload = payload.flatten();
        let timestamp = envelope.jetstream().timestamp.map(|t| t.to_offset(time::UtcOffset::UTC));
        let mut out = String::new();
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            let mut rendered = String::new();
            for piece in segment {
                let value = value_of(piece, envelope, timestamp, payload.as_ref());
                match value {
                    Some(v) => rendered.push_str(&v),
                    None => rendered.push_str(fallback),
                }
            }
            if rendered == "." || rendered == ".." {
                rendered = "_".into();
            }
            out.push_str(&rendered);
        }
        out
    }
}

fn token(inner: &str) -> Result<Piece, String> {
    Ok(match inner {
        "stream" => Piece::Stream,
        "subject" => Piece::Subject,
        "yyyy" => Piece::Year,
        "mm" => Piece::Month,
        "dd" => Piece::Day,
        "hh" => Piece::Hour,
        other => {
            if let Some(path) = other.strip_prefix("field:") {
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(format!("token `{{{other}}}` needs a dotted path such as `{{field:order.region}}`"));
                }
                Piece::Field(path.to_owned())
            } else if let Some(n) = other.strip_prefix("subject_token[").and_then(|r| r.strip_suffix(']')) {
                Piece::SubjectToken(n.parse().map_err(|_| format!("token `{{{other}}}` needs a number, from 0"))?)
            } else {
                return Err(format!(
                    "unknown token `{{{other}}}` (known: stream, subject, subject_token[N], yyyy, mm, dd, hh, field:path)"
                ));
            }
        }
    })
}

fn value_of(
    piece: &Piece,
    envelope: &Envelope,
    timestamp: Option<OffsetDateTime>,
    payload: Option<&serde_json::Value>,
) -> Option<String> {
    let two = |n: u8| format!("{n:02}");
    match piece {
        Piece::Text(text) => Some(text.clone()),
        Piece::Stream => Some(safe(&envelope.keyed_stream())),
        Piece::Subject => Some(safe(envelope.subject())),
        Piece::SubjectToken(n) => envelope.subject().split('.').nth(*n).filter(|t| !t.is_empty()).map(safe),
        Piece::Year => timestamp.map(|t| format!("{:04}", t.year())),
        Piece::Month => timestamp.map(|t| two(t.month() as u8)),
        Piece::Day => timestamp.map(|t| two(t.day())),
        Piece::Hour => timestamp.map(|t| two(t.hour())),
        Piece::Field(path) => {
            let value = payload?;
            let found = path.split('.').try_fold(value, |v, key| v.get(key))?;
            let text = match found {
                serde_json::Value::String(s) if !s.is_empty() => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some(safe(&text))
        }
    }
}

/// `value` reduced to path-safe characters, at most [`MAX_VALUE_BYTES`].
fn safe(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_VALUE_BYTES));
    for c in value.chars() {
        if out.len() >= MAX_VALUE_BYTES {
            break;
        }
        if allowed(c) {
            out.push(c);
        } else {
            out.push('_');
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The partition, object name and manifest of a sample message, for `nats-sink validate`:
/// stream `stream`, a subject made from `subject_filter` (wildcards become `x`), stream
/// sequence 1, timestamp `now`, payload `{}`.
pub fn example(template: &Template, fallback: &str, stream: &str, subject_filter: &str, extension: &str) -> String {
    let subject: Vec<&str> =
        subject_filter.split('.').map(|t| if t == "*" || t == ">" || t.is_empty() { "x" } else { t }).collect();
    let subject = subject.join(".");
    let info = sinks_contract::envelope::JetStreamInfo {
        stream: stream.to_owned(),
        consumer: String::new(),
        stream_sequence: 1,
        consumer_sequence: 1,
        delivered: 1,
        pending: 0,
        timestamp: Some(OffsetDateTime::now_utc()),
        domain: None,
    };
    let envelope = Envelope::new(subject.clone(), bytes::Bytes::from_static(b"{}"), Default::default(), info);
    let partition = template.render(&envelope, fallback);
    let name = super::naming::object_name(stream, 1, 1, extension);
    let mut out = String::new();
    let _ = write!(out, "{partition}/{name} (a sample message on `{subject}`, stream sequence 1, now)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::envelope::{Headers, JetStreamInfo};

    fn msg(subject: &str, payload: &str, ts: Option<&str>) -> Envelope {
        let info = JetStreamInfo {
            stream: "ORDERS".into(),
            consumer: "c".into(),
            stream_sequence: 7,
            consumer_sequence: 7,
            delivered: 1,
            pending: 0,
            timestamp: ts.map(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).unwrap()),
            domain: None,
        };
        Envelope::new(subject, payload.to_owned(), Headers::new(), info)
    }

    #[test]
    fn every_token_renders_per_message() {
        let t = Template::parse(
            "{stream}/{subject}/{subject_token[1]}/year={yyyy}/{mm}-{dd}-{hh}/{field:order.region}/{field:n}",
        )
        .unwrap();
        let e = msg("orders.eu.created", r#"{"order":{"region":"eu/west"},"n":42}"#, Some("2026-03-04T05:06:07+02:00"));
        assert_eq!(t.render(&e, "_missing"), "ORDERS/orders.eu.created/eu/year=2026/03-04-03/eu_west/42");
        let bare = msg("orders", "not json", None);
        assert_eq!(
            t.render(&bare, "_missing"),
            "ORDERS/orders/_missing/year=_missing/_missing-_missing-_missing/_missing/_missing",
            "missing values go to the fallback, never an error"
        );
        assert!(t.reads_payload());
        assert!(!Template::parse("{stream}/{yyyy}").unwrap().reads_payload());
        // In a later epoch of the stream `{stream}` is the epoch-scoped name.
        let later = e.with_stream_epoch(Some("e17".into()));
        assert!(t.render(&later, "_missing").starts_with("ORDERS.e17/orders.eu.created/"));
    }

    #[test]
    fn values_are_made_path_safe() {
        let t = Template::parse("{field:v}").unwrap();
        let rows = [
            (r#"{"v":"../../etc"}"#, ".._.._etc"),
            (r#"{"v":".."}"#, "_"),
            (r#"{"v":"a b/c"}"#, "a_b_c"),
            (r#"{"v":"ünï"}"#, "_n_"),
            (r#"{"v":{"nested":1}}"#, "_missing"),
            (r#"{"v":""}"#, "_missing"),
            (r#"{"v":true}"#, "true"),
        ];
        for (payload, want) in rows {
            assert_eq!(t.render(&msg("s", payload, None), "_missing"), want, "{payload}");
        }
        let long = format!(r#"{{"v":"{}"}}"#, "x".repeat(300));
        assert_eq!(t.render(&msg("s", &long, None), "_missing").len(), MAX_VALUE_BYTES);
    }

    #[test]
    fn bad_templates_are_refused() {
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "{nope}",
            "{stream",
            "a}b",
            "{field:}",
            "{field:a..b}",
            "{subject_token[x]}",
            "a b",
            "..",
            "x/../y",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad:?} should be refused");
        }
        for good in ["{stream}/{yyyy}/{mm}/{dd}/{hh}", "events", "dt={yyyy}-{mm}-{dd}/{subject_token[0]}"] {
            assert!(Template::parse(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn the_example_shows_a_sample_path() {
        let t = Template::parse("{stream}/{subject_token[1]}/{field:region}").unwrap();
        let line = example(&t, "_missing", "ORDERS", "orders.*.>", "ndjson");
        assert!(
            line.starts_with("ORDERS/x/_missing/ORDERS-00000000000000000001-00000000000000000001.ndjson"),
            "{line}"
        );
    }
}
