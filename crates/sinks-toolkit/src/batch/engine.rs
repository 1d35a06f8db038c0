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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

#[cfg(feature = "parquet")]
use super::delta::TableState;
use super::encode::encoder;
use super::groups::{Group, State, lock, row_refusal};
use super::index::{Committed, Fingerprints, PartKey};
pub use super::object_log::{ObjectLog, Settings, TempObject};
use super::partition::Template;
use super::row::Row;
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::ordering::OrderKey;
use sinks_contract::sink::{DestinationRef, FlushScope, Holding, HoldingSettings, MessageOutcome, Presence, Settled};

/// Manifests read (or objects closed) at once.
pub(super) const PARALLEL: usize = 8;

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

/// What every clone of a writer shares.
#[derive(Debug)]
pub(super) struct Inner<L> {
    pub(super) log: L,
    pub(super) settings: Settings,
    template: Template,
    pub(super) state: Mutex<State>,
    locks: Mutex<HashMap<PartKey, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) prints: Mutex<Fingerprints>,
    next_id: AtomicU64,
    /// The table every committed object is added to (`sink.batch.table`).
    #[cfg(feature = "parquet")]
    pub(super) table: Option<TableState>,
}

/// What appending found for one message.
enum Appended {
    Outcome(MessageOutcome),
    /// Already stored in `object`: a duplicate, or (with the content check) compared first.
    Stored(Arc<Committed>),
}

impl<L: ObjectLog> BatchWriter<L> {
    /// A writer over `log` with `settings` (validated by the sink's config).
    pub fn new(log: L, settings: Settings) -> Self {
        let template = settings.batch.template();
        #[cfg(feature = "parquet")]
        let table = TableState::of(&settings.batch);
        Self {
            inner: Arc::new(Inner {
                log,
                settings,
                template,
                state: Mutex::new(State::default()),
                locks: Mutex::new(HashMap::new()),
                prints: Mutex::new(Fingerprints::default()),
                next_id: AtomicU64::new(1),
                #[cfg(feature = "parquet")]
                table,
            }),
        }
    }

    /// Opens what the writer needs before its first write: with `sink.batch.table`, the
    /// table (created, or its schema checked against the config and evolved by added
    /// columns; an incompatible change is a configuration error). A no-op otherwise.
    pub async fn open(&self) -> Result<(), SinkError> {
        self.inner.open_table().await
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
            // With a table, a manifest log it has not caught up with (a crash between an
            // object and its table commit) is added before its messages are reported stored.
            let result = match inner.ensure_loaded(&k).await {
                Ok(()) => inner.sync_table(&k).await,
                Err(e) => Err(e),
            };
            (k, result)
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
        self.spawn_checkpoint();
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
        let (closing, mut settled) = lock(&self.inner.state).take_due(scope == FlushScope::All, max_age);
        let closed: Vec<Vec<Settled>> = futures::stream::iter(closing.into_iter().map(|c| self.inner.close(c)))
            .buffer_unordered(PARALLEL / 2)
            .collect()
            .await;
        settled.extend(closed.into_iter().flatten());
        self.spawn_checkpoint();
        settled
    }

    /// Table mode: writes the checkpoint a commit made due, in a task of its own (a commit
    /// never waits for it; see `table.rs`), and then any a commit made due meanwhile.
    fn spawn_checkpoint(&self) {
        #[cfg(feature = "parquet")]
        if let Some(snap) = self.inner.table.as_ref().and_then(TableState::take_due) {
            let inner = Arc::clone(&self.inner);
            tokio::spawn(async move {
                let mut next = Some(snap);
                while let Some(snap) = next {
                    inner.write_checkpoint(snap).await;
                    next = inner.table.as_ref().and_then(TableState::take_due);
                }
            });
        }
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
        let committed = state.recent(&stream, sequence)?;
        Some(self.inner.log.destination(&committed.object))
    }

    /// Reads `batch` back: stored (and its row's payload fingerprint equal to the
    /// message's), stored with another payload, or missing.
    pub async fn reconcile(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let mut out = Vec::with_capacity(batch.len());
        for envelope in batch {
            out.push(self.inner.presence(&self.part_key(envelope), envelope).await?);
        }
        Ok(out)
    }
}

impl<L: ObjectLog> Inner<L> {
    pub(super) fn lock_for(&self, key: &PartKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = lock(&self.locks);
        if locks.len() > 4096 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key.clone()).or_default())
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
        if let Some(refusal) = row_refusal(size, &s.batch, s.max_row_bytes) {
            return Appended::Outcome(MessageOutcome::Failed(refusal));
        }
        // An object never grows past max_bytes: a row that would not fit starts the next.
        if state.open.get(key).is_some_and(|g| g.cannot_take(size, s.batch.max_bytes)) {
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
                group.add(seq, size);
                // Full: it leaves the open set now (the next message starts another object),
                // and the next flush commits it.
                if group.is_full(&s.batch) {
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

    /// A new object of `key`'s partition: its temporary file and encoder.
    fn open_group(&self, key: &PartKey) -> Result<Group, SinkError> {
        let temp = self.log.temp(&key.0)?;
        let encoder = encoder(&self.settings.batch, temp.file)
            .map_err(|e| SinkError::temporary("cannot start a batch object").with_source(e))?;
        Ok(Group::new(self.next_id.fetch_add(1, Ordering::Relaxed), key.clone(), Some(encoder), temp.path))
    }
}

/// Without the `parquet` feature there is no table mode (a table needs `format: parquet`,
/// which such a build refuses at start-up): the engine's table hooks do nothing.
#[cfg(not(feature = "parquet"))]
impl<L: ObjectLog> Inner<L> {
    /// Nothing to open.
    pub(super) async fn open_table(&self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Nothing to add objects to.
    pub(super) async fn sync_table(&self, _key: &PartKey) -> Result<(), SinkError> {
        Ok(())
    }
}
