//! Parquet batch objects (cargo feature `parquet`, arrow-rs): one row per message, the
//! stable schema of [`schema`], written one row group at a time so an open object holds at
//! most one row group's pages in memory.
//!
//! Schema (in order): `subject` utf8, `stream` utf8, `stream_sequence` int64,
//! `message_id` utf8 (nullable), `timestamp` timestamp(ns, UTC) (nullable: the JetStream
//! timestamp), `headers` utf8 JSON (nullable), `payload_sha256` utf8, `payload` utf8 (the
//! normalized payload's JSON text), then the declared columns (`string`, `json` → utf8,
//! `int64`, `float64` → double, `boolean`, `timestamp` → timestamp(µs, UTC)). The file's
//! key-value metadata carries `nats_sinks.schema = nats_sinks.batch.row.v1`.

use std::fs::File;
use std::io;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
    TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::config::{BatchCompression, ColumnConfig, ColumnType};
use super::row::{Cell, Encoder, ROW_SCHEMA, Row, StoredRow, ZSTD_LEVEL};

/// Rows gathered in column builders before they go to the writer.
const BATCH_ROWS: usize = 1024;
/// Bytes gathered in column builders before they go to the writer (below the allocator's
/// oversize threshold of 1 MiB, so the builders' buffers are reused, not mapped anew).
const BATCH_BYTES: usize = 512 * 1024;
/// Memory a row group may take before it is written out (and a new one started): what an
/// open Parquet object holds in memory.
pub const ROW_GROUP_BYTES: usize = 4 * 1024 * 1024;
/// The standard columns that hold a different value in (nearly) every row: written without
/// a dictionary.
const UNIQUE_COLUMNS: [&str; 6] =
    ["stream_sequence", "message_id", "timestamp", "headers", "payload_sha256", "payload"];
/// Metadata key naming the row schema.
pub const SCHEMA_KEY: &str = "nats_sinks.schema";

/// The Arrow schema of an object with `columns` declared.
pub fn schema(columns: &[ColumnConfig]) -> SchemaRef {
    schema_in(columns, TimeUnit::Nanosecond)
}

/// [`schema`] with the standard `timestamp` column in `unit`: nanoseconds for batch mode's
/// stable schema, microseconds in table mode (a Delta `timestamp` is microseconds; readers
/// such as delta-rs refuse to cast nanoseconds down).
pub fn schema_in(columns: &[ColumnConfig], unit: TimeUnit) -> SchemaRef {
    let utc = || Some(Arc::<str>::from("UTC"));
    let mut fields = vec![
        Field::new("subject", DataType::Utf8, false),
        Field::new("stream", DataType::Utf8, false),
        Field::new("stream_sequence", DataType::Int64, false),
        Field::new("message_id", DataType::Utf8, true),
        Field::new("timestamp", DataType::Timestamp(unit, utc()), true),
        Field::new("headers", DataType::Utf8, true),
        Field::new("payload_sha256", DataType::Utf8, false),
        Field::new("payload", DataType::Utf8, false),
    ];
    for c in columns {
        let kind = match c.kind {
            ColumnType::String | ColumnType::Json => DataType::Utf8,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, utc()),
        };
        fields.push(Field::new(&c.name, kind, c.nullable));
    }
    Arc::new(Schema::new(fields))
}

enum Typed {
    Str(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Micros(TimestampMicrosecondBuilder),
}

impl Typed {
    fn new(kind: ColumnType) -> Self {
        match kind {
            ColumnType::String | ColumnType::Json => Self::Str(StringBuilder::new()),
            ColumnType::Int64 => Self::Int(Int64Builder::new()),
            ColumnType::Float64 => Self::Float(Float64Builder::new()),
            ColumnType::Boolean => Self::Bool(BooleanBuilder::new()),
            ColumnType::Timestamp => Self::Micros(TimestampMicrosecondBuilder::new().with_timezone("UTC")),
        }
    }

    fn push(&mut self, cell: &Cell) {
        match (self, cell) {
            (Self::Str(b), Cell::Str(v)) => b.append_value(v),
            (Self::Int(b), Cell::Int(v)) => b.append_value(*v),
            (Self::Float(b), Cell::Float(v)) => b.append_value(*v),
            (Self::Bool(b), Cell::Bool(v)) => b.append_value(*v),
            (Self::Micros(b), Cell::Micros(v)) => b.append_value(*v),
            (Self::Str(b), _) => b.append_null(),
            (Self::Int(b), _) => b.append_null(),
            (Self::Float(b), _) => b.append_null(),
            (Self::Bool(b), _) => b.append_null(),
            (Self::Micros(b), _) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Str(b) => Arc::new(b.finish()),
            Self::Int(b) => Arc::new(b.finish()),
            Self::Float(b) => Arc::new(b.finish()),
            Self::Bool(b) => Arc::new(b.finish()),
            Self::Micros(b) => Arc::new(b.finish()),
        }
    }
}

/// The standard `timestamp` column's builder: nanoseconds, or microseconds (table mode).
enum Stamp {
    Nanos(TimestampNanosecondBuilder),
    Micros(TimestampMicrosecondBuilder),
}

impl Stamp {
    fn push(&mut self, nanos: Option<i64>) {
        match self {
            Self::Nanos(b) => b.append_option(nanos),
            Self::Micros(b) => b.append_option(nanos.map(|n| n.div_euclid(1000))),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Nanos(b) => Arc::new(b.finish()),
            Self::Micros(b) => Arc::new(b.finish()),
        }
    }
}

/// Streams rows into a Parquet file.
pub(super) struct ParquetEncoder {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    subject: StringBuilder,
    stream: StringBuilder,
    sequence: Int64Builder,
    message_id: StringBuilder,
    timestamp: Stamp,
    headers: StringBuilder,
    sha256: StringBuilder,
    payload: StringBuilder,
    typed: Vec<Typed>,
    rows: usize,
    bytes: usize,
}

fn parquet_error(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(e.to_string())
}

impl ParquetEncoder {
    /// An encoder writing into `file`; `micros` for table mode's microsecond timestamps.
    pub(super) fn new(
        file: File,
        compression: BatchCompression,
        columns: &[ColumnConfig],
        micros: bool,
    ) -> io::Result<Self> {
        let compression = match compression {
            BatchCompression::Zstd => Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL).map_err(parquet_error)?),
            BatchCompression::None => Compression::UNCOMPRESSED,
            _ => Compression::SNAPPY,
        };
        let mut props = WriterProperties::builder();
        // A dictionary pays only for repeated values: these columns hold one value per
        // message, so a dictionary would be built (and held) only to be dropped again.
        for column in UNIQUE_COLUMNS {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column), false);
        }
        let props = props
            .set_compression(compression)
            .set_max_row_group_row_count(None)
            .set_created_by(format!("nats-sinks {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(SCHEMA_KEY.to_owned(), ROW_SCHEMA.to_owned())]))
            .build();
        let unit = if micros { TimeUnit::Microsecond } else { TimeUnit::Nanosecond };
        let schema = schema_in(columns, unit);
        let writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(props)).map_err(parquet_error)?;
        Ok(Self {
            writer,
            schema,
            subject: StringBuilder::new(),
            stream: StringBuilder::new(),
            sequence: Int64Builder::new(),
            message_id: StringBuilder::new(),
            timestamp: if micros {
                Stamp::Micros(TimestampMicrosecondBuilder::new().with_timezone("UTC"))
            } else {
                Stamp::Nanos(TimestampNanosecondBuilder::new().with_timezone("UTC"))
            },
            headers: StringBuilder::new(),
            sha256: StringBuilder::new(),
            payload: StringBuilder::new(),
            typed: columns.iter().map(|c| Typed::new(c.kind)).collect(),
            rows: 0,
            bytes: 0,
        })
    }

    /// Hands the gathered rows to the writer, and closes the row group when it is large.
    fn write_out(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(self.subject.finish()),
            Arc::new(self.stream.finish()),
            Arc::new(self.sequence.finish()),
            Arc::new(self.message_id.finish()),
            self.timestamp.finish(),
            Arc::new(self.headers.finish()),
            Arc::new(self.sha256.finish()),
            Arc::new(self.payload.finish()),
        ];
        arrays.extend(self.typed.iter_mut().map(Typed::finish));
        let batch =
            RecordBatch::try_new(Arc::clone(&self.schema), arrays).map_err(|e| io::Error::other(e.to_string()))?;
        self.writer.write(&batch).map_err(parquet_error)?;
        self.rows = 0;
        self.bytes = 0;
        if self.writer.memory_size() >= ROW_GROUP_BYTES {
            self.writer.flush().map_err(parquet_error)?;
        }
        Ok(())
    }
}

impl Encoder for ParquetEncoder {
    fn append(&mut self, row: &Row) -> io::Result<()> {
        self.subject.append_value(&row.subject);
        self.stream.append_value(&row.stream);
        let seq = i64::try_from(row.stream_sequence).map_err(|_| io::Error::other("stream sequence beyond i64"))?;
        self.sequence.append_value(seq);
        self.message_id.append_option(row.message_id.as_deref());
        let ts = row.timestamp.and_then(|t| i64::try_from(t.unix_timestamp_nanos()).ok());
        self.timestamp.push(ts);
        self.headers.append_option(row.headers.as_deref());
        self.sha256.append_value(&row.payload.sha256);
        let payload = row.payload.value.get();
        self.payload.append_value(payload);
        for (builder, cell) in self.typed.iter_mut().zip(&row.cells) {
            builder.push(cell);
        }
        self.rows += 1;
        self.bytes += payload.len() + row.subject.len() + row.headers.as_ref().map_or(0, String::len) + 128;
        if self.rows >= BATCH_ROWS || self.bytes >= BATCH_BYTES {
            self.write_out()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> io::Result<File> {
        self.write_out()?;
        self.writer.into_inner().map_err(parquet_error)
    }
}

/// Reads the rows of a Parquet object (`super::encode::read_rows` calls it for Parquet).
pub(super) fn read_rows(file: File, with_payload: bool, mut each: impl FnMut(StoredRow)) -> Result<u64, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| format!("not a parquet file: {e}"))?;
    let mut names = vec!["stream", "stream_sequence", "payload_sha256"];
    if with_payload {
        names.push("payload");
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), names.iter().copied());
    let reader = builder.with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(|e| e.to_string())?;
    let mut rows = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| format!("cannot read a row group: {e}"))?;
        let column = |name: &str| batch.column_by_name(name).ok_or_else(|| format!("no `{name}` column"));
        let stream = column("stream")?.as_string_opt::<i32>().ok_or("`stream` is not utf8")?;
        let sequence =
            column("stream_sequence")?.as_primitive_opt::<Int64Type>().ok_or("`stream_sequence` is not int64")?;
        let sha = column("payload_sha256")?.as_string_opt::<i32>().ok_or("`payload_sha256` is not utf8")?;
        let payload = if with_payload {
            Some(column("payload")?.as_string_opt::<i32>().ok_or("`payload` is not utf8")?)
        } else {
            None
        };
        for i in 0..batch.num_rows() {
            each(StoredRow {
                stream: stream.value(i).to_owned(),
                stream_sequence: u64::try_from(sequence.value(i)).map_err(|_| "negative stream sequence")?,
                payload_sha256: sha.value(i).to_owned(),
                payload: payload.map(|p| p.value(i).to_owned()).unwrap_or_default(),
            });
            rows += 1;
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::io::Seek;

    use super::*;
    use crate::batch::config::{BatchConfig, Format};
    use crate::batch::encode::{encoder, read_rows as read_any};
    use sinks_contract::payload::PayloadMode;

    #[test]
    fn rows_round_trip_in_several_row_groups_with_typed_columns() {
        let columns = vec![
            ColumnConfig { name: "qty".into(), path: "qty".into(), kind: ColumnType::Int64, nullable: true },
            ColumnConfig { name: "who".into(), path: "who".into(), kind: ColumnType::String, nullable: true },
        ];
        for compression in [BatchCompression::Snappy, BatchCompression::Zstd, BatchCompression::None] {
            let config = BatchConfig {
                format: Format::Parquet,
                compression: Some(compression),
                columns: columns.clone(),
                ..BatchConfig::default()
            };
            let mut enc = encoder(&config, tempfile::tempfile().unwrap()).unwrap();
            let mut want = Vec::new();
            let mut x: u64 = 7;
            for seq in 1..=5000u64 {
                // 4 KB that do not compress, so the row groups are really that large.
                let pad: String = (0..4000)
                    .map(|_| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        char::from(b'a' + ((x >> 33) % 26) as u8)
                    })
                    .collect();
                let payload = format!(r#"{{"qty":{seq},"who":"w{seq}","pad":"{pad}"}}"#);
                let e = sinks_contract::testing::envelope("S", seq, "s.x", payload);
                let row = Row::of(&e, PayloadMode::JsonOrEnvelope, &columns).unwrap();
                want.push((seq, row.payload.sha256.clone(), row.payload.value.get().to_owned()));
                enc.append(&row).unwrap();
            }
            let mut file = enc.finish().unwrap();
            file.rewind().unwrap();
            let meta = ParquetRecordBatchReaderBuilder::try_new(file.try_clone().unwrap()).unwrap();
            assert!(meta.metadata().num_row_groups() > 1, "20 MB of rows make more than one row group");
            let kv = meta.metadata().file_metadata().key_value_metadata().unwrap();
            assert!(kv.iter().any(|k| k.key == SCHEMA_KEY && k.value.as_deref() == Some(ROW_SCHEMA)));
            // The one-value-per-row columns go without a dictionary; the others keep theirs.
            for column in meta.metadata().row_group(0).columns() {
                let name = column.column_path().string();
                let unique = UNIQUE_COLUMNS.contains(&name.as_str());
                assert_eq!(column.dictionary_page_offset().is_none(), unique, "{name}: dictionary");
            }
            let mut got = Vec::new();
            file.rewind().unwrap();
            read_any(file, Format::Parquet, compression, true, |r| {
                got.push((r.stream_sequence, r.payload_sha256, r.payload));
            })
            .unwrap();
            assert_eq!(got, want, "{compression:?}");
        }
    }
}
