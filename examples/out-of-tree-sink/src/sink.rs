//! [`SqliteSink`]: one row per message in a SQLite table, keyed by the message's
//! idempotency key.
//!
//! A write runs on tokio's blocking pool, in one transaction: each message gets a savepoint
//! of its own, so one refused row fails alone, and nothing is reported committed before the
//! transaction's `COMMIT` returned (WAL journal, `synchronous = FULL`: the commit is on disk).
//! Messages are written in batch order, one after another, which keeps the contract's
//! ordering rule; a message behind a temporary failure of its ordering key is held back.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};
use sinks_contract::existing::{self, Stored};
use sinks_contract::idempotency::KeySource;
use sinks_contract::{
    BatchResult, Capabilities, DestinationRef, Destinations, Envelope, MessageOutcome, Presence, ReadBack, Sink,
    SinkError,
};

use crate::config::SqliteSinkConfig;
use crate::error::classify;

/// Runs blocking SQLite work on tokio's blocking pool, so the async runtime is never blocked;
/// a task that panicked is a temporary failure (the batch is redelivered).
async fn blocking<T, F>(f: F) -> Result<T, SinkError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, SinkError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| SinkError::temporary("blocking task failed").with_source(e))?
}

/// The SQLite sink. Cheap to share: the connection sits behind a mutex.
#[derive(Debug, Clone)]
pub struct SqliteSink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: SqliteSinkConfig,
    /// The writing connection, opened by `open` (or by the first write).
    connection: Mutex<Option<Connection>>,
}

impl SqliteSink {
    /// A sink for `config`; nothing is opened until [`Sink::open`] or the first write.
    pub fn new(config: SqliteSinkConfig) -> Self {
        Self { inner: Arc::new(Inner { config, connection: Mutex::new(None) }) }
    }

    /// The configuration in effect.
    pub fn config(&self) -> &SqliteSinkConfig {
        &self.inner.config
    }

    /// The `CREATE TABLE` statement of the sink's table (also printed by `sqlite-sink ddl`).
    pub fn ddl(&self) -> String {
        ddl(&self.inner.config.table)
    }
}

/// The table: the key, where the message came from, and the payload with its fingerprint.
pub fn ddl(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n\
         \x20 idempotency_key TEXT PRIMARY KEY,\n\
         \x20 stream TEXT NOT NULL,\n\
         \x20 stream_epoch TEXT,\n\
         \x20 stream_sequence INTEGER NOT NULL,\n\
         \x20 subject TEXT NOT NULL,\n\
         \x20 message_id TEXT,\n\
         \x20 headers TEXT NOT NULL,\n\
         \x20 payload BLOB NOT NULL,\n\
         \x20 payload_sha256 TEXT NOT NULL,\n\
         \x20 received_at_ms INTEGER NOT NULL\n\
         )"
    )
}

/// Lowercase hex SHA-256 of a payload: what tells a duplicate from a conflict.
fn fingerprint(payload: &[u8]) -> String {
    format!("{:x}", Sha256::digest(payload))
}

impl Inner {
    /// The writing connection's slot. A write that panicked left no half-done work behind (its
    /// transaction rolled back when it was dropped), so a poisoned lock is taken over as is.
    fn slot(&self) -> MutexGuard<'_, Option<Connection>> {
        self.connection.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the database for writing, durable commits on, the table there. The database file
    /// is created only with `create_table` (`test-sink` turns it off to change nothing).
    fn connect(&self) -> Result<Connection, SinkError> {
        let path = &self.config.path;
        let flags = if self.config.create_table {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else if !path.exists() {
            return Err(
                SinkError::config(format!("the database {} does not exist", path.display())).with_field("sink.path")
            );
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        };
        let conn =
            Connection::open_with_flags(&self.config.path, flags).map_err(|e| classify("opening the database", e))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| classify("switching to the wal journal", e))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(|e| classify("setting synchronous = full", e))?;
        if self.config.create_table {
            conn.execute_batch(&ddl(&self.config.table)).map_err(|e| classify("creating the table", e))?;
        }
        let found: Option<i64> = conn
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [&self.config.table], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| classify("looking up the table", e))?;
        if found.is_none() {
            return Err(
                SinkError::config(format!("the table {} does not exist", self.config.table)).with_field("sink.table")
            );
        }
        Ok(conn)
    }

    /// A read-only connection (health checks and read-back): it never creates anything,
    /// and reads beside a live writer (WAL).
    fn reader(&self) -> Result<Connection, SinkError> {
        Connection::open_with_flags(&self.config.path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| classify("opening the database to read", e))
    }

    /// Writes `batch` in one transaction; see the module docs.
    fn write(&self, batch: &[Envelope], deadline: Instant) -> BatchResult {
        let mut slot = self.slot();
        if slot.is_none() {
            *slot = Some(self.connect()?);
        }
        let Some(conn) = slot.as_mut() else { return Err(SinkError::temporary("no connection")) };
        // Waiting for another writer's lock is bounded by what is left of the budget.
        conn.busy_timeout(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| classify("setting the busy timeout", e))?;
        let mut tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify("starting a transaction", e))?;
        let mut held = HashSet::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        for envelope in batch {
            let order = envelope.order_key();
            if order.is_some_and(|k| held.contains(&k)) {
                outcomes.push(MessageOutcome::HeldBack);
                continue;
            }
            let outcome = if Instant::now() >= deadline {
                MessageOutcome::temporary("the write budget was spent before this message was written")
            } else {
                self.write_one(&mut tx, envelope)
            };
            if outcome.failed_temporarily()
                && let Some(key) = order
            {
                held.insert(key);
            }
            outcomes.push(outcome);
        }
        // Only now is anything durable; if the commit fails, nothing of the batch is.
        tx.commit().map_err(|e| classify("committing the transaction", e))?;
        Ok(outcomes)
    }

    /// One message, inside its own savepoint: committed, duplicate, conflict or failed.
    fn write_one(&self, tx: &mut rusqlite::Transaction<'_>, envelope: &Envelope) -> MessageOutcome {
        let key = match self.config.key.key_of(envelope) {
            Ok(key) => key,
            Err(e) => {
                return MessageOutcome::Failed(
                    SinkError::permanent(format!("no idempotency key: {e}")).with_reason(e.reason_code()),
                );
            }
        };
        // Keyed by the origin, the row describes the event as its origin stored it, so the same
        // event through a mirror or a source writes the same row (certification clause C14).
        let event = match self.config.key {
            KeySource::OriginSequence => match envelope.at_origin() {
                Ok(event) => std::borrow::Cow::Owned(event),
                Err(e) => {
                    return MessageOutcome::Failed(SinkError::permanent(e.to_string()).with_reason(e.reason_code()));
                }
            },
            _ => std::borrow::Cow::Borrowed(envelope),
        };
        let envelope = &*event;
        let payload = envelope.payload();
        if payload.len() > self.config.max_payload_bytes {
            return MessageOutcome::Failed(
                SinkError::permanent(format!(
                    "a payload of {} bytes is over sink.max_payload_bytes ({})",
                    payload.len(),
                    self.config.max_payload_bytes
                ))
                .with_reason("payload_too_large"),
            );
        }
        let ours = fingerprint(payload);
        let table = &self.config.table;
        let result = (|| {
            let sp = tx.savepoint()?;
            let stored: Option<String> = sp
                .query_row(
                    &format!("SELECT payload_sha256 FROM {table} WHERE idempotency_key = ?1"),
                    [key.as_str()],
                    |r| r.get(0),
                )
                .optional()?;
            let outcome = match stored {
                None => {
                    let js = envelope.jetstream();
                    sp.execute(
                        &format!(
                            "INSERT INTO {table} (idempotency_key, stream, stream_epoch, stream_sequence, subject, \
                             message_id, headers, payload, payload_sha256, received_at_ms) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                        ),
                        params![
                            key.as_str(),
                            js.stream,
                            envelope.stream_epoch(),
                            js.stream_sequence as i64,
                            envelope.subject(),
                            envelope.message_id(),
                            envelope.headers().to_json().to_string(),
                            payload.as_ref(),
                            ours,
                            (envelope.received_at().unix_timestamp_nanos() / 1_000_000) as i64,
                        ],
                    )?;
                    MessageOutcome::Committed
                }
                Some(stored) => {
                    let found = Stored::compare(Some(&stored), &ours);
                    let decided = existing::decide(self.config.conflict_policy, envelope, &key, found, "sqlite row");
                    if matches!(decided, MessageOutcome::Conflict(sinks_contract::ConflictResolution::Overwritten)) {
                        sp.execute(
                            &format!(
                                "UPDATE {table} SET subject = ?2, message_id = ?3, headers = ?4, payload = ?5, \
                                 payload_sha256 = ?6 WHERE idempotency_key = ?1"
                            ),
                            params![
                                key.as_str(),
                                envelope.subject(),
                                envelope.message_id(),
                                envelope.headers().to_json().to_string(),
                                payload.as_ref(),
                                ours,
                            ],
                        )?;
                    }
                    decided
                }
            };
            sp.commit()?;
            Ok::<_, rusqlite::Error>(outcome)
        })();
        result.unwrap_or_else(|e| MessageOutcome::Failed(classify("writing a row", e)))
    }

    /// What the table holds for each envelope, compared by payload fingerprint.
    fn read_back(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let conn = self.reader()?;
        let sql = format!("SELECT payload_sha256 FROM {} WHERE idempotency_key = ?1", self.config.table);
        let mut select = conn.prepare(&sql).map_err(|e| classify("preparing the read-back", e))?;
        let mut out = Vec::with_capacity(batch.len());
        for envelope in batch {
            let Ok(key) = self.config.key.key_of(envelope) else {
                // Without a key the message was never stored.
                out.push(Presence::Missing);
                continue;
            };
            let stored: Option<String> = select
                .query_row([key.as_str()], |r| r.get(0))
                .optional()
                .map_err(|e| classify("reading a row back", e))?;
            out.push(match stored {
                None => Presence::Missing,
                Some(stored) if stored == fingerprint(envelope.payload()) => Presence::Equal,
                Some(_) => Presence::Different,
            });
        }
        Ok(out)
    }
}

#[async_trait]
impl Sink for SqliteSink {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new().reports_duplicates(true).detects_conflicts(true)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            // At start-up a database that cannot be opened is the operator's to fix.
            let conn = inner.connect().map_err(|e| match e.class() {
                sinks_contract::ErrorClass::Temporary => SinkError::config(e.display_chain()).with_field("sink.path"),
                _ => e,
            })?;
            *inner.slot() = Some(conn);
            Ok(())
        })
        .await
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + budget;
        let inner = Arc::clone(&self.inner);
        // The blocking pool needs owned data: envelopes are cheap to clone (shared bytes).
        let batch = batch.to_vec();
        blocking(move || inner.write(&batch, deadline)).await
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            let conn = inner.reader()?;
            let sql = format!("SELECT COUNT(*) FROM (SELECT 1 FROM {} LIMIT 1)", inner.config.table);
            conn.query_row(&sql, [], |r| r.get::<_, i64>(0)).map_err(|e| classify("probing the table", e))?;
            Ok(())
        })
        .await
    }

    async fn close(&self) -> Result<(), SinkError> {
        // After the last write: nothing holds the lock any more.
        *self.inner.slot() = None;
        Ok(())
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }
}

#[async_trait]
impl ReadBack for SqliteSink {
    fn checks(&self) -> String {
        format!("a row of {} under the message's key, and its payload sha-256", self.inner.config.table)
    }

    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = Arc::clone(&self.inner);
        let batch = batch.to_vec();
        blocking(move || inner.read_back(&batch)).await
    }
}

impl Destinations for SqliteSink {
    /// Nothing to remember: a row's place follows from the message's key.
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let key = self.inner.config.key.key_of(envelope).ok()?;
        Some(DestinationRef::Row { table: self.inner.config.table.clone(), key: key.as_str().to_owned() })
    }
}
