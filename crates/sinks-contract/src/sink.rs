//! The [`Sink`] trait and the per-message outcomes a sink reports.
//!
//! A sink writes a batch of envelopes and returns, for each one, what became of it. It never
//! sees an ack handle: the runner settles every message from its own outcome through the
//! ACK gate, only after `write_batch` has returned. The trait is object safe, so sinks of
//! different kinds can sit side by side as `Arc<dyn Sink>`.
//!
//! A sink that gathers many messages into one record (the file and S3 sinks' batch mode:
//! one object per many messages) *holds* messages across writes: it reports them
//! [`MessageOutcome::Pending`], says so through [`Sink::holding`], and reports their final
//! outcomes later from [`Sink::flush`], by stream and stream sequence ([`Settled`]). The
//! runner keeps a pending message unacknowledged and heartbeated until then (see
//! `docs/sink-contract.md`, "Holding sinks"); [`crate::holding::Durable`] turns such a sink
//! back into one that never reports `Pending`, for callers that want a final outcome per
//! write.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;

use crate::envelope::Envelope;
use crate::error::SinkError;

/// What happened to one envelope of a batch.
#[derive(Debug)]
pub enum MessageOutcome {
    /// Durably committed by this write.
    Committed,
    /// Already committed by an earlier delivery (same key, same or unknown content).
    Duplicate,
    /// The key exists with different content; `resolution` says what the sink did.
    Conflict(ConflictResolution),
    /// Not written; the error's class says whether a retry can help.
    Failed(SinkError),
    /// Not attempted: an earlier message with the same ordering key (see
    /// [`crate::ordering`]) failed temporarily, and writing this one first would overtake
    /// it. Not a failure of this message: the runner releases it for redelivery together
    /// with the message it waits for, never dead-letters it for a neighbour's failure, and
    /// does not count it against `max_retries`.
    HeldBack,
    /// Accepted into a record that is not committed yet (an open object of a holding sink,
    /// see [`Sink::holding`]): not durable, and not a failure. The runner keeps the message
    /// unacknowledged (heartbeated) and settles it from the outcome a later [`Sink::flush`]
    /// reports for its stream sequence. Only a sink that declares [`Sink::holding`] may
    /// report it.
    Pending,
}

/// What a sink did about a conflicting redelivery (same key, different content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictResolution {
    /// The first version was kept; the message is acknowledged and the conflict logged.
    KeptExisting,
    /// The new version replaced the old one; acknowledged and logged.
    Overwritten,
    /// Neither is acceptable: the message is dead-lettered.
    Rejected,
}

/// The five outcome classes of the contract (see `docs/sink-contract.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeClass {
    /// Committed now.
    Committed,
    /// Committed earlier.
    Duplicate,
    /// Same key, different content.
    Conflict,
    /// Failed, retry later.
    FailedTemporary,
    /// Failed, never retry.
    FailedPermanent,
    /// Not attempted, behind a temporary failure of its ordering key.
    HeldBack,
    /// Accepted into a record not committed yet; its final outcome comes from a flush.
    Pending,
}

impl MessageOutcome {
    /// Shorthand for a temporary failure.
    pub fn temporary(message: impl Into<String>) -> Self {
        Self::Failed(SinkError::temporary(message))
    }

    /// Shorthand for a permanent failure.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Failed(SinkError::permanent(message))
    }

    /// A copy of this outcome (a failure's source is rendered into its message).
    pub fn copied(&self) -> Self {
        match self {
            Self::Committed => Self::Committed,
            Self::Duplicate => Self::Duplicate,
            Self::Conflict(r) => Self::Conflict(*r),
            Self::Failed(e) => Self::Failed(e.duplicate()),
            Self::HeldBack => Self::HeldBack,
            Self::Pending => Self::Pending,
        }
    }

    /// The contract class of this outcome (configuration errors count as temporary).
    pub fn class(&self) -> OutcomeClass {
        match self {
            Self::Committed => OutcomeClass::Committed,
            Self::Duplicate => OutcomeClass::Duplicate,
            Self::Conflict(_) => OutcomeClass::Conflict,
            Self::Failed(e) if e.is_permanent() => OutcomeClass::FailedPermanent,
            Self::Failed(_) => OutcomeClass::FailedTemporary,
            Self::HeldBack => OutcomeClass::HeldBack,
            Self::Pending => OutcomeClass::Pending,
        }
    }

    /// True for a temporary failure of this message's own write (not a hold-back, which
    /// is no failure of its own).
    pub fn failed_temporarily(&self) -> bool {
        matches!(self, Self::Failed(e) if !e.is_permanent())
    }

    /// True when the message is durably in the destination (committed, duplicate, or a
    /// conflict that kept or replaced a version).
    pub fn is_durable(&self) -> bool {
        matches!(
            self,
            Self::Committed
                | Self::Duplicate
                | Self::Conflict(ConflictResolution::KeptExisting | ConflictResolution::Overwritten)
        )
    }
}

/// Logs, at debug level, how a sink's batch came out (counts only, never content).
pub fn log_outcomes(sink: &str, outcomes: &[MessageOutcome]) {
    let count = |class: OutcomeClass| outcomes.iter().filter(|o| o.class() == class).count();
    tracing::debug!(
        sink,
        messages = outcomes.len(),
        committed = count(OutcomeClass::Committed),
        duplicates = count(OutcomeClass::Duplicate),
        conflicts = count(OutcomeClass::Conflict),
        failed_temporary = count(OutcomeClass::FailedTemporary),
        failed_permanent = count(OutcomeClass::FailedPermanent),
        held_back = count(OutcomeClass::HeldBack),
        pending = count(OutcomeClass::Pending),
        "batch outcomes"
    );
}

/// Result of one `write_batch` call.
///
/// `Ok(outcomes)` has exactly one outcome per input envelope, in input order.
/// `Err(error)` means the failure could not be attributed to single messages and nothing in
/// the batch may be treated as committed; a permanent batch error makes the runner bisect
/// the batch until the poison message is isolated.
pub type BatchResult = Result<Vec<MessageOutcome>, SinkError>;

/// Where a message is stored in a destination: reported by the sink next to the message's
/// outcome ([`Sink::destination`]) and recorded in the delivery ledger's receipt. Sinks only
/// describe the place; they never publish anything.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DestinationRef {
    /// A file below the sink's root directory.
    File {
        /// Absolute path of the file.
        path: String,
    },
    /// A row of a table (relational and key-value stores).
    Row {
        /// Table name.
        table: String,
        /// Key column value (the idempotency key).
        key: String,
    },
    /// An object in a bucket.
    Object {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// A request to an HTTP endpoint.
    Http {
        /// Endpoint URL (without credentials).
        url: String,
        /// Status of the response that settled the message, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// Value of the configured response id header, when the endpoint sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    /// An entry of a cache (Coherence and similar).
    Cache {
        /// Cache name.
        cache: String,
        /// Entry key.
        key: String,
    },
}

/// What a sink found when it read one message back from its destination
/// ([`Sink::reconcile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// Stored, with the same content (same payload fingerprint).
    Equal,
    /// Stored under the message's key, with different content.
    Different,
    /// Not stored.
    Missing,
    /// Not read back: the sink could check other messages of the batch but not this one (a
    /// fan-out message whose required targets cannot read back). Reconcile treats it like a
    /// sink without read-back: the DLQ and the ledger decide, else it is `unchecked`.
    Unchecked,
}

/// Whether a sink can read its destination back for `nats-sink reconcile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadBack {
    /// Supported; the text says what is checked (e.g. "file exists and payload fingerprint").
    Supported(String),
    /// Not supported; the text says why (stated to the operator as such).
    Unsupported(String),
}

/// What a holding sink (one that reports [`MessageOutcome::Pending`]) asks of whoever
/// writes through it: how long a message may wait for its record, and how often
/// [`Sink::flush`] should be called with [`FlushScope::Due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    /// The longest a message waits in an open record before the record is closed (the
    /// batch mode's `max_age_ms`); closing and committing it take some time on top.
    pub max_wait: Duration,
    /// How often the sink wants to be flushed with [`FlushScope::Due`], so that records that
    /// reached their age (or filled up) are committed promptly.
    pub tick: Duration,
}

/// Which held records [`Sink::flush`] closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushScope {
    /// Those that are due: full, or holding a message that has waited `max_wait`.
    Due,
    /// Every open record (shutdown, or the runner holding as many messages as the consumer
    /// lets it have unacknowledged).
    All,
}

/// The final outcome of a message a holding sink reported [`MessageOutcome::Pending`],
/// named by its stream and stream sequence (what identifies a JetStream message).
#[derive(Debug)]
pub struct Settled {
    /// The message's stream.
    pub stream: String,
    /// Its stream sequence.
    pub sequence: u64,
    /// What became of it: committed, duplicate, or a failure (never `Pending` or
    /// `HeldBack`).
    pub outcome: MessageOutcome,
}

/// Static facts about a sink that the runner and the certification suite read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The sink commits a batch all-or-nothing (one transaction).
    pub atomic_batch: bool,
    /// The sink can tell a redelivery of an already committed message and reports it as
    /// [`MessageOutcome::Duplicate`].
    pub reports_duplicates: bool,
    /// The sink can tell a conflicting redelivery (same key, different content).
    pub detects_conflicts: bool,
}

/// A destination that durably commits batches of envelopes.
#[async_trait]
pub trait Sink: Send + Sync + std::fmt::Debug {
    /// Short kind name (`file`, `mysql`, …) used in logs, DLQ headers and reports.
    fn name(&self) -> &str;

    /// What this destination can promise.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Prepares the destination (directories, pools, schema). Called once before the first
    /// write. A [`crate::ErrorClass::Config`] error here stops start-up with exit code 2.
    async fn open(&self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Writes and commits `batch`. MUST return only after every envelope reported as
    /// committed is durable, and MUST report one outcome per envelope in input order.
    /// MUST NOT settle anything: it has no way to. Envelopes that share an
    /// [`Envelope::order_key`] MUST NOT be written concurrently or out of order; one whose
    /// predecessor failed temporarily is reported [`MessageOutcome::HeldBack`].
    async fn write_batch(&self, batch: &[Envelope]) -> BatchResult;

    /// [`Sink::write_batch`] with a time budget: a sink that retries failed requests inside
    /// the write stops retrying in time to return within `budget` (reporting the failure
    /// as temporary, with the delay it would have waited as `retry_after`). The runner
    /// derives the budget from the consumer's AckWait, or from the in-progress heartbeats
    /// that keep a long write alive. The default ignores the budget.
    async fn write_batch_within(&self, batch: &[Envelope], budget: std::time::Duration) -> BatchResult {
        let _ = budget;
        self.write_batch(batch).await
    }

    /// Cheap reachability probe of the destination.
    async fn health_check(&self) -> Result<(), SinkError>;

    /// Releases resources after the last write. A holding sink discards what it still holds
    /// (nothing, after the runner's final [`Sink::flush`] with [`FlushScope::All`]); its
    /// messages were never acknowledged and come back.
    async fn close(&self) -> Result<(), SinkError> {
        Ok(())
    }

    /// `Some` when the sink holds messages across writes and reports
    /// [`MessageOutcome::Pending`] (the default: `None`, it never does).
    fn holding(&self) -> Option<Holding> {
        None
    }

    /// Closes and commits the held records `scope` names, and returns the final outcome of
    /// every pending message decided since the previous call (those of records closed now,
    /// and of records that failed or filled up meanwhile), each exactly once. A message
    /// still in an open record is not reported. The default holds nothing and returns
    /// nothing.
    async fn flush(&self, scope: FlushScope) -> Vec<Settled> {
        let _ = scope;
        Vec::new()
    }

    /// Told once, before [`Sink::open`], that the core will ask [`Sink::destination`] for
    /// every settled message (the delivery ledger is on). A sink that must remember something
    /// per message to answer (the HTTP sink keeps each answer's status) keeps nothing until it
    /// is told; a sink that wraps another passes it on. The default does nothing.
    fn report_destinations(&self) {}

    /// Where `envelope` is stored, reported next to its durable `outcome` (committed,
    /// duplicate, kept or overwritten conflict) for the delivery ledger. Called by the core
    /// after the write returned; `None` (the default) when the sink cannot say. What a sink
    /// remembers per message only for this, it remembers once [`Sink::report_destinations`]
    /// was called.
    fn destination(&self, envelope: &Envelope, outcome: &MessageOutcome) -> Option<DestinationRef> {
        let _ = (envelope, outcome);
        None
    }

    /// Whether [`Sink::reconcile`] is implemented, and what it checks.
    fn read_back(&self) -> ReadBack {
        ReadBack::Unsupported(format!("the `{}` sink cannot read its destination back yet", self.name()))
    }

    /// Reads `batch` back from the destination without writing anything: one [`Presence`]
    /// per envelope, in input order. Used by `nats-sink reconcile`; must be safe to run
    /// next to a live writer. The default reports the sink as unsupported.
    async fn reconcile(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let _ = batch;
        Err(SinkError::permanent(format!("the `{}` sink cannot read its destination back", self.name())))
    }
}

/// Writes `envelopes` through `sink` within `budget`, and when the sink fails the whole
/// batch permanently, bisects until each permanent failure is pinned to a single message.
/// Always returns one outcome per envelope (a misaligned answer counts as a temporary
/// failure of every envelope). Used by the runner and by spool replay.
pub fn write_isolating<'a>(
    sink: &'a dyn Sink,
    envelopes: &'a [Envelope],
    budget: Duration,
) -> Pin<Box<dyn Future<Output = Vec<MessageOutcome>> + Send + 'a>> {
    Box::pin(async move {
        match sink.write_batch_within(envelopes, budget).await {
            Ok(outcomes) if outcomes.len() == envelopes.len() => outcomes,
            Ok(outcomes) => {
                tracing::error!(
                    sink = sink.name(),
                    expected = envelopes.len(),
                    got = outcomes.len(),
                    "sink broke the contract: wrong number of outcomes; treating the batch as a temporary failure"
                );
                envelopes.iter().map(|_| MessageOutcome::temporary("sink returned a misaligned outcome list")).collect()
            }
            Err(e) if e.is_permanent() && envelopes.len() > 1 => {
                let mid = envelopes.len() / 2;
                tracing::info!(messages = envelopes.len(), error = %e, "batch failed permanently; bisecting to isolate the poison message");
                let mut left = write_isolating(sink, &envelopes[..mid], budget).await;
                left.extend(write_isolating(sink, &envelopes[mid..], budget).await);
                left
            }
            Err(e) => envelopes.iter().map(|_| MessageOutcome::Failed(e.duplicate())).collect(),
        }
    })
}
