//! [`FileSink`]: writes each envelope to its own file, atomically, and reports per-message
//! outcomes only after the files and their directories are durable.
//!
//! A batch goes through four phases, each spread over blocking tasks:
//! 1. **stage**: build each record, create a temp file next to its final path (`O_EXCL`) and
//!    write it; a redelivery whose file already exists is settled here without writing
//!    (a first delivery is not looked up: `place` finds an existing name itself);
//! 2. **fsync** (when `fsync`): every staged temp file is fsynced, up to
//!    [`MAX_PARALLEL_FSYNCS`] at once, so the filesystem commits them together and a batch
//!    costs about one fsync latency instead of one per message;
//! 3. **place**: a rename that never replaces (create-if-absent, `sinks_toolkit::files`)
//!    for `skip_existing` and `fail`, a plain rename for `overwrite` (but under
//!    `stream_sequence` names, where a different payload is a reused stream sequence and
//!    is refused as `sequence_reused`, `overwrite` never replaces either). Files become visible
//!    here, so this phase keeps the one ordering rule (`sinks_contract::ordering`): messages
//!    sharing an ordering key are placed one after another in stream order, and one behind a
//!    temporary failure of its key (in any phase) is held back, its temp file discarded;
//! 4. **directory fsync** (when `fsync`): every directory holding one of the batch's files is
//!    fsynced once (plus the root when partitioning, which makes new partition directories
//!    durable). A message whose directory fsync failed is reported as failed, never committed.
//!
//! With `mode: batch` none of this runs: the contract's `BatchWriter` appends each message
//! to its partition's open file and reports it pending, and commits files through
//! [`crate::batch::FileLog`] when they are full or old (see `sinks_toolkit::batch`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::io::{self, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use sinks_contract::existing::{self, OnExisting, Stored};
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, Holding, MessageOutcome, OrderKey,
    Presence, ReadBack, Sink, SinkError,
};
use sinks_toolkit::batch::{BatchWriter, Settings};
use sinks_toolkit::blocking::{TaskFailed, blocking, run_parallel};
use sinks_toolkit::files::{self, FileMode};
use sinks_toolkit::lanes::{Lane, place_lanes};
use sinks_toolkit::sink_root::{self, expand_home, sync_dir};
use time::OffsetDateTime;

use crate::batch::FileLog;
use crate::config::FileSinkConfig;
use crate::error::classify;
use crate::path::{self, RelativePath};
use crate::record;

/// Most blocking tasks one batch uses at a time for staging and placing files.
pub(crate) const MAX_PARALLEL_TASKS: usize = 8;

/// Most file or directory fsyncs one batch has in flight at a time.
pub(crate) const MAX_PARALLEL_FSYNCS: usize = 64;

/// Durable local-file destination: one JSON document per message below a root directory.
#[derive(Debug, Clone)]
pub struct FileSink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: FileSinkConfig,
    extension: String,
    /// Canonical root directory, resolved by `open` (or lazily by the first write).
    root: Arc<OnceLock<PathBuf>>,
    /// The batch mode's writer (`mode: batch`).
    batch: Option<BatchWriter<FileLog>>,
}

/// What became of one message, and which directories must be fsynced before it counts.
#[derive(Debug)]
struct Placed {
    outcome: MessageOutcome,
    sync_dirs: Vec<PathBuf>,
}

impl Placed {
    fn failed(error: SinkError) -> Self {
        Self { outcome: MessageOutcome::Failed(error), sync_dirs: Vec::new() }
    }
}

/// A record written to its temp file, waiting for fsync and placement.
#[derive(Debug)]
struct Staged {
    /// The message (what an existing file is compared with, and logged as).
    envelope: Box<Envelope>,
    temp: tempfile::NamedTempFile,
    final_path: PathBuf,
    payload_sha256: String,
    sync_dirs: Vec<PathBuf>,
}

/// Where one message stands between phases.
#[derive(Debug)]
enum Step {
    /// Its outcome is known (duplicate, failure, ...).
    Done(Placed),
    /// Written to a temp file, not yet placed.
    Staged(Staged),
}

impl FileSink {
    /// A file sink for a validated `config`. Touches no files; [`Sink::open`] prepares the root.
    pub fn new(config: FileSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let extension = config.effective_extension().to_owned();
        let root = Arc::new(OnceLock::new());
        let batch = config.batch_config().map(|batch| {
            let settings = Settings {
                batch,
                payload_mode: config.payload_mode,
                policy: config.duplicate_policy.on_existing(),
                content_check: true,
                max_row_bytes: u64::MAX,
                sink: "file",
                record: "batch file",
            };
            BatchWriter::new(FileLog::new(Arc::clone(&root), config.fsync, config.file_mode, config.dir_mode), settings)
        });
        Ok(Self { inner: Arc::new(Inner { config, extension, root, batch }) })
    }

    /// The configuration in effect.
    pub fn config(&self) -> &FileSinkConfig {
        &self.inner.config
    }

    /// The canonical root directory, once [`Sink::open`] (or a first write) resolved it.
    pub fn root(&self) -> Option<&Path> {
        self.inner.root.get().map(PathBuf::as_path)
    }

    async fn resolved_root(&self) -> Result<PathBuf, SinkError> {
        if let Some(root) = self.inner.root.get() {
            return Ok(root.clone());
        }
        let inner = Arc::clone(&self.inner);
        let root = blocking(move || inner.prepare_root()).await?;
        Ok(self.inner.root.get_or_init(|| root).clone())
    }
}

#[async_trait]
impl Sink for FileSink {
    fn name(&self) -> &str {
        "file"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new().atomic_batch(false).reports_duplicates(true).detects_conflicts(true)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let root = self.resolved_root().await?;
        if let Some(writer) = &self.inner.batch {
            writer.open().await?;
        }
        tracing::info!(directory = %root.display(), "file sink root ready");
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let root = self.resolved_root().await?;
        if let Some(writer) = &self.inner.batch {
            let outcomes = writer.write(batch).await;
            sinks_contract::sink::log_outcomes("file", &outcomes);
            return Ok(outcomes);
        }
        let fsync = self.inner.config.fsync;
        let stage = {
            let inner = Arc::clone(&self.inner);
            move |envelope: Envelope| inner.stage(&root, envelope)
        };
        let steps = run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, stage).await;
        let steps = if fsync { run_parallel(steps, MAX_PARALLEL_FSYNCS, fsync_staged).await } else { steps };
        let keys: Vec<Option<OrderKey>> = batch.iter().map(Envelope::order_key).collect();
        let mut placed = place_in_order(Arc::clone(&self.inner), steps, &keys).await;
        if fsync {
            sync_directories(&mut placed).await;
        }
        let outcomes: Vec<MessageOutcome> = placed.into_iter().map(|p| p.outcome).collect();
        sinks_contract::sink::log_outcomes("file", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.probe()).await
    }

    async fn close(&self) -> Result<(), SinkError> {
        if let Some(writer) = &self.inner.batch {
            writer.discard_open();
        }
        Ok(())
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }

    fn holding(&self) -> Option<&dyn Holding> {
        self.inner.batch.as_ref().map(|writer| writer as &dyn Holding)
    }
}

impl Destinations for FileSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        if let Some(writer) = &self.inner.batch {
            return writer.destination(envelope);
        }
        let root = match self.inner.root.get() {
            Some(root) => root.clone(),
            None => expand_home(&self.inner.config.directory),
        };
        let rel = self.inner.relative(envelope).ok()?;
        Some(DestinationRef::File { path: root.join(rel.to_path_buf()).display().to_string() })
    }
}

#[async_trait]
impl ReadBack for FileSink {
    fn checks(&self) -> String {
        if self.inner.batch.is_some() {
            return String::from(
                "the partition's manifests name the file holding the stream sequence, and that file's row carries the payload's SHA-256",
            );
        }
        String::from(
            "file exists, and both its recorded fingerprint (payload_info.sha256) and the SHA-256 of the payload it holds match",
        )
    }

    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        // Never create anything: a root that does not exist holds nothing.
        let root = match self.inner.root.get() {
            Some(root) => root.clone(),
            None => match fs::canonicalize(expand_home(&self.inner.config.directory)) {
                Ok(root) => root,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![Presence::Missing; batch.len()]),
                Err(e) => return Err(classify(e, "cannot resolve sink.directory")),
            },
        };
        if let Some(writer) = &self.inner.batch {
            let _ = self.inner.root.set(root);
            return writer.reconcile(batch).await;
        }
        let inner = Arc::clone(&self.inner);
        let check = move |envelope: Envelope| inner.presence(&root, &envelope);
        let found = run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, check).await;
        found.into_iter().collect()
    }
}

impl Inner {
    /// Where `envelope` goes, relative to the root.
    fn relative(&self, envelope: &Envelope) -> Result<RelativePath, SinkError> {
        path::relative_path(envelope, self.config.filename_strategy, &self.extension, self.config.partition_by_subject)
            .map_err(|e| SinkError::permanent(format!("cannot derive a file name: {e}")))
    }

    /// Whether `envelope`'s file exists below `root` with the same payload fingerprint
    /// (blocking; reads only).
    fn presence(&self, root: &Path, envelope: &Envelope) -> Result<Presence, SinkError> {
        let rel = self.relative(envelope)?;
        let final_path = root.join(rel.to_path_buf());
        let file =
            match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&final_path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Presence::Missing),
                Err(e) => return Err(classify(e, "cannot open a stored record")),
            };
        let normalized = sinks_contract::payload::normalize(envelope.payload(), self.config.payload_mode)
            .map_err(|e| SinkError::permanent(format!("cannot fingerprint the payload: {e}")))?;
        // What a correct record holds: the original bytes' fingerprint, and the payload as
        // the sink stores it (JSON without the whitespace around it, or an envelope).
        let stored_form = crate::path::sha256_hex(&sinks_contract::payload::decode_stored(normalized.value.get()));
        if record::stored_matches(BufReader::new(file), self.config.compression, &normalized.sha256, &stored_form) {
            Ok(Presence::Equal)
        } else {
            Ok(Presence::Different)
        }
    }

    /// Resolves, creates if allowed, and probes the root directory.
    fn prepare_root(&self) -> Result<PathBuf, SinkError> {
        let c = &self.config;
        sink_root::prepare(&c.directory, c.create_directory, c.dir_mode, c.fsync)
    }

    /// Checks that the root takes a record: a probe file written (and fsynced, with
    /// `fsync`) and removed.
    fn probe(&self) -> Result<(), SinkError> {
        sink_root::probe(
            self.root.get().map(PathBuf::as_path),
            &self.config.directory,
            self.config.fsync,
            "file sink root",
        )
    }

    /// Stages one envelope: derives its path and record, settles a redelivery whose file
    /// exists, else writes the record to a temp file next to the final path (blocking).
    fn stage(&self, root: &Path, envelope: Envelope) -> Step {
        let rel = match path::relative_path(
            &envelope,
            self.config.filename_strategy,
            &self.extension,
            self.config.partition_by_subject,
        ) {
            Ok(rel) => rel,
            Err(e) => {
                return Step::Done(Placed::failed(SinkError::permanent(format!("cannot derive a file name: {e}"))));
            }
        };
        if !path::is_confined(&rel.to_path_buf()) {
            return Step::Done(Placed::failed(SinkError::permanent("refusing a path outside sink.directory")));
        }
        let record = match record::encode(&envelope, &self.config, OffsetDateTime::now_utc()) {
            Ok(record) => record,
            Err(e) => {
                return Step::Done(Placed::failed(
                    SinkError::permanent(format!("cannot build the file record: {e}"))
                        .with_error_type("SerializationError"),
                ));
            }
        };
        self.stage_file(root, &rel, &record, envelope).unwrap_or_else(|e| Step::Done(Placed::failed(e)))
    }

    /// True when placing must never replace an existing file: every policy but
    /// `overwrite`, and `overwrite` too under stream-sequence names (a replacement could
    /// destroy an earlier event's record before it was compared).
    fn conditional(&self) -> bool {
        existing::conditional(self.config.duplicate_policy.on_existing(), self.config.filename_strategy.key_basis())
    }

    fn stage_file(
        &self,
        root: &Path,
        rel: &RelativePath,
        record: &record::EncodedRecord,
        envelope: Envelope,
    ) -> Result<Step, SinkError> {
        let dir = match &rel.partition {
            Some(partition) => ensure_partition(root, partition, self.config.dir_mode)?,
            None => root.to_path_buf(),
        };
        let final_path = dir.join(&rel.file_name);
        let mut sync_dirs = vec![dir.clone()];
        if rel.partition.is_some() {
            sync_dirs.push(root.to_path_buf());
        }

        // A redelivery usually finds its file: settle it without writing (and fsyncing) a
        // temp file first. A first delivery is not looked up: the lookup costs every new
        // file a directory search under the directory's lock, and `place` decides anyway
        // (a rename that never replaces), for a first delivery whose name exists too.
        let redelivered = envelope.jetstream().delivered > 1;
        if redelivered && self.conditional() && fs::symlink_metadata(&final_path).is_ok() {
            let outcome = self.existing_file(&envelope, &final_path, &record.payload_sha256);
            let sync_dirs = if matches!(outcome, MessageOutcome::Failed(_)) { Vec::new() } else { sync_dirs };
            return Ok(Step::Done(Placed { outcome, sync_dirs }));
        }

        let mut temp = tempfile::Builder::new()
            .prefix(&path::temp_prefix(&rel.file_name))
            .suffix(".tmp")
            .rand_bytes(8)
            .tempfile_in(&dir)
            .map_err(|e| classify(e, "cannot create temp file"))?;
        self.config.file_mode.apply(temp.as_file()).map_err(|e| classify(e, "cannot set the temp file's mode"))?;
        temp.write_all(&record.bytes).map_err(|e| classify(e, "cannot write temp file"))?;
        Ok(Step::Staged(Staged {
            envelope: Box::new(envelope),
            temp,
            final_path,
            payload_sha256: record.payload_sha256.clone(),
            sync_dirs,
        }))
    }

    /// Places a staged (and, when configured, fsynced) temp file at its final path.
    fn place(&self, staged: Staged) -> Placed {
        let Staged { envelope, temp, final_path, payload_sha256, mut sync_dirs } = staged;
        let outcome = if self.conditional() {
            match files::place_new(temp, &final_path) {
                Ok(()) => MessageOutcome::Committed,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    self.existing_file(&envelope, &final_path, &payload_sha256)
                }
                Err(e) => MessageOutcome::Failed(classify(e, "cannot move temp file into place")),
            }
        } else {
            match temp.persist(&final_path) {
                Ok(_) => MessageOutcome::Committed,
                Err(e) => MessageOutcome::Failed(classify(e.error, "cannot rename temp file into place")),
            }
        };
        if matches!(outcome, MessageOutcome::Failed(_)) {
            sync_dirs.clear();
        }
        Placed { outcome, sync_dirs }
    }

    /// The outcome when `envelope`'s final file already exists (`sinks_contract::existing`,
    /// logged): under `fail` a permanent failure without reading it, else what
    /// [`Self::stored`] finds, judged by the policy and the names' key basis (under
    /// stream-sequence names a different payload is a reused sequence, whatever the policy).
    fn existing_file(&self, envelope: &Envelope, final_path: &Path, payload_sha256: &str) -> MessageOutcome {
        let policy = self.config.duplicate_policy.on_existing();
        let stored = match policy {
            OnExisting::Refuse => Ok(Stored::Unchecked),
            _ => self.stored(final_path, payload_sha256),
        };
        let basis = self.config.filename_strategy.key_basis();
        stored.map_or_else(|outcome| outcome, |stored| existing::decide(policy, envelope, basis, stored, "file"))
    }

    /// What the existing final file holds, compared by stored payload hash: a file that
    /// cannot be read or is not a readable record cannot be compared. `Err` is an outcome of
    /// its own: a symlink or a non-regular file (permanent), a file gone meanwhile
    /// (temporary).
    fn stored(&self, final_path: &Path, payload_sha256: &str) -> Result<Stored, MessageOutcome> {
        let opened = OpenOptions::new()
            .read(true)
            // Never follow a symlink planted at the final name; never block on a FIFO.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(final_path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(MessageOutcome::Failed(SinkError::permanent("refusing symlinked path")));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(MessageOutcome::Failed(
                    SinkError::temporary("existing file vanished before it could be checked").with_source(e),
                ));
            }
            Err(e) => {
                tracing::warn!(error = %e, file = %final_path.display(), "cannot read existing file; treating it as a duplicate");
                return Ok(Stored::Uncomparable);
            }
        };
        match file.metadata() {
            Ok(meta) if !meta.is_file() => {
                return Err(MessageOutcome::Failed(SinkError::permanent("destination path is not a regular file")));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, file = %final_path.display(), "cannot inspect existing file; treating it as a duplicate");
                return Ok(Stored::Uncomparable);
            }
        }
        let stored = record::stored_payload_sha256(BufReader::new(file), self.config.compression);
        if stored.is_none() {
            tracing::warn!(file = %final_path.display(), "existing file is not a readable record; treating it as a duplicate");
        }
        Ok(existing::Stored::compare(stored.as_deref(), payload_sha256))
    }
}

/// The partition directory `root/name`, created when missing. A symlink is refused, so no
/// write ever follows a link out of the root.
fn ensure_partition(root: &Path, name: &str, mode: FileMode) -> Result<PathBuf, SinkError> {
    let dir = root.join(name);
    for _ in 0..3 {
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(SinkError::permanent("refusing symlinked path")),
            Ok(meta) if meta.is_dir() => return Ok(dir),
            Ok(_) => return Err(SinkError::config("partition path exists and is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match mode.create_dir(&dir) {
                // New directory: the root is fsynced with the batch, making it durable.
                Ok(()) => return Ok(dir),
                // Another task created it meanwhile: inspect it again.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(classify(e, "cannot create partition directory")),
            },
            Err(e) => return Err(classify(e, "cannot inspect partition directory")),
        }
    }
    Err(SinkError::temporary("partition directory keeps changing"))
}

/// Fsyncs a staged temp file; a failure settles the message as failed.
fn fsync_staged(step: Step) -> Step {
    match step {
        Step::Staged(staged) => match staged.temp.as_file().sync_all() {
            Ok(()) => Step::Staged(staged),
            Err(e) => Step::Done(Placed::failed(classify(e, "cannot fsync temp file"))),
        },
        done => done,
    }
}

/// Fsyncs every directory the batch's durable outcomes depend on, once each and in parallel,
/// and turns the outcomes that depend on a failed directory into failures.
async fn sync_directories(placed: &mut [Placed]) {
    let dirs: BTreeSet<PathBuf> = placed.iter().flat_map(|p| p.sync_dirs.iter().cloned()).collect();
    if dirs.is_empty() {
        return;
    }
    let dirs: Vec<PathBuf> = dirs.into_iter().collect();
    let results = run_parallel(dirs.clone(), MAX_PARALLEL_FSYNCS, |dir: PathBuf| sync_dir(&dir)).await;
    let failures: BTreeMap<&Path, SinkError> =
        dirs.iter().zip(results).filter_map(|(dir, result)| result.err().map(|e| (dir.as_path(), e))).collect();
    for (dir, e) in &failures {
        tracing::warn!(directory = %dir.display(), error = %e.display_chain(), "directory fsync failed");
    }
    for p in placed.iter_mut() {
        if let Some(e) = p.sync_dirs.iter().find_map(|d| failures.get(d.as_path())) {
            p.outcome = MessageOutcome::Failed(e.duplicate());
        }
    }
}

/// Places every staged file, lane by lane (`sinks_toolkit::lanes`): a lane's files one after
/// another in input order, lanes in parallel. Within a lane, everything behind a temporary
/// failure is held back.
async fn place_in_order(inner: Arc<Inner>, steps: Vec<Step>, keys: &[Option<OrderKey>]) -> Vec<Placed> {
    let items: Vec<(Option<OrderKey>, Step)> =
        steps.into_iter().enumerate().map(|(index, step)| (keys.get(index).copied().flatten(), step)).collect();
    let place = move |lane: Lane<Step>| {
        lane.place_in_order(
            |step, blocked| match step {
                Step::Done(placed) => placed,
                // Dropping the staged temp file removes it.
                Step::Staged(_) if blocked => Placed { outcome: MessageOutcome::HeldBack, sync_dirs: Vec::new() },
                Step::Staged(staged) => inner.place(staged),
            },
            |placed| &placed.outcome,
        )
    };
    let placed = place_lanes(items, MAX_PARALLEL_TASKS, place).await;
    placed.into_iter().map(|p| p.unwrap_or_else(Placed::task_failed)).collect()
}

impl TaskFailed for Step {
    fn task_failed() -> Self {
        Self::Done(Placed::failed(SinkError::temporary("file write task failed")))
    }
}

impl TaskFailed for Placed {
    fn task_failed() -> Self {
        Self::failed(SinkError::temporary("file write task failed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The place phase keeps the ordering rule: behind a temporary failure of its key a
    /// staged file is held back (and its temp file discarded); other keys go on.
    #[tokio::test]
    async fn placing_holds_back_behind_a_temporary_failure_of_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let config: FileSinkConfig = serde_json::from_value(serde_json::json!({"directory": dir.path()})).unwrap();
        let sink = FileSink::new(config).unwrap();
        let root = sink.resolved_root().await.unwrap();
        let batch: Vec<Envelope> = [(1, "a"), (2, "a"), (3, "b"), (4, "a")]
            .into_iter()
            .map(|(seq, subject)| sinks_contract::testing::envelope("S", seq, subject, "{}"))
            .collect();
        let mut steps: Vec<Step> = batch.iter().map(|e| sink.inner.stage(&root, e.clone())).collect();
        assert!(steps.iter().all(|s| matches!(s, Step::Staged(_))));
        // Message 1 failed temporarily before placing (say its fsync did).
        steps[0] = Step::Done(Placed::failed(SinkError::temporary("injected")));
        let keys: Vec<Option<OrderKey>> = batch.iter().map(Envelope::order_key).collect();
        let placed = place_in_order(Arc::clone(&sink.inner), steps, &keys).await;
        let classes: Vec<_> = placed.iter().map(|p| p.outcome.class()).collect();
        use sinks_contract::OutcomeClass::*;
        assert_eq!(classes, [FailedTemporary, HeldBack, Committed, HeldBack]);
        let mut files: Vec<String> = walk(dir.path());
        files.sort();
        assert_eq!(files.len(), 1, "only b's file exists, no temp files are left: {files:?}");
        assert!(files[0].ends_with("S-00000000000000000003.json"), "{files:?}");
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path.display().to_string());
            }
        }
        out
    }
}
