//! [`ReviewPackageSink`]: one package directory per message, built under a temporary name,
//! fsynced, renamed into place without replacing anything, the root fsynced; outcomes are
//! reported only after that.
//!
//! A batch goes through three phases:
//! 1. **stage** (in parallel, any order: nothing is visible yet): build the package
//!    ([`crate::package`]), write its files into the temporary directory `.{id}.tmp` next to
//!    its final name, fsync each file and the directory (`fsync`). A temporary directory of
//!    that name that no write of this process owns was left by a crash: it is removed and
//!    written again. A second delivery of the same message staged at the same time by this
//!    process gets a temporary name of its own (`.{id}.<random>.tmp`). A redelivery whose
//!    package exists is settled here without writing;
//! 2. **place** (the one ordering rule, `sinks_contract::ordering`): messages sharing an
//!    ordering key are renamed into place one after another in input order, one behind a
//!    temporary failure of its key is held back (its temporary directory removed); the rename
//!    never replaces (`sinks_toolkit::files::place_new_dir`), and a name that is taken is
//!    judged by `sinks_contract::existing` against the stored manifest's payload fingerprint;
//! 3. **root fsync** (`fsync`): the root directory once, before any outcome counts; a
//!    failure fails every message that depended on it (temporarily).

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use sinks_contract::existing::{self, KeyBasis, OnExisting, Stored};
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, MessageOutcome, OrderKey, Presence,
    ReadBack, Sink, SinkError,
};
use sinks_toolkit::blocking::{TaskFailed, blocking, run_parallel};
use sinks_toolkit::files;
use sinks_toolkit::lanes::{Lane, place_lanes};
use sinks_toolkit::sink_root::{self, expand_home, sync_dir};
use time::OffsetDateTime;

use crate::config::ReviewPackageSinkConfig;
use crate::error::classify;
use crate::package::{self, BuildError, Package, Shape};
use crate::verify;

/// Most blocking tasks one batch uses at a time (each stages its packages one after another,
/// every file fsynced, so enough of them keep the disk's queue full).
pub(crate) const MAX_PARALLEL_TASKS: usize = 16;
/// What the existing-key decision calls a package in its messages and logs.
const RECORD: &str = "review package";

/// Durable local destination: one self-describing, hash-checked directory per message.
#[derive(Debug, Clone)]
pub struct ReviewPackageSink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ReviewPackageSinkConfig,
    /// Canonical root directory, resolved by `open` (or lazily by the first write).
    root: OnceLock<PathBuf>,
    /// Package ids whose fixed temporary name (`.{id}.tmp`) a write of this process owns.
    staging: Mutex<HashSet<String>>,
}

/// A package written into its temporary directory, waiting to be placed. Dropping it removes
/// the directory (unless it was placed) and gives its temporary name back.
#[derive(Debug)]
struct Staged {
    envelope: Box<Envelope>,
    id: String,
    temp: TempPackage,
    final_path: PathBuf,
    payload_sha256: String,
}

/// A temporary package directory owned by one write.
#[derive(Debug)]
struct TempPackage {
    inner: Arc<Inner>,
    path: PathBuf,
    /// The package id whose fixed temporary name this is (`None`: a random name).
    owns_fixed_name: Option<String>,
    placed: bool,
}

impl Drop for TempPackage {
    fn drop(&mut self) {
        if !self.placed
            && let Err(e) = fs::remove_dir_all(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(directory = %self.path.display(), error = %e, "cannot remove a temporary package directory");
        }
        if let Some(id) = self.owns_fixed_name.take() {
            self.inner.staging.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
        }
    }
}

/// What became of one message, and whether it depends on the root's fsync.
#[derive(Debug)]
struct Placed {
    outcome: MessageOutcome,
    needs_root_sync: bool,
}

impl Placed {
    fn failed(error: SinkError) -> Self {
        Self { outcome: MessageOutcome::Failed(error), needs_root_sync: false }
    }

    fn settled(outcome: MessageOutcome) -> Self {
        let needs_root_sync = matches!(outcome, MessageOutcome::Committed | MessageOutcome::Duplicate);
        Self { outcome, needs_root_sync }
    }
}

/// Where one message stands between phases.
#[derive(Debug)]
enum Step {
    /// Its outcome is known.
    Done(Placed),
    /// Written to its temporary directory, not yet placed.
    Staged(Box<Staged>),
}

impl ReviewPackageSink {
    /// A review package sink for a validated `config`. Touches nothing; [`Sink::open`]
    /// prepares the root.
    pub fn new(config: ReviewPackageSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self { inner: Arc::new(Inner { config, root: OnceLock::new(), staging: Mutex::new(HashSet::new()) }) })
    }

    /// The configuration in effect.
    pub fn config(&self) -> &ReviewPackageSinkConfig {
        &self.inner.config
    }

    /// The canonical root directory, once [`Sink::open`] (or a first write) resolved it.
    pub fn root(&self) -> Option<&Path> {
        self.inner.root.get().map(PathBuf::as_path)
    }

    /// Checks every package below the root (nothing is created or changed): what `nats-sink
    /// verify-packages` prints.
    pub async fn verify(&self) -> Result<verify::Report, SinkError> {
        let root = match self.inner.root.get() {
            Some(root) => root.clone(),
            None => expand_home(&self.inner.config.directory),
        };
        blocking(move || {
            verify::verify_root(&root)
                .map_err(|e| classify(e, "cannot list sink.directory").with_field("sink.directory"))
        })
        .await
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
impl Sink for ReviewPackageSink {
    fn name(&self) -> &str {
        "review_package"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new().atomic_batch(false).reports_duplicates(true).detects_conflicts(true)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let root = self.resolved_root().await?;
        tracing::info!(directory = %root.display(), "review package root ready");
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let root = self.resolved_root().await?;
        let stage = {
            let inner = Arc::clone(&self.inner);
            let root = root.clone();
            move |envelope: Envelope| inner.stage(&root, envelope)
        };
        let steps = run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, stage).await;
        let keys: Vec<Option<OrderKey>> = batch.iter().map(Envelope::order_key).collect();
        let mut placed = place_in_order(Arc::clone(&self.inner), steps, &keys).await;
        if self.inner.config.fsync && placed.iter().any(|p| p.needs_root_sync) {
            let synced = blocking(move || sync_dir(&root)).await;
            if let Err(e) = synced {
                tracing::warn!(error = %e.display_chain(), "review package root fsync failed");
                for p in placed.iter_mut().filter(|p| p.needs_root_sync) {
                    p.outcome = MessageOutcome::Failed(e.duplicate());
                }
            }
        }
        let outcomes: Vec<MessageOutcome> = placed.into_iter().map(|p| p.outcome).collect();
        sinks_contract::sink::log_outcomes("review_package", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.probe()).await
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }
}

impl Destinations for ReviewPackageSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let root = match self.inner.root.get() {
            Some(root) => root.clone(),
            None => expand_home(&self.inner.config.directory),
        };
        let event = self.inner.keyed(envelope).ok()?;
        let id = package::package_id(&event).ok()?;
        Some(DestinationRef::File { path: root.join(id).display().to_string() })
    }
}

#[async_trait]
impl ReadBack for ReviewPackageSink {
    fn checks(&self) -> String {
        String::from(
            "the package exists and is intact (every file matches hashes.json and manifest.json, nothing missing or added), and its manifest records this payload's SHA-256",
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
        let inner = Arc::clone(&self.inner);
        let check = move |envelope: Envelope| match inner.keyed(&envelope) {
            Ok(event) => presence(&root, &event),
            Err(e) => {
                Err(SinkError::permanent(format!("cannot derive a package id: {e}")).with_reason(e.reason_code()))
            }
        };
        let found = run_parallel(batch.to_vec(), MAX_PARALLEL_TASKS, check).await;
        found.into_iter().collect()
    }
}

/// Whether `envelope`'s package is below `root`, intact, and holds its payload (blocking;
/// reads only).
fn presence(root: &Path, envelope: &Envelope) -> Result<Presence, SinkError> {
    let id =
        package::package_id(envelope).map_err(|e| SinkError::permanent(format!("cannot derive a package id: {e}")))?;
    let dir = root.join(&id);
    match fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Presence::Missing),
        Err(e) => return Err(classify(e, "cannot inspect a stored package")),
        Ok(_) => {}
    }
    let (state, stored) = verify::check_package(&dir, &id);
    let ours = package::sha256_hex(envelope.payload());
    Ok(if state.is_intact() && stored.as_deref() == Some(ours.as_str()) {
        Presence::Equal
    } else {
        Presence::Different
    })
}

impl Inner {
    /// The event a package is made of: under `key_strategy: origin_sequence` the event as its
    /// origin stored it (named by its origin's key, the same whatever path delivered it),
    /// else the message as delivered. Refused when the origin cannot be told.
    fn keyed<'e>(
        &self,
        envelope: &'e Envelope,
    ) -> Result<std::borrow::Cow<'e, Envelope>, sinks_contract::idempotency::IdempotencyError> {
        let origin_keyed = self.config.key_strategy == sinks_contract::idempotency::KeySource::OriginSequence;
        sinks_toolkit::metadata::MetadataScope::Message.content_of(envelope, origin_keyed)
    }

    fn shape(&self) -> Shape {
        Shape {
            pretty: self.config.pretty,
            include_payload: self.config.include_payload,
            max_payload_bytes: self.config.max_payload_bytes,
        }
    }

    /// Resolves, creates if allowed, and probes the root directory.
    fn prepare_root(&self) -> Result<PathBuf, SinkError> {
        let c = &self.config;
        sink_root::prepare(&c.directory, c.create_directory, c.dir_mode, c.fsync)
    }

    /// Checks that the root takes a package: a probe file written (and fsynced, with
    /// `fsync`) and removed.
    fn probe(&self) -> Result<(), SinkError> {
        let root = self.root.get().map(PathBuf::as_path);
        sink_root::probe(root, &self.config.directory, self.config.fsync, "review package root")
    }

    /// Stages one envelope: settles a redelivery whose package exists, else writes its
    /// package into a temporary directory (blocking).
    fn stage(self: &Arc<Self>, root: &Path, envelope: Envelope) -> Step {
        let origin_keyed = self.config.key_strategy == sinks_contract::idempotency::KeySource::OriginSequence;
        let envelope = match if origin_keyed { envelope.at_origin() } else { Ok(envelope) } {
            Ok(event) => event,
            Err(e) => {
                let error = SinkError::permanent(format!("cannot derive a package id: {e}"));
                return Step::Done(Placed::failed(
                    error.with_error_type("ValidationError").with_reason(e.reason_code()),
                ));
            }
        };
        let now = OffsetDateTime::now_utc();
        let package = match package::build(&envelope, self.shape(), now, now) {
            Ok(package) => package,
            Err(e @ BuildError::TooLarge) => {
                return Step::Done(Placed::failed(
                    SinkError::permanent(e.to_string()).with_error_type("PermanentSinkError"),
                ));
            }
            Err(e) => return Step::Done(Placed::failed(SinkError::permanent(e.to_string()))),
        };
        let final_path = root.join(&package.id);
        // A redelivery usually finds its package: settle it without writing one. A first
        // delivery is not looked up; placing finds a taken name itself.
        if envelope.jetstream().delivered > 1 && fs::symlink_metadata(&final_path).is_ok() {
            let outcome = self.existing(&envelope, &final_path, &package.payload_sha256);
            return Step::Done(Placed::settled(outcome));
        }
        match self.write_temp(root, &package) {
            Ok(temp) => Step::Staged(Box::new(Staged {
                envelope: Box::new(envelope),
                id: package.id,
                temp,
                final_path,
                payload_sha256: package.payload_sha256,
            })),
            Err(e) => Step::Done(Placed::failed(e)),
        }
    }

    /// Claims a temporary directory for `package` and writes its files into it, fsynced.
    fn write_temp(self: &Arc<Self>, root: &Path, package: &Package) -> Result<TempPackage, SinkError> {
        let fixed = root.join(format!(".{}.tmp", package.id));
        let claimed = self.staging.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(package.id.clone());
        let temp = if claimed {
            let temp = TempPackage {
                inner: Arc::clone(self),
                path: fixed,
                owns_fixed_name: Some(package.id.clone()),
                placed: false,
            };
            match fs::symlink_metadata(&temp.path) {
                Ok(_) => {
                    // No write of this process owns it: an earlier write was interrupted.
                    tracing::warn!(package = %package.id, "removing a temporary package directory left by an interrupted write");
                    fs::remove_dir_all(&temp.path)
                        .or_else(|e| {
                            if e.kind() == io::ErrorKind::NotADirectory { fs::remove_file(&temp.path) } else { Err(e) }
                        })
                        .map_err(|e| classify(e, "cannot remove a stale temporary package directory"))?;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(classify(e, "cannot inspect a temporary package directory")),
            }
            self.config
                .dir_mode
                .create_dir(&temp.path)
                .map_err(|e| classify(e, "cannot create a temporary package directory"))?;
            temp
        } else {
            // The same message is being written by another write of this process right now.
            let dir = tempfile::Builder::new()
                .prefix(&format!(".{}.", package.id))
                .suffix(".tmp")
                .rand_bytes(8)
                .tempdir_in(root)
                .map_err(|e| classify(e, "cannot create a temporary package directory"))?;
            let path = dir.keep();
            let temp = TempPackage { inner: Arc::clone(self), path, owns_fixed_name: None, placed: false };
            fs::set_permissions(&temp.path, std::os::unix::fs::PermissionsExt::from_mode(self.config.dir_mode.bits()))
                .map_err(|e| classify(e, "cannot set a temporary package directory's mode"))?;
            temp
        };
        for file in &package.files {
            let path = temp.path.join(file.name);
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| classify(e, "cannot create a package file"))?;
            self.config.file_mode.apply(&out).map_err(|e| classify(e, "cannot set a package file's mode"))?;
            out.write_all(&file.bytes).map_err(|e| classify(e, "cannot write a package file"))?;
            if self.config.fsync {
                out.sync_all().map_err(|e| classify(e, "cannot fsync a package file"))?;
            }
        }
        if self.config.fsync {
            sync_dir(&temp.path)?;
        }
        Ok(temp)
    }

    /// Renames a staged package into place, never over an existing one.
    fn place(&self, staged: Staged) -> Placed {
        let Staged { envelope, id, mut temp, final_path, payload_sha256 } = staged;
        match files::place_new_dir(&temp.path, &final_path) {
            Ok(()) => {
                temp.placed = true;
                tracing::debug!(package = %id, "review package placed");
                Placed::settled(MessageOutcome::Committed)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                drop(temp);
                Placed::settled(self.existing(&envelope, &final_path, &payload_sha256))
            }
            Err(e) => Placed::failed(classify(e, "cannot rename a package into place")),
        }
    }

    /// The outcome when `envelope`'s package name is taken (`sinks_contract::existing`,
    /// logged): what the stored manifest records, compared with this payload's fingerprint.
    /// Under stream-sequence package ids (every JetStream message's) a different payload is
    /// a reused sequence, whatever `duplicate_policy` says.
    fn existing(&self, envelope: &Envelope, final_path: &Path, payload_sha256: &str) -> MessageOutcome {
        let stored = match self.stored(final_path, payload_sha256) {
            Ok(stored) => stored,
            Err(outcome) => return outcome,
        };
        let basis = envelope.idempotency_key().map_or(KeyBasis::Publisher, |key| KeyBasis::of_key(&key));
        let policy: OnExisting = self.config.duplicate_policy.on_existing();
        existing::decide(policy, envelope, basis, stored, RECORD)
    }

    /// What the package at `final_path` holds, compared by its manifest's payload
    /// fingerprint: a package whose manifest cannot be read cannot be compared. `Err` is an
    /// outcome of its own: a symlink or a file at the name (permanent), a package gone
    /// meanwhile (temporary).
    fn stored(&self, final_path: &Path, payload_sha256: &str) -> Result<Stored, MessageOutcome> {
        match fs::symlink_metadata(final_path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(MessageOutcome::Failed(SinkError::permanent("refusing a symlinked package path")));
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(MessageOutcome::Failed(SinkError::permanent(
                    "the package name is taken by a non-directory",
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(MessageOutcome::Failed(
                    SinkError::temporary("the existing package vanished before it could be checked").with_source(e),
                ));
            }
            Err(e) => {
                tracing::warn!(error = %e, package = %final_path.display(), "cannot inspect an existing package; treating it as a duplicate");
                return Ok(Stored::Uncomparable);
            }
        }
        let manifest = final_path.join(package::MANIFEST);
        let read =
            OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&manifest).and_then(
                |file| {
                    let mut bytes = Vec::new();
                    io::Read::read_to_end(&mut io::Read::take(file, 1024 * 1024), &mut bytes).map(|_| bytes)
                },
            );
        let stored = match read {
            Ok(bytes) => package::stored_payload_sha256(&bytes),
            Err(e) => {
                tracing::warn!(error = %e, package = %final_path.display(), "cannot read an existing package's manifest");
                None
            }
        };
        Ok(existing::Stored::compare(stored.as_deref(), payload_sha256))
    }
}

/// Places every staged package, lane by lane (`sinks_toolkit::lanes`): a lane's packages one
/// after another in input order, lanes in parallel. Within a lane, everything behind a
/// temporary failure is held back (its temporary directory removed).
async fn place_in_order(inner: Arc<Inner>, steps: Vec<Step>, keys: &[Option<OrderKey>]) -> Vec<Placed> {
    let items: Vec<(Option<OrderKey>, Step)> =
        steps.into_iter().enumerate().map(|(index, step)| (keys.get(index).copied().flatten(), step)).collect();
    let place = move |lane: Lane<Step>| {
        lane.place_in_order(
            |step, blocked| match step {
                Step::Done(placed) => placed,
                // Dropping the staged package removes its temporary directory.
                Step::Staged(_) if blocked => Placed { outcome: MessageOutcome::HeldBack, needs_root_sync: false },
                Step::Staged(staged) => inner.place(*staged),
            },
            |placed| &placed.outcome,
        )
    };
    let placed = place_lanes(items, MAX_PARALLEL_TASKS, place).await;
    placed.into_iter().map(|p| p.unwrap_or_else(Placed::task_failed)).collect()
}

impl TaskFailed for Step {
    fn task_failed() -> Self {
        Self::Done(Placed::failed(SinkError::temporary("review package write task failed")))
    }
}

impl TaskFailed for Placed {
    fn task_failed() -> Self {
        Self::failed(SinkError::temporary("review package write task failed"))
    }
}

/// The names of the entries directly below `dir`, sorted (for tests and the verify report).
#[cfg(test)]
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use sinks_contract::testing::envelope;

    use super::*;

    async fn sink(dir: &Path) -> ReviewPackageSink {
        let sink = ReviewPackageSink::new(ReviewPackageSinkConfig::new(dir.join("out"))).unwrap();
        sink.open().await.unwrap();
        sink
    }

    /// The place phase keeps the ordering rule: behind a temporary failure of its key a
    /// staged package is held back (its temporary directory removed); other keys go on.
    #[tokio::test]
    async fn placing_holds_back_behind_a_temporary_failure_of_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path()).await;
        let root = sink.root().unwrap().to_path_buf();
        let batch: Vec<Envelope> = [(1, "a"), (2, "a"), (3, "b"), (4, "a")]
            .into_iter()
            .map(|(seq, subject)| envelope("S", seq, subject, "{}"))
            .collect();
        let mut steps: Vec<Step> = batch.iter().map(|e| sink.inner.stage(&root, e.clone())).collect();
        assert!(steps.iter().all(|s| matches!(s, Step::Staged(_))));
        steps[0] = Step::Done(Placed::failed(SinkError::temporary("injected")));
        let keys: Vec<Option<OrderKey>> = batch.iter().map(Envelope::order_key).collect();
        let placed = place_in_order(Arc::clone(&sink.inner), steps, &keys).await;
        let classes: Vec<_> = placed.iter().map(|p| p.outcome.class()).collect();
        use sinks_contract::OutcomeClass::*;
        assert_eq!(classes, [FailedTemporary, HeldBack, Committed, HeldBack]);
        let id = package::package_id(&batch[2]).unwrap();
        assert_eq!(names(&root), [id], "only b's package exists, no temporary directory is left");
        assert!(sink.inner.staging.lock().unwrap().is_empty(), "every temporary name was given back");
    }

    /// Two deliveries of one message staged at once: the second gets a name of its own, both
    /// place (the second finds the first's package: a duplicate), nothing is left over.
    #[tokio::test]
    async fn one_message_staged_twice_at_once_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path()).await;
        let root = sink.root().unwrap().to_path_buf();
        let e = envelope("S", 9, "a", "{}");
        let first = sink.inner.stage(&root, e.clone());
        let second = sink.inner.stage(&root, e.clone());
        let mut temps = names(&root);
        temps.sort();
        assert_eq!(temps.len(), 2, "{temps:?}");
        let (Step::Staged(first), Step::Staged(second)) = (first, second) else { panic!("both staged") };
        let classes = [sink.inner.place(*first).outcome.class(), sink.inner.place(*second).outcome.class()];
        use sinks_contract::OutcomeClass::*;
        assert_eq!(classes, [Committed, Duplicate]);
        assert_eq!(names(&root), [package::package_id(&e).unwrap()]);
    }
}
