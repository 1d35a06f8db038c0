//! [`FileHarness`]: certifies the file sink against `docs/sink-contract.md` (feature
//! `certify`). Every fixture is a fresh temporary directory, read back by parsing the files
//! directly, without the sink.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, PayloadMode, Sink};

use crate::{FileSink, FileSinkConfig};

/// Harness over fresh temporary directories.
#[derive(Debug, Default)]
pub struct FileHarness;

/// Reads every record file below a directory it owns (removed on drop).
struct DirReadBack {
    dir: tempfile::TempDir,
}

#[async_trait]
impl Records for DirReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let root = self.dir.path().join("out");
        tokio::task::spawn_blocking(move || read_records(&root)).await.map_err(|e| e.to_string())?
    }

    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        let root = self.dir.path().join("out");
        let read = move || walk(&root, |file, _| file);
        tokio::task::spawn_blocking(read).await.map_err(|e| e.to_string())?.map(Some)
    }
}

#[derive(Deserialize)]
struct StoredRecord<'a> {
    stream: String,
    /// Only in a later epoch of the stream.
    #[serde(default)]
    stream_epoch: Option<String>,
    stream_sequence: u64,
    #[serde(borrow)]
    payload: &'a RawValue,
    payload_info: PayloadInfo,
}

#[derive(Deserialize)]
struct PayloadInfo {
    wrapped: bool,
}

/// Every record below `root` (dot files skipped), as `(stream-sequence key, payload bytes)`:
/// the key of the record's keyed stream (`{stream}.{epoch}` when it has a `stream_epoch`).
/// A JSON payload comes back exactly as stored; a wrapped one is unwrapped to its bytes.
pub fn read_records(root: &Path) -> Result<Vec<Record>, String> {
    walk(root, |_, payload| payload)
}

/// Every record below `root` as `(key, pick(the file's bytes, the payload bytes))`.
fn walk(root: &Path, pick: impl Fn(Bytes, Bytes) -> Bytes) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == root => return Ok(out),
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        for entry in entries {
            let entry = entry.map_err(|e| e.to_string())?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let record: StoredRecord<'_> =
                serde_json::from_slice(&text).map_err(|e| format!("{} is not a record: {e}", path.display()))?;
            let stream = match &record.stream_epoch {
                Some(epoch) => format!("{}.{epoch}", record.stream),
                None => record.stream,
            };
            let key = format!("stream-sequence:{stream}:{}", record.stream_sequence);
            let payload = if record.payload_info.wrapped {
                Bytes::from(sinks_contract::payload::decode_stored(record.payload.get()))
            } else {
                Bytes::copy_from_slice(record.payload.get().as_bytes())
            };
            let file = Bytes::copy_from_slice(&text);
            out.push((key, pick(file, payload)));
        }
    }
    Ok(out)
}

async fn fixture(mode: PayloadMode) -> Result<Fixture, String> {
    fixture_with(|config| config.payload_mode = mode).await
}

async fn fixture_with(adjust: impl FnOnce(&mut FileSinkConfig)) -> Result<Fixture, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = FileSinkConfig::new(dir.path().join("out"));
    adjust(&mut config);
    let sink = FileSink::new(config).map_err(|e| e.to_string())?;
    sink.open().await.map_err(|e| e.display_chain())?;
    Ok(Fixture { sink: Arc::new(sink), records: Box::new(DirReadBack { dir }) })
}

#[async_trait]
impl Harness for FileHarness {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        fixture(PayloadMode::JsonOrEnvelope).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = fixture(PayloadMode::JsonOnly).await.ok()?;
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", "this is not json")))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(fixture_with(|config| config.filename_strategy = crate::FilenameStrategy::OriginSequence).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        // The root was opened, then its volume "went away": the directory is gone.
        let dir = tempfile::tempdir().ok()?;
        let sink = FileSink::new(FileSinkConfig::new(dir.path().join("out"))).ok()?;
        sink.open().await.ok()?;
        drop(dir);
        Some(Arc::new(sink))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sink_section = serde_json::json!({
            "type": "file",
            "directory": dir.path().join("out"),
            "fsync": true,
        });
        Ok(CrashTarget { sink_section, records: Box::new(DirReadBack { dir }), env: Vec::new() })
    }
}

/// Harness for the batch mode (`mode: batch`, NDJSON): the sink behind
/// `sinks_toolkit::holding::Durable` (each write flushes its objects and returns final
/// outcomes), read back by parsing every object file below the directory.
#[derive(Debug, Default)]
pub struct FileBatchHarness;

/// Reads what batch mode wrote below the `out` directory of a directory it owns, with `read`
/// ([`read_batch_records`] for the objects, [`read_table_records`] for a Delta table).
struct BatchDirReadBack {
    dir: tempfile::TempDir,
    read: fn(&Path) -> Result<Vec<Record>, String>,
}

impl BatchDirReadBack {
    /// Every batch object below `dir`.
    fn objects(dir: tempfile::TempDir) -> Self {
        Self { dir, read: read_batch_records }
    }

    /// The Delta table at `dir`.
    fn table(dir: tempfile::TempDir) -> Self {
        Self { dir, read: read_table_records }
    }
}

#[async_trait]
impl Records for BatchDirReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let (root, read) = (self.dir.path().join("out"), self.read);
        tokio::task::spawn_blocking(move || read(&root)).await.map_err(|e| e.to_string())?
    }
}

/// Every row of every batch object below `root` (dot files and the `_nats-sinks` manifest
/// directories skipped), as `(stream-sequence key, payload bytes)`; a row's `stream` is
/// already its keyed stream (`{stream}.{epoch}` in a later epoch).
pub fn read_batch_records(root: &Path) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (path, format, compression) in batch_objects(root)? {
        let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        sinks_toolkit::batch::encode::read_rows(file, format, compression, true, |row| {
            let key = format!("stream-sequence:{}:{}", row.stream, row.stream_sequence);
            out.push((key, Bytes::from(sinks_contract::payload::decode_stored(&row.payload))));
        })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(out)
}

/// Every batch object file below `root`, with the format and compression its extension says.
pub fn batch_objects(
    root: &Path,
) -> Result<Vec<(PathBuf, sinks_toolkit::batch::Format, sinks_toolkit::batch::BatchCompression)>, String> {
    use sinks_toolkit::batch::{BatchCompression, Format};
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == root => return Ok(out),
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        for entry in entries {
            let entry = entry.map_err(|e| e.to_string())?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with('.') || name == sinks_toolkit::batch::naming::MANIFEST_DIR {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let kind = if name.ends_with(".ndjson") {
                (Format::Ndjson, BatchCompression::None)
            } else if name.ends_with(".ndjson.gz") {
                (Format::Ndjson, BatchCompression::Gzip)
            } else if name.ends_with(".ndjson.zst") {
                (Format::Ndjson, BatchCompression::Zstd)
            } else if name.ends_with(".parquet") {
                (Format::Parquet, BatchCompression::Snappy)
            } else {
                return Err(format!("{} is not a batch object", path.display()));
            };
            out.push((path, kind.0, kind.1));
        }
    }
    Ok(out)
}

async fn batch_fixture(mode: PayloadMode) -> Result<Fixture, String> {
    batch_mode_fixture(mode, None, |dir| Box::new(BatchDirReadBack::objects(dir))).await
}

/// A batch-mode file sink in a directory of its own (`batch`: its `sink.batch` section, the
/// default when `None`), opened and held durable, read back by what `records` makes of the
/// directory.
async fn batch_mode_fixture(
    mode: PayloadMode,
    batch: Option<sinks_toolkit::batch::BatchConfig>,
    records: impl FnOnce(tempfile::TempDir) -> Box<dyn Records>,
) -> Result<Fixture, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = FileSinkConfig::new(dir.path().join("out"));
    config.payload_mode = mode;
    config.mode = crate::WriteMode::Batch;
    config.batch = batch;
    let sink = FileSink::new(config).map_err(|e| e.to_string())?;
    sink.open().await.map_err(|e| e.display_chain())?;
    let sink = sinks_toolkit::holding::Durable::wrap(Arc::new(sink));
    Ok(Fixture { sink, records: records(dir) })
}

#[async_trait]
impl Harness for FileBatchHarness {
    fn name(&self) -> &'static str {
        "file-batch"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        batch_fixture(PayloadMode::JsonOrEnvelope).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = batch_fixture(PayloadMode::JsonOnly).await.ok()?;
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", "this is not json")))
    }

    fn no_key_per_event(&self) -> Option<&'static str> {
        Some(
            "batch files are named by the consumed stream's sequences: sink.filename_strategy: \
                  origin_sequence is refused with sink.mode: batch",
        )
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let dir = tempfile::tempdir().ok()?;
        let mut config = FileSinkConfig::new(dir.path().join("out"));
        config.mode = crate::WriteMode::Batch;
        let sink = FileSink::new(config).ok()?;
        sink.open().await.ok()?;
        drop(dir);
        Some(sinks_toolkit::holding::Durable::wrap(Arc::new(sink)))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sink_section = serde_json::json!({
            "type": "file",
            "directory": dir.path().join("out"),
            "mode": "batch",
            "batch": {"max_messages": 500, "max_age_ms": 1000},
        });
        Ok(CrashTarget { sink_section, records: Box::new(BatchDirReadBack::objects(dir)), env: Vec::new() })
    }
}

/// The file sink's batch mode in table mode (`sink.batch.table`: Parquet objects added to a
/// Delta table at the directory), certified like [`FileBatchHarness`] but read back through
/// the table: the rows of the files the Delta log holds live ([`read_table_records`]).
/// Checkpoints every 5 commits, so the crash runs write and read them too.
#[derive(Debug, Default)]
pub struct FileTableHarness;

/// The batch section of [`FileTableHarness`].
fn table_batch() -> sinks_toolkit::batch::BatchConfig {
    use sinks_toolkit::batch::{BatchConfig, Format, TableConfig};
    BatchConfig {
        format: Format::Parquet,
        partition_template: "stream_name={stream}".into(),
        table: Some(TableConfig { checkpoint_interval: 5, ..TableConfig::default() }),
        ..BatchConfig::default()
    }
}

/// Every row of the Delta table at `root`, read without the sink's own log reader: the log's
/// entries are replayed in version order (`add`, `remove`) and the rows of the live files
/// read (`sinks_certify::delta_log`, shared with the S3 table harness). An object added twice
/// with `dataChange` (a slot committed twice) is an error, as is a log that does not start at
/// version 0 or has a gap (the sink never removes entries). No table (nothing committed yet)
/// reads as empty.
pub fn read_table_records(root: &Path) -> Result<Vec<Record>, String> {
    use sinks_certify::delta_log;
    use sinks_toolkit::batch::{BatchCompression, Format};
    let log = root.join(delta_log::LOG_DIR);
    let names: Vec<String> = match std::fs::read_dir(&log) {
        Ok(dir) => dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", log.display())),
    };
    let mut entries = Vec::new();
    for name in delta_log::commit_entries(names)? {
        let text = std::fs::read_to_string(log.join(&name)).map_err(|e| format!("{name}: {e}"))?;
        entries.push((name, text));
    }
    let mut out = Vec::new();
    for path in delta_log::live_files(&entries)? {
        let file = std::fs::File::open(root.join(&path)).map_err(|e| format!("table file {path}: {e}"))?;
        sinks_toolkit::batch::encode::read_rows(file, Format::Parquet, BatchCompression::Snappy, true, |row| {
            let key = format!("stream-sequence:{}:{}", row.stream, row.stream_sequence);
            out.push((key, Bytes::from(sinks_contract::payload::decode_stored(&row.payload))));
        })
        .map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(out)
}

async fn table_fixture(mode: PayloadMode) -> Result<Fixture, String> {
    batch_mode_fixture(mode, Some(table_batch()), |dir| Box::new(BatchDirReadBack::table(dir))).await
}

#[async_trait]
impl Harness for FileTableHarness {
    fn name(&self) -> &'static str {
        "file-table"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        table_fixture(PayloadMode::JsonOrEnvelope).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = table_fixture(PayloadMode::JsonOnly).await.ok()?;
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", "this is not json")))
    }

    fn no_key_per_event(&self) -> Option<&'static str> {
        FileBatchHarness.no_key_per_event()
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let dir = tempfile::tempdir().ok()?;
        let mut config = FileSinkConfig::new(dir.path().join("out"));
        config.mode = crate::WriteMode::Batch;
        config.batch = Some(table_batch());
        let sink = FileSink::new(config).ok()?;
        sink.open().await.ok()?;
        drop(dir);
        Some(sinks_toolkit::holding::Durable::wrap(Arc::new(sink)))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut batch = serde_json::to_value(table_batch()).map_err(|e| e.to_string())?;
        batch["max_messages"] = 500.into();
        batch["max_age_ms"] = 1000.into();
        let sink_section = serde_json::json!({
            "type": "file",
            "directory": dir.path().join("out"),
            "mode": "batch",
            "batch": batch,
        });
        Ok(CrashTarget { sink_section, records: Box::new(BatchDirReadBack::table(dir)), env: Vec::new() })
    }
}
