//! One message as a row of a batch object: the standard columns (subject, stream,
//! stream sequence, message id, JetStream timestamp, headers, payload fingerprint, payload)
//! and the typed Parquet columns taken from the payload.
//!
//! The payload is normalized per the sink's `payload_mode` ([`sinks_contract::payload`]): a JSON
//! payload is kept exactly as published, anything else is wrapped in the payload envelope.
//! An NDJSON row embeds it as JSON; a Parquet row stores its JSON text. An encrypted
//! subject's payload is the encryption envelope (the runner encrypts before any sink sees
//! a message), so a row never holds the plaintext of an encrypted message.
//!
//! What every format shares sits here too, below the formats: the [`Encoder`] trait each
//! format's writer implements (NDJSON in [`super::encode`], Parquet in `super::parquet`), a
//! row as read back ([`StoredRow`]) and the compression levels.

use std::fs::File;
use std::io;

use serde::Serialize;
use serde_json::value::RawValue;
use time::OffsetDateTime;

use super::config::{ColumnConfig, ColumnType};
use sinks_contract::envelope::Envelope;
use sinks_contract::payload::{NormalizedPayload, PayloadMode};

/// Zstandard level of NDJSON objects and Parquet pages (the library's default).
pub const ZSTD_LEVEL: i32 = 3;
/// gzip level of NDJSON objects.
pub const GZIP_LEVEL: u32 = 6;

/// Streams the rows of one object into a file.
pub trait Encoder: Send {
    /// Appends one row.
    fn append(&mut self, row: &Row) -> io::Result<()>;

    /// Writes what the format needs at the end (a gzip trailer, a Parquet footer), flushes
    /// its buffers into the file (not to the disk: staging decides that), and gives the
    /// file back.
    fn finish(self: Box<Self>) -> io::Result<File>;
}

/// One row read back from an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// Stream.
    pub stream: String,
    /// Stream sequence.
    pub stream_sequence: u64,
    /// SHA-256 of the original payload bytes (hex).
    pub payload_sha256: String,
    /// The stored payload's JSON text (empty unless asked for).
    pub payload: String,
}

/// Schema name of an NDJSON row and of the Parquet file metadata.
pub const ROW_SCHEMA: &str = "nats_sinks.batch.row.v1";

/// One typed value of a declared column.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// No value (a nullable column without one).
    Null,
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// Microseconds since the epoch (UTC).
    Micros(i64),
}

/// A message ready to be appended to an object.
#[derive(Debug)]
pub struct Row {
    /// Subject.
    pub subject: String,
    /// Stream: its name, or `{stream}.{epoch}` in a later epoch of it
    /// ([`Envelope::keyed_stream`]), as the object's name and manifest log have it.
    pub stream: String,
    /// Stream sequence.
    pub stream_sequence: u64,
    /// `Nats-Msg-Id`, when there was one.
    pub message_id: Option<String>,
    /// JetStream timestamp.
    pub timestamp: Option<OffsetDateTime>,
    /// Headers as a JSON object (`null` when there are none).
    pub headers: Option<String>,
    /// The normalized payload.
    pub payload: NormalizedPayload,
    /// Typed column values, in declaration order.
    pub cells: Vec<Cell>,
}

/// Why a message cannot be a row. Permanent for that message alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// The payload mode refused the payload.
    #[error("{0}")]
    Payload(String),
    /// A typed column's value is missing or of the wrong type.
    #[error("column `{column}`: {reason}")]
    Column {
        /// The column name.
        column: String,
        /// What is wrong (never the value itself).
        reason: String,
    },
}

#[derive(Serialize)]
struct Line<'a> {
    schema: &'static str,
    subject: &'a str,
    stream: &'a str,
    stream_sequence: u64,
    message_id: Option<&'a str>,
    timestamp: Option<String>,
    headers: Option<&'a RawValue>,
    payload_sha256: &'a str,
    payload: &'a RawValue,
}

impl Row {
    /// The row of `envelope` under `mode`, with `columns` taken from its payload.
    pub fn of(envelope: &Envelope, mode: PayloadMode, columns: &[ColumnConfig]) -> Result<Self, RowError> {
        let payload = sinks_contract::payload::normalize(envelope.payload(), mode)
            .map_err(|e| RowError::Payload(e.to_string()))?;
        let headers = (!envelope.headers().is_empty()).then(|| envelope.headers().to_json().to_string());
        let cells = if columns.is_empty() {
            Vec::new()
        } else {
            let value = if payload.wrapped { serde_json::Value::Null } else { payload.to_value() };
            columns.iter().map(|c| cell(&value, c)).collect::<Result<Vec<_>, _>>()?
        };
        let js = envelope.jetstream();
        Ok(Self {
            subject: envelope.subject().to_owned(),
            stream: envelope.keyed_stream().into_owned(),
            stream_sequence: js.stream_sequence,
            message_id: envelope.message_id().map(str::to_owned),
            timestamp: js.timestamp,
            headers,
            payload,
            cells,
        })
    }

    /// The timestamp as RFC 3339 in UTC with nanoseconds.
    pub fn timestamp_text(&self) -> Option<String> {
        self.timestamp.map(crate::metadata::rfc3339)
    }

    /// The uncompressed size this row counts against `max_bytes`: its NDJSON line.
    pub fn size(&self) -> u64 {
        self.ndjson_line().len() as u64
    }

    /// The NDJSON line (a compact JSON object and `\n`).
    pub fn ndjson_line(&self) -> Vec<u8> {
        let headers = self.headers.as_deref().and_then(|h| RawValue::from_string(h.to_owned()).ok());
        let line = Line {
            schema: ROW_SCHEMA,
            subject: &self.subject,
            stream: &self.stream,
            stream_sequence: self.stream_sequence,
            message_id: self.message_id.as_deref(),
            timestamp: self.timestamp_text(),
            headers: headers.as_deref(),
            payload_sha256: &self.payload.sha256,
            payload: &self.payload.value,
        };
        let mut out = serde_json::to_vec(&line).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// The value of `column` in the payload `value`.
fn cell(value: &serde_json::Value, column: &ColumnConfig) -> Result<Cell, RowError> {
    let fail = |reason: &str| RowError::Column { column: column.name.clone(), reason: reason.to_owned() };
    let found = column.path.split('.').try_fold(value, |v, key| v.get(key)).filter(|v| !v.is_null());
    let Some(found) = found else {
        return if column.nullable { Ok(Cell::Null) } else { Err(fail("missing from the payload")) };
    };
    let wrong = || fail(&format!("not a {}", type_name(column.kind)));
    Ok(match column.kind {
        ColumnType::String => Cell::Str(found.as_str().ok_or_else(wrong)?.to_owned()),
        ColumnType::Int64 => Cell::Int(found.as_i64().ok_or_else(wrong)?),
        ColumnType::Float64 => Cell::Float(found.as_f64().ok_or_else(wrong)?),
        ColumnType::Boolean => Cell::Bool(found.as_bool().ok_or_else(wrong)?),
        ColumnType::Json => Cell::Str(found.to_string()),
        ColumnType::Timestamp => {
            let text = found.as_str().ok_or_else(wrong)?;
            let t = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map_err(|_| wrong())?;
            let micros = t.unix_timestamp_nanos() / 1000;
            Cell::Micros(i64::try_from(micros).map_err(|_| wrong())?)
        }
    })
}

fn type_name(kind: ColumnType) -> &'static str {
    match kind {
        ColumnType::String => "string",
        ColumnType::Int64 => "64-bit integer",
        ColumnType::Float64 => "number",
        ColumnType::Boolean => "boolean",
        ColumnType::Timestamp => "RFC 3339 timestamp",
        ColumnType::Json => "JSON value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::envelope::Headers;

    fn column(name: &str, kind: ColumnType, nullable: bool) -> ColumnConfig {
        ColumnConfig { name: name.into(), path: name.replace('_', "."), kind, nullable }
    }

    #[test]
    fn the_ndjson_line_keeps_json_payloads_as_published() {
        let e = sinks_contract::testing::envelope_with(
            "ORDERS",
            42,
            "orders.eu",
            " {\"a\": 1.50, \"n\":12345678901234567890}\n",
            Headers::new().with("Nats-Msg-Id", "m-1").with("X-A", "1"),
            1,
        );
        let row = Row::of(&e, PayloadMode::JsonOrEnvelope, &[]).unwrap();
        let line = String::from_utf8(row.ndjson_line()).unwrap();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(doc["schema"], ROW_SCHEMA);
        assert_eq!(doc["stream_sequence"], 42);
        assert_eq!(doc["message_id"], "m-1");
        assert_eq!(doc["headers"]["X-A"], "1");
        assert!(line.contains(r#""payload":{"a": 1.50, "n":12345678901234567890}"#), "{line}");
        assert_eq!(row.size(), line.len() as u64);
        assert_eq!(doc["stream"], "ORDERS");
        let later = Row::of(&e.clone().with_stream_epoch(Some("e9".into())), PayloadMode::JsonOrEnvelope, &[]).unwrap();
        assert_eq!(later.stream, "ORDERS.e9", "a later epoch's rows carry the epoch-scoped stream");
        let text = sinks_contract::testing::envelope("S", 1, "s", "plain text");
        let wrapped = Row::of(&text, PayloadMode::JsonOrEnvelope, &[]).unwrap();
        assert!(wrapped.payload.wrapped);
        assert!(matches!(Row::of(&text, PayloadMode::JsonOnly, &[]), Err(RowError::Payload(_))));
    }

    #[test]
    fn typed_columns_fail_the_message_alone_with_the_column_named() {
        let columns = [
            column("order_id", ColumnType::String, false),
            column("qty", ColumnType::Int64, true),
            column("price", ColumnType::Float64, true),
            column("paid", ColumnType::Boolean, true),
            column("at", ColumnType::Timestamp, true),
            column("meta", ColumnType::Json, true),
        ];
        let good = sinks_contract::testing::envelope(
            "S",
            1,
            "s",
            r#"{"order":{"id":"o-1"},"qty":3,"price":2,"paid":true,"at":"2026-01-02T03:04:05Z","meta":{"k":[1]}}"#,
        );
        let row = Row::of(&good, PayloadMode::JsonOrEnvelope, &columns).unwrap();
        assert_eq!(
            row.cells,
            [
                Cell::Str("o-1".into()),
                Cell::Int(3),
                Cell::Float(2.0),
                Cell::Bool(true),
                Cell::Micros(1_767_323_045_000_000),
                Cell::Str(r#"{"k":[1]}"#.into())
            ]
        );
        let sparse = sinks_contract::testing::envelope("S", 2, "s", r#"{"order":{"id":"o-2"}}"#);
        let row = Row::of(&sparse, PayloadMode::JsonOrEnvelope, &columns).unwrap();
        assert!(row.cells[1..].iter().all(|c| *c == Cell::Null), "nullable columns without a value are null");
        for (payload, bad) in [
            (r#"{"qty":1}"#, "order_id"),
            (r#"{"order":{"id":7}}"#, "order_id"),
            (r#"{"order":{"id":"x"},"qty":1.5}"#, "qty"),
            (r#"{"order":{"id":"x"},"at":"yesterday"}"#, "at"),
            ("not json", "order_id"),
        ] {
            let e = sinks_contract::testing::envelope("S", 3, "s", payload);
            match Row::of(&e, PayloadMode::JsonOrEnvelope, &columns) {
                Err(RowError::Column { column, reason }) => {
                    assert_eq!(column, bad, "{payload}");
                    assert!(!reason.contains('{'), "the reason never quotes the payload: {reason}");
                }
                other => panic!("{payload}: expected a column error, got {other:?}"),
            }
        }
    }
}
