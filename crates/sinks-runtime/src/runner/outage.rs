//! Outage reporting: failed writes logged per batch or, during a destination outage, once
//! when it starts, once per interval, and once when it ends.

use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::error::ErrorClass;
use sinks_contract::sink::MessageOutcome;

use super::context::Ctx;

/// How often a continuing destination outage is summarized in the log.
pub(super) const OUTAGE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A destination outage in progress: batches in which nothing could be written.
#[derive(Debug, Default)]
pub(super) struct Outage {
    /// When the outage began (`None`: no outage).
    since: Option<Instant>,
    /// Failed batches and messages since it began.
    batches: u64,
    messages: u64,
    /// What failed since the last log line.
    window: Failures,
    /// When the last line was logged.
    logged: Option<Instant>,
}

/// The failed messages of one or more batches, for one log line.
#[derive(Debug, Default, Clone)]
pub(super) struct Failures {
    pub(super) batches: u64,
    pub(super) messages: u64,
    pub(super) first_sequence: u64,
    pub(super) last_sequence: u64,
    pub(super) class: Option<ErrorClass>,
    pub(super) reason: String,
}

impl Failures {
    /// The failures of one batch (sequences, the first failure's class and reason).
    pub(super) fn of(envelopes: &[Envelope], outcomes: &[MessageOutcome]) -> Self {
        let mut f = Self::default();
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            let MessageOutcome::Failed(e) = outcome else { continue };
            let seq = envelope.jetstream().stream_sequence;
            if f.messages == 0 {
                f.first_sequence = seq;
                f.last_sequence = seq;
                f.class = Some(e.class());
                f.reason = e.display_chain();
            }
            f.first_sequence = f.first_sequence.min(seq);
            f.last_sequence = f.last_sequence.max(seq);
            f.messages += 1;
        }
        f.batches = u64::from(f.messages > 0);
        f
    }

    /// Adds `other` (later failures): counts and sequence range grow, the latest reason wins.
    pub(super) fn add(&mut self, other: Self) {
        if self.messages == 0 {
            *self = other;
            return;
        }
        self.batches += other.batches;
        self.messages += other.messages;
        self.first_sequence = self.first_sequence.min(other.first_sequence);
        self.last_sequence = self.last_sequence.max(other.last_sequence);
        if other.class.is_some() {
            self.class = other.class;
            self.reason = other.reason;
        }
    }

    pub(super) fn class_name(&self) -> &'static str {
        match self.class {
            Some(ErrorClass::Temporary) | None => "temporary",
            Some(ErrorClass::Permanent) => "permanent",
            Some(ErrorClass::Config) => "config",
        }
    }
}

/// Logs failed writes per batch or, during a destination outage (every message of a batch
/// failed temporarily), once when it starts, once per [`OUTAGE_LOG_INTERVAL`] with what
/// failed meanwhile, and once when a batch makes messages durable with no temporary failure
/// (it has recovered). Each line carries counts, the
/// first and last stream sequence, the error class and the reason; per-message detail is at
/// debug level (in `settle_one`).
pub(super) fn track_outage(ctx: &Ctx, envelopes: &[Envelope], outcomes: &[MessageOutcome], now: Instant) {
    let failures = Failures::of(envelopes, outcomes);
    let any_temporary = outcomes.iter().any(MessageOutcome::failed_temporarily);
    let all_temporary =
        any_temporary && outcomes.iter().all(|o| o.failed_temporarily() || matches!(o, MessageOutcome::HeldBack));
    let any_durable = outcomes.iter().any(MessageOutcome::is_durable);
    let sink = ctx.sink.name();
    let mut outage = ctx.outage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(since) = outage.since {
        // The outage ends with a batch that made something durable and had no temporary
        // failure. A redelivered batch whose already-written messages come back as
        // duplicates while the rest still fails is part of the outage, not its end.
        if any_durable && !any_temporary {
            tracing::info!(
                sink,
                outage_seconds = now.duration_since(since).as_secs(),
                failed_batches = outage.batches,
                failed_messages = outage.messages,
                "destination recovered"
            );
            *outage = Outage::default();
            ctx.metrics.status().set_sink_healthy(true);
        } else if failures.messages > 0 {
            outage.batches += 1;
            outage.messages += failures.messages;
            outage.window.add(failures);
            if outage.logged.is_some_and(|at| now.duration_since(at) >= OUTAGE_LOG_INTERVAL) {
                let f = std::mem::take(&mut outage.window);
                outage.logged = Some(now);
                tracing::warn!(
                    sink,
                    outage_seconds = now.duration_since(since).as_secs(),
                    batches = f.batches,
                    messages = f.messages,
                    first_sequence = f.first_sequence,
                    last_sequence = f.last_sequence,
                    class = f.class_name(),
                    reason = %f.reason,
                    "destination still unavailable"
                );
            }
        }
        return;
    }
    if failures.messages == 0 {
        return;
    }
    let f = &failures;
    let config_error = f.class == Some(ErrorClass::Config);
    if all_temporary {
        *outage = Outage { since: Some(now), logged: Some(now), batches: 1, messages: f.messages, ..Outage::default() };
        ctx.metrics.status().set_sink_healthy(false);
        if config_error {
            tracing::error!(sink, messages = f.messages, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "destination unavailable: nothing in the batch could be written (destination configuration error; retried)");
        } else {
            tracing::warn!(sink, messages = f.messages, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "destination unavailable: nothing in the batch could be written");
        }
        return;
    }
    let written = outcomes.iter().filter(|o| o.is_durable()).count();
    if config_error {
        tracing::error!(sink, messages = f.messages, written, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "messages of the batch were not written (destination configuration error; retried)");
    } else {
        tracing::warn!(sink, messages = f.messages, written, first_sequence = f.first_sequence, last_sequence = f.last_sequence, class = f.class_name(), reason = %f.reason, "messages of the batch were not written");
    }
}
