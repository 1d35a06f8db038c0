//! Delta checkpoints (no I/O here): a [`Snapshot`] as a classic single-part checkpoint, one
//! Parquet file of the table's state at a version (`protocol`, `metaData`, the `txn` of every
//! application and an `add` for every live file, one action per row, each in its own struct
//! column), the `_delta_log/_last_checkpoint` pointer that names it, and both read back,
//! including the checkpoints delta-rs writes (single- or multi-part; columns this writer
//! does not use are ignored).
//!
//! A reader trusts only a checkpoint that is whole: the file is created in one step (an
//! atomic link, an S3 `PUT`), and `_last_checkpoint` is replaced only after it exists.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, Int32Array, Int64Array, ListArray, MapArray, RecordBatch};
use arrow_array::{StringArray, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value, json};

use super::delta::{LOG_DIR, LiveFile, Snapshot};

/// The pointer to the latest checkpoint.
pub const LAST_CHECKPOINT: &str = "_delta_log/_last_checkpoint";

/// The single-part checkpoint of `version`: `_delta_log/00000000000000000010.checkpoint.parquet`.
pub fn checkpoint_name(version: u64) -> String {
    format!("{LOG_DIR}/{version:020}.checkpoint.parquet")
}

/// Part `part` of `parts` of a multi-part checkpoint of `version`.
pub fn part_name(version: u64, part: u64, parts: u64) -> String {
    format!("{LOG_DIR}/{version:020}.checkpoint.{part:010}.{parts:010}.parquet")
}

/// The files a checkpoint named by a `_last_checkpoint` pointer consists of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    /// The table version it holds.
    pub version: u64,
    /// Its parts (`None`: a single file).
    pub parts: Option<u64>,
}

impl Pointer {
    /// The pointer `_last_checkpoint` holds; `Err` when it is not one this writer reads (a
    /// V2 checkpoint's, or not JSON).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("_last_checkpoint is not JSON: {e}"))?;
        let version = v.get("version").and_then(Value::as_u64).ok_or("_last_checkpoint has no version")?;
        if v.get("v2Checkpoint").is_some_and(|c| !c.is_null()) {
            return Err("_last_checkpoint names a V2 checkpoint, which this writer does not read".into());
        }
        let parts = v.get("parts").and_then(Value::as_u64).filter(|p| *p > 1);
        Ok(Self { version, parts })
    }

    /// The single-part checkpoint a log file's name is, if it is one.
    pub fn of_name(name: &str) -> Option<Self> {
        let version = name.strip_suffix(".checkpoint.parquet")?;
        (version.len() == 20 && version.bytes().all(|b| b.is_ascii_digit()))
            .then(|| version.parse().ok())
            .flatten()
            .map(|version| Self { version, parts: None })
    }

    /// The files to read, in order.
    pub fn files(&self) -> Vec<String> {
        match self.parts {
            None => vec![checkpoint_name(self.version)],
            Some(n) => (1..=n).map(|i| part_name(self.version, i, n)).collect(),
        }
    }
}

/// A checkpoint of `snap` (which has read at least one commit): the Parquet file's bytes
/// and the `_last_checkpoint` pointer's.
pub fn write(snap: &Snapshot) -> Result<(Vec<u8>, Vec<u8>), String> {
    let version = snap.version.ok_or("an empty table has no checkpoint")?;
    let batch = batch_of(snap)?;
    let rows = batch.num_rows();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), None).map_err(|e| e.to_string())?;
    writer.write(&batch).map_err(|e| e.to_string())?;
    writer.close().map_err(|e| e.to_string())?;
    let pointer = json!({
        "version": version,
        "size": rows,
        "sizeInBytes": out.len(),
        "numOfAddFiles": snap.files.len(),
    });
    Ok((out, pointer.to_string().into_bytes()))
}

/// Reads the checkpoint files `parts` (their bytes, in order) of `version` into a snapshot.
pub fn read(version: u64, parts: Vec<Vec<u8>>) -> Result<Snapshot, String> {
    let mut snap = Snapshot::default();
    for bytes in parts {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
            .and_then(ParquetRecordBatchReaderBuilder::build)
            .map_err(|e| format!("checkpoint {version} is not a readable parquet file: {e}"))?;
        for batch in reader {
            let batch = batch.map_err(|e| format!("checkpoint {version}: {e}"))?;
            apply_batch(&mut snap, &batch).map_err(|e| format!("checkpoint {version}: {e}"))?;
        }
    }
    if snap.metadata.is_none() || snap.protocol.is_none() {
        return Err(format!("checkpoint {version} holds no metaData or no protocol"));
    }
    snap.version = Some(version);
    Ok(snap)
}

// ---- writing ----

/// One action per row: the protocol, the metadata, every txn, every live file.
enum Row<'a> {
    Protocol,
    Metadata,
    Txn(&'a str, u64),
    Add(&'a LiveFile),
}

fn strings<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

fn longs(values: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(values))
}

/// A map of strings per row (an empty one where `rows` has none: a not-null map).
fn string_map(rows: &[Vec<(&str, Option<&str>)>], values_nullable: bool) -> Result<ArrayRef, String> {
    let keys = strings(rows.iter().flatten().map(|(k, _)| Some(*k)));
    let values = strings(rows.iter().flatten().map(|(_, v)| *v));
    let entries = StructArray::try_new(
        Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, values_nullable),
        ]),
        vec![keys, values],
        None,
    )
    .map_err(|e| e.to_string())?;
    let field = Arc::new(Field::new("key_value", entries.data_type().clone(), false));
    let offsets = OffsetBuffer::from_lengths(rows.iter().map(Vec::len));
    Ok(Arc::new(MapArray::try_new(field, offsets, entries, None, false).map_err(|e| e.to_string())?))
}

/// A struct column: `children` (named, with their nullability) valid where `valid` is.
fn struct_of(children: Vec<(&str, bool, ArrayRef)>, valid: &[bool]) -> Result<StructArray, String> {
    let fields: Vec<Field> =
        children.iter().map(|(name, nullable, a)| Field::new(*name, a.data_type().clone(), *nullable)).collect();
    let arrays = children.into_iter().map(|(_, _, a)| a).collect();
    StructArray::try_new(Fields::from(fields), arrays, Some(NullBuffer::from(valid.to_vec())))
        .map_err(|e| e.to_string())
}

fn batch_of(snap: &Snapshot) -> Result<RecordBatch, String> {
    let meta = snap.metadata.as_ref().ok_or("the table has no metaData")?;
    let mut rows = vec![Row::Protocol, Row::Metadata];
    let mut txns: Vec<(&String, &u64)> = snap.txns.iter().collect();
    txns.sort();
    rows.extend(txns.into_iter().map(|(app, v)| Row::Txn(app, *v)));
    rows.extend(snap.files.values().map(Row::Add));
    let is = |f: fn(&Row<'_>) -> bool| rows.iter().map(f).collect::<Vec<bool>>();

    // protocol
    let (reader, writer) = snap.protocol_versions();
    let (reader, writer) = (i32::try_from(reader).unwrap_or(1), i32::try_from(writer).unwrap_or(2));
    let valid = is(|r| matches!(r, Row::Protocol));
    let protocol = struct_of(
        vec![
            ("minReaderVersion", false, Arc::new(Int32Array::from(vec![reader; rows.len()]))),
            ("minWriterVersion", false, Arc::new(Int32Array::from(vec![writer; rows.len()]))),
        ],
        &valid,
    )?;

    // metaData
    let text = |k: &str| meta.get(k).and_then(Value::as_str);
    let valid = is(|r| matches!(r, Row::Metadata));
    let at_meta = |v| only_at(&valid, v);
    let must = |v| filled(&valid, v);
    let options: Vec<(String, String)> = object_pairs(meta.get("format").and_then(|f| f.get("options")));
    let configuration: Vec<(String, String)> = object_pairs(meta.get("configuration"));
    let per_row = |pairs| pairs_at(&valid, pairs);
    let provider = meta.get("format").and_then(|f| f.get("provider")).and_then(Value::as_str).unwrap_or("parquet");
    let format = struct_of(
        vec![("provider", false, strings(must(provider))), ("options", false, string_map(&per_row(&options), false)?)],
        &vec![true; rows.len()],
    )?;
    let partition_columns: Vec<&str> = meta
        .get("partitionColumns")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let lengths = valid.iter().map(|m| if *m { partition_columns.len() } else { 0 });
    let element = strings(valid.iter().filter(|m| **m).flat_map(|_| partition_columns.iter().map(|c| Some(*c))));
    let columns_list = ListArray::try_new(
        Arc::new(Field::new("element", DataType::Utf8, false)),
        OffsetBuffer::from_lengths(lengths),
        element,
        None,
    )
    .map_err(|e| e.to_string())?;
    let created = meta.get("createdTime").and_then(Value::as_i64);
    let metadata = struct_of(
        vec![
            ("id", false, strings(must(text("id").ok_or("the table's metaData has no id")?))),
            ("name", true, strings(at_meta(text("name")))),
            ("description", true, strings(at_meta(text("description")))),
            ("format", false, Arc::new(format)),
            ("schemaString", false, strings(must(text("schemaString").ok_or("the table's metaData has no schema")?))),
            ("partitionColumns", false, Arc::new(columns_list)),
            ("createdTime", true, longs(valid.iter().map(|m| created.filter(|_| *m)))),
            ("configuration", false, string_map(&per_row(&configuration), false)?),
        ],
        &valid,
    )?;

    // txn
    let valid = is(|r| matches!(r, Row::Txn(..)));
    let txn = struct_of(
        vec![
            ("appId", false, strings(rows.iter().map(|r| Some(if let Row::Txn(a, _) = r { *a } else { "" })))),
            (
                "version",
                false,
                longs(
                    rows.iter()
                        .map(|r| Some(if let Row::Txn(_, v) = r { i64::try_from(*v).unwrap_or(i64::MAX) } else { 0 })),
                ),
            ),
            ("lastUpdated", true, longs(rows.iter().map(|_| None))),
        ],
        &valid,
    )?;

    // add
    let valid = is(|r| matches!(r, Row::Add(_)));
    let file = file_of;
    let partition_values: Vec<Vec<(&str, Option<&str>)>> = rows
        .iter()
        .map(|r| {
            file(r)
                .map_or_else(Vec::new, |f| f.partition_values.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect())
        })
        .collect();
    let add = struct_of(
        vec![
            ("path", false, strings(rows.iter().map(|r| Some(file(r).map_or("", |f| f.path.as_str()))))),
            ("partitionValues", false, string_map(&partition_values, true)?),
            ("size", false, longs(rows.iter().map(|r| Some(file(r).map_or(0, |f| f.size))))),
            ("modificationTime", false, longs(rows.iter().map(|r| Some(file(r).map_or(0, |f| f.modification_time))))),
            (
                "dataChange",
                false,
                Arc::new(BooleanArray::from(
                    rows.iter().map(|r| Some(file(r).is_some_and(|f| f.data_change))).collect::<Vec<_>>(),
                )),
            ),
            ("stats", true, strings(rows.iter().map(|r| file(r).and_then(|f| f.stats.as_deref())))),
        ],
        &valid,
    )?;

    // remove: no tombstones are kept (readers need none; vacuum lists the directory)
    let none = vec![false; rows.len()];
    let remove = struct_of(
        vec![
            ("path", false, strings(rows.iter().map(|_| Some("")))),
            ("deletionTimestamp", true, longs(rows.iter().map(|_| None))),
            ("dataChange", false, Arc::new(BooleanArray::from(vec![false; rows.len()]))),
        ],
        &none,
    )?;

    let columns: Vec<(&str, StructArray)> =
        vec![("protocol", protocol), ("metaData", metadata), ("txn", txn), ("add", add), ("remove", remove)];
    let schema =
        Schema::new(columns.iter().map(|(name, a)| Field::new(*name, a.data_type().clone(), true)).collect::<Vec<_>>());
    let arrays: Vec<ArrayRef> = columns.into_iter().map(|(_, a)| Arc::new(a) as ArrayRef).collect();
    RecordBatch::try_new(Arc::new(schema), arrays).map_err(|e| e.to_string())
}

/// `v` where `valid`, else null.
fn only_at<'a>(valid: &[bool], v: Option<&'a str>) -> Vec<Option<&'a str>> {
    valid.iter().map(|m| if *m { v } else { None }).collect()
}

/// `v` where `valid`, else empty (a not-null child of a null struct).
fn filled<'a>(valid: &[bool], v: &'a str) -> Vec<Option<&'a str>> {
    valid.iter().map(|m| Some(if *m { v } else { "" })).collect()
}

/// `pairs` as a map where `valid`, else an empty map.
fn pairs_at<'a>(valid: &[bool], pairs: &'a [(String, String)]) -> Vec<Vec<(&'a str, Option<&'a str>)>> {
    valid
        .iter()
        .map(|m| if *m { pairs.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect() } else { vec![] })
        .collect()
}

fn file_of<'a>(r: &Row<'a>) -> Option<&'a LiveFile> {
    if let Row::Add(f) = r { Some(*f) } else { None }
}

fn object_pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned()))).collect())
        .unwrap_or_default()
}

// ---- reading ----

fn str_at(a: &dyn Array, i: usize) -> Option<String> {
    if a.is_null(i) {
        return None;
    }
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(i).to_owned()),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i).to_owned()),
        DataType::Utf8View => Some(a.as_string_view().value(i).to_owned()),
        _ => None,
    }
}

fn int_at(a: &dyn Array, i: usize) -> Option<i64> {
    if a.is_null(i) {
        return None;
    }
    match a.data_type() {
        DataType::Int64 => Some(a.as_primitive::<Int64Type>().value(i)),
        DataType::Int32 => Some(i64::from(a.as_primitive::<Int32Type>().value(i))),
        _ => None,
    }
}

fn bool_at(a: &dyn Array, i: usize) -> Option<bool> {
    (!a.is_null(i)).then(|| a.as_boolean_opt().map(|b| b.value(i))).flatten()
}

/// Row `i` of a map column, as pairs.
fn map_at(a: &dyn Array, i: usize) -> Vec<(String, Option<String>)> {
    let Some(m) = a.as_map_opt().filter(|_| !a.is_null(i)) else { return Vec::new() };
    let entries = m.value(i);
    let (keys, values) = (entries.column(0), entries.column(1));
    (0..entries.len()).filter_map(|j| Some((str_at(keys.as_ref(), j)?, str_at(values.as_ref(), j)))).collect()
}

/// Row `i` of a list-of-strings column.
fn list_at(a: &dyn Array, i: usize) -> Option<Vec<String>> {
    if a.is_null(i) {
        return None;
    }
    let values = match a.data_type() {
        DataType::List(_) => a.as_list::<i32>().value(i),
        DataType::LargeList(_) => a.as_list::<i64>().value(i),
        _ => return None,
    };
    Some((0..values.len()).filter_map(|j| str_at(values.as_ref(), j)).collect())
}

/// A struct column's child accessors.
struct Struct<'a>(&'a StructArray);

impl Struct<'_> {
    fn str(&self, name: &str, i: usize) -> Option<String> {
        self.0.column_by_name(name).and_then(|c| str_at(c.as_ref(), i))
    }
    fn int(&self, name: &str, i: usize) -> Option<i64> {
        self.0.column_by_name(name).and_then(|c| int_at(c.as_ref(), i))
    }
    fn map(&self, name: &str, i: usize) -> Vec<(String, Option<String>)> {
        self.0.column_by_name(name).map(|c| map_at(c.as_ref(), i)).unwrap_or_default()
    }
    fn list(&self, name: &str, i: usize) -> Option<Vec<String>> {
        self.0.column_by_name(name).and_then(|c| list_at(c.as_ref(), i))
    }
    fn child(&self, name: &str) -> Option<Struct<'_>> {
        self.0.column_by_name(name).and_then(|c| c.as_struct_opt()).map(Struct)
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StructArray> {
    batch.column_by_name(name).and_then(|c| c.as_struct_opt())
}

fn pairs_object(pairs: Vec<(String, Option<String>)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k, v.map_or(Value::Null, Value::String))).collect::<Map<_, _>>())
}

fn apply_batch(snap: &mut Snapshot, batch: &RecordBatch) -> Result<(), String> {
    for i in 0..batch.num_rows() {
        if let Some(p) = column(batch, "protocol").filter(|c| c.is_valid(i)).map(Struct) {
            let mut protocol = json!({
                "minReaderVersion": p.int("minReaderVersion", i).ok_or("a protocol row has no minReaderVersion")?,
                "minWriterVersion": p.int("minWriterVersion", i).ok_or("a protocol row has no minWriterVersion")?,
            });
            for features in ["readerFeatures", "writerFeatures"] {
                if let Some(list) = p.list(features, i) {
                    protocol[features] = json!(list);
                }
            }
            snap.protocol = Some(protocol);
        }
        if let Some(m) = column(batch, "metaData").filter(|c| c.is_valid(i)).map(Struct) {
            let format = m.child("format");
            snap.metadata = Some(json!({
                "id": m.str("id", i).ok_or("a metaData row has no id")?,
                "name": m.str("name", i),
                "description": m.str("description", i),
                "format": {
                    "provider": format.as_ref().and_then(|f| f.str("provider", i)).unwrap_or_else(|| "parquet".into()),
                    "options": pairs_object(format.as_ref().map(|f| f.map("options", i)).unwrap_or_default()),
                },
                "schemaString": m.str("schemaString", i).ok_or("a metaData row has no schemaString")?,
                "partitionColumns": m.list("partitionColumns", i).unwrap_or_default(),
                "configuration": pairs_object(m.map("configuration", i)),
                "createdTime": m.int("createdTime", i),
            }));
        }
        if let Some(t) = column(batch, "txn").filter(|c| c.is_valid(i)).map(Struct) {
            let app = t.str("appId", i).ok_or("a txn row has no appId")?;
            let version = t.int("version", i).and_then(|v| u64::try_from(v).ok()).ok_or("a txn row has no version")?;
            snap.txns.insert(app, version);
        }
        if let Some(a) = column(batch, "add").filter(|c| c.is_valid(i)).map(Struct) {
            let file = LiveFile {
                path: a.str("path", i).ok_or("an add row has no path")?,
                partition_values: a.map("partitionValues", i).into_iter().collect::<BTreeMap<_, _>>(),
                size: a.int("size", i).unwrap_or(0),
                modification_time: a.int("modificationTime", i).unwrap_or(0),
                data_change: a.0.column_by_name("dataChange").and_then(|c| bool_at(c.as_ref(), i)).unwrap_or(true),
                stats: a.str("stats", i),
            };
            snap.files.insert(file.path.clone(), file);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::config::{BatchConfig, Format};
    use crate::batch::delta::{AddFile, TableSchema, entry, metadata_action, protocol_action, txn_action};

    #[test]
    fn a_checkpoint_reads_back_as_the_snapshot_it_was_written_from() {
        let config = BatchConfig {
            format: Format::Parquet,
            partition_template: "dt={yyyy}/kind={subject}".into(),
            ..BatchConfig::default()
        };
        let schema = TableSchema::of(&config);
        let add =
            |path: &str, first| AddFile { path: path.into(), size: 10, rows: 3, first, last: first + 2 }.action(7);
        let mut snap = Snapshot::default();
        snap.apply(0, &entry(&[protocol_action(), metadata_action(&schema, None, 1)])).unwrap();
        snap.apply(1, &entry(&[add("dt=2026/kind=a/x-1-3.parquet", 1), txn_action("app/a", 0, 1)])).unwrap();
        snap.apply(2, &entry(&[add("dt=2026/kind=b/x-4-6.parquet", 4), txn_action("app/b", 3, 1)])).unwrap();
        let removed = json!({"remove": {"path": "dt=2026/kind=a/x-1-3.parquet", "dataChange": false}});
        snap.apply(3, &entry(&[removed, add("dt=2026/kind=a/c.parquet", 1)])).unwrap();
        let (bytes, pointer) = write(&snap).unwrap();
        assert_eq!(Pointer::parse(&pointer).unwrap(), Pointer { version: 3, parts: None });
        let back = read(3, vec![bytes]).unwrap();
        assert_eq!(back.version, Some(3));
        assert_eq!(back.txns, snap.txns);
        assert_eq!(back.files, snap.files);
        assert_eq!(back.files.len(), 2);
        assert_eq!(back.protocol_versions(), (1, 2));
        assert_eq!(TableSchema::parse(back.metadata.as_ref().unwrap()).unwrap(), schema);
        assert_eq!(back.metadata.as_ref().unwrap()["id"], snap.metadata.as_ref().unwrap()["id"]);
        assert!(read(3, vec![b"not parquet".to_vec()]).is_err());
    }

    #[test]
    fn checkpoint_names_and_pointers() {
        assert_eq!(checkpoint_name(10), "_delta_log/00000000000000000010.checkpoint.parquet");
        assert_eq!(Pointer::of_name("00000000000000000010.checkpoint.parquet").map(|p| p.version), Some(10));
        assert_eq!(Pointer::of_name("00000000000000000010.json"), None);
        assert_eq!(Pointer::of_name("10.checkpoint.parquet"), None);
        let multi = Pointer::parse(br#"{"version": 4, "size": 9, "parts": 2}"#).unwrap();
        assert_eq!(
            multi.files(),
            [
                "_delta_log/00000000000000000004.checkpoint.0000000001.0000000002.parquet",
                "_delta_log/00000000000000000004.checkpoint.0000000002.0000000002.parquet"
            ]
        );
        assert!(Pointer::parse(br#"{"version": 4, "v2Checkpoint": {"path": "x"}}"#).is_err());
        assert!(Pointer::parse(b"{").is_err());
    }
}
