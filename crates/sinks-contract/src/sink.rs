//! The [`Sink`] trait and the per-message outcomes a sink reports.
//!
//! A sink writes a batch of envelopes and returns, for each one, what became of it. It never
//! sees an ack handle: the runner settles every message from its own outcome through the
//! ACK gate, only after [`Sink::write`] has returned. The trait is object safe, so sinks of
//! different kinds can sit side by side as `Arc<dyn Sink>`.
//!
//! A sink that gathers many messages into one record (the file and S3 sinks' batch mode:
//! one object per many messages) *holds* messages across writes: it reports them
//! [`MessageOutcome::Pending`], has the [`Holding`] capability ([`Sink::holding`]), and
//! reports their final outcomes later from [`Holding::flush`], by stream and stream sequence
//! ([`Settled`]). The runner keeps a pending message unacknowledged and heartbeated until
//! then (see `docs/sink-contract.md`, "Holding sinks"); `sinks_toolkit::holding::Durable`
//! turns such a sink back into one that never reports `Pending`, for callers that want a
//! final outcome per write.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;

use crate::envelope::Envelope;
use crate::error::SinkError;

/// What happened to one envelope of a batch.
#[derive(Debug)]
#[non_exhaustive]
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
    /// unacknowledged (heartbeated) and settles it from the outcome a later [`Holding::flush`]
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
#[non_exhaustive]
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

    /// True when the destination throttled the message ([`SinkError::throttled`]).
    pub fn throttled(&self) -> bool {
        matches!(self, Self::Failed(e) if e.is_throttled())
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

/// Result of one [`Sink::write`] call.
///
/// `Ok(outcomes)` has exactly one outcome per input envelope, in input order.
/// `Err(error)` means the failure could not be attributed to single messages and nothing in
/// the batch may be treated as committed; a permanent batch error makes the runner bisect
/// the batch until the poison message is isolated.
pub type BatchResult = Result<Vec<MessageOutcome>, SinkError>;

/// Where a message is stored in a destination: reported by the sink next to the message's
/// outcome ([`Destinations::destination`]) and recorded in the delivery ledger's receipt. Sinks only
/// describe the place; they never publish anything.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
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
    /// A place this enum has no variant for (a topic partition and offset, a document of a
    /// collection, …): the sink names the kind of place and the place itself.
    Other {
        /// What kind of place (`kafka-offset`, `postgres-row`, …), lowercase.
        place: String,
        /// Where, in the destination's own notation (`orders/3@1042`).
        location: String,
    },
}

/// What a sink found when it read one message back from its destination
/// ([`ReadBack::read`]).
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

/// The read-back capability of a sink ([`Sink::read_back`]): reads messages back from the
/// destination without writing anything. Used by `nats-sink reconcile`.
#[async_trait]
pub trait ReadBack: Send + Sync + std::fmt::Debug {
    /// What is checked (e.g. "file exists and payload fingerprint"), stated to the operator.
    fn checks(&self) -> String;

    /// One [`Presence`] per envelope of `batch`, in input order. Must be safe to run next to
    /// a live writer.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError>;
}

/// What an operator is told about a sink without read-back ([`Sink::read_back`] is `None`).
pub fn cannot_read_back(sink: &(impl Sink + ?Sized)) -> String {
    match sink.capabilities().read_back_note {
        Some(note) => format!("the `{}` sink cannot read its destination back: {note}", sink.name()),
        None => format!("the `{}` sink cannot read its destination back", sink.name()),
    }
}

/// What a holding sink asks of whoever writes through it: how long a message may wait for
/// its record, and how often [`Holding::flush`] should be called with [`FlushScope::Due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HoldingSettings {
    /// The longest a message waits in an open record before the record is closed (the
    /// batch mode's `max_age_ms`); closing and committing it take some time on top.
    pub max_wait: Duration,
    /// How often the sink wants to be flushed with [`FlushScope::Due`], so that records that
    /// reached their age (or filled up) are committed promptly.
    pub tick: Duration,
}

impl HoldingSettings {
    /// Settings of a sink whose messages wait at most `max_wait`, flushed every `tick`.
    pub fn new(max_wait: Duration, tick: Duration) -> Self {
        Self { max_wait, tick }
    }
}

/// The holding capability of a sink ([`Sink::holding`]): it gathers many messages into one
/// record (the file and S3 sinks' batch mode), reports them [`MessageOutcome::Pending`] when
/// it takes them, and their final outcomes later from [`Holding::flush`].
#[async_trait]
pub trait Holding: Send + Sync + std::fmt::Debug {
    /// How long a message may wait, and how often to flush.
    fn settings(&self) -> HoldingSettings;

    /// Closes and commits the held records `scope` names, and returns the final outcome of
    /// every pending message decided since the previous call (those of records closed now,
    /// and of records that failed or filled up meanwhile), each exactly once. A message
    /// still in an open record is not reported.
    async fn flush(&self, scope: FlushScope) -> Vec<Settled>;
}

/// Which held records [`Holding::flush`] closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct Settled {
    /// The message's stream.
    pub stream: String,
    /// Its stream sequence.
    pub sequence: u64,
    /// What became of it: committed, duplicate, or a failure (never `Pending` or
    /// `HeldBack`).
    pub outcome: MessageOutcome,
}

impl Settled {
    /// The final `outcome` of the message at `sequence` of `stream`.
    pub fn new(stream: impl Into<String>, sequence: u64, outcome: MessageOutcome) -> Self {
        Self { stream: stream.into(), sequence, outcome }
    }
}

/// The destination-reporting capability of a sink ([`Sink::destinations`]): where each
/// durably settled message is stored, for the delivery ledger.
pub trait Destinations: Send + Sync + std::fmt::Debug {
    /// Told once, before [`Sink::open`], that the core will ask [`Destinations::destination`]
    /// for every settled message (the delivery ledger is on). A sink that must remember
    /// something per message to answer (the HTTP sink keeps each answer's status) keeps
    /// nothing until it is told; one that needs nothing leaves this default, which does
    /// nothing.
    fn enable(&self) {}

    /// Where `envelope` is stored, reported next to its durable `outcome` (committed,
    /// duplicate, kept or overwritten conflict). Called by the core after the write
    /// returned; `None` when the sink cannot say for this message.
    fn destination(&self, envelope: &Envelope, outcome: &MessageOutcome) -> Option<DestinationRef>;
}

/// Static facts about a sink that the runner and the certification suite read. Built with
/// [`Capabilities::new`] and its setters, so that a fact added later defaults to "no".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The sink commits a batch all-or-nothing (one transaction).
    pub atomic_batch: bool,
    /// The sink can tell a redelivery of an already committed message and reports it as
    /// [`MessageOutcome::Duplicate`].
    pub reports_duplicates: bool,
    /// The sink can tell a conflicting redelivery (same key, different content).
    pub detects_conflicts: bool,
    /// When [`Sink::read_back`] is `None`: why, or what would turn it on, told to the operator
    /// after "the `<name>` sink cannot read its destination back" ([`cannot_read_back`]).
    pub read_back_note: Option<&'static str>,
}

impl Capabilities {
    /// No capability: not atomic, no duplicate or conflict detection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Capabilities::atomic_batch`].
    #[must_use]
    pub fn atomic_batch(mut self, on: bool) -> Self {
        self.atomic_batch = on;
        self
    }

    /// Sets [`Capabilities::reports_duplicates`].
    #[must_use]
    pub fn reports_duplicates(mut self, on: bool) -> Self {
        self.reports_duplicates = on;
        self
    }

    /// Sets [`Capabilities::detects_conflicts`].
    #[must_use]
    pub fn detects_conflicts(mut self, on: bool) -> Self {
        self.detects_conflicts = on;
        self
    }

    /// Sets [`Capabilities::read_back_note`].
    #[must_use]
    pub fn read_back_note(mut self, note: &'static str) -> Self {
        self.read_back_note = Some(note);
        self
    }
}

/// The time budget of a write that no consumer's AckWait bounds (tests, tools, spool replay
/// without a runner): four fifths of JetStream's default AckWait of 30 s.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(24);

/// A destination that durably commits batches of envelopes.
///
/// Three methods are required ([`Sink::name`], [`Sink::write`], [`Sink::health_check`]);
/// the others have defaults. An optional capability is one accessor returning the
/// capability object ([`Sink::holding`], [`Sink::read_back`], [`Sink::destinations`]), so a
/// wrapper that forwards the accessor forwards the whole capability: it cannot pass on a
/// flag and drop the behaviour behind it. Wrappers in this workspace are checked with
/// `#[deny(clippy::missing_trait_methods)]`, which fails the lint build when one forgets a
/// method.
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

    /// Writes and commits `batch` within `budget`. MUST return only after every envelope
    /// reported as committed is durable, and MUST report one outcome per envelope in input
    /// order. MUST NOT settle anything: it has no way to. Envelopes that share an
    /// [`Envelope::order_key`] MUST NOT be written concurrently or out of order; one whose
    /// predecessor failed temporarily is reported [`MessageOutcome::HeldBack`].
    ///
    /// A sink that retries failed requests inside the write stops retrying in time to
    /// return within `budget`, reporting the failure as temporary (with the delay it would
    /// have waited as `retry_after`). The runner derives the budget from the consumer's
    /// AckWait, or from the in-progress heartbeats that keep a long write alive; callers
    /// without a consumer pass [`DEFAULT_BUDGET`].
    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult;

    /// Cheap reachability probe of the destination.
    async fn health_check(&self) -> Result<(), SinkError>;

    /// Releases resources after the last write. A holding sink discards what it still holds
    /// (nothing, after the runner's final [`Holding::flush`] with [`FlushScope::All`]); its
    /// messages were never acknowledged and come back.
    async fn close(&self) -> Result<(), SinkError> {
        Ok(())
    }

    /// `Some` when the sink holds messages across writes and reports
    /// [`MessageOutcome::Pending`] (the default: `None`, it never does).
    fn holding(&self) -> Option<&dyn Holding> {
        None
    }

    /// `Some` when the sink can read its destination back for `nats-sink reconcile`. The
    /// default: `None`, it cannot.
    fn read_back(&self) -> Option<&dyn ReadBack> {
        None
    }

    /// `Some` when the sink can say where each settled message is stored (for the delivery
    /// ledger). The default: `None`, it cannot.
    fn destinations(&self) -> Option<&dyn Destinations> {
        None
    }
}

/// `impl Sink for $pointer<S>` forwarding every method to the pointee, written once for the
/// smart pointers below (the lint makes a forgotten method an error).
macro_rules! forward_sink {
    ($(#[$doc:meta])* $pointer:ty) => {
        $(#[$doc])*
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<S: Sink + ?Sized> Sink for $pointer {
            fn name(&self) -> &str {
                (**self).name()
            }
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            async fn open(&self) -> Result<(), SinkError> {
                (**self).open().await
            }
            async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
                (**self).write(batch, budget).await
            }
            async fn health_check(&self) -> Result<(), SinkError> {
                (**self).health_check().await
            }
            async fn close(&self) -> Result<(), SinkError> {
                (**self).close().await
            }
            fn holding(&self) -> Option<&dyn Holding> {
                (**self).holding()
            }
            fn read_back(&self) -> Option<&dyn ReadBack> {
                (**self).read_back()
            }
            fn destinations(&self) -> Option<&dyn Destinations> {
                (**self).destinations()
            }
        }
    };
}

forward_sink!(
    /// A shared sink is a sink: every method forwards.
    std::sync::Arc<S>
);
forward_sink!(
    /// A boxed sink is a sink: every method forwards.
    Box<S>
);

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
        match sink.write(envelopes, budget).await {
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
