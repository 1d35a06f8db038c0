//! [`MemorySink`]: a sink that keeps committed payloads in memory, keyed by idempotency key,
//! with injectable faults. It keeps the whole delivery contract, so the certification suite
//! and the runner tests use it as the reference implementation.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::existing;
use sinks_contract::sink::{BatchResult, Capabilities, MessageOutcome, Sink};

/// Faults to inject into a [`MemorySink`].
#[derive(Debug, Default)]
pub struct FaultPlan {
    /// Fail this many upcoming `write` calls with a temporary batch error.
    pub fail_batches: AtomicUsize,
    /// Reject payloads equal to this as permanent, as a batch-level error that does not say
    /// which message was bad (forces the runner to bisect).
    pub poison_payload: Mutex<Option<Bytes>>,
    /// Act as if the destination were unreachable.
    pub unreachable: AtomicBool,
    /// Make every `write` take this many milliseconds.
    pub write_delay_ms: AtomicU64,
    /// Stream sequences whose first write attempt fails temporarily (each once); later
    /// messages of the same ordering key in that batch are held back, as the contract asks.
    pub fail_once: Mutex<HashSet<u64>>,
}

/// In-memory destination keyed by idempotency key.
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<HashMap<String, Bytes>>,
    commits: Mutex<Vec<(u64, Option<sinks_contract::OrderKey>)>>,
    writes: AtomicUsize,
    key: sinks_contract::idempotency::KeySource,
    /// Injected faults.
    pub faults: FaultPlan,
}

impl MemorySink {
    /// An empty sink without faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty sink that keys each message by `key` (the default: the envelope's own key).
    pub fn keyed_by(key: sinks_contract::idempotency::KeySource) -> Self {
        Self { key, ..Self::default() }
    }

    /// The committed payload for `key`, read without going through `write`.
    pub fn get(&self, key: &str) -> Option<Bytes> {
        self.lock().get(key).cloned()
    }

    /// Replaces (`Some`) or removes (`None`) the record of `key` behind the sink's back.
    pub fn set(&self, key: &str, payload: Option<Bytes>) {
        let mut records = self.lock();
        match payload {
            Some(p) => records.insert(key.to_owned(), p),
            None => records.remove(key),
        };
    }

    /// Every committed record as `(key, payload)`.
    pub fn records(&self) -> Vec<(String, Bytes)> {
        self.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Number of committed records.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(stream sequence, ordering key)` of every commit, in commit order.
    pub fn commits(&self) -> Vec<(u64, Option<sinks_contract::OrderKey>)> {
        self.commits.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Number of `write` calls so far.
    pub fn write_calls(&self) -> usize {
        self.writes.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Bytes>> {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl Sink for MemorySink {
    fn name(&self) -> &str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new().atomic_batch(false).reports_duplicates(true).detects_conflicts(true)
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let delay = self.faults.write_delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        if self.faults.unreachable.load(Ordering::Relaxed) {
            return Err(SinkError::temporary("memory destination unreachable"));
        }
        let pending = self.faults.fail_batches.load(Ordering::Relaxed);
        if pending > 0 {
            self.faults.fail_batches.store(pending - 1, Ordering::Relaxed);
            return Err(SinkError::temporary("injected temporary failure"));
        }
        let poison = self.faults.poison_payload.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(p) = poison
            && batch.iter().any(|e| *e.payload() == p)
        {
            return Err(SinkError::permanent("batch contains a rejected payload"));
        }
        let mut fail_once = self.faults.fail_once.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut commits = self.commits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut records = self.lock();
        let mut blocked = HashSet::new();
        let outcomes = batch
            .iter()
            .map(|e| {
                if e.order_key().is_some_and(|k| blocked.contains(&k)) {
                    return MessageOutcome::HeldBack;
                }
                if fail_once.remove(&e.jetstream().stream_sequence) {
                    blocked.extend(e.order_key());
                    return MessageOutcome::temporary("injected temporary failure of one message");
                }
                let key = match self.key.key_of(e) {
                    Ok(k) => k,
                    Err(err) => return MessageOutcome::Failed(SinkError::permanent(err.to_string())),
                };
                let basis = existing::KeyBasis::of_key(&key);
                let key = key.to_string();
                match records.get(&key) {
                    Some(existing) if existing == e.payload() => MessageOutcome::Duplicate,
                    Some(_) => existing::decide(
                        existing::OnExisting::Keep,
                        e,
                        basis,
                        existing::Stored::Different,
                        "memory key",
                    ),
                    None => {
                        records.insert(key, e.payload().clone());
                        commits.push((e.jetstream().stream_sequence, e.order_key()));
                        MessageOutcome::Committed
                    }
                }
            })
            .collect();
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        if self.faults.unreachable.load(Ordering::Relaxed) {
            Err(SinkError::temporary("memory destination unreachable"))
        } else {
            Ok(())
        }
    }
}
