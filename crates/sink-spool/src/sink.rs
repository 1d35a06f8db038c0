//! [`SpoolSink`]: takes custody of messages in local, encrypted, fsynced files, one per
//! message, and hands them to [`crate::replay`] later.
//!
//! A batch goes through the file sink's phases, adapted:
//! 1. **stage** (parallel): the record is built and encrypted, and written to a temp file
//!    next to its final name; a message whose file exists is settled here (a duplicate, or a
//!    conflict when the stored payload differs, which under stream-sequence keys is a reused
//!    sequence, refused as `sequence_reused`; a permanent failure under `fail`);
//! 2. **fsync** (parallel, when `fsync`) of every staged temp file;
//! 3. **place** (one lane per ordering key, lanes in parallel): capacity is reserved, then
//!    the temp file is moved to its final name (create-if-absent, `sinks_toolkit::files`); a full spool is a
//!    temporary failure and holds back the rest of its key;
//! 4. **directory fsync**, once per batch, before any outcome is reported.
//!
//! **Reconcile** reads a message's record file (named by its idempotency key), decrypts it and
//! compares the payload: equal, or different (other content, or a record that no longer
//! decrypts). A message without a record was replayed into its target and deleted, or was
//! never spooled: the spool alone cannot tell which, so it is unchecked — unless
//! `delete_after_replay` is off, when replay keeps records and no record means missing.
//!
//! Capacity is accounted in O(1) per write: counters of records and bytes recovered by one
//! directory scan at start-up and refreshed by another scan only when a write would go over
//! a limit (a replay in another process may have freed space meanwhile).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sinks_contract::existing::{self, OnExisting, Stored};
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, Envelope, MessageOutcome, OrderKey, Presence, ReadBack, Sink, SinkError,
};
use sinks_toolkit::blocking::{TaskFailed, blocking, run_parallel};
use sinks_toolkit::encryption::{Cipher, Key, Keyring};
use sinks_toolkit::files;
use sinks_toolkit::lanes::{Lane, place_lanes};
use time::OffsetDateTime;

use crate::config::{DrainOrdering, SpoolSinkConfig};
use crate::error::{classify, full, open_error};
use crate::record::{self, FILE_SUFFIX, RecordError};

/// Most blocking tasks a batch uses for staging and placing.
const MAX_PARALLEL_TASKS: usize = 8;
/// Most fsyncs in flight at once.
const MAX_PARALLEL_FSYNCS: usize = 64;
/// Prefix of the health probe's temp file.
const PROBE_PREFIX: &str = ".nats-sinks-spool-healthcheck.";

/// Local custody: one encrypted, fsynced file per message.
#[derive(Debug, Clone)]
pub struct SpoolSink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: SpoolSinkConfig,
    keys: OnceLock<Keys>,
    root: OnceLock<PathBuf>,
    usage: Mutex<Usage>,
}

/// The record cipher (none for a plaintext spool) and the keys that read records.
#[derive(Debug)]
struct Keys {
    cipher: Option<Cipher>,
    keyring: Keyring,
}

/// What the spool holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Record files.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// One spool file, as replay sees it before decrypting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file.
    pub path: PathBuf,
    /// Replay rank of its priority (lower first).
    pub priority_rank: i64,
    /// When it was spooled.
    pub spooled_at_epoch_ns: i64,
    /// Its size in bytes.
    pub size: u64,
}

/// A record written to its temp file, waiting for fsync and placement.
#[derive(Debug)]
struct Staged {
    temp: tempfile::NamedTempFile,
    final_path: PathBuf,
    size: u64,
}

#[derive(Debug)]
enum Step {
    Done(MessageOutcome),
    Staged(Staged),
}

impl TaskFailed for Step {
    fn task_failed() -> Self {
        Self::Done(MessageOutcome::temporary("spool write task failed"))
    }
}

impl SpoolSink {
    /// A spool sink for a validated `config`. Touches no files and reads no keys;
    /// [`Sink::open`] does both.
    pub fn new(config: SpoolSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                keys: OnceLock::new(),
                root: OnceLock::new(),
                usage: Mutex::new(Usage::default()),
            }),
        })
    }

    /// Uses `key` as the record key (the active `key_id`) instead of reading
    /// `sink.encryption.key_b64_env` (tests, tools).
    pub fn with_key(self, key: Key) -> Self {
        let config = &self.inner.config;
        let mut keyring = Keyring::new();
        keyring.insert(config.encryption.key_id.clone(), key.clone());
        let cipher = config
            .encryption
            .enabled
            .then(|| config.encryption.default_policy())
            .flatten()
            .map(|policy| Cipher::new(&policy, key, config.encryption.format_version));
        let _ = self.inner.keys.set(Keys { cipher, keyring });
        self
    }

    /// The configuration in effect.
    pub fn config(&self) -> &SpoolSinkConfig {
        &self.inner.config
    }

    /// The keys, read from the environment on first use.
    fn keys(&self) -> Result<&Keys, SinkError> {
        if let Some(keys) = self.inner.keys.get() {
            return Ok(keys);
        }
        let encryption = &self.inner.config.encryption;
        let keyring =
            Keyring::from_config(encryption, "sink.encryption").map_err(|e| SinkError::config(e.to_string()))?;
        let cipher = match encryption.enabled.then(|| encryption.default_policy()).flatten() {
            Some(policy) => {
                let key = Key::from_env(&policy.key_b64_env, "sink.encryption.key_b64_env")
                    .map_err(|e| SinkError::config(e.to_string()))?;
                Some(Cipher::new(&policy, key, encryption.format_version))
            }
            None => None,
        };
        Ok(self.inner.keys.get_or_init(|| Keys { cipher, keyring }))
    }

    /// The keys that read this spool's records.
    pub fn keyring(&self) -> Result<&Keyring, SinkError> {
        self.keys().map(|k| &k.keyring)
    }

    async fn resolved_root(&self) -> Result<PathBuf, SinkError> {
        if let Some(root) = self.inner.root.get() {
            return Ok(root.clone());
        }
        let inner = Arc::clone(&self.inner);
        let root = blocking(move || inner.prepare_root()).await?;
        Ok(self.inner.root.get_or_init(|| root).clone())
    }

    /// What the spool holds now (from the counters).
    pub fn usage(&self) -> Usage {
        *self.inner.lock_usage()
    }

    /// Every record file, in replay order (`drain_ordering`), read without decrypting.
    pub async fn entries(&self) -> Result<Vec<Entry>, SinkError> {
        let root = self.resolved_root().await?;
        let ordering = self.inner.config.drain_ordering;
        blocking(move || {
            let mut entries = Vec::new();
            for path in record_files(&root).map_err(|e| classify(e, "cannot list the spool directory"))? {
                let bytes = match fs::read(&path) {
                    Ok(b) => b,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(classify(e, "cannot read a spool file")),
                };
                match record::head(&bytes) {
                    Ok(head) => entries.push(Entry {
                        path,
                        priority_rank: head.priority_rank,
                        spooled_at_epoch_ns: head.spooled_at_epoch_ns,
                        size: bytes.len() as u64,
                    }),
                    Err(e) => tracing::warn!(file = %path.display(), error = %e, "skipping an unreadable spool file"),
                }
            }
            entries.sort_by(|a, b| {
                let by_time = (a.spooled_at_epoch_ns, &a.path).cmp(&(b.spooled_at_epoch_ns, &b.path));
                match ordering {
                    DrainOrdering::Priority => a.priority_rank.cmp(&b.priority_rank).then(by_time),
                    DrainOrdering::Fifo => by_time,
                }
            });
            Ok(entries)
        })
        .await
    }

    /// The envelope stored in `entry` (decrypted with the spool's keys).
    pub async fn read(&self, entry: &Entry) -> Result<Envelope, RecordError> {
        let keyring = self.keyring().map_err(|e| RecordError::Format(e.to_string()))?.clone();
        let path = entry.path.clone();
        tokio::task::spawn_blocking(move || {
            let bytes =
                fs::read(&path).map_err(|e| RecordError::Format(format!("cannot read {}: {e}", path.display())))?;
            record::envelope_of(&record::unwrap(&bytes, &keyring)?)
        })
        .await
        .map_err(|e| RecordError::Format(e.to_string()))?
    }

    /// Deletes replayed records (and fsyncs the directory), freeing their space.
    pub async fn remove(&self, entries: &[Entry]) -> Result<(), SinkError> {
        if entries.is_empty() {
            return Ok(());
        }
        let root = self.resolved_root().await?;
        let paths: Vec<(PathBuf, u64)> = entries.iter().map(|e| (e.path.clone(), e.size)).collect();
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            let mut freed = Usage::default();
            for (path, size) in &paths {
                match fs::remove_file(path) {
                    Ok(()) => {
                        freed.records += 1;
                        freed.bytes += size;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(classify(e, "cannot delete a replayed spool file")),
                }
            }
            {
                let mut usage = inner.lock_usage();
                usage.records = usage.records.saturating_sub(freed.records);
                usage.bytes = usage.bytes.saturating_sub(freed.bytes);
            }
            if inner.config.fsync {
                sync_dir(&root)?;
            }
            Ok(())
        })
        .await
    }
}

/// The `*.spool.json` files directly in `root` (dot files skipped).
fn record_files(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && name.ends_with(FILE_SUFFIX) && entry.file_type()?.is_file() {
            out.push(entry.path());
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| classify(e, "cannot fsync the spool directory"))
}

impl Inner {
    fn lock_usage(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resolves (creating it when allowed) the directory and counts what it holds.
    fn prepare_root(&self) -> Result<PathBuf, SinkError> {
        let dir = expand_home(&self.config.directory);
        let shown = dir.display();
        match fs::metadata(&dir) {
            Ok(meta) if !meta.is_dir() => {
                return Err(SinkError::config(format!("`{shown}` is not a directory")).with_field("sink.directory"));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.config.create_directory => {
                self.config
                    .dir_mode
                    .create_dir_all(&dir)
                    .map_err(|e| open_error(e, &format!("cannot create `{shown}`")))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SinkError::config(format!(
                    "`{shown}` does not exist and sink.create_directory is false: create it, or set sink.create_directory = true"
                ))
                .with_field("sink.directory"));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(SinkError::config(format!(
                    "cannot inspect `{shown}`: a part of the path is not a directory"
                ))
                .with_source(e)
                .with_field("sink.directory"));
            }
            Err(e) => return Err(open_error(e, &format!("cannot inspect `{shown}`"))),
        }
        let root = fs::canonicalize(&dir).map_err(|e| classify(e, "cannot resolve sink.directory"))?;
        self.rescan(&root)?;
        Ok(root)
    }

    /// Recounts records and bytes with one directory scan.
    fn rescan(&self, root: &Path) -> Result<Usage, SinkError> {
        let mut usage = Usage::default();
        for path in record_files(root).map_err(|e| classify(e, "cannot list the spool directory"))? {
            if let Ok(meta) = fs::metadata(&path) {
                usage.records += 1;
                usage.bytes += meta.len();
            }
        }
        *self.lock_usage() = usage;
        Ok(usage)
    }

    fn stage(&self, keys: &Keys, root: &Path, envelope: &Envelope, now: OffsetDateTime) -> Step {
        let name = match record::file_name(envelope) {
            Ok(name) => name,
            Err(e) => return Step::Done(MessageOutcome::permanent(e.to_string())),
        };
        let final_path = root.join(&name);
        if fs::symlink_metadata(&final_path).is_ok() {
            return Step::Done(self.existing(keys, &final_path, envelope));
        }
        let plain = match record::plain_record(envelope, &self.config, now) {
            Ok(plain) => plain,
            Err(e) => {
                let error = SinkError::permanent(e.to_string()).with_error_type("SerializationError");
                return Step::Done(MessageOutcome::Failed(error));
            }
        };
        let bytes = record::encode(&record::wrapper(&plain, keys.cipher.as_ref()), self.config.pretty);
        let staged = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(root)
            .and_then(|temp| self.config.file_mode.apply(temp.as_file()).map(|()| temp))
            .and_then(|mut temp| temp.write_all(&bytes).map(|()| temp));
        match staged {
            Ok(temp) => Step::Staged(Staged { temp, final_path, size: bytes.len() as u64 }),
            Err(e) => Step::Done(MessageOutcome::Failed(classify(e, "cannot write a spool temp file"))),
        }
    }

    /// The outcome for a message whose file exists (`sinks_contract::existing`): a duplicate
    /// when the stored payload is the same (or cannot be read), a conflict when it differs
    /// under a message id or payload key, and a reused sequence (refused, `sequence_reused`)
    /// when it differs under a stream-sequence key; under `fail`, permanent without reading
    /// it.
    fn existing(&self, keys: &Keys, path: &Path, envelope: &Envelope) -> MessageOutcome {
        let policy = self.config.duplicate_policy.on_existing();
        let stored = if policy == OnExisting::Refuse {
            Stored::Unchecked
        } else {
            let read = fs::read(path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| record::unwrap(&bytes, &keys.keyring).map_err(|e| e.to_string()))
                .and_then(|plain| record::payload_bytes(&plain).map_err(|e| e.to_string()));
            match read {
                Ok(payload) if Sha256::digest(&payload) == Sha256::digest(envelope.payload()) => Stored::Same,
                Ok(_) => Stored::Different,
                Err(e) => {
                    tracing::debug!(file = %path.display(), error = %e, "cannot read an existing spool record");
                    Stored::Uncomparable
                }
            }
        };
        let basis =
            envelope.idempotency_key().map_or(existing::KeyBasis::Publisher, |k| existing::KeyBasis::of_key(&k));
        existing::decide(policy, envelope, basis, stored, "spool record")
    }

    /// Reserves room for `size` more bytes and one more record (rescanning once when the
    /// counters say the spool is full).
    fn reserve(&self, root: &Path, size: u64) -> Result<(), SinkError> {
        let fits = |u: &Usage| u.records < self.config.max_records && u.bytes + size <= self.config.max_bytes;
        {
            let mut usage = self.lock_usage();
            if fits(&usage) {
                usage.records += 1;
                usage.bytes += size;
                return Ok(());
            }
        }
        let fresh = self.rescan(root)?;
        if !fits(&fresh) {
            let what = if fresh.records >= self.config.max_records { "sink.max_records" } else { "sink.max_bytes" };
            return Err(full(what));
        }
        let mut usage = self.lock_usage();
        usage.records += 1;
        usage.bytes += size;
        Ok(())
    }

    fn release(&self, size: u64) {
        let mut usage = self.lock_usage();
        usage.records = usage.records.saturating_sub(1);
        usage.bytes = usage.bytes.saturating_sub(size);
    }

    fn place(&self, keys: &Keys, root: &Path, staged: Staged, envelope: &Envelope) -> MessageOutcome {
        let Staged { temp, final_path, size } = staged;
        if let Err(e) = self.reserve(root, size) {
            return MessageOutcome::Failed(e);
        }
        match files::place_new(temp, &final_path) {
            Ok(()) => MessageOutcome::Committed,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.release(size);
                self.existing(keys, &final_path, envelope)
            }
            Err(e) => {
                self.release(size);
                MessageOutcome::Failed(classify(e, "cannot place a spool file"))
            }
        }
    }

    fn probe(&self, root: &Path) -> Result<(), SinkError> {
        let mut temp = tempfile::Builder::new()
            .prefix(PROBE_PREFIX)
            .tempfile_in(root)
            .map_err(|e| classify(e, "cannot create a file in the spool directory"))?;
        temp.write_all(b"").map_err(|e| classify(e, "cannot write in the spool directory"))?;
        if self.config.fsync {
            temp.as_file().sync_all().map_err(|e| classify(e, "cannot fsync in the spool directory"))?;
        }
        Ok(())
    }
}

fn expand_home(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else { return path.to_path_buf() };
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

fn fsync_staged(step: Step) -> Step {
    match step {
        Step::Staged(staged) => match staged.temp.as_file().sync_all() {
            Ok(()) => Step::Staged(staged),
            Err(e) => Step::Done(MessageOutcome::Failed(classify(e, "cannot fsync a spool temp file"))),
        },
        done => done,
    }
}

#[async_trait]
impl Sink for SpoolSink {
    fn name(&self) -> &str {
        "spool"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new().atomic_batch(false).reports_duplicates(true).detects_conflicts(true)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let encrypted = self.keys()?.cipher.is_some();
        let root = self.resolved_root().await?;
        let usage = self.usage();
        tracing::info!(
            directory = %root.display(),
            encrypted,
            records = usage.records,
            bytes = usage.bytes,
            max_records = self.inner.config.max_records,
            max_bytes = self.inner.config.max_bytes,
            "spool ready"
        );
        if !encrypted {
            tracing::warn!("spool records are written in plaintext (sink.allow_unencrypted)");
        }
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.keys()?;
        let root = self.resolved_root().await?;
        let now = OffsetDateTime::now_utc();
        let stage = {
            let (me, root) = (self.clone(), root.clone());
            move |envelope: Envelope| match me.keys() {
                Ok(keys) => me.inner.stage(keys, &root, &envelope, now),
                Err(e) => Step::Done(MessageOutcome::Failed(e)),
            }
        };
        let steps = run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, stage).await;
        let fsync = self.inner.config.fsync;
        let steps = if fsync { run_parallel(steps, MAX_PARALLEL_FSYNCS, fsync_staged).await } else { steps };

        // One lane per ordering key (a message without a key is a lane of its own).
        let items: Vec<(Option<OrderKey>, (Step, Envelope))> =
            steps.into_iter().zip(batch.iter().cloned()).map(|(step, e)| (e.order_key(), (step, e))).collect();
        let place = {
            let (me, root) = (self.clone(), root.clone());
            move |lane: Lane<(Step, Envelope)>| {
                let Ok(keys) = me.keys() else { return Vec::new() };
                lane.place_in_order(
                    |(step, envelope), blocked| match step {
                        Step::Done(outcome) => outcome,
                        Step::Staged(_) if blocked => MessageOutcome::HeldBack,
                        Step::Staged(staged) => me.inner.place(keys, &root, staged, &envelope),
                    },
                    |outcome| outcome,
                )
            }
        };
        let outcomes = place_lanes(items, MAX_PARALLEL_TASKS, place).await;
        let mut outcomes: Vec<MessageOutcome> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| MessageOutcome::temporary("spool write task failed")))
            .collect();
        if fsync && outcomes.iter().any(|o| matches!(o, MessageOutcome::Committed)) {
            let synced = blocking(move || sync_dir(&root)).await;
            if let Err(e) = synced {
                tracing::warn!(error = %e.display_chain(), "spool directory fsync failed");
                for o in outcomes.iter_mut().filter(|o| matches!(o, MessageOutcome::Committed)) {
                    *o = MessageOutcome::Failed(e.duplicate());
                }
            }
        }
        sinks_contract::sink::log_outcomes("spool", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let root = self.resolved_root().await?;
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.probe(&root)).await
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }
}

#[async_trait]
impl ReadBack for SpoolSink {
    fn checks(&self) -> String {
        let absent = if self.inner.config.delete_after_replay {
            "a message without a record is unchecked: replay deletes what its target committed \
             (delete_after_replay), so replayed and never spooled cannot be told apart here; reconcile the \
             replay target's configuration for those"
        } else {
            "a message without a record is missing (delete_after_replay is off: replay keeps records)"
        };
        format!("spool record by name (sha256 of the idempotency key), decrypted, payload compared; {absent}")
    }

    /// Reads each message's record (blocking tasks in parallel); never writes, never
    /// creates the directory.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let absent = if self.inner.config.delete_after_replay { Presence::Unchecked } else { Presence::Missing };
        let root = match self.inner.root.get() {
            Some(root) => root.clone(),
            None => match fs::canonicalize(expand_home(&self.inner.config.directory)) {
                Ok(root) => root,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![absent; batch.len()]),
                Err(e) => return Err(classify(e, "cannot resolve sink.directory")),
            },
        };
        let keyring = self.keyring()?.clone();
        let check = move |envelope: Envelope| presence(&root, &keyring, &envelope, absent);
        run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, check).await.into_iter().collect()
    }
}

/// What the spool holds for `envelope` under `root` (blocking; reads only): `absent` when it
/// has no record.
fn presence(root: &Path, keyring: &Keyring, envelope: &Envelope, absent: Presence) -> Result<Presence, SinkError> {
    // A message without an idempotency key was never spooled (it failed permanently).
    let Ok(name) = record::file_name(envelope) else { return Ok(absent) };
    let bytes = match fs::read(root.join(name)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(absent),
        Err(e) => return Err(classify(e, "cannot read a spool record")),
    };
    let stored = record::unwrap(&bytes, keyring).and_then(|plain| record::payload_bytes(&plain));
    Ok(match stored {
        Ok(payload) if payload == envelope.payload().as_ref() => Presence::Equal,
        Ok(_) => Presence::Different,
        Err(e) => {
            tracing::debug!(
                stream_sequence = envelope.jetstream().stream_sequence,
                error = %e,
                "spool record cannot be read back"
            );
            Presence::Different
        }
    })
}
