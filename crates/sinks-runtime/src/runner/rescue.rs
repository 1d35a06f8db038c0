//! The rescue: the last chance of a message the server stopped redelivering.
//!
//! JetStream gives up on a message after its consumer's `max_deliver` deliveries and says so
//! only in a `MAX_DELIVERIES` advisory. A run that is alive during that last delivery
//! dead-letters a message it cannot write; one that was killed then would lose it. The
//! capture stream (`crate::setup::ensure_capture`) keeps those advisories, and this task
//! reads them through the rescue consumer (shared by every worker of the consumer, so one
//! advisory goes to one worker), reads each message back from its stream by sequence, and
//! gives it the same policy steps and write as a fetched message, without an ordering key (it
//! must not wait behind anything). Durable (committed, or found already stored): done. Not:
//! dead-lettered with reason `max_deliver_exhausted`, its delivery count and the error of this
//! attempt. Without a dead-letter stream, or when the dead-letter publish fails, the
//! advisory is NAKed and the rescue tried again later: the message stays in its stream, so it
//! is never dropped by the sink. A message the stream no longer holds is counted and logged
//! once (`nats-sink reconcile` shows it as `gone`).
//!
//! The advisory is acknowledged only after the message's outcome is durable (its record, or
//! its dead letter, and its ledger receipt); a rescue repeated after a crash finds the record
//! (a duplicate) or stores the same dead letter (deduplicated by `Nats-Msg-Id`).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt;
use serde::Deserialize;
use sinks_contract::envelope::{Envelope, JetStreamInfo};
use sinks_contract::sink::MessageOutcome;
use sinks_policy::Prepared;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::RunStats;
use super::context::Ctx;
use super::heartbeat::keep_alive;
use crate::ack::{AfterDeadLetter, Settlement};
use crate::metrics::CounterId;
use crate::setup::Capture;
use crate::source::{AckHandle, handle_of, headers_of};

/// The fields of a `io.nats.jetstream.advisory.v1.max_deliver` advisory the rescue reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(super) struct Exhausted {
    /// Source stream.
    pub(super) stream: String,
    /// Consumer whose deliveries ran out.
    pub(super) consumer: String,
    /// The message's stream sequence.
    pub(super) stream_seq: u64,
    /// Deliveries the server made.
    pub(super) deliveries: u64,
    /// When the server gave up (RFC 3339), when the advisory says.
    #[serde(default)]
    pub(super) timestamp: Option<String>,
}

impl Exhausted {
    /// True when the server gave up before `created`: the advisory names a message of an
    /// earlier stream of the same name (deleted and created again since), not this one's.
    pub(super) fn predates(&self, created: Option<OffsetDateTime>) -> bool {
        let at = self
            .timestamp
            .as_deref()
            .and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok());
        matches!((at, created), (Some(at), Some(created)) if at < created)
    }
}

impl Exhausted {
    /// The advisory in `payload`, if it is one.
    pub(super) fn parse(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice(payload).ok().filter(|a: &Self| a.stream_seq > 0)
    }
}

/// How long a NAKed advisory waits before the rescue tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// One advisory being handled: its ack handle and the message it names.
struct Case {
    advisory: AckHandle,
    exhausted: Exhausted,
}

/// Reads the capture stream until a stop is requested, rescuing what it names.
pub(super) async fn rescue_loop(ctx: Arc<Ctx>, capture: Capture, mut stop: watch::Receiver<bool>) {
    let batch = ctx.config.rescue.batch_size;
    tracing::info!(stream = %capture.stream, "rescue of exhausted messages on");
    loop {
        if *stop.borrow() {
            return;
        }
        // While the stream's identity is undecided nothing is written, rescued or not.
        if ctx.guard.paused() && !ctx.guard.wait_open(&stop).await {
            return;
        }
        let fetched = tokio::select! {
            fetched = capture.consumer.fetch().max_messages(batch).expires(Duration::from_secs(1)).messages() => fetched,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut messages = match fetched {
            Ok(messages) => messages,
            Err(e) => {
                tracing::debug!(error = %e, "reading the exhaustion capture stream failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        };
        let mut cases = Vec::new();
        while let Some(Ok(message)) = messages.next().await {
            let Some(advisory) = handle_of(&message) else { continue };
            match Exhausted::parse(&message.payload) {
                Some(exhausted)
                    if exhausted.stream == ctx.config.nats.stream && exhausted.consumer == ctx.config.nats.consumer =>
                {
                    cases.push(Case { advisory, exhausted });
                }
                _ => {
                    tracing::warn!(subject = %message.subject, "not an exhaustion advisory of this consumer; dropped");
                    let _ = advisory.send(AckKind::Ack).await;
                }
            }
        }
        if !cases.is_empty() {
            rescue(&ctx, &capture, cases).await;
        }
    }
}

/// Rescues the messages `cases` name (see the module documentation).
async fn rescue(ctx: &Ctx, capture: &Capture, cases: Vec<Case>) {
    let mut ready: Vec<(Envelope, Case)> = Vec::with_capacity(cases.len());
    let (epoch, created) = {
        let state = ctx.guard.watch();
        let state = state.borrow();
        (state.epoch.clone(), state.created)
    };
    for case in cases {
        let seq = case.exhausted.stream_seq;
        if case.exhausted.predates(created) {
            RunStats::add(&ctx.stats.rescue_gone, 1);
            ctx.metrics.inc(CounterId::MessagesRescueGone, 1);
            tracing::warn!(
                stream_sequence = seq,
                "an exhaustion advisory names a message of the stream before it was created again; that message is gone"
            );
            let _ = case.advisory.send(AckKind::Ack).await;
            continue;
        }
        match capture.source.get_raw_message(seq).await {
            Ok(raw) => {
                let headers = headers_of(&raw.headers);
                let jetstream = JetStreamInfo {
                    stream: ctx.config.nats.stream.clone(),
                    consumer: ctx.config.nats.consumer.clone(),
                    stream_sequence: seq,
                    consumer_sequence: 0,
                    delivered: case.exhausted.deliveries.max(1),
                    pending: 0,
                    timestamp: Some(raw.time).filter(|t| *t != OffsetDateTime::UNIX_EPOCH),
                    domain: None,
                };
                let app = ctx.config.message_metadata.resolve(raw.subject.as_str(), &headers);
                let envelope = Envelope::new(raw.subject.as_str(), raw.payload, headers, jetstream)
                    .with_app_metadata(app)
                    .with_stream_epoch(epoch.clone());
                ready.push((envelope, case));
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                RunStats::add(&ctx.stats.rescue_gone, 1);
                ctx.metrics.inc(CounterId::MessagesRescueGone, 1);
                tracing::warn!(
                    stream_sequence = seq,
                    deliveries = case.exhausted.deliveries,
                    "an exhausted message is no longer in its stream (retention or deletion); reconcile shows it as gone"
                );
                let _ = case.advisory.send(AckKind::Ack).await;
            }
            Err(e) => {
                tracing::debug!(stream_sequence = seq, error = %e, "cannot read an exhausted message back yet; retrying");
                failed(ctx, &case, None).await;
            }
        }
    }
    // The policy steps, as for a fetched message; a refused message is dead-lettered with its
    // policy's reason.
    let mut writes: Vec<(Envelope, Case)> = Vec::with_capacity(ready.len());
    for (position, (envelope, case)) in ready.into_iter().enumerate() {
        match ctx.pipeline.prepare(envelope, position) {
            Prepared::Ready(envelope) => writes.push((envelope.with_order_key(None), case)),
            Prepared::Rejected { envelope, rejection } => {
                let outcome = MessageOutcome::Failed(rejection.into_error());
                settle(ctx, envelope, case, outcome, Step::Refused).await;
            }
        }
    }
    if writes.is_empty() {
        return;
    }
    let envelopes: Vec<Envelope> = writes.iter().map(|(e, _)| e.clone()).collect();
    let handles: Vec<AckHandle> = writes.iter().map(|(_, c)| c.advisory.clone()).collect();
    let write = sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &envelopes, ctx.write_budget);
    let outcomes = keep_alive(ctx, &handles, write).await;
    // The destination is down: the last chance waits for it rather than ending in a dead letter.
    let outcomes = super::hold::ride_out(ctx, &envelopes, &handles, outcomes).await;
    // A holding sink took some into objects not committed yet: wait for their objects.
    let outcomes = keep_alive(ctx, &handles, super::pending::resolve(ctx, &envelopes, outcomes)).await;
    for ((envelope, case), outcome) in writes.into_iter().zip(outcomes) {
        settle(ctx, envelope, case, outcome, Step::Written).await;
    }
}

/// Where a rescue's outcome came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A policy step refused the message: dead-lettered with that policy's reason.
    Refused,
    /// The sink's write: a failure is the exhaustion (`max_deliver_exhausted`).
    Written,
}

/// [`settle_untraced`] in a trace span of its own, when traces are on.
async fn settle(ctx: &Ctx, envelope: Envelope, case: Case, outcome: MessageOutcome, step: Step) {
    let Some(traces) = &ctx.traces else {
        let _ = settle_untraced(ctx, envelope, case, outcome, step).await;
        return;
    };
    let span = traces.single(&envelope);
    let ids = Some(span.ids());
    let label = crate::otel::Fate::outcome_label(&outcome);
    let done = crate::otel::scope(ids, settle_untraced(ctx, envelope, case, outcome, step)).await;
    let settlement = if done.is_some() { "ack" } else { "nak" };
    let dead_lettered = done == Some(true);
    let fate = crate::otel::Fate { outcome: label, settlement, dead_lettered };
    crate::otel::finish(span, fate, dead_lettered.then_some(crate::dlq::EXHAUSTED_REASON));
}

/// Finishes one rescue from the outcome of its last chance: `Some(false)` when it was
/// durable, `Some(true)` when it was dead-lettered, `None` when it is retried later.
async fn settle_untraced(
    ctx: &Ctx,
    envelope: Envelope,
    case: Case,
    outcome: MessageOutcome,
    step: Step,
) -> Option<bool> {
    let seq = case.exhausted.stream_seq;
    let deliveries = case.exhausted.deliveries;
    if outcome.is_durable() {
        record(ctx, &envelope, &outcome, &Settlement::Ack).await;
        RunStats::add(&ctx.stats.rescued, 1);
        ctx.metrics.inc(CounterId::MessagesRescued, 1);
        tracing::info!(stream_sequence = seq, deliveries, outcome = ?outcome.class(), "exhausted message rescued");
        let _ = case.advisory.send(AckKind::Ack).await;
        return Some(false);
    }
    let error = match (crate::dlq::record_error(&outcome), step) {
        // A policy's refusal keeps its own reason; any failure of the write is the exhaustion.
        (Some(e), Step::Refused) => e.duplicate(),
        (Some(e), Step::Written) => crate::dlq::exhausted_error(deliveries, &e),
        (None, _) => return None,
    };
    let Some(dlq) = &ctx.dlq else {
        failed(ctx, &case, Some(&error)).await;
        return None;
    };
    match dlq.publish(&envelope, &error, ctx.sink.name()).await {
        Ok(()) => {
            let dead = MessageOutcome::Failed(error);
            record(ctx, &envelope, &dead, &Settlement::DeadLetter(AfterDeadLetter::Ack)).await;
            RunStats::add(&ctx.stats.rescue_dead_lettered, 1);
            RunStats::add(&ctx.stats.dead_lettered, 1);
            ctx.metrics.inc(CounterId::MessagesRescuedDeadLettered, 1);
            ctx.metrics.inc(CounterId::MessagesDlq, 1);
            ctx.metrics.dlq_record(crate::dlq::reason(&dead));
            if let MessageOutcome::Failed(e) = &dead {
                tracing::warn!(
                    stream_sequence = seq,
                    subject = envelope.subject(),
                    deliveries,
                    reason = crate::dlq::reason(&dead),
                    error = %e.display_chain(),
                    "exhausted message dead-lettered"
                );
            }
            let _ = case.advisory.send(AckKind::Ack).await;
            Some(true)
        }
        Err(e) => {
            RunStats::add(&ctx.stats.dead_letter_failures, 1);
            ctx.metrics.inc(CounterId::DlqPublishErrors, 1);
            tracing::warn!(stream_sequence = seq, error = %e, "dead-letter publish of an exhausted message failed; retrying");
            failed(ctx, &case, None).await;
            None
        }
    }
}

/// Counts a rescue that did not finish and NAKs its advisory, to be tried again later.
async fn failed(ctx: &Ctx, case: &Case, error: Option<&sinks_contract::SinkError>) {
    RunStats::add(&ctx.stats.rescue_failures, 1);
    ctx.metrics.inc(CounterId::RescueFailures, 1);
    if let Some(e) = error {
        tracing::warn!(
            stream_sequence = case.exhausted.stream_seq,
            deliveries = case.exhausted.deliveries,
            error = %e.display_chain(),
            "an exhausted message could not be written and no dead-letter stream is configured; the rescue tries again"
        );
    }
    let _ = case.advisory.send(AckKind::Nak(Some(RETRY_AFTER))).await;
}

/// The ledger receipt of a rescued message, when the ledger is on.
async fn record(ctx: &Ctx, envelope: &Envelope, outcome: &MessageOutcome, settlement: &Settlement) {
    let Some(ledger) = &ctx.ledger else { return };
    if let Some(receipt) = ledger.receipt(envelope, outcome, settlement, ctx.sink.as_ref()) {
        ledger.record(&receipt).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisories_are_read_and_anything_else_is_not() {
        let advisory = br#"{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2026-12-01T00:00:00Z","stream":"S","consumer":"C","stream_seq":42,"deliveries":3}"#;
        assert_eq!(
            Exhausted::parse(advisory),
            Some(Exhausted {
                stream: "S".into(),
                consumer: "C".into(),
                stream_seq: 42,
                deliveries: 3,
                timestamp: Some("2026-12-01T00:00:00Z".into())
            })
        );
        let parsed = Exhausted::parse(advisory).unwrap();
        let at = |t: &str| Some(OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).unwrap());
        assert!(parsed.predates(at("2026-12-02T00:00:00Z")), "the stream was created again after it");
        assert!(!parsed.predates(at("2026-11-30T00:00:00Z")));
        assert!(!parsed.predates(None), "an unknown creation time drops nothing");
        assert_eq!(Exhausted::parse(b"not json"), None);
        assert_eq!(Exhausted::parse(br#"{"stream":"S","consumer":"C"}"#), None, "no sequence");
        assert_eq!(Exhausted::parse(br#"{"stream":"S","consumer":"C","stream_seq":0,"deliveries":1}"#), None);
    }
}
