//! [`BatchWriter`]: the batch mode of the file and S3 sinks, once. It groups messages into
//! open objects per partition, streams their rows into local temporary files, closes an
//! object when it is full or old, commits it through the manifest log
//! ([`super::manifest`]), and tells, for every message, whether it is already stored.
//!
//! A sink supplies the I/O through [`ObjectLog`] (a directory, a bucket) and forwards its
//! `Sink` methods: [`BatchWriter::write`] (a write: every message is appended and reported
//! `Pending`, or found already stored, or refused alone), [`BatchWriter::flush`] (closes
//! what is due and returns the final outcomes), [`BatchWriter::reconcile`] and
//! [`BatchWriter::destination`].
//!
//! **Already stored?** A message's partition depends only on the message, so a redelivery
//! is looked for in one manifest log: the writer reads that log once (every manifest,
//! completing any object whose manifest is there but whose object is not visible yet) and
//! keeps it, bounded ([`super::index`]); its own commits extend it. A message found there
//! is a duplicate (its payload fingerprint compared with the stored row's when
//! `content_check` is on, which reads that object back once); one in an object still open
//! or closing is pending again (the newer delivery replaces the older one in the runner).
//!
//! **Ordering.** Rows go into their object in input order. A message that fails
//! temporarily while being appended (its partition's manifest log cannot be read, its
//! temporary file cannot be written) holds back the later messages of its ordering key in
//! that write. An object that fails when it closes fails all its messages temporarily:
//! they come back and go into a later object.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;

use super::config::BatchConfig;
use super::encode::{Encoder, encoder, read_rows};
use super::index::{Committed, Fingerprints, Index, PartIndex, PartKey, Slot};
use super::manifest::{MANIFEST_SCHEMA, Manifest};
use super::naming;
use super::partition::Template;
use super::row::Row;
use super::seqset::SeqSet;
use crate::existing::{self, OnExisting, Stored};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::ordering::OrderKey;
use sinks_contract::payload::PayloadMode;
use sinks_contract::sink::{DestinationRef, FlushScope, Holding, HoldingSettings, MessageOutcome, Presence, Settled};

/// Manifests read (or objects closed) at once.
const PARALLEL: usize = 8;
/// Attempts at one slot when its create was ambiguous (a timeout: it may have been made).
const AMBIGUOUS_ATTEMPTS: u32 = 3;
/// Recently committed or found objects remembered for [`BatchWriter::destination`].
const RECENT: usize = 256;

/// A local temporary file an object is written into.
#[derive(Debug)]
pub struct TempObject {
    /// The open file.
    pub file: File,
    /// Its name, when it has one (the file sink's, next to the final name; removed when
    /// dropped unless kept); `None` for an anonymous file (the S3 sink's spill file).
    pub path: Option<tempfile::TempPath>,
}

/// The I/O of one destination, in keys relative to the sink's root or prefix
/// (`partition/name`). Errors carry the sink's own classes.
#[async_trait]
pub trait ObjectLog: Send + Sync + std::fmt::Debug + 'static {
    /// The names directly under `dir` (objects, files, subdirectories); none when `dir`
    /// does not exist.
    async fn list(&self, dir: &str) -> Result<Vec<String>, SinkError>;
    /// A small object's bytes (a manifest); `None` when it does not exist.
    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, SinkError>;
    /// Creates `key` with `body` only when it does not exist yet, atomically: `true` when
    /// this call created it, `false` when it exists.
    async fn create(&self, key: &str, body: Vec<u8>) -> Result<bool, SinkError>;
    /// A new temporary file for an object of `partition` (blocking; called off the async
    /// workers).
    fn temp(&self, partition: &str) -> Result<TempObject, SinkError>;
    /// Makes the finished temporary file the durable staging of object `key` (`size`
    /// bytes), without making `key` visible; returns what completing it needs, recorded in
    /// the manifest.
    async fn stage(&self, key: &str, temp: TempObject, size: u64) -> Result<serde_json::Value, SinkError>;
    /// Makes the staged object visible at `key`; idempotent. `true` when `key` is visible
    /// now, `false` when it is not and its staging is gone.
    async fn complete(&self, key: &str, staging: &serde_json::Value) -> Result<bool, SinkError>;
    /// Discards a staging no manifest names (best effort; logs on failure).
    async fn discard(&self, key: &str, staging: &serde_json::Value);
    /// The object `key` in a local file, to read its rows; `None` when it does not exist.
    async fn fetch(&self, key: &str) -> Result<Option<File>, SinkError>;
    /// Where object `key` is, for delivery receipts.
    fn destination(&self, key: &str) -> DestinationRef;
}

/// How a sink configured its batch mode.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `sink.batch` section.
    pub batch: BatchConfig,
    /// The sink's payload mode.
    pub payload_mode: PayloadMode,
    /// What an existing record means (`keep` or `refuse`; batch mode never replaces).
    pub policy: OnExisting,
    /// Compare a redelivery's payload fingerprint with the stored row's.
    pub content_check: bool,
    /// The largest row one message may make, besides `max_bytes` (a sink's own limit).
    pub max_row_bytes: u64,
    /// Sink name used in logs.
    pub sink: &'static str,
    /// What a stored object is called in messages (`batch object`, `batch file`).
    pub record: &'static str,
}

/// An object being filled.
struct Group {
    id: u64,
    key: PartKey,
    set: SeqSet,
    rows: u64,
    bytes: u64,
    opened: Instant,
    encoder: Option<Box<dyn Encoder>>,
    path: Option<tempfile::TempPath>,
    closing: bool,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("id", &self.id).field("rows", &self.rows).finish_non_exhaustive()
    }
}

/// A sealed group on its way to being committed.
struct Closing {
    id: u64,
    key: PartKey,
    set: SeqSet,
    rows: u64,
    encoder: Box<dyn Encoder>,
    path: Option<tempfile::TempPath>,
}

#[derive(Debug, Default)]
struct State {
    open: HashMap<PartKey, Group>,
    sealed: Vec<Group>,
    done: Vec<Settled>,
    index: Index,
    recent: std::collections::VecDeque<(String, Arc<Committed>)>,
}

impl State {
    fn pending(&self, key: &PartKey, seq: u64) -> bool {
        self.open.get(key).is_some_and(|g| g.set.contains(seq))
            || self.sealed.iter().any(|g| g.key == *key && g.set.contains(seq))
    }

    fn remember(&mut self, stream: &str, committed: &Arc<Committed>) {
        if self.recent.iter().any(|(s, c)| s == stream && Arc::ptr_eq(c, committed)) {
            return;
        }
        self.recent.push_back((stream.to_owned(), Arc::clone(committed)));
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    fn seal(&mut self, key: &PartKey) {
        if let Some(group) = self.open.remove(key) {
            self.sealed.push(group);
        }
    }

    /// Fails every message of `group` temporarily (its object cannot be committed).
    fn fail_group(&mut self, key: &PartKey, set: &SeqSet, error: &SinkError) {
        let stream = stream_of(&key.1);
        self.done.extend(
            set.iter()
                .map(|sequence| Settled::new(stream.clone(), sequence, MessageOutcome::Failed(error.duplicate()))),
        );
    }
}

/// The batch mode of one sink over its destination `L`.
#[derive(Debug)]
pub struct BatchWriter<L: ObjectLog> {
    inner: Arc<Inner<L>>,
}

impl<L: ObjectLog> Clone for BatchWriter<L> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

/// The batch mode is a sink's [`Holding`] capability: `Sink::holding` of the file and S3
/// sinks returns their writer, when they run in batch mode.
#[async_trait]
impl<L: ObjectLog> Holding for BatchWriter<L> {
    fn settings(&self) -> HoldingSettings {
        self.holding_settings()
    }

    async fn flush(&self, scope: FlushScope) -> Vec<Settled> {
        Self::flush(self, scope).await
    }
}

#[derive(Debug)]
struct Inner<L> {
    log: L,
    settings: Settings,
    template: Template,
    state: Mutex<State>,
    locks: Mutex<HashMap<PartKey, Arc<tokio::sync::Mutex<()>>>>,
    prints: Mutex<Fingerprints>,
    next_id: AtomicU64,
}

/// How a claim ended.
enum Claim {
    /// This writer's manifest is at this slot.
    Slot(u64),
    /// Committed objects already hold some of the messages: the object is abandoned.
    Lost(Vec<Arc<Committed>>),
}

/// What appending found for one message.
enum Appended {
    Outcome(MessageOutcome),
    /// Already stored in `object`: a duplicate, or (with the content check) compared first.
    Stored(Arc<Committed>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The stream name in a keyed stream (`{stream}` or `{stream}.{epoch}`, a stream name
/// cannot contain `.`): what the runner names a pending message by
/// ([`crate::holding::key_of`]), so [`Settled`] outcomes carry it.
fn stream_of(keyed: &str) -> String {
    keyed.split('.').next().unwrap_or(keyed).to_owned()
}

impl<L: ObjectLog> BatchWriter<L> {
    /// A writer over `log` with `settings` (validated by the sink's config).
    pub fn new(log: L, settings: Settings) -> Self {
        let template = settings.batch.template();
        Self {
            inner: Arc::new(Inner {
                log,
                settings,
                template,
                state: Mutex::new(State::default()),
                locks: Mutex::new(HashMap::new()),
                prints: Mutex::new(Fingerprints::default()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The destination's I/O.
    pub fn log(&self) -> &L {
        &self.inner.log
    }

    /// What the runner needs to know to hold this writer's messages.
    pub fn holding_settings(&self) -> HoldingSettings {
        let max_wait = Duration::from_millis(self.inner.settings.batch.max_age_ms);
        HoldingSettings::new(max_wait, (max_wait / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)))
    }

    /// The partition `envelope` goes to.
    pub fn partition(&self, envelope: &Envelope) -> String {
        self.inner.template.render(envelope, &self.inner.settings.batch.partition_fallback)
    }

    /// The manifest log `envelope` belongs to: its partition and its keyed stream
    /// ([`Envelope::keyed_stream`]), so a later epoch of the stream has logs, objects and
    /// sequences of its own and never finds an earlier epoch's message under its sequence.
    pub fn part_key(&self, envelope: &Envelope) -> PartKey {
        (self.partition(envelope), envelope.keyed_stream().into_owned())
    }

    /// Appends `batch`: one outcome per envelope, in order (`Pending` for every message
    /// taken into an open object).
    pub async fn write(&self, batch: &[Envelope]) -> Vec<MessageOutcome> {
        if batch.is_empty() {
            return Vec::new();
        }
        let keys: Vec<PartKey> = batch.iter().map(|e| self.part_key(e)).collect();
        let distinct: HashSet<PartKey> = keys.iter().cloned().collect();
        let inner = &self.inner;
        let loads = futures::stream::iter(distinct.into_iter().map(|k: PartKey| async move {
            let result = inner.ensure_loaded(&k).await;
            (k, result)
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
        let failed: HashMap<PartKey, SinkError> =
            loads.into_iter().filter_map(|(k, r)| r.err().map(|e| (k, e))).collect();
        let inner = Arc::clone(&self.inner);
        let envelopes = batch.to_vec();
        let appended = crate::blocking::blocking(move || Ok(inner.append(&envelopes, &keys, &failed))).await;
        let appended = match appended {
            Ok(a) => a,
            Err(e) => return batch.iter().map(|_| MessageOutcome::Failed(e.duplicate())).collect(),
        };
        let mut outcomes = Vec::with_capacity(batch.len());
        for (envelope, found) in batch.iter().zip(appended) {
            outcomes.push(match found {
                Appended::Outcome(o) => o,
                Appended::Stored(committed) => self.inner.existing(envelope, &committed).await,
            });
        }
        outcomes
    }

    /// Closes what `scope` names and returns every final outcome decided since the last
    /// call.
    pub async fn flush(&self, scope: FlushScope) -> Vec<Settled> {
        let max_age = Duration::from_millis(self.inner.settings.batch.max_age_ms);
        let (closing, mut settled) = {
            let mut state = lock(&self.inner.state);
            let due: Vec<PartKey> = state
                .open
                .iter()
                .filter(|(_, g)| scope == FlushScope::All || g.opened.elapsed() >= max_age)
                .map(|(k, _)| k.clone())
                .collect();
            for key in &due {
                state.seal(key);
            }
            let mut closing = Vec::new();
            for group in state.sealed.iter_mut().filter(|g| !g.closing) {
                if let Some(encoder) = group.encoder.take() {
                    group.closing = true;
                    closing.push(Closing {
                        id: group.id,
                        key: group.key.clone(),
                        set: group.set.clone(),
                        rows: group.rows,
                        encoder,
                        path: group.path.take(),
                    });
                }
            }
            (closing, std::mem::take(&mut state.done))
        };
        let closed: Vec<Vec<Settled>> = futures::stream::iter(closing.into_iter().map(|c| self.inner.close(c)))
            .buffer_unordered(PARALLEL / 2)
            .collect()
            .await;
        settled.extend(closed.into_iter().flatten());
        settled
    }

    /// Messages in open or closing objects right now.
    pub fn pending(&self) -> u64 {
        let state = lock(&self.inner.state);
        state.open.values().chain(&state.sealed).map(|g| g.rows).sum()
    }

    /// Discards every open object (after the final flush; their messages were never
    /// acknowledged and come back).
    pub fn discard_open(&self) {
        let mut state = lock(&self.inner.state);
        let open = state.open.len() + state.sealed.len();
        state.open.clear();
        state.sealed.retain(|g| g.closing);
        if open > 0 {
            tracing::info!(sink = self.inner.settings.sink, objects = open, "open batch objects discarded at close");
        }
    }

    /// Where `envelope` was stored, when it was in an object committed or found recently.
    pub fn destination(&self, envelope: &Envelope) -> Option<DestinationRef> {
        let stream = envelope.keyed_stream();
        let sequence = envelope.jetstream().stream_sequence;
        let state = lock(&self.inner.state);
        let (_, committed) = state.recent.iter().rev().find(|(s, c)| *s == *stream && c.set.contains(sequence))?;
        Some(self.inner.log.destination(&committed.object))
    }

    /// Reads `batch` back: stored (and its row's payload fingerprint equal to the
    /// message's), stored with another payload, or missing.
    pub async fn reconcile(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let mut out = Vec::with_capacity(batch.len());
        for envelope in batch {
            let key = self.part_key(envelope);
            self.inner.ensure_loaded(&key).await?;
            let found = {
                let mut state = lock(&self.inner.state);
                state.index.get_mut(&key).and_then(|p| p.lookup(envelope.jetstream().stream_sequence).cloned())
            };
            let Some(committed) = found else {
                out.push(Presence::Missing);
                continue;
            };
            let prints = self.inner.fingerprints(&committed).await?;
            let ours = sinks_contract::payload::normalize(envelope.payload(), PayloadMode::BytesEnvelope)
                .map(|n| n.sha256)
                .unwrap_or_default();
            out.push(match prints.get(&envelope.jetstream().stream_sequence) {
                Some(stored) if *stored == ours => Presence::Equal,
                Some(_) => Presence::Different,
                None => Presence::Missing,
            });
        }
        Ok(out)
    }
}

impl<L: ObjectLog> Inner<L> {
    fn lock_for(&self, key: &PartKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = lock(&self.locks);
        if locks.len() > 4096 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key.clone()).or_default())
    }

    /// Reads the manifest log of `key` unless it is loaded.
    async fn ensure_loaded(&self, key: &PartKey) -> Result<(), SinkError> {
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let guard = self.lock_for(key);
        let _held = guard.lock().await;
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let slots = self.read_new_slots(key, &HashSet::new()).await?;
        let mut part = PartIndex::default();
        for (slot, entry) in slots {
            part.insert(slot, entry);
        }
        let mut state = lock(&self.state);
        let open: Vec<PartKey> = state.open.keys().cloned().collect();
        let keep: Vec<&PartKey> = open.iter().collect();
        state.index.put(key.clone(), part, &keep);
        Ok(())
    }

    /// Reads every manifest of `key` whose slot is not in `known`, completing objects that
    /// are not visible yet.
    async fn read_new_slots(&self, key: &PartKey, known: &HashSet<u64>) -> Result<Vec<(u64, Slot)>, SinkError> {
        let dir = naming::manifest_dir(&key.0, &key.1);
        let mut slots: Vec<u64> = self
            .log
            .list(&dir)
            .await?
            .iter()
            .filter_map(|n| naming::slot_of(n))
            .filter(|s| !known.contains(s))
            .collect();
        if slots.is_empty() {
            return Ok(Vec::new());
        }
        slots.sort_unstable();
        let objects: HashSet<String> = self.log.list(&key.0).await?.into_iter().collect();
        let objects = &objects;
        let dir = &dir;
        let read = futures::stream::iter(slots.into_iter().map(|slot| async move {
            let name = format!("{dir}/{}", naming::manifest_name(slot));
            (slot, self.read_slot(&name, objects).await)
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
        let mut out = Vec::with_capacity(read.len());
        for (slot, entry) in read {
            if let Some(entry) = entry? {
                out.push((slot, entry));
            }
        }
        Ok(out)
    }

    /// One manifest, verified: its object visible (completed now if needed), or void.
    async fn read_slot(&self, name: &str, objects: &HashSet<String>) -> Result<Option<Slot>, SinkError> {
        let Some(bytes) = self.log.read(name).await? else { return Ok(None) };
        let manifest = Manifest::from_bytes(&bytes).map_err(|e| {
            tracing::error!(sink = self.settings.sink, error = %e, "a batch manifest cannot be read; its partition stays blocked until it is repaired");
            SinkError::temporary(format!("unreadable batch manifest: {e}"))
        })?;
        let object_name = manifest.object.rsplit('/').next().unwrap_or_default().to_owned();
        let visible = objects.contains(&object_name) || {
            let completed = self.log.complete(&manifest.object, &manifest.staging).await?;
            if completed {
                tracing::warn!(
                    sink = self.settings.sink,
                    slot = manifest.slot,
                    first = manifest.first,
                    last = manifest.last,
                    "batch object completed from its staging (its writer stopped after committing its manifest)"
                );
            } else {
                tracing::warn!(
                    sink = self.settings.sink,
                    slot = manifest.slot,
                    first = manifest.first,
                    last = manifest.last,
                    "batch manifest without its object or staging: void, its messages are written again"
                );
            }
            completed
        };
        if !visible {
            return Ok(Some(Slot::Void));
        }
        let set = manifest.sequence_set().map_err(SinkError::temporary)?;
        Ok(Some(Slot::Committed(Arc::new(Committed {
            object: manifest.object,
            format: manifest.format,
            compression: manifest.compression,
            set,
        }))))
    }

    /// Appends a batch (blocking: encoders write to files). Holds the state lock.
    fn append(&self, batch: &[Envelope], keys: &[PartKey], failed: &HashMap<PartKey, SinkError>) -> Vec<Appended> {
        let mut state = lock(&self.state);
        let mut blocked: HashSet<OrderKey> = HashSet::new();
        let mut out = Vec::with_capacity(batch.len());
        for (envelope, key) in batch.iter().zip(keys) {
            let order = envelope.order_key();
            if order.is_some_and(|k| blocked.contains(&k)) {
                out.push(Appended::Outcome(MessageOutcome::HeldBack));
                continue;
            }
            let found = self.append_one(&mut state, envelope, key, failed);
            if let (Appended::Outcome(o), Some(k)) = (&found, order)
                && o.failed_temporarily()
            {
                blocked.insert(k);
            }
            out.push(found);
        }
        out
    }

    fn append_one(
        &self,
        state: &mut State,
        envelope: &Envelope,
        key: &PartKey,
        failed: &HashMap<PartKey, SinkError>,
    ) -> Appended {
        let s = &self.settings;
        let seq = envelope.jetstream().stream_sequence;
        if let Some(e) = failed.get(key) {
            return Appended::Outcome(MessageOutcome::Failed(e.duplicate()));
        }
        let Some(part) = state.index.get_mut(key) else {
            return Appended::Outcome(MessageOutcome::temporary("the partition's manifest log is not loaded"));
        };
        if let Some(committed) = part.lookup(seq).cloned() {
            state.remember(&key.1, &committed);
            return Appended::Stored(committed);
        }
        if state.pending(key, seq) {
            return Appended::Outcome(MessageOutcome::Pending);
        }
        let row = match Row::of(envelope, s.payload_mode, &s.batch.columns) {
            Ok(row) => row,
            Err(e) => {
                return Appended::Outcome(MessageOutcome::Failed(
                    SinkError::permanent(format!("cannot build the row: {e}")).with_error_type("SerializationError"),
                ));
            }
        };
        let size = row.size();
        if size > s.batch.max_bytes.min(s.max_row_bytes) {
            return Appended::Outcome(MessageOutcome::Failed(
                SinkError::permanent(format!(
                    "the message's row is {size} bytes, more than one object may hold (sink.batch.max_bytes)"
                ))
                .with_error_type("ValidationError"),
            ));
        }
        // An object never grows past max_bytes: a row that would not fit starts the next.
        if state.open.get(key).is_some_and(|g| g.rows > 0 && g.bytes + size > s.batch.max_bytes) {
            state.seal(key);
        }
        if !state.open.contains_key(key) {
            let group = match self.open_group(key) {
                Ok(group) => group,
                Err(e) => return Appended::Outcome(MessageOutcome::Failed(e)),
            };
            state.open.insert(key.clone(), group);
        }
        let Some(group) = state.open.get_mut(key) else {
            return Appended::Outcome(MessageOutcome::temporary("no open object"));
        };
        let written = group.encoder.as_mut().map(|enc| enc.append(&row));
        match written {
            Some(Ok(())) => {
                group.set.insert(seq);
                group.rows += 1;
                group.bytes += size;
                // Full: it leaves the open set now (the next message starts another object),
                // and the next flush commits it.
                if group.rows >= s.batch.max_messages || group.bytes >= s.batch.max_bytes {
                    state.seal(key);
                }
                Appended::Outcome(MessageOutcome::Pending)
            }
            Some(Err(e)) => {
                let error = SinkError::temporary("cannot write the batch object's temporary file").with_source(e);
                if let Some(group) = state.open.remove(key) {
                    state.fail_group(key, &group.set, &error);
                }
                Appended::Outcome(MessageOutcome::Failed(error))
            }
            None => Appended::Outcome(MessageOutcome::temporary("the open object has no encoder")),
        }
    }

    fn open_group(&self, key: &PartKey) -> Result<Group, SinkError> {
        let temp = self.log.temp(&key.0)?;
        let encoder = encoder(&self.settings.batch, temp.file)
            .map_err(|e| SinkError::temporary("cannot start a batch object").with_source(e))?;
        Ok(Group {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            key: key.clone(),
            set: SeqSet::new(),
            rows: 0,
            bytes: 0,
            opened: Instant::now(),
            encoder: Some(encoder),
            path: temp.path,
            closing: false,
        })
    }

    /// The outcome of a redelivery of a message stored in `committed`.
    async fn existing(&self, envelope: &Envelope, committed: &Arc<Committed>) -> MessageOutcome {
        let s = &self.settings;
        let record = s.record;
        let stored = if !s.content_check {
            Stored::Unchecked
        } else if existing::conditional(s.policy, existing::KeyBasis::StreamSequence) {
            match self.fingerprints(committed).await {
                Ok(prints) => {
                    let ours = sinks_contract::payload::normalize(envelope.payload(), PayloadMode::BytesEnvelope)
                        .map(|n| n.sha256)
                        .unwrap_or_default();
                    existing::compare(prints.get(&envelope.jetstream().stream_sequence).map(String::as_str), &ours)
                }
                Err(e) if !e.is_permanent() => return MessageOutcome::Failed(e),
                Err(_) => Stored::Uncomparable,
            }
        } else {
            Stored::Unchecked
        };
        existing::resolve(envelope, s.policy, existing::KeyBasis::StreamSequence, stored, record)
    }

    /// The payload fingerprints of `committed`'s rows (read back once, then cached).
    async fn fingerprints(&self, committed: &Committed) -> Result<Arc<HashMap<u64, String>>, SinkError> {
        if let Some(p) = lock(&self.prints).get(&committed.object) {
            return Ok(p);
        }
        let Some(file) = self.log.fetch(&committed.object).await? else {
            return Err(SinkError::temporary("a committed batch object is not there (deleted behind the sink?)"));
        };
        let (format, compression) = (committed.format, committed.compression);
        let prints = crate::blocking::blocking(move || {
            let mut map = HashMap::new();
            read_rows(file, format, compression, false, |r| {
                map.insert(r.stream_sequence, r.payload_sha256);
            })
            .map_err(|e| SinkError::permanent(format!("cannot read a batch object back: {e}")))?;
            Ok(map)
        })
        .await?;
        let prints = Arc::new(prints);
        lock(&self.prints).put(committed.object.clone(), Arc::clone(&prints));
        Ok(prints)
    }

    /// Closes one object: finish, stage, claim a slot, complete. Returns its messages'
    /// outcomes. A temporary failure is retried with backoff for `commit_retry_seconds`
    /// (the messages stay pending meanwhile); a permanent one, or one past that time,
    /// fails every message of the object.
    async fn close(&self, c: Closing) -> Vec<Settled> {
        let Closing { id, key, set, rows, encoder, path } = c;
        let retry_for = Duration::from_secs(self.settings.batch.commit_retry_seconds);
        let settled = match self.finish(encoder).await {
            Ok(file) => self.commit_retrying(&key, &set, rows, file, path, retry_for).await,
            Err(e) => Err(e),
        };
        let settled = match settled {
            Ok(outcomes) => outcomes,
            Err(error) => {
                tracing::warn!(
                    sink = self.settings.sink,
                    rows,
                    first = set.first(),
                    last = set.last(),
                    error = %error.display_chain(),
                    "batch object not committed; its messages come back"
                );
                set.iter()
                    .map(|sequence| {
                        Settled::new(stream_of(&key.1), sequence, MessageOutcome::Failed(error.duplicate()))
                    })
                    .collect()
            }
        };
        lock(&self.state).sealed.retain(|g| g.id != id);
        settled
    }

    /// Writes out the object's last bytes: the finished file.
    async fn finish(&self, encoder: Box<dyn Encoder>) -> Result<File, SinkError> {
        crate::blocking::blocking(move || {
            encoder.finish().map_err(|e| SinkError::temporary("cannot finish the batch object").with_source(e))
        })
        .await
    }

    /// [`Self::commit`], tried again while it fails temporarily and `retry_for` lasts, with
    /// jittered backoff from 250 ms to 5 s. Each attempt stages from the same finished file.
    async fn commit_retrying(
        &self,
        key: &PartKey,
        set: &SeqSet,
        rows: u64,
        file: File,
        mut path: Option<tempfile::TempPath>,
        retry_for: Duration,
    ) -> Result<Vec<Settled>, SinkError> {
        let deadline = tokio::time::Instant::now() + retry_for;
        let mut delay = Duration::from_millis(250);
        let mut attempt = 1u32;
        loop {
            // The first attempt stages the finished file itself; a later one a fresh copy of
            // it (a failed attempt may have consumed or removed its temp name).
            let temp = match path.take() {
                Some(path) => TempObject {
                    file: file
                        .try_clone()
                        .map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?,
                    path: Some(path),
                },
                None if attempt == 1 => TempObject {
                    file: file
                        .try_clone()
                        .map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?,
                    path: None,
                },
                None => self.copy_of(&file, &key.0).await?,
            };
            let error = match self.commit(key, set, rows, temp).await {
                Ok(settled) => {
                    if attempt > 1 {
                        tracing::info!(
                            sink = self.settings.sink,
                            attempt,
                            rows,
                            "batch object committed after retries"
                        );
                    }
                    return Ok(settled);
                }
                Err(e) => e,
            };
            let pause = delay.mul_f64(0.5 + rand::random::<f64>() / 2.0);
            if error.is_permanent() || tokio::time::Instant::now() + pause >= deadline {
                return Err(error);
            }
            tracing::warn!(
                sink = self.settings.sink,
                attempt,
                retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
                error = %error.display_chain(),
                "batch object not committed yet; its messages stay pending and the commit is retried"
            );
            tokio::time::sleep(pause).await;
            delay = (delay * 2).min(Duration::from_secs(5));
            attempt += 1;
        }
    }

    /// A new temp object of `partition` holding the bytes of `file`.
    async fn copy_of(&self, file: &File, partition: &str) -> Result<TempObject, SinkError> {
        let mut temp = self.log.temp(partition)?;
        let mut source =
            file.try_clone().map_err(|e| SinkError::temporary("cannot reopen a batch object").with_source(e))?;
        crate::blocking::blocking(move || {
            use std::io::{Seek, Write};
            source
                .rewind()
                .and_then(|()| std::io::copy(&mut source, &mut temp.file))
                .and_then(|_| temp.file.flush())
                .map_err(|e| SinkError::temporary("cannot copy a batch object for another attempt").with_source(e))?;
            Ok(temp)
        })
        .await
    }

    /// One attempt to commit the finished object `temp`: stage, claim a slot, complete.
    async fn commit(
        &self,
        key: &PartKey,
        set: &SeqSet,
        rows: u64,
        temp: TempObject,
    ) -> Result<Vec<Settled>, SinkError> {
        let (Some(first), Some(last)) = (set.first(), set.last()) else { return Ok(Vec::new()) };
        let size = temp.file.metadata().map(|m| m.len()).unwrap_or_default();
        let s = &self.settings;
        let object = naming::join(&key.0, &naming::object_name(&key.1, first, last, s.batch.extension()));
        let staging = self.log.stage(&object, temp, size).await?;
        let manifest = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            stream: key.1.clone(),
            partition: key.0.clone(),
            slot: 0,
            object: object.clone(),
            format: s.batch.format,
            compression: s.batch.effective_compression(),
            first,
            last,
            rows,
            bytes: size,
            sequences: set.to_string(),
            staging: staging.clone(),
        };
        let guard = self.lock_for(key);
        let claimed = {
            let _claiming = guard.lock().await;
            self.claim(key, set, manifest).await
        };
        let slot = match claimed {
            Ok(Claim::Slot(slot)) => slot,
            Ok(Claim::Lost(overlap)) => {
                self.log.discard(&object, &staging).await;
                return Ok(self.abandoned(key, set, &overlap));
            }
            Err(e) => {
                self.log.discard(&object, &staging).await;
                return Err(e);
            }
        };
        // Committed: from here on the manifest names this object, and whoever reads the
        // manifest completes it if this process cannot.
        if !self.log.complete(&object, &staging).await? {
            return Err(SinkError::temporary("the staged batch object vanished before it was completed"));
        }
        let committed = Arc::new(Committed {
            object,
            format: s.batch.format,
            compression: s.batch.effective_compression(),
            set: set.clone(),
        });
        {
            let mut state = lock(&self.state);
            if let Some(part) = state.index.get_mut(key) {
                part.insert(slot, Slot::Committed(Arc::clone(&committed)));
            }
            state.remember(&key.1, &committed);
        }
        tracing::debug!(sink = s.sink, slot, rows, first, last, bytes = size, "batch object committed");
        Ok(set.iter().map(|sequence| Settled::new(stream_of(&key.1), sequence, MessageOutcome::Committed)).collect())
    }

    /// Claims the next free slot of `key`'s manifest log for `manifest` (the caller holds
    /// the partition's lock): before every attempt the whole known log is checked for one
    /// of `set`'s sequences, and a slot taken by another writer is read before the next.
    async fn claim(&self, key: &PartKey, set: &SeqSet, mut manifest: Manifest) -> Result<Claim, SinkError> {
        let mut ambiguous = 0;
        loop {
            self.ensure_loaded_locked(key).await?;
            let (slot, overlap) = {
                let mut state = lock(&self.state);
                let part = state.index.get_mut(key).ok_or_else(|| SinkError::temporary("manifest log evicted"))?;
                (part.next_slot(), part.overlapping(set))
            };
            if !overlap.is_empty() {
                return Ok(Claim::Lost(overlap));
            }
            manifest.slot = slot;
            let name = format!("{}/{}", naming::manifest_dir(&key.0, &key.1), naming::manifest_name(slot));
            match self.log.create(&name, manifest.to_bytes()).await {
                Ok(true) => return Ok(Claim::Slot(slot)),
                Ok(false) => {}
                Err(e) => {
                    // The create may have been made: the slot's manifest tells whose it is.
                    ambiguous += 1;
                    match self.log.read(&name).await {
                        Ok(Some(b)) if Manifest::from_bytes(&b).is_ok_and(|m| m.staging == manifest.staging) => {
                            return Ok(Claim::Slot(slot));
                        }
                        Ok(Some(_)) => {}
                        Ok(None) if ambiguous < AMBIGUOUS_ATTEMPTS => continue,
                        _ => return Err(e),
                    }
                }
            }
            self.refresh(key).await?;
        }
    }

    /// [`Self::ensure_loaded`] for a caller that holds the partition's lock.
    async fn ensure_loaded_locked(&self, key: &PartKey) -> Result<(), SinkError> {
        if lock(&self.state).index.contains(key) {
            return Ok(());
        }
        let slots = self.read_new_slots(key, &HashSet::new()).await?;
        let mut part = PartIndex::default();
        for (slot, entry) in slots {
            part.insert(slot, entry);
        }
        lock(&self.state).index.put(key.clone(), part, &[]);
        Ok(())
    }

    /// Reads the manifests of `key` committed since it was loaded (the caller holds the
    /// partition's lock).
    async fn refresh(&self, key: &PartKey) -> Result<(), SinkError> {
        let known: HashSet<u64> = {
            let mut state = lock(&self.state);
            state.index.get_mut(key).map(|p| p.slots().collect()).unwrap_or_default()
        };
        let slots = self.read_new_slots(key, &known).await?;
        let mut state = lock(&self.state);
        match state.index.get_mut(key) {
            Some(part) => {
                for (slot, entry) in slots {
                    part.insert(slot, entry);
                }
            }
            None => {
                drop(state);
                return Err(SinkError::temporary("manifest log evicted while it was read"));
            }
        }
        Ok(())
    }

    /// The outcomes of an object that lost its slot to one holding some of its messages:
    /// those are duplicates; the rest come back and go into another object.
    fn abandoned(&self, key: &PartKey, set: &SeqSet, overlap: &[Arc<Committed>]) -> Vec<Settled> {
        let mut duplicates = 0u64;
        let out: Vec<Settled> = set
            .iter()
            .map(|sequence| {
                let outcome = if overlap.iter().any(|c| c.set.contains(sequence)) {
                    duplicates += 1;
                    MessageOutcome::Duplicate
                } else {
                    MessageOutcome::temporary("the batch object lost its manifest slot to another writer's object")
                };
                Settled::new(stream_of(&key.1), sequence, outcome)
            })
            .collect();
        tracing::info!(
            sink = self.settings.sink,
            rows = set.len(),
            duplicates,
            "batch object abandoned: another writer committed some of its messages first; the rest come back"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_outcomes_name_the_stream_without_its_epoch() {
        for (keyed, stream) in [("ORDERS", "ORDERS"), ("ORDERS.e17", "ORDERS"), ("A_B-c.e1r2", "A_B-c")] {
            assert_eq!(stream_of(keyed), stream, "{keyed}");
        }
        let e = sinks_contract::testing::envelope("ORDERS", 5, "o", "{}").with_stream_epoch(Some("e17".into()));
        assert_eq!(crate::holding::key_of(&e).0, stream_of(&e.keyed_stream()), "the runner's pending key");
    }
}
