//! Table mode (`sink.batch.table`): every committed object is added to a Delta Lake table
//! at the sink's root or prefix ([`super::delta`] has the log's format), exactly once.
//!
//! **What a commit records.** The manifest log of a partition and stream is the source of
//! truth for which objects exist; the table follows it. Each manifest log has an
//! application id in the table, `nats-sinks/<stream>/<partition>` (the stream with its
//! epoch when it has one), and a table commit that adds the objects of slots `from..=to`
//! carries a `txn` action of that id at version `to` in the same atomic log entry as their
//! `add` actions. So the table knows, for every manifest log, the slot it reached, and a
//! writer adds exactly the slots after it, in slot order, whoever claimed them (two
//! workers on one consumer, a restarted process completing another's object): versions
//! never go backwards and no slot is added twice.
//!
//! **When.** After a writer completes an object (before any of its messages is
//! acknowledged), and whenever a write touches a manifest log the table has not caught up
//! with (after a crash between the manifest and the table commit, the redelivered messages
//! are found stored, and their object is added before they are reported duplicates).
//! Concurrent requests of one process share one log entry (one `txn` per manifest log).
//!
//! **The commit** is a conditional create of the next `_delta_log/<version>.json`. Taken by
//! another writer: the log is read again and the entry recomputed at the next version. An
//! error (a lost answer: the entry may have landed) reads the entry back: our bytes there
//! mean it landed.
//!
//! **Checkpoints.** The log is read from the latest checkpoint `_last_checkpoint` names
//! (else the newest whole one listed, else from version 0) and the commits after it. After
//! every `checkpoint_interval` commits the snapshot is due as a checkpoint, which the next
//! write or flush writes in a task of its own: a commit never waits for one, and a failed
//! one is logged and made due again by the next commit.

use serde_json::{Value, json};

use super::checkpoint::{self, LAST_CHECKPOINT, Pointer};
use super::delta::{
    AddFile, LOG_DIR, MIN_READER_VERSION, MIN_WRITER_VERSION, Snapshot, TableSchema, TableState as Table, commit_name,
    entry, metadata_action, protocol_action, txn_action,
};
use super::engine::Inner;
use super::groups::lock;
use super::index::{PartKey, Slot};
use super::object_log::ObjectLog;
use sinks_contract::error::SinkError;

/// Log entries tried at most by one sync before it gives up (temporarily).
const MAX_CONFLICTS: u32 = 100;

/// The table's application id of the manifest log of `key`.
pub fn app_id(key: &PartKey) -> String {
    format!("nats-sinks/{}/{}", key.1, key.0)
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis())
        .unwrap_or(i64::MAX)
}

fn commit_info(operation: &str, lineage: Value) -> Value {
    json!({"commitInfo": {
        "timestamp": now_ms(),
        "operation": operation,
        "operationParameters": {"mode": "Append"},
        "engineInfo": concat!("nats-sinks/", env!("CARGO_PKG_VERSION")),
        "isBlindAppend": true,
        "nats_sinks": lineage,
    }})
}

/// What one manifest log adds to a commit.
struct Catchup {
    key: PartKey,
    app: String,
    from: u64,
    to: u64,
    adds: Vec<AddFile>,
}

impl<L: ObjectLog> Inner<L> {
    /// Reads the log entries after `snap`'s into it (an empty snapshot starts at the latest
    /// checkpoint, when there is one).
    async fn read_log(&self, snap: &mut Snapshot) -> Result<(), SinkError> {
        if snap.version.is_none() {
            self.read_start(snap).await?;
        }
        loop {
            let version = snap.next_version();
            let Some(bytes) = self.log.read(&commit_name(version)).await? else { break };
            snap.apply(version, &bytes)
                .map_err(|e| SinkError::temporary(format!("the delta table's log cannot be read: {e}")))?;
        }
        Ok(())
    }

    /// Where an empty snapshot starts: the checkpoint `_last_checkpoint` names; else, when
    /// the log has no version 0 (another tool's log cleanup removed it), the newest
    /// checkpoint listed that reads whole; else nothing (the log is replayed from 0). A log
    /// with commits but neither version 0 nor a readable checkpoint is refused.
    async fn read_start(&self, snap: &mut Snapshot) -> Result<(), SinkError> {
        let hint = match self.log.read(LAST_CHECKPOINT).await? {
            None => None,
            Some(bytes) => Pointer::parse(&bytes)
                .inspect_err(
                    |e| tracing::warn!(sink = self.settings.sink, error = %e, "delta checkpoint pointer ignored"),
                )
                .ok(),
        };
        if let Some(p) = hint
            && self.start_at(snap, p).await?
        {
            return Ok(());
        }
        if self.log.read(&commit_name(0)).await?.is_some() {
            return Ok(());
        }
        let names = self.log.list(LOG_DIR).await?;
        let mut listed: Vec<Pointer> = names.iter().filter_map(|n| Pointer::of_name(n)).collect();
        listed.sort_by_key(|p| std::cmp::Reverse(p.version));
        for p in listed.into_iter().filter(|p| Some(*p) != hint) {
            if self.start_at(snap, p).await? {
                return Ok(());
            }
        }
        if names.iter().any(|n| n.ends_with(".json")) {
            return Err(SinkError::config(
                "sink.batch.table: the delta table's log has no version 0 and no readable checkpoint to start from",
            ));
        }
        Ok(())
    }

    /// Reads checkpoint `p` into `snap`: `false` when it is missing or unreadable (logged).
    async fn start_at(&self, snap: &mut Snapshot, p: Pointer) -> Result<bool, SinkError> {
        let mut parts = Vec::new();
        for name in p.files() {
            match self.log.read(&name).await? {
                Some(bytes) => parts.push(bytes),
                None => {
                    tracing::warn!(sink = self.settings.sink, checkpoint = name, "delta checkpoint missing");
                    return Ok(false);
                }
            }
        }
        let read = crate::blocking::blocking(move || Ok(checkpoint::read(p.version, parts))).await?;
        match read {
            Ok(read) => {
                *snap = read;
                if let Some(table) = &self.table {
                    table.started_at(p.version);
                }
                tracing::info!(sink = self.settings.sink, version = p.version, "delta table read from a checkpoint");
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(sink = self.settings.sink, version = p.version, error = %e, "delta checkpoint unreadable");
                Ok(false)
            }
        }
    }

    /// Writes `snap` as a checkpoint (table mode; see [`Table::take_due`]): the Parquet
    /// file, then `_last_checkpoint` unless it names a later one. Never fails: a failure is
    /// logged, and the next commit makes a checkpoint due again.
    pub(super) async fn write_checkpoint(&self, snap: Snapshot) {
        let Some(table) = &self.table else { return };
        let Some(version) = snap.version else { return table.checkpointed(None) };
        let result = async {
            let (file, pointer) = crate::blocking::blocking(move || {
                checkpoint::write(&snap).map_err(|e| SinkError::temporary(format!("cannot encode a checkpoint: {e}")))
            })
            .await?;
            // Already there (another writer's, whole): only the pointer may be missing.
            self.log.create(&checkpoint::checkpoint_name(version), file).await?;
            let newer = match self.log.read(LAST_CHECKPOINT).await? {
                Some(bytes) => Pointer::parse(&bytes).is_ok_and(|p| p.version >= version),
                None => false,
            };
            if !newer {
                self.log.put(LAST_CHECKPOINT, pointer).await?;
            }
            Ok::<(), SinkError>(())
        }
        .await;
        match result {
            Ok(()) => {
                tracing::debug!(sink = self.settings.sink, version, "delta checkpoint written");
                table.checkpointed(Some(version));
            }
            Err(e) => {
                tracing::warn!(
                    sink = self.settings.sink,
                    version,
                    error = %e.display_chain(),
                    "delta checkpoint not written; tried again after the next commit"
                );
                table.checkpointed(None);
            }
        }
    }

    /// Tries `actions` as the entry after `snap`'s: `true` when it landed (and `snap`
    /// includes it), `false` when another writer's entry is there.
    async fn put_entry(&self, snap: &mut Snapshot, actions: &[Value]) -> Result<bool, SinkError> {
        let version = snap.next_version();
        let name = commit_name(version);
        let body = entry(actions);
        let landed = match self.log.create(&name, body.clone()).await {
            Ok(created) => created,
            // The answer may be lost while the entry landed: the entry there tells.
            Err(e) => match self.log.read(&name).await {
                Ok(Some(there)) => {
                    let ours = there == body;
                    if ours {
                        tracing::warn!(
                            sink = self.settings.sink,
                            version,
                            error = %e.display_chain(),
                            "delta table commit answered with an error but landed"
                        );
                    }
                    ours
                }
                _ => return Err(e),
            },
        };
        if landed {
            snap.apply(version, &body).map_err(SinkError::temporary)?;
        }
        Ok(landed)
    }

    /// Creates the table, or checks its schema against the config's and evolves it (a
    /// `metaData` action adding nullable columns); refuses an incompatible change.
    async fn ensure_table(&self, table: &Table, snap: &mut Snapshot) -> Result<(), SinkError> {
        for _ in 0..MAX_CONFLICTS {
            self.read_log(snap).await?;
            let (reader, writer) = snap.protocol_versions();
            let above = |have: i64, max: u64| u64::try_from(have).map_or(true, |h| h > max);
            if above(reader, MIN_READER_VERSION) || above(writer, MIN_WRITER_VERSION) {
                return Err(SinkError::config(format!(
                    "sink.batch.table: the delta table needs reader version {reader} and writer version {writer}; \
                     table mode writes tables of reader version {MIN_READER_VERSION} and writer version {MIN_WRITER_VERSION}"
                )));
            }
            let actions = match &snap.metadata {
                None => vec![
                    protocol_action(),
                    metadata_action(&table.schema, None, now_ms()),
                    commit_info("CREATE TABLE", json!({})),
                ],
                Some(meta) => {
                    let have = TableSchema::parse(meta)
                        .map_err(|e| SinkError::config(format!("sink.batch.table: the delta table's schema: {e}")))?;
                    match have.evolve_to(&table.schema) {
                        Ok(false) => return Ok(()),
                        Ok(true) => vec![
                            metadata_action(&table.schema, Some(meta), now_ms()),
                            commit_info("ADD COLUMNS", json!({})),
                        ],
                        Err(e) => {
                            return Err(SinkError::config(format!(
                                "sink.batch.columns: the delta table's schema cannot become the config's: {e}"
                            )));
                        }
                    }
                }
            };
            if snap.metadata.is_some() {
                tracing::info!(sink = self.settings.sink, "delta table schema evolved: columns added");
            }
            self.put_entry(snap, &actions).await?;
        }
        Err(SinkError::temporary("the delta table's log kept changing while it was created"))
    }

    /// Opens the table (table mode only): creates it, or checks and evolves its schema.
    pub(super) async fn open_table(&self) -> Result<(), SinkError> {
        let Some(table) = &self.table else { return Ok(()) };
        let mut snap = table.snapshot.lock().await;
        self.ensure_table(table, &mut snap).await
    }

    /// The last slot of `key`'s manifest log that the index knows.
    fn last_slot(&self, key: &PartKey) -> Option<u64> {
        let mut state = lock(&self.state);
        state.index.get_mut(key).and_then(|p| p.next_slot().checked_sub(1))
    }

    /// What `key`'s manifest log adds after slot `done` (none: from 0); `None` when the
    /// table has every slot the index knows, or the index does not hold the log.
    fn catchup(&self, key: &PartKey, done: Option<u64>) -> Result<Option<Catchup>, SinkError> {
        let mut state = lock(&self.state);
        let Some(part) = state.index.get_mut(key) else { return Ok(None) };
        let Some(to) = part.next_slot().checked_sub(1) else { return Ok(None) };
        let from = done.map_or(0, |d| d + 1);
        if from > to {
            return Ok(None);
        }
        let mut adds = Vec::new();
        for slot in from..=to {
            match part.slot(slot) {
                Some(Slot::Committed(c)) => adds.push(AddFile {
                    path: c.object.clone(),
                    size: c.bytes,
                    rows: c.rows,
                    first: c.set.first().unwrap_or(0),
                    last: c.set.last().unwrap_or(0),
                }),
                Some(Slot::Void) => {}
                None => return Err(SinkError::temporary(format!("manifest slot {slot} is not read yet"))),
            }
        }
        Ok(Some(Catchup { key: key.clone(), app: app_id(key), from, to, adds }))
    }

    /// Makes the table hold every object of `key`'s manifest log the index knows (table
    /// mode only): nothing when it does already, else one commit (shared with the other
    /// manifest logs waiting) adding the slots after the table's `txn` version.
    pub(super) async fn sync_table(&self, key: &PartKey) -> Result<(), SinkError> {
        let Some(table) = &self.table else { return Ok(()) };
        let app = app_id(key);
        let Some(last) = self.last_slot(key) else { return Ok(()) };
        if table.reached(&app).is_some_and(|r| r >= last) {
            return Ok(());
        }
        lock(&table.dirty).insert(key.clone());
        let mut snap = table.snapshot.lock().await;
        for _ in 0..MAX_CONFLICTS {
            if table.reached(&app).is_some_and(|r| r >= last) {
                return Ok(());
            }
            self.ensure_table(table, &mut snap).await?;
            lock(&table.dirty).insert(key.clone());
            let keys: Vec<PartKey> = lock(&table.dirty).iter().cloned().collect();
            let mut catchups = Vec::new();
            {
                let mut known = lock(&table.known);
                for k in &keys {
                    let done = snap.txns.get(&app_id(k)).copied();
                    if let Some(d) = done {
                        known.insert(app_id(k), d);
                    }
                    match self.catchup(k, done)? {
                        Some(c) => catchups.push(c),
                        None => {
                            lock(&table.dirty).remove(k);
                        }
                    }
                }
            }
            if catchups.is_empty() {
                continue;
            }
            let now = now_ms();
            let mut actions: Vec<Value> = Vec::new();
            let mut lineage = Vec::new();
            for c in &catchups {
                actions.extend(c.adds.iter().map(|a| a.action(now)));
                actions.push(txn_action(&c.app, c.to, now));
                lineage.push(json!({
                    "stream": c.key.1,
                    "partition": c.key.0,
                    "slots": [c.from, c.to],
                    "first": c.adds.iter().map(|a| a.first).min(),
                    "last": c.adds.iter().map(|a| a.last).max(),
                    "objects": c.adds.iter().map(|a| a.path.as_str()).collect::<Vec<_>>(),
                }));
            }
            actions.push(commit_info("WRITE", json!({"logs": lineage})));
            if self.put_entry(&mut snap, &actions).await? {
                super::crash_point::reached("table_committed");
                table.committed(&snap);
                let mut known = lock(&table.known);
                let mut dirty = lock(&table.dirty);
                for c in &catchups {
                    known.insert(c.app.clone(), c.to);
                    dirty.remove(&c.key);
                }
                tracing::debug!(
                    sink = self.settings.sink,
                    version = snap.version,
                    logs = catchups.len(),
                    objects = catchups.iter().map(|c| c.adds.len()).sum::<usize>(),
                    "delta table commit"
                );
            }
        }
        Err(SinkError::temporary("the delta table's log kept changing: too many conflicting commits"))
    }
}
