//! Settlement: the gate's decision for every message, parking of held-back messages, and
//! applying each settlement (dead letter, receipt, ack).

use std::time::{Duration, Instant};

use async_nats::jetstream::AckKind;
use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{ConflictResolution, MessageOutcome};
use time::OffsetDateTime;

use super::RunStats;
use super::context::Ctx;
use super::outage::Failures;
use super::parking::HELD_BACK_MARGIN;
use crate::ack::{self, AfterDeadLetter, Settlement};
use crate::ledger::LedgerMode;
use crate::metrics::{CounterId, GaugeId, Metrics, TimingId};
use crate::source::{AckHandle, Fetched};

/// Dead-letters (or, without a DLQ, leaves for redelivery) the messages a policy refused.
pub(super) async fn settle_refused(ctx: &Ctx, refused: Vec<(Envelope, AckHandle, MessageOutcome)>) {
    if refused.is_empty() {
        return;
    }
    let sends = refused.iter().map(|(envelope, ack, outcome)| {
        let settlement = ack::settle(outcome, envelope.jetstream().delivered, &ctx.policy, rand::random::<f64>());
        settle_one(ctx, envelope, ack, outcome, settlement, None)
    });
    let settled = join_all(sends).await;
    let envelopes: Vec<&Envelope> = refused.iter().map(|(e, _, _)| e).collect();
    record_settled(ctx, &envelopes, &settled, None);
}

/// The settlement of every message (pure gate decisions). A temporary failure that will
/// come back opens a lot for its key, and the messages held back behind it are parked
/// there instead of settled (they are removed from what is returned).
pub(super) fn decide(
    ctx: &Ctx,
    batch: Fetched,
    outcomes: Vec<MessageOutcome>,
    now: Instant,
) -> (Fetched, Vec<MessageOutcome>, Vec<Settlement>) {
    let mut parking = ctx.lock_parking();
    let settlements: Vec<Settlement> = batch
        .envelopes
        .iter()
        .zip(&outcomes)
        .map(|(e, o)| ack::settle(o, e.jetstream().delivered, &ctx.policy, rand::random::<f64>()))
        .collect();
    for ((envelope, outcome), settlement) in batch.envelopes.iter().zip(&outcomes).zip(&settlements) {
        let back_in = match settlement {
            Settlement::Nak(d) => *d,
            Settlement::LeaveUnacked => ctx.ack_wait,
            Settlement::Ack | Settlement::DeadLetter(_) => continue,
        };
        if let (true, Some(key)) = (outcome.failed_temporarily(), envelope.order_key()) {
            parking.block(key, envelope.jetstream().stream_sequence, now + back_in);
        }
    }
    let mut kept = Fetched { envelopes: Vec::with_capacity(batch.len()), acks: Vec::with_capacity(batch.len()) };
    let mut kept_outcomes = Vec::with_capacity(outcomes.len());
    let mut kept_settlements = Vec::with_capacity(outcomes.len());
    for (((envelope, ack), outcome), settlement) in
        batch.envelopes.into_iter().zip(batch.acks).zip(outcomes).zip(settlements)
    {
        let (envelope, ack, settlement) = if matches!(outcome, MessageOutcome::HeldBack) {
            RunStats::add(&ctx.stats.held_back, 1);
            match parking.park(envelope, ack) {
                None => continue,
                // Nothing to wait for here (its blocker was dead-lettered, say): released.
                Some((e, a)) => {
                    let after = ctx.policy.backoff.base + HELD_BACK_MARGIN;
                    let settlement = ack::settle_held_back(e.jetstream().delivered, &ctx.policy, after);
                    (e, a, settlement)
                }
            }
        } else {
            (envelope, ack, settlement)
        };
        parking.settling(envelope.jetstream().stream_sequence);
        kept.envelopes.push(envelope);
        kept.acks.push(ack);
        kept_outcomes.push(outcome);
        kept_settlements.push(settlement);
    }
    ctx.note_parking(&parking);
    (kept, kept_outcomes, kept_settlements)
}

pub(super) async fn settle_batch(
    ctx: &Ctx,
    batch: Fetched,
    outcomes: Vec<MessageOutcome>,
    settlements: Vec<Settlement>,
) {
    let confirm = &ctx.config.delivery.ack_confirmation;
    let confirm_timeout = confirm.enabled.then(|| Duration::from_millis(confirm.timeout_ms));
    let started = Instant::now();
    let sends = batch.envelopes.iter().zip(&batch.acks).zip(outcomes.iter()).zip(settlements).map(
        |(((envelope, ack), outcome), settlement)| async move {
            settle_one(ctx, envelope, ack, outcome, settlement, confirm_timeout).await
        },
    );
    let settled = join_all(sends).await;
    ctx.metrics.observe(TimingId::MessageAckSeconds, started.elapsed().as_secs_f64());
    let envelopes: Vec<&Envelope> = batch.envelopes.iter().collect();
    record_settled(ctx, &envelopes, &settled, Some(&outcomes));
}

/// What became of one message's settlement.
#[derive(Debug, Clone)]
pub(super) enum Settled {
    /// Acked (after a durable outcome, or after a stored DLQ record).
    Acked,
    /// Terminated after a stored DLQ record.
    Terminated,
    /// NAKed with this redelivery delay.
    Naked(Duration),
    /// Left for AckWait.
    LeftUnacked,
    /// The ack, NAK or term could not be sent (`term`: it was a term).
    NotSent { term: bool, error: String },
}

/// Records a batch's settlements (counts, redelivery delays, end-to-end latency of messages
/// acked after a durable outcome) and logs settlements that could not be sent, once for the
/// batch. `outcomes` are the write outcomes, when the messages were written.
pub(super) fn record_settled(
    ctx: &Ctx,
    envelopes: &[&Envelope],
    settled: &[Settled],
    outcomes: Option<&[MessageOutcome]>,
) {
    let mut not_sent = Failures::default();
    let (mut acked, mut terminated, mut naked, mut left, mut ack_errors, mut term_errors) = (0, 0, 0, 0, 0, 0);
    let mut delays = Metrics::local(TimingId::RetryBackoffDelaySeconds);
    let mut latency = Metrics::local(TimingId::EndToEndLatencySeconds);
    let now = ctx.metrics.enabled().then(OffsetDateTime::now_utc);
    let now_ns = now.map(OffsetDateTime::unix_timestamp_nanos);
    for (i, (envelope, settled)) in envelopes.iter().zip(settled).enumerate() {
        match settled {
            Settled::Acked => {
                acked += 1;
                let durable = outcomes.and_then(|o| o.get(i)).is_some_and(MessageOutcome::is_durable);
                if let (true, Some(now_ns), Some(ts)) = (durable, now_ns, envelope.jetstream().timestamp) {
                    latency.observe(((now_ns - ts.unix_timestamp_nanos()) as f64 / 1e9).max(0.0));
                }
            }
            Settled::Terminated => terminated += 1,
            Settled::Naked(d) => {
                naked += 1;
                delays.observe(d.as_secs_f64());
            }
            Settled::LeftUnacked => left += 1,
            Settled::NotSent { term, error } => {
                if *term {
                    term_errors += 1;
                } else {
                    ack_errors += 1;
                }
                let seq = envelope.jetstream().stream_sequence;
                if not_sent.messages == 0 {
                    not_sent.first_sequence = seq;
                    not_sent.reason.clone_from(error);
                }
                not_sent.first_sequence = not_sent.first_sequence.min(seq);
                not_sent.last_sequence = not_sent.last_sequence.max(seq);
                not_sent.messages += 1;
            }
        }
    }
    if not_sent.messages > 0 {
        tracing::warn!(
            messages = not_sent.messages,
            first_sequence = not_sent.first_sequence,
            last_sequence = not_sent.last_sequence,
            reason = %not_sent.reason,
            "settlements not delivered; these messages will be redelivered"
        );
    }
    let m = &ctx.metrics;
    if !m.enabled() {
        return;
    }
    m.inc(CounterId::MessagesAcked, acked);
    m.inc(CounterId::MessagesTerminated, terminated);
    m.inc(CounterId::MessagesNacked, naked);
    m.inc(CounterId::MessagesLeftUnacked, left);
    m.inc(CounterId::AckErrors, ack_errors);
    m.inc(CounterId::TermErrors, term_errors);
    m.merge(TimingId::RetryBackoffDelaySeconds, &delays);
    m.merge(TimingId::EndToEndLatencySeconds, &latency);
    if latency.count() > 0
        && let Some(now) = now
    {
        m.set(GaugeId::LastSinkSuccessEpochSeconds, now.unix_timestamp_nanos() as f64 / 1e9);
    }
}

pub(super) async fn settle_one(
    ctx: &Ctx,
    envelope: &Envelope,
    ack: &AckHandle,
    outcome: &MessageOutcome,
    settlement: Settlement,
    confirm: Option<Duration>,
) -> Settled {
    let delivered = envelope.jetstream().delivered;
    let seq = envelope.jetstream().stream_sequence;
    match outcome {
        MessageOutcome::Duplicate => RunStats::add(&ctx.stats.duplicates, 1),
        MessageOutcome::Conflict(resolution) => {
            RunStats::add(&ctx.stats.conflicts, 1);
            tracing::warn!(
                stream_sequence = seq,
                subject = envelope.subject(),
                ?resolution,
                "conflicting redelivery: same key, different content"
            );
        }
        // Write failures are logged per batch (see `track_outage`); the detail is here.
        MessageOutcome::Failed(e) if e.reason().is_none() => {
            tracing::debug!(stream_sequence = seq, class = ?e.class(), error = %e.display_chain(), "write failed");
        }
        // Refused by a policy step: logged when it was refused.
        MessageOutcome::Failed(_) | MessageOutcome::HeldBack | MessageOutcome::Committed => {}
    }
    let settlement = match settlement {
        Settlement::DeadLetter(then) => dead_letter(ctx, envelope, outcome, then, delivered).await,
        other => other,
    };
    // The settlement is final and its durable effects are committed: the receipt goes out
    // before the ack (or after it, in `after_ack` mode), within the ledger's budget.
    let receipt =
        ctx.ledger.as_ref().and_then(|l| l.receipt(envelope, outcome, &settlement, ctx.sink.as_ref()).map(|r| (l, r)));
    let after_ack = match receipt {
        Some((ledger, receipt)) if ledger.mode() == LedgerMode::BeforeAck => {
            ledger.record(&receipt).await;
            None
        }
        other => other,
    };
    let kind = match settlement {
        Settlement::Ack => AckKind::Ack,
        Settlement::Nak(d) => AckKind::Nak(Some(d)),
        Settlement::LeaveUnacked => {
            RunStats::add(&ctx.stats.left_unacked, 1);
            return Settled::LeftUnacked;
        }
        // Resolved above into Ack / Term / Nak.
        Settlement::DeadLetter(AfterDeadLetter::Ack) => AckKind::Ack,
        Settlement::DeadLetter(AfterDeadLetter::Term) => AckKind::Term,
    };
    if ctx.policy.max_deliver.is_some_and(|m| delivered >= m) && matches!(kind, AckKind::Nak(_)) {
        tracing::error!(
            stream_sequence = seq,
            delivered,
            "last allowed delivery failed and no DLQ is configured; the server will drop this message"
        );
    }
    let counter = match kind {
        AckKind::Nak(_) => &ctx.stats.naked,
        _ => &ctx.stats.acked,
    };
    // Timed only with metrics on, and only what has a timing (confirmed acks and terms): a
    // clock read per plain ack is not free.
    let timed = matches!(kind, AckKind::Term) || (confirm.is_some() && matches!(kind, AckKind::Ack));
    let started = (timed && ctx.metrics.enabled()).then(Instant::now);
    let seconds = |started: Option<Instant>| started.map_or(0.0, |s| s.elapsed().as_secs_f64());
    let result = match (confirm, &kind) {
        (Some(t), AckKind::Ack) => {
            ctx.metrics.inc(CounterId::AckConfirmationAttempts, 1);
            let result = ack.send_confirmed(kind, t).await;
            ctx.metrics.observe(TimingId::AckConfirmationSeconds, seconds(started));
            let confirmed = match &result {
                Ok(()) => CounterId::AckConfirmationSuccesses,
                Err(e) if e.to_string().contains("timed out") => CounterId::AckConfirmationTimeouts,
                Err(_) => CounterId::AckConfirmationFailures,
            };
            ctx.metrics.inc(confirmed, 1);
            result
        }
        _ => ack.send(kind).await,
    };
    let term = matches!(kind, AckKind::Term);
    if term {
        ctx.metrics.observe(TimingId::MessageTermSeconds, seconds(started));
    }
    let settled = match result {
        Ok(()) => {
            RunStats::add(counter, 1);
            match kind {
                AckKind::Nak(d) => Settled::Naked(d.unwrap_or_default()),
                AckKind::Term => Settled::Terminated,
                _ => Settled::Acked,
            }
        }
        Err(e) => {
            RunStats::add(&ctx.stats.ack_failures, 1);
            tracing::debug!(stream_sequence = seq, error = %e, "settlement not delivered; the message will be redelivered");
            Settled::NotSent { term, error: e.to_string() }
        }
    };
    if let Some((ledger, receipt)) = after_ack {
        ledger.record(&receipt).await;
    }
    settled
}

/// The DLQ reason label of a dead-lettered outcome: the policy reason code when there is
/// one, else what kind of failure it was.
pub(super) fn dlq_reason(outcome: &MessageOutcome) -> &str {
    match outcome {
        MessageOutcome::Failed(e) => {
            e.reason().unwrap_or(if e.is_permanent() { "sink_permanent" } else { "retries_exhausted" })
        }
        MessageOutcome::Conflict(_) => "conflict_rejected",
        MessageOutcome::HeldBack => "held_back_last_delivery",
        _ => "other",
    }
}

/// Publishes the DLQ record; returns the settlement to apply to the original.
pub(super) async fn dead_letter(
    ctx: &Ctx,
    envelope: &Envelope,
    outcome: &MessageOutcome,
    then: AfterDeadLetter,
    delivered: u64,
) -> Settlement {
    let conflict;
    let error = match outcome {
        MessageOutcome::Failed(e) => e,
        MessageOutcome::Conflict(ConflictResolution::Rejected) => {
            conflict = SinkError::permanent("conflicting redelivery: same key, different content")
                .with_error_type("ConflictError");
            &conflict
        }
        MessageOutcome::HeldBack => {
            conflict = SinkError::temporary(
                "held back on its last allowed delivery: an earlier message with the same ordering key failed \
                 temporarily, and a redelivery would exceed the consumer's max_deliver",
            )
            .with_error_type("HeldBackError");
            &conflict
        }
        _ => return Settlement::Ack,
    };
    let Some(dlq) = &ctx.dlq else { return ack::after_failed_dead_letter(delivered, &ctx.policy, rand::random()) };
    match dlq.publish(envelope, error, ctx.sink.name()).await {
        Ok(()) => {
            RunStats::add(&ctx.stats.dead_lettered, 1);
            let reason = dlq_reason(outcome);
            ctx.metrics.inc(CounterId::MessagesDlq, 1);
            ctx.metrics.dlq_record(reason);
            tracing::warn!(
                stream_sequence = envelope.jetstream().stream_sequence,
                subject = envelope.subject(),
                error_type = error.error_type(),
                reason,
                error = %error.display_chain(),
                "message dead-lettered"
            );
            Settlement::DeadLetter(then)
        }
        Err(e) => {
            RunStats::add(&ctx.stats.dead_letter_failures, 1);
            ctx.metrics.inc(CounterId::DlqPublishErrors, 1);
            tracing::error!(stream_sequence = envelope.jetstream().stream_sequence, error = %e, "dead-letter publish failed; message NAKed, not acked");
            ack::after_failed_dead_letter(delivered, &ctx.policy, rand::random())
        }
    }
}
