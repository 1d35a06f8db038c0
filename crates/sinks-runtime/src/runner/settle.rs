//! Settlement: planning every message's settlement, and applying the plan.
//!
//! [`Planner::plan`] is the one place the runner asks the ACK gate (`ack::settle`,
//! `ack::settle_held_back`), for every message it settles: refused by a policy, written (or
//! held back) by the sink, or released from parking. It is pure bookkeeping done under the
//! parking lock: a temporary failure that will come back opens a lot for its key, and the
//! messages held back behind it are parked there instead of settled.
//!
//! [`apply`] then carries the plan out, message by message ([`settle_one`]): a dead letter is
//! published and the DLQ stream's answer becomes the ack kind that settles the original
//! (`ack::after_dead_letter`); the receipt goes out once the settlement is final; then the
//! ack, NAK or term is sent through the message's handle, and the settlement is counted.
//!
//! A rescued message takes the same steps with its advisory as its handle (`handle`): the
//! advisory is acked once the message is durable or its dead letter stored (the receipt
//! always before that ack), NAKed when neither happened; its settlement is counted in the
//! rescue's counters (`rescued`, `rescue_dead_lettered`, `rescue_failures`) instead of the
//! acks and NAKs of fetched messages.

use std::time::{Duration, Instant};

use async_nats::jetstream::AckKind;
use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;
use time::OffsetDateTime;

use super::batch::Batch;
use super::context::Ctx;
use super::handle::{Handle, count_rescue_failure, redrive_end};
use super::outage::Failures;
use super::parking::{HELD_BACK_MARGIN, Parking};
use crate::ack::{self, AfterDeadLetter, GatePolicy, Settlement};
use crate::ledger::{LedgerMode, LedgerPublisher, Receipt};
use crate::metrics::{CounterId, GaugeId, Metrics, RunStats, TimingId};
use crate::reasons;
use crate::source::AckHandle;

/// Why a set of messages is being settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// Refused by a policy step: they never reached the sink.
    Refused,
    /// Written by the sink (or held back by it), at this time.
    Written(Instant),
    /// Held back, then released from parking (overdue, or on shutdown).
    Released,
}

/// What planning needs besides the messages: the gate's policy, the consumer's AckWait (when
/// a message left for it comes back) and a source of jitter samples in `[0, 1)`.
#[derive(Debug)]
pub(super) struct Planner<'a, R> {
    /// The gate policy.
    pub(super) policy: &'a GatePolicy,
    /// The consumer's effective AckWait.
    pub(super) ack_wait: Duration,
    /// Jitter samples.
    pub(super) sample: R,
}

/// Messages with their settlements decided, index for index.
#[derive(Debug)]
pub(super) struct Planned<H> {
    /// The messages to settle.
    pub(super) batch: Batch<H>,
    /// Their outcomes.
    pub(super) outcomes: Vec<MessageOutcome>,
    /// Their settlements.
    pub(super) settlements: Vec<Settlement>,
    /// Why they are settled.
    pub(super) cause: Cause,
    /// Messages of a written batch that the sink held back (parked, or released at once).
    pub(super) held_back: u64,
}

impl<H> Planned<H> {
    /// How many messages are to be settled.
    pub(super) fn len(&self) -> usize {
        self.batch.len()
    }

    /// True when there is nothing to settle.
    pub(super) fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

/// The planner of `ctx`'s run: its gate policy and AckWait, with random jitter.
pub(super) fn planner(ctx: &Ctx) -> Planner<'_, fn() -> f64> {
    Planner { policy: &ctx.policy, ack_wait: ctx.ack_wait, sample: rand::random::<f64> }
}

impl<R: FnMut() -> f64> Planner<'_, R> {
    /// Plans the settlement of every message of `batch` (with its `outcomes`, index for
    /// index). A written message that failed temporarily and will come back opens a lot for
    /// its ordering key; a written held-back message is parked in its key's lot and left out
    /// of the plan, or, with nothing to wait for (its blocker was dead-lettered, say),
    /// released to come back soon after it. Released messages come back
    /// [`HELD_BACK_MARGIN`] after the message they waited for; on their last allowed
    /// delivery the gate dead-letters them instead.
    pub(super) fn plan<H: Clone>(
        &mut self,
        parking: &mut Parking<H>,
        batch: Batch<H>,
        outcomes: Vec<MessageOutcome>,
        cause: Cause,
    ) -> Planned<H> {
        let (policy, ack_wait, sample) = (self.policy, self.ack_wait, &mut self.sample);
        // The one place the runner asks the gate. `released` is when a held-back message
        // should come back (`None`: any other message).
        let mut gate = |outcome: &MessageOutcome, delivered: u64, released: Option<Duration>| match released {
            Some(after) => ack::settle_held_back(delivered, policy, after),
            None => ack::settle(outcome, delivered, policy, sample()),
        };
        // Every settlement but those of held-back written messages first, so that those find
        // the lots their batch-mates' failures open.
        let mut decided: Vec<Option<Settlement>> = Vec::with_capacity(outcomes.len());
        for (envelope, outcome) in batch.envelopes.iter().zip(&outcomes) {
            let js = envelope.jetstream();
            let settlement = match (cause, outcome) {
                (Cause::Released, _) => Some(gate(outcome, js.delivered, Some(HELD_BACK_MARGIN))),
                (Cause::Written(_), MessageOutcome::HeldBack) => None,
                _ => Some(gate(outcome, js.delivered, None)),
            };
            if let (Cause::Written(now), Some(settlement), true, Some(key)) =
                (cause, settlement, outcome.failed_temporarily(), envelope.order_key())
            {
                let back_in = match settlement {
                    Settlement::Nak(d) => Some(d),
                    Settlement::LeaveUnacked => Some(ack_wait),
                    Settlement::Ack | Settlement::DeadLetter(_) => None,
                };
                if let Some(back_in) = back_in {
                    parking.block(key, js.stream_sequence, now + back_in);
                }
            }
            decided.push(settlement);
        }
        // Every message settled (none held back), the common case: the plan keeps the batch
        // as it is instead of moving each message into a new one.
        if decided.iter().all(Option::is_some) {
            if let Cause::Written(_) = cause {
                for envelope in &batch.envelopes {
                    parking.settling(envelope.jetstream().stream_sequence);
                }
            }
            let settlements = decided.into_iter().flatten().collect();
            return Planned { batch, outcomes, settlements, cause, held_back: 0 };
        }
        let mut planned = Planned {
            batch: Batch::with_capacity(outcomes.len()),
            outcomes: Vec::with_capacity(outcomes.len()),
            settlements: Vec::with_capacity(outcomes.len()),
            cause,
            held_back: 0,
        };
        for (((envelope, handle), outcome), settlement) in batch.into_iter().zip(outcomes).zip(decided) {
            let (envelope, handle, settlement) = match settlement {
                Some(settlement) => (envelope, handle, settlement),
                None => {
                    planned.held_back += 1;
                    let Some((envelope, handle)) = parking.park(envelope, handle) else { continue };
                    let after = policy.backoff.base + HELD_BACK_MARGIN;
                    let settlement = gate(&outcome, envelope.jetstream().delivered, Some(after));
                    (envelope, handle, settlement)
                }
            };
            if let Cause::Written(_) = cause {
                parking.settling(envelope.jetstream().stream_sequence);
            }
            planned.batch.push(envelope, handle);
            planned.outcomes.push(outcome);
            planned.settlements.push(settlement);
        }
        planned
    }
}

/// Applies a plan: settles every message and records the settlements. A written batch's acks
/// are confirmed (`delivery.ack_confirmation`) and timed; refused and released messages'
/// are not.
pub(super) async fn apply(ctx: &Ctx, planned: Planned<Handle>) {
    let written = matches!(planned.cause, Cause::Written(_));
    // A written batch is recorded even when all of it was parked (an empty settlement).
    if planned.is_empty() && !written {
        return;
    }
    let confirm = &ctx.config.delivery.ack_confirmation;
    let confirm_timeout = (written && confirm.enabled).then(|| Duration::from_millis(confirm.timeout_ms));
    let started = written.then(Instant::now);
    let Planned { batch, outcomes, settlements, .. } = &planned;
    let one = |i: usize| {
        let (envelope, outcome, settlement) = (&batch.envelopes[i], &outcomes[i], settlements[i]);
        traced(
            ctx,
            envelope,
            outcome,
            settlement,
            settle_one(ctx, envelope, &batch.handles[i], outcome, settlement, confirm_timeout),
        )
    };
    // Without confirmations or receipts, an ack or a NAK waits for nothing but the
    // connection's queue: they are sent one after the other from this task (one future, not
    // one per message), and only dead letters, which wait for the DLQ stream, run side by
    // side. Otherwise every settlement runs side by side (a redriven message's too: its
    // end waits for its mark in the redrive bucket).
    let marks = batch.handles.iter().any(|h| h.redrive().is_some());
    let settled = if confirm_timeout.is_none() && ctx.ledger.is_none() && !marks {
        let mut settled = Vec::with_capacity(planned.len());
        let mut letters = Vec::new();
        for (i, settlement) in settlements.iter().enumerate() {
            if let Settlement::DeadLetter(_) = settlement {
                letters.push(i);
                settled.push(Settled::LeftUnacked);
            } else if let Some((handle, kind)) = plain(ctx, &batch.handles[i], *settlement) {
                settled.push(settle_plain(ctx, &batch.envelopes[i], handle, &outcomes[i], kind).await);
            } else {
                settled.push(one(i).await);
            }
        }
        let done = join_all(letters.iter().map(|&i| one(i))).await;
        for (i, result) in letters.into_iter().zip(done) {
            settled[i] = result;
        }
        settled
    } else {
        join_all((0..planned.len()).map(one)).await
    };
    if let Some(started) = started {
        ctx.metrics.observe(TimingId::MessageAckSeconds, started.elapsed().as_secs_f64());
    }
    record_settled(ctx, batch, &settled, outcomes);
}

/// A fetched message's ack or NAK with no trace span, sent as it is (no confirmation, ledger
/// or redrive mark: [`apply`] asks only then): its handle and the ack kind. `None` for anything
/// else, which [`settle_one`] settles.
fn plain<'a>(ctx: &Ctx, handle: &'a Handle, settlement: Settlement) -> Option<(&'a AckHandle, AckKind)> {
    let Handle::Delivery(handle) = handle else { return None };
    if ctx.traces.is_some() {
        return None;
    }
    match settlement {
        Settlement::Ack => Some((handle, AckKind::Ack)),
        Settlement::Nak(d) => Some((handle, AckKind::Nak(Some(d)))),
        Settlement::LeaveUnacked | Settlement::DeadLetter(_) => None,
    }
}

/// [`settle_one`] for what [`plain`] picked: the same steps (the outcome noted, the last
/// delivery's warning, the send, the count) in a future a fraction of `settle_one`'s size. A
/// batch builds one of these per message, and building `settle_one`'s, with room for a
/// dead letter and a receipt, was a tenth of the blackhole sink's CPU (docs/performance.md).
async fn settle_plain(
    ctx: &Ctx,
    envelope: &Envelope,
    handle: &AckHandle,
    outcome: &MessageOutcome,
    kind: AckKind,
) -> Settled {
    note_outcome(ctx, envelope, outcome);
    warn_last_delivery(ctx, envelope, &kind);
    let sent = handle.send(kind).await;
    settled_as(ctx, envelope, kind, true, sent)
}

/// What a settlement of `envelope` of `kind` became once sent (or not): counted as acked or
/// NAKed when `counted` (a rescued message is counted by its rescue), or as an ack failure.
fn settled_as(
    ctx: &Ctx,
    envelope: &Envelope,
    kind: AckKind,
    counted: bool,
    sent: Result<(), async_nats::Error>,
) -> Settled {
    match sent {
        Ok(()) => {
            let (counter, settled) = match kind {
                AckKind::Nak(d) => (&ctx.stats.nacked, Settled::Naked(d.unwrap_or_default())),
                AckKind::Term => (&ctx.stats.acked, Settled::Terminated),
                _ => (&ctx.stats.acked, Settled::Acked),
            };
            if counted {
                RunStats::add(counter, 1);
            }
            settled
        }
        Err(e) => {
            RunStats::add(&ctx.stats.ack_failures, 1);
            let seq = envelope.jetstream().stream_sequence;
            tracing::debug!(stream_sequence = seq, error = %e, "settlement not delivered; the message will be redelivered");
            Settled::NotSent { term: matches!(kind, AckKind::Term), error: e.to_string() }
        }
    }
}

/// What became of one message's settlement.
#[derive(Debug, Clone)]
enum Settled {
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

/// Records the settlements of messages with `outcomes` (counts, redelivery delays,
/// end-to-end latency of messages acked after a durable outcome) and logs settlements that
/// could not be sent, once for all of them. A rescued message's settlement (its advisory's)
/// is counted by the rescue's counters in [`settle_one`]; only a send that failed counts here.
fn record_settled(ctx: &Ctx, batch: &Batch<Handle>, settled: &[Settled], outcomes: &[MessageOutcome]) {
    let mut not_sent = Failures::default();
    let (mut acked, mut terminated, mut nacked, mut left, mut ack_errors, mut term_errors) = (0, 0, 0, 0, 0, 0);
    let mut delays = Metrics::local(TimingId::RetryBackoffDelaySeconds);
    let mut latency = Metrics::local(TimingId::EndToEndLatencySeconds);
    let now = ctx.metrics.enabled().then(OffsetDateTime::now_utc);
    let now_ns = now.map(OffsetDateTime::unix_timestamp_nanos);
    let messages = batch.envelopes.iter().zip(&batch.handles).zip(settled).zip(outcomes);
    for (((envelope, handle), settled), outcome) in messages {
        match settled {
            Settled::Acked | Settled::Terminated | Settled::Naked(_) | Settled::LeftUnacked if handle.out_of_band() => {
            }
            Settled::Acked => {
                acked += 1;
                if let (true, Some(now_ns), Some(ts)) = (outcome.is_durable(), now_ns, envelope.jetstream().timestamp) {
                    latency.observe(((now_ns - ts.unix_timestamp_nanos()) as f64 / 1e9).max(0.0));
                }
            }
            Settled::Terminated => terminated += 1,
            Settled::Naked(d) => {
                nacked += 1;
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
    m.inc(CounterId::MessagesNacked, nacked);
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

impl Settled {
    /// The settlement as a trace span names it.
    fn label(&self) -> &'static str {
        match self {
            Self::Acked => "ack",
            Self::Terminated => "term",
            Self::Naked(_) => "nak",
            Self::LeftUnacked => "left_unacked",
            Self::NotSent { .. } => "not_sent",
        }
    }
}

/// Runs `settle` (the settlement of `envelope`) inside the message's trace span, when traces
/// are on: its log lines, dead-letter record and receipt carry the trace, and the span ends
/// with the message's fate.
async fn traced(
    ctx: &Ctx,
    envelope: &Envelope,
    outcome: &MessageOutcome,
    settlement: Settlement,
    settle: impl std::future::Future<Output = Settled>,
) -> Settled {
    let Some(traces) = &ctx.traces else { return settle.await };
    let span = traces.take(envelope.jetstream().stream_sequence);
    let ids = span.as_ref().map(crate::otel::MessageSpan::ids);
    let settled = crate::otel::scope(ids, settle).await;
    if let Some(span) = span {
        let dead_lettered =
            matches!(settlement, Settlement::DeadLetter(_)) && matches!(settled, Settled::Acked | Settled::Terminated);
        let fate = crate::otel::Fate {
            outcome: crate::otel::Fate::outcome_label(outcome),
            settlement: settled.label(),
            dead_lettered,
        };
        crate::otel::finish(span, fate, dead_lettered.then(|| reasons::reason(outcome)));
    }
    settled
}

/// Settles one message as planned: dead-letters it first when so planned, publishes its
/// receipt once the settlement is final (before the ack, or after it in `after_ack` mode; a
/// rescued message's always before its advisory's ack), and sends the ack kind through its
/// handle (confirmed within `confirm` when given).
async fn settle_one(
    ctx: &Ctx,
    envelope: &Envelope,
    handle: &Handle,
    outcome: &MessageOutcome,
    settlement: Settlement,
    confirm: Option<Duration>,
) -> Settled {
    let rescued = handle.rescued();
    note_outcome(ctx, envelope, outcome);
    let kind = match settlement {
        Settlement::Ack => AckKind::Ack,
        Settlement::Nak(d) => AckKind::Nak(Some(d)),
        Settlement::LeaveUnacked => return leave_unacked(ctx, handle, outcome, settlement).await,
        Settlement::DeadLetter(then) => dead_letter(ctx, envelope, outcome, then, handle).await,
    };
    let after_ack = receipt_before_ack(ctx, envelope, handle, outcome, &settlement, &kind).await;
    if rescued {
        note_rescue(ctx, envelope, outcome, settlement, &kind);
    } else {
        warn_last_delivery(ctx, envelope, &kind);
    }
    let sent = send_kind(ctx, handle, kind, outcome, settlement, confirm).await;
    let settled = settled_as(ctx, envelope, kind, !rescued, sent);
    if let Some((ledger, receipt)) = after_ack {
        ledger.record(&receipt).await;
    }
    settled
}

/// Counts and logs what the write said of `envelope` before it is settled: duplicates,
/// conflicts (a warning each) and the detail of a write failure (logged per batch by
/// `track_outage`). Policy refusals were logged when refused, the rescue's exhaustion is
/// logged with its settlement, and the other outcomes have nothing to log.
fn note_outcome(ctx: &Ctx, envelope: &Envelope, outcome: &MessageOutcome) {
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
        MessageOutcome::Failed(e) if e.reason().is_none() => {
            tracing::debug!(stream_sequence = seq, class = ?e.class(), error = %e.display_chain(), "write failed");
        }
        _ => {}
    }
}

/// A message left for AckWait: nothing is sent; a redriven message's ticket hears it.
async fn leave_unacked(ctx: &Ctx, handle: &Handle, outcome: &MessageOutcome, settlement: Settlement) -> Settled {
    if let Some(ticket) = handle.redrive() {
        return match ticket.end(redrive_end(None, settlement, outcome)).await {
            Ok(()) => Settled::LeftUnacked,
            Err(e) => Settled::NotSent { term: false, error: e.to_string() },
        };
    }
    if !handle.rescued() {
        RunStats::add(&ctx.stats.left_unacked, 1);
    }
    Settled::LeftUnacked
}

/// The receipt of a message settled as `kind`. A NAK is not final and has none. Otherwise the
/// settlement is final and its durable effects are committed (the DLQ record among them):
/// the receipt goes out here, before the ack, within the ledger's budget, or is returned to
/// go out after it (`after_ack` mode, except for a message settled out of band, such as a
/// rescued message's advisory).
async fn receipt_before_ack<'a>(
    ctx: &'a Ctx,
    envelope: &Envelope,
    handle: &Handle,
    outcome: &MessageOutcome,
    settlement: &Settlement,
    kind: &AckKind,
) -> Option<(&'a LedgerPublisher, Receipt)> {
    let receipt = match kind {
        AckKind::Nak(_) => None,
        _ => ctx
            .ledger
            .as_ref()
            .and_then(|l| l.receipt(envelope, outcome, settlement, ctx.sink.as_ref()).map(|r| (l, r))),
    };
    match receipt {
        Some((ledger, receipt)) if handle.out_of_band() || ledger.mode() == LedgerMode::BeforeAck => {
            ledger.record(&receipt).await;
            None
        }
        other => other,
    }
}

/// Tells the operator when a NAK is for the consumer's last allowed delivery: the rescue
/// gives the message its last chance, or (no DLQ, no rescue) the server drops it.
fn warn_last_delivery(ctx: &Ctx, envelope: &Envelope, kind: &AckKind) {
    let delivered = envelope.jetstream().delivered;
    if !(ctx.policy.max_deliver.is_some_and(|m| delivered >= m) && matches!(kind, AckKind::Nak(_))) {
        return;
    }
    let seq = envelope.jetstream().stream_sequence;
    if ctx.rescue {
        tracing::warn!(
            stream_sequence = seq,
            delivered,
            "last allowed delivery failed; the server stops redelivering it, and the rescue gives it its last chance"
        );
    } else {
        tracing::error!(
            stream_sequence = seq,
            delivered,
            "last allowed delivery failed, no DLQ is configured and rescue is off; the server will drop this message"
        );
    }
}

/// Sends `kind` through `handle`: a redriven message's end to its ticket (once durable: the
/// receipt is out), an ack confirmed within `confirm` when given, anything else as it is.
/// Confirmed acks and terms are timed, only with metrics on (a clock read per plain ack is
/// not free).
async fn send_kind(
    ctx: &Ctx,
    handle: &Handle,
    kind: AckKind,
    outcome: &MessageOutcome,
    settlement: Settlement,
    confirm: Option<Duration>,
) -> Result<(), async_nats::Error> {
    let timed = matches!(kind, AckKind::Term) || (confirm.is_some() && matches!(kind, AckKind::Ack));
    let started = (timed && ctx.metrics.enabled()).then(Instant::now);
    let seconds = |started: Option<Instant>| started.map_or(0.0, |s| s.elapsed().as_secs_f64());
    let result = match (confirm, &kind, handle.redrive()) {
        (_, _, Some(ticket)) => ticket.end(redrive_end(Some(&kind), settlement, outcome)).await,
        (Some(t), AckKind::Ack, None) => {
            ctx.metrics.inc(CounterId::AckConfirmationAttempts, 1);
            let result = handle.send_confirmed(kind, t).await;
            ctx.metrics.observe(TimingId::AckConfirmationSeconds, seconds(started));
            let confirmed = match &result {
                Ok(()) => CounterId::AckConfirmationSuccesses,
                Err(e) if e.to_string().contains("timed out") => CounterId::AckConfirmationTimeouts,
                Err(_) => CounterId::AckConfirmationFailures,
            };
            ctx.metrics.inc(confirmed, 1);
            result
        }
        _ => handle.send(kind).await,
    };
    if matches!(kind, AckKind::Term) {
        ctx.metrics.observe(TimingId::MessageTermSeconds, seconds(started));
    }
    result
}

/// Counts and logs how a rescued message's last chance ended, before its advisory is
/// settled as `kind`: made durable (the advisory is acked), or neither durable nor
/// dead-lettered (the advisory is NAKed and the rescue tries again). A dead letter is
/// counted where it is stored ([`dead_letter`]).
fn note_rescue(ctx: &Ctx, envelope: &Envelope, outcome: &MessageOutcome, settlement: Settlement, kind: &AckKind) {
    let seq = envelope.jetstream().stream_sequence;
    let deliveries = envelope.jetstream().delivered;
    match (settlement, kind) {
        (Settlement::Ack, _) => {
            RunStats::add(&ctx.stats.rescued, 1);
            ctx.metrics.inc(CounterId::MessagesRescued, 1);
            tracing::info!(stream_sequence = seq, deliveries, outcome = ?outcome.class(), "exhausted message rescued");
        }
        (_, AckKind::Nak(_)) => {
            count_rescue_failure(&ctx.stats, &ctx.metrics);
            // A dead-letter publish that failed was logged when it failed.
            if let (Settlement::Nak(_), MessageOutcome::Failed(e)) = (settlement, outcome) {
                tracing::warn!(
                    stream_sequence = seq,
                    deliveries,
                    error = %e.display_chain(),
                    "an exhausted message could not be written and no dead-letter stream is configured; the rescue tries again"
                );
            }
        }
        _ => {}
    }
}

/// Publishes the DLQ record of a message the gate dead-letters (a rescued message's dead
/// letter is also the rescue's; a redriven message's carries its redrive count and the
/// fan-out target its earlier record named). Returns the ack kind that settles the original:
/// `then` once the DLQ stream stored the record, a NAK when it did not (or when no DLQ is
/// configured), never an ack.
async fn dead_letter(
    ctx: &Ctx,
    envelope: &Envelope,
    outcome: &MessageOutcome,
    then: AfterDeadLetter,
    handle: &Handle,
) -> AckKind {
    let rescued = handle.rescued();
    let Some(error) = reasons::record_error(outcome) else { return AckKind::Ack };
    let redrive = handle.redrive();
    let error = match redrive.and_then(|t| t.target()) {
        Some(target) if error.target().is_none() => reasons::RecordError::Made(error.duplicate().with_target(target)),
        _ => error,
    };
    let seq = envelope.jetstream().stream_sequence;
    let count = redrive.map_or(0, super::handle::RedriveTicket::next_count);
    let stored = match &ctx.dlq {
        None => false,
        Some(dlq) => match dlq.publish_counted(envelope, &error, ctx.sink.name(), count).await {
            Ok(()) => {
                RunStats::add(&ctx.stats.dead_lettered, 1);
                let reason = reasons::reason(outcome);
                ctx.metrics.inc(CounterId::MessagesDlq, 1);
                ctx.metrics.dlq_record(reason);
                if count > 0 {
                    tracing::warn!(
                        stream_sequence = seq,
                        subject = envelope.subject(),
                        redrive_count = count,
                        error_type = error.error_type(),
                        error = %error.display_chain(),
                        "redriven message failed again; dead-lettered again"
                    );
                } else if rescued {
                    RunStats::add(&ctx.stats.rescue_dead_lettered, 1);
                    ctx.metrics.inc(CounterId::MessagesRescuedDeadLettered, 1);
                    tracing::warn!(
                        stream_sequence = seq,
                        subject = envelope.subject(),
                        deliveries = envelope.jetstream().delivered,
                        reason,
                        error = %error.display_chain(),
                        "exhausted message dead-lettered"
                    );
                } else {
                    tracing::warn!(
                        stream_sequence = seq,
                        subject = envelope.subject(),
                        error_type = error.error_type(),
                        reason,
                        error = %error.display_chain(),
                        "message dead-lettered"
                    );
                }
                true
            }
            Err(e) => {
                RunStats::add(&ctx.stats.dead_letter_failures, 1);
                ctx.metrics.inc(CounterId::DlqPublishErrors, 1);
                if rescued {
                    tracing::warn!(stream_sequence = seq, error = %e, "dead-letter publish of an exhausted message failed; retrying");
                } else {
                    tracing::error!(stream_sequence = seq, error = %e, "dead-letter publish failed; message NAKed, not acked");
                }
                false
            }
        },
    };
    ack::after_dead_letter(stored, then, envelope.jetstream().delivered, &ctx.policy, rand::random())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::TemporaryAction;
    use sinks_contract::envelope::Headers;
    use sinks_contract::ordering::OrderKey;
    use sinks_contract::testing::envelope_with;

    const ACK_WAIT: Duration = Duration::from_secs(30);
    const DLQ: Option<AfterDeadLetter> = Some(AfterDeadLetter::Ack);

    fn policy(dead_letter: Option<AfterDeadLetter>, max_deliver: Option<u64>) -> GatePolicy {
        crate::ack::tests::policy(dead_letter, max_deliver, TemporaryAction::Nak)
    }

    /// Messages as `(sequence, ordering key, delivered, outcome)`; outcome letters: `c`
    /// committed, `t` temporary failure, `p` permanent failure, `h` held back.
    type Msg = (u64, Option<&'static str>, u64, char);

    fn messages(msgs: &[Msg]) -> (Batch<String>, Vec<MessageOutcome>) {
        msgs.iter()
            .map(|&(seq, key, delivered, outcome)| {
                let e = envelope_with("S", seq, "s.x", "{}", Headers::new(), delivered);
                let outcome = match outcome {
                    'c' => MessageOutcome::Committed,
                    't' => MessageOutcome::temporary("t"),
                    'p' => MessageOutcome::permanent("p"),
                    'h' => MessageOutcome::HeldBack,
                    other => panic!("{other}"),
                };
                ((e.with_order_key(key.map(OrderKey::subject)), format!("h{seq}")), outcome)
            })
            .unzip()
    }

    fn plan(policy: &GatePolicy, parking: &mut Parking<String>, msgs: &[Msg], cause: Cause) -> Planned<String> {
        let (batch, outcomes) = messages(msgs);
        Planner { policy, ack_wait: ACK_WAIT, sample: || 0.5 }.plan(parking, batch, outcomes, cause)
    }

    fn settled(planned: &Planned<String>) -> Vec<(u64, Settlement)> {
        planned.batch.envelopes.iter().map(|e| e.jetstream().stream_sequence).zip(planned.settlements.clone()).collect()
    }

    fn kept(parking: &Parking<String>) -> Vec<u64> {
        parking.kept_handles().into_iter().map(|(seq, _)| seq).collect()
    }

    /// A parking with the lot of key `a` behind 10, 11 parked in it.
    fn parked(now: Instant) -> Parking<String> {
        let mut parking = Parking::default();
        parking.block(OrderKey::subject("a"), 10, now);
        let (mut batch, _) = messages(&[(11, Some("a"), 1, 'h')]);
        let (e, h) = (batch.envelopes.remove(0), batch.handles.remove(0));
        assert!(parking.park(e, h).is_none());
        parking
    }

    #[test]
    fn written_table() {
        use Settlement::{DeadLetter, Nak};
        let s = Duration::from_secs;
        let released = s(1) + HELD_BACK_MARGIN;
        type Row = (
            &'static str,
            Option<AfterDeadLetter>,
            &'static [Msg],
            Vec<(u64, Settlement)>,
            &'static [(u64, &'static [u64])],
            u64,
        );
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            // what, dlq, written messages, settlements, lots after, held back
            ("a temporary failure opens a lot; the message behind it is parked, not settled", DLQ,
             &[(10, Some("a"), 1, 't'), (11, Some("a"), 1, 'h'), (12, Some("b"), 1, 'c')],
             vec![(10, Nak(s(1))), (12, Settlement::Ack)], &[(10, &[11])], 1),
            ("held back with no lot (its blocker was dead-lettered): released after the backoff base", DLQ,
             &[(10, Some("a"), 1, 'p'), (11, Some("a"), 1, 'h')],
             vec![(10, DeadLetter(AfterDeadLetter::Ack)), (11, Nak(released))], &[], 1),
            ("held back with no lot on its last delivery: dead-lettered with a DLQ", DLQ,
             &[(11, Some("a"), 3, 'h')], vec![(11, DeadLetter(AfterDeadLetter::Ack))], &[], 1),
            ("... and NAKed without one, never left for AckWait", None,
             &[(11, Some("a"), 3, 'h')], vec![(11, Nak(released))], &[], 1),
            ("a temporary failure on its last delivery is dead-lettered and opens no lot", DLQ,
             &[(10, Some("a"), 3, 't'), (11, Some("a"), 1, 'h')],
             vec![(10, DeadLetter(AfterDeadLetter::Ack)), (11, Nak(released))], &[], 1),
            ("a temporary failure without a key opens no lot", DLQ,
             &[(10, None, 1, 't')], vec![(10, Nak(s(1)))], &[], 0),
            ("a permanent failure opens no lot", None,
             &[(10, Some("a"), 1, 'p')], vec![(10, Nak(s(60)))], &[], 0),
            ("every message behind the failure of its key is parked in order, other keys go on", DLQ,
             &[(10, Some("a"), 2, 't'), (11, Some("b"), 1, 't'), (12, Some("a"), 1, 'h'), (13, Some("b"), 1, 'h'), (14, Some("a"), 1, 'h')],
             vec![(10, Nak(s(2))), (11, Nak(s(1)))], &[(10, &[12, 14]), (11, &[13])], 3),
        ];
        let now = Instant::now();
        for (what, dlq, msgs, want, lots, held_back) in &table {
            let mut parking = Parking::default();
            let planned = plan(&policy(*dlq, Some(3)), &mut parking, msgs, Cause::Written(now));
            assert_eq!(settled(&planned), *want, "{what}: settlements");
            let planned_handles: Vec<String> = want.iter().map(|(seq, _)| format!("h{seq}")).collect();
            assert_eq!(planned.batch.handles, planned_handles, "{what}: each settles through its own handle");
            assert_eq!(planned.outcomes.len(), want.len(), "{what}: one outcome per settlement");
            let want_lots: Vec<(u64, Vec<u64>)> = lots.iter().map(|(b, p)| (*b, p.to_vec())).collect();
            assert_eq!(parking.lots(), want_lots, "{what}: lots");
            assert_eq!(planned.held_back, *held_back, "{what}: held back");
        }
    }

    #[test]
    fn a_lot_is_due_when_its_failed_message_is() {
        // A NAK brings it back after the delay; a message left for AckWait after AckWait.
        let grace = ACK_WAIT * 2;
        let ms = Duration::from_millis;
        for (delivered, due) in [(1, Duration::from_secs(1)), (6, ACK_WAIT)] {
            let now = Instant::now();
            let mut parking = Parking::default();
            let msgs = [(10, Some("a"), delivered, 't'), (11, Some("a"), 1, 'h')];
            plan(&policy(DLQ, None), &mut parking, &msgs, Cause::Written(now));
            parking.note_fetch(&[], now + due + grace);
            assert!(parking.release(false, grace).is_empty(), "delivered={delivered}: not yet overdue");
            parking.note_fetch(&[], now + due + grace + ms(1));
            assert_eq!(parking.release(false, grace).len(), 1, "delivered={delivered}: overdue");
        }
    }

    #[test]
    fn a_written_message_stops_its_heartbeats_a_refused_copy_does_not() {
        let now = Instant::now();
        let p = policy(DLQ, None);
        let mut parking = parked(now);
        let refused = plan(&p, &mut parking, &[(11, Some("a"), 2, 'p')], Cause::Refused);
        assert_eq!(settled(&refused), [(11, Settlement::DeadLetter(AfterDeadLetter::Ack))]);
        assert_eq!(kept(&parking), [11], "the parked copy is still heartbeated");
        let written = plan(&p, &mut parking, &[(11, Some("a"), 2, 'c')], Cause::Written(now));
        assert_eq!(settled(&written), [(11, Settlement::Ack)]);
        assert!(kept(&parking).is_empty(), "heartbeats stop before it is settled");
    }

    #[test]
    fn refused_messages_are_dead_lettered_or_naked_slowly() {
        for (dlq, want) in
            [(DLQ, Settlement::DeadLetter(AfterDeadLetter::Ack)), (None, Settlement::Nak(Duration::from_secs(60)))]
        {
            let mut parking = Parking::default();
            let planned = plan(&policy(dlq, None), &mut parking, &[(10, Some("a"), 1, 'p')], Cause::Refused);
            assert_eq!(settled(&planned), [(10, want)], "dlq={dlq:?}");
            assert!(parking.lots().is_empty(), "a refusal opens no lot");
            assert_eq!(planned.held_back, 0);
        }
    }

    #[test]
    fn released_messages_come_back_just_after_their_blocker() {
        let msgs = [(11, Some("a"), 1, 'h'), (12, Some("a"), 3, 'h')];
        let nak = Settlement::Nak(HELD_BACK_MARGIN);
        for (dlq, last) in [(DLQ, Settlement::DeadLetter(AfterDeadLetter::Ack)), (None, nak)] {
            let mut parking = Parking::default();
            let planned = plan(&policy(dlq, Some(3)), &mut parking, &msgs, Cause::Released);
            assert_eq!(settled(&planned), [(11, nak), (12, last)], "dlq={dlq:?}");
            assert_eq!(planned.held_back, 0, "counted when they were held back, not again");
        }
    }
}
