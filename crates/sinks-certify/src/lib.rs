//! The sink certification suite: one async case per clause of `docs/sink-contract.md`,
//! run against any sink through a [`Harness`], and an in-memory reference sink
//! ([`MemorySink`]) that keeps every clause.
//!
//! Not a stable API, and destructive: a harness hands out fresh, isolated destinations
//! (a new directory, table or bucket prefix) and the cases write whatever they need into them.
//! A sink's `tests/certify.rs` runs each case as its own test ([`certify_tests!`]), each
//! recording its result ([`record_case`]); `cargo xtask certify` runs those tests through
//! cargo, sink by sink, and renders the matrix from the records ([`read_results`]). A case that cannot run fails, unless
//! the harness says its destination is missing for a reason on the one allow-list
//! ([`skips`]): then every case is an [`Outcome::Skip`] naming the entry, which is printed
//! at the end of the run and never counted as a pass.
#![deny(missing_docs)]

mod cases;
pub mod crash;
pub mod delta_log;
mod logs;
mod memory;
mod memory_sink;
mod report;
pub mod skips;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::FutureExt;

pub use cases::*;
pub use memory::MemoryHarness;
pub use memory_sink::{FaultPlan, MemorySink};
pub use report::{CaseResult, Outcome, RESULTS_ENV, SinkReport, read_results, record_case};

use sinks_contract::sink::Sink;

/// One record as the destination holds it: `(idempotency key, stored payload bytes)`.
pub type Record = (String, Bytes);

/// Reads a destination without going through the sink.
#[async_trait]
pub trait Records: Send + Sync {
    /// Every record the destination holds, duplicates included (a destination that can hold
    /// one key twice must return it twice).
    async fn read_all(&self) -> Result<Vec<Record>, String>;

    /// Every record as the destination stores it, whole (`(idempotency key, the stored
    /// bytes)`: the file, object, request body, entry or row as written, not just the
    /// payload), when the harness can show it: what clause C13 compares between two
    /// deliveries of one event. `Ok(None)` (the default): the harness shows payloads only, and
    /// C13 compares those.
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        Ok(None)
    }
}

/// A sink bound to a fresh, isolated destination, and a reader for that destination.
pub struct Fixture {
    /// The sink under test (already opened).
    pub sink: Arc<dyn Sink>,
    /// Reads what the destination durably holds.
    pub records: Box<dyn Records>,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture").field("sink", &self.sink).finish_non_exhaustive()
    }
}

/// Why a harness has no destination, for a reason on the allow-list ([`skips`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The allow-list entry ([`skips::ALLOWED_SKIPS`]).
    pub allowed: &'static str,
    /// What exactly is missing (an unset variable, say).
    pub detail: String,
}

/// What a sink crate provides so the suite can observe its destination from outside.
#[async_trait]
pub trait Harness: Send + Sync {
    /// Short sink name (`file`, `mysql`, …) used in reports.
    fn name(&self) -> &'static str;

    /// `Some` when this harness's destination cannot be had here for an allow-listed
    /// reason: every clause is then skipped, naming the entry. `None` (the default) for
    /// every destination the project can start itself: then a missing destination fails.
    fn unavailable(&self) -> Option<Unavailable> {
        None
    }

    /// Like [`Harness::unavailable`], for the crash certification only (which needs a
    /// destination outside the test process).
    fn crash_unavailable(&self) -> Option<Unavailable> {
        self.unavailable()
    }

    /// A fresh, isolated destination with the sink's default payload mode, and a sink bound
    /// to it. `Err(reason)` when the destination cannot be had (the case fails).
    async fn fresh(&self) -> Result<Fixture, String>;

    /// A fresh destination whose sink rejects `poison` permanently, if one can be made.
    async fn poison(&self) -> Option<(Fixture, sinks_contract::Envelope)> {
        None
    }

    /// A fresh destination whose sink keys each message by `origin_sequence` (clause C14). The
    /// default offers none, which fails C14 unless [`Harness::no_key_per_event`] says why it
    /// cannot apply.
    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        None
    }

    /// Why this sink mode has no key of its own per event (batch objects, the spool's custody
    /// copy), which skips C14 under the allow-listed [`skips::NO_KEY_PER_EVENT`]; `None` (the
    /// default) for a sink that keys each message.
    fn no_key_per_event(&self) -> Option<&'static str> {
        None
    }

    /// A sink whose destination is unreachable (closed port, removed directory), if one can
    /// be made.
    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        None
    }

    /// Secrets configured for this sink's fixtures; they must never appear in logs.
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// A fresh destination for the crash certification: the `sink` config section that
    /// `nats-sink run` should use (with `type`), and a reader for that destination. The
    /// sink must key records by the default idempotency key (stream sequence).
    async fn crash_target(&self) -> Result<CrashTarget, String> {
        Err("this harness offers no crash target".into())
    }
}

/// Where a crash certification run writes, and how to read it back.
pub struct CrashTarget {
    /// The `sink` section for the `nats-sink` config, `type` included.
    pub sink_section: serde_json::Value,
    /// Reads the destination (owns whatever must live as long as the destination).
    pub records: Box<dyn Records>,
    /// Environment variables `nats-sink` needs for this destination (secrets named by the
    /// section's `*_env` fields); empty for most sinks.
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for CrashTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashTarget").field("sink_section", &self.sink_section).finish_non_exhaustive()
    }
}

type CaseFn = for<'a> fn(&'a dyn Harness) -> futures::future::BoxFuture<'a, Outcome>;

/// Shows that a harness's crash target is usable: writes five envelopes of stream `CRASH`
/// through `sink` (opened, built from `target.sink_section`; a holding sink is flushed) and
/// checks that
/// `target.records` returns exactly them, keyed by stream sequence, payloads intact.
pub async fn check_crash_target(target: &CrashTarget, sink: &dyn Sink) -> Result<(), String> {
    let batch: Vec<sinks_contract::Envelope> =
        (1..=5).map(|s| sinks_contract::testing::envelope("CRASH", s, "crash.x", format!("{{\"s\":{s}}}"))).collect();
    let mut outcomes = sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await.map_err(|e| e.display_chain())?;
    // A holding sink (batch mode) reports them pending: its flush commits them.
    if outcomes.iter().any(|o| matches!(o, sinks_contract::MessageOutcome::Pending))
        && let Some(holding) = sink.holding()
    {
        for settled in holding.flush(sinks_contract::FlushScope::All).await {
            if let Some(i) = batch.iter().position(|e| e.jetstream().stream_sequence == settled.sequence) {
                outcomes[i] = settled.outcome;
            }
        }
    }
    if !outcomes.iter().all(|o| matches!(o, sinks_contract::MessageOutcome::Committed)) {
        return Err(format!("not all committed: {outcomes:?}"));
    }
    let mut records = target.records.read_all().await?;
    records.sort();
    let expected: Vec<Record> =
        (1..=5).map(|s| (format!("stream-sequence:CRASH:{s}"), Bytes::from(format!("{{\"s\":{s}}}")))).collect();
    if records != expected {
        return Err(format!("read back {records:?}, expected {expected:?}"));
    }
    Ok(())
}

/// Every clause: `(id, title, case)`.
pub const CLAUSES: &[(&str, &str, CaseFn)] = &[
    ("C1", "durable before success", |h| Box::pin(c1_durable_before_success(h))),
    ("C2", "outcomes aligned with the input", |h| Box::pin(c2_outcomes_aligned(h))),
    ("C3", "empty batch", |h| Box::pin(c3_empty_batch(h))),
    ("C4", "duplicate redelivery is harmless", |h| Box::pin(c4_duplicate_is_harmless(h))),
    ("C5", "conflicting redelivery is detected", |h| Box::pin(c5_conflict_is_detected(h))),
    ("C6", "poison is isolated and permanent", |h| Box::pin(c6_poison_is_isolated(h))),
    ("C7", "unreachable is temporary", |h| Box::pin(c7_unreachable_is_temporary(h))),
    ("C8", "payload edge cases", |h| Box::pin(c8_payload_edge_cases(h))),
    ("C9", "concurrent batches", |h| Box::pin(c9_concurrent_batches(h))),
    ("C10", "health check", |h| Box::pin(c10_health_check(h))),
    ("C11", "no secrets or payloads in logs", |h| Box::pin(c11_no_secrets_or_payloads_in_logs(h))),
    ("C12", "a reused stream sequence is refused", |h| Box::pin(c12_reused_sequence_is_refused(h))),
    ("C13", "one event, one content", |h| Box::pin(c13_one_event_one_content(h))),
    ("C14", "one key for an event through a mirror or a source", |h| Box::pin(c14_one_key_whatever_the_path(h))),
];

/// Runs one clause by id, catching panics as failures.
pub async fn run_case(harness: &dyn Harness, id: &str) -> CaseResult {
    let Some((id, title, case)) = CLAUSES.iter().find(|(i, _, _)| *i == id) else {
        return CaseResult::new(id, "unknown clause", Outcome::Fail(format!("no clause {id}")));
    };
    if let Some(missing) = harness.unavailable() {
        return CaseResult::new(id, title, skipped(&missing));
    }
    let outcome = match AssertUnwindSafe(case(harness)).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".into());
            Outcome::Fail(format!("panicked: {text}"))
        }
    };
    CaseResult::new(id, title, outcome)
}

/// The outcome of a case whose destination is `missing`: a skip naming its allow-list
/// entry, or a failure when the entry is not on the list.
pub fn skipped(missing: &Unavailable) -> Outcome {
    match skips::allowed(missing.allowed) {
        Some(entry) => Outcome::Skip { allowed: entry.id.to_owned(), reason: missing.detail.clone() },
        None => Outcome::Fail(format!(
            "cannot run ({}), and `{}` is not on the allow-list of skips",
            missing.detail, missing.allowed
        )),
    }
}

/// Runs every clause against `harness`.
pub async fn run_all(harness: &dyn Harness) -> SinkReport {
    let mut cases = Vec::with_capacity(CLAUSES.len());
    for (id, _, _) in CLAUSES {
        cases.push(run_case(harness, id).await);
    }
    SinkReport { sink: harness.name().to_owned(), cases, crash: None }
}

/// Asserts a clause outcome inside a `#[test]`: panics on a failure (a case that could not
/// run included); an allow-listed skip is printed and recorded in the skip log
/// ([`skips::record_allowed_skip`]).
pub fn assert_case(sink: &str, result: &CaseResult) {
    match &result.outcome {
        Outcome::Pass => {}
        Outcome::Skip { allowed, reason } => {
            skips::record_allowed_skip(allowed, &format!("{sink} {} ({})", result.id, result.title), reason);
        }
        Outcome::Fail(reason) => panic!("{} ({}) failed: {reason}", result.id, result.title),
    }
}

/// Generates one `#[tokio::test]` per clause for `$harness` (an expression evaluated in each
/// test), so a failure names its clause: `sinks_certify::certify_tests!(FileHarness);`. Only
/// an allow-listed skip does not fail (see [`assert_case`]). Each result is also recorded
/// for the matrix when [`RESULTS_ENV`] is set ([`record_case`]).
#[macro_export]
macro_rules! certify_tests {
    ($harness:expr) => {
        $crate::certify_tests!(@case $harness, c1_durable_before_success, "C1");
        $crate::certify_tests!(@case $harness, c2_outcomes_aligned, "C2");
        $crate::certify_tests!(@case $harness, c3_empty_batch, "C3");
        $crate::certify_tests!(@case $harness, c4_duplicate_is_harmless, "C4");
        $crate::certify_tests!(@case $harness, c5_conflict_is_detected, "C5");
        $crate::certify_tests!(@case $harness, c6_poison_is_isolated, "C6");
        $crate::certify_tests!(@case $harness, c7_unreachable_is_temporary, "C7");
        $crate::certify_tests!(@case $harness, c8_payload_edge_cases, "C8");
        $crate::certify_tests!(@case $harness, c9_concurrent_batches, "C9");
        $crate::certify_tests!(@case $harness, c10_health_check, "C10");
        $crate::certify_tests!(@case $harness, c11_no_secrets_or_payloads_in_logs, "C11");
        $crate::certify_tests!(@case $harness, c12_reused_sequence_is_refused, "C12");
        $crate::certify_tests!(@case $harness, c13_one_event_one_content, "C13");
        $crate::certify_tests!(@case $harness, c14_one_key_whatever_the_path, "C14");
    };
    (@case $harness:expr, $name:ident, $id:literal) => {
        #[tokio::test]
        async fn $name() {
            let harness = $harness;
            let result = $crate::run_case(&harness, $id).await;
            $crate::record_case($crate::Harness::name(&harness), &result, None);
            $crate::assert_case($crate::Harness::name(&harness), &result);
        }
    };
}
