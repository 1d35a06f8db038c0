//! The batch and its one forward path.
//!
//! A [`Batch`] is owned by the runner from the fetch to its settlement: the envelopes the
//! sink sees and, index for index, the ack handles only the runner holds. [`process`] is a
//! batch's task, and every step hands the batch on to the next one, never back:
//!
//! 1. wait (heartbeated) until earlier batches sharing one of its ordering keys have written;
//! 2. run the policy steps on each message ([`apply_policies`]): refused ones leave the batch;
//! 3. admit it past the parking: messages of a key waiting for its failed message join that
//!    key's lot, and a failed message coming back (or refused on its way back) brings its lot;
//!    the refused messages' settlements are planned under the same lock;
//! 4. put it in priority-lane order and write it (with in-progress heartbeats), while the
//!    refused messages are dead-lettered;
//! 5. when the destination is down (every message failed temporarily), hold the batch
//!    through the outage and write it again (`hold`); record its outcomes and the outage log;
//! 6. plan every message's settlement (parking the held-back ones), release the ordering
//!    gate, and apply the settlements.

use std::time::Instant;

use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::{MessageOutcome, OutcomeClass};
use sinks_policy::Prepared;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::RunStats;
use super::context::Ctx;
use super::heartbeat::{WriteHeartbeat, hold_while, keep_alive};
use super::outage::track_outage;
use super::settle::{self, Cause};
use super::tally::PolicyTally;
use crate::freshness::FreshnessBatch;
use crate::metrics::{CLASSES, CounterId, TimingId, class_slot};
use crate::source::AckHandle;

/// Messages that travel together: the envelopes the sink sees and, index for index, their
/// ack handles (`H` is [`AckHandle`] in a run; the pure parts are generic so that tests can
/// use plain values).
#[derive(Debug)]
pub(super) struct Batch<H> {
    /// What the sink writes.
    pub(super) envelopes: Vec<Envelope>,
    /// The right to settle each envelope, at the same index.
    pub(super) handles: Vec<H>,
}

impl<H> Default for Batch<H> {
    fn default() -> Self {
        Self { envelopes: Vec::new(), handles: Vec::new() }
    }
}

impl<H> Batch<H> {
    /// An empty batch with room for `n` messages.
    pub(super) fn with_capacity(n: usize) -> Self {
        Self { envelopes: Vec::with_capacity(n), handles: Vec::with_capacity(n) }
    }

    /// Adds one message.
    pub(super) fn push(&mut self, envelope: Envelope, handle: H) {
        self.envelopes.push(envelope);
        self.handles.push(handle);
    }

    /// How many messages it holds.
    pub(super) fn len(&self) -> usize {
        self.envelopes.len()
    }

    /// True when it holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.envelopes.is_empty()
    }
}

impl<H> IntoIterator for Batch<H> {
    type Item = (Envelope, H);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<Envelope>, std::vec::IntoIter<H>>;

    fn into_iter(self) -> Self::IntoIter {
        self.envelopes.into_iter().zip(self.handles)
    }
}

impl<H> FromIterator<(Envelope, H)> for Batch<H> {
    fn from_iter<I: IntoIterator<Item = (Envelope, H)>>(iter: I) -> Self {
        let (envelopes, handles) = iter.into_iter().unzip();
        Self { envelopes, handles }
    }
}

impl<H> Extend<(Envelope, H)> for Batch<H> {
    fn extend<I: IntoIterator<Item = (Envelope, H)>>(&mut self, iter: I) {
        for (envelope, handle) in iter {
            self.push(envelope, handle);
        }
    }
}

/// Where a batch comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// Fetched from JetStream: the policy steps run on each message.
    Fetched,
    /// A chunk of a draining lot ([`super::parking::Parking::take_ready`]): these messages
    /// went through the policy steps when they were fetched, and must not again (encryption,
    /// custody and the rest are not idempotent).
    Parked,
}

/// One batch's task (see the module documentation for its steps). `waits` are the writes of
/// earlier batches sharing its keys; `done` tells later ones that its own write is over.
pub(super) async fn process(
    ctx: &Ctx,
    batch: Batch<AckHandle>,
    origin: Origin,
    waits: Vec<watch::Receiver<bool>>,
    done: watch::Sender<bool>,
) {
    if !waits.is_empty() {
        let earlier = join_all(waits.into_iter().map(|mut w| async move {
            let _ = w.wait_for(|d| *d).await;
        }));
        hold_while(ctx, &batch.handles, earlier).await;
    }
    let started = Instant::now();
    if let Some(traces) = &ctx.traces {
        traces.begin(&batch.envelopes);
    }
    // Policies first (encryption among them): from here on, sinks and dead-letter records
    // see only what the policies let through, encrypted when encryption is on. A refused
    // message is dead-lettered alone, while its batch-mates are written.
    let (batch, refused, rejections) = match origin {
        Origin::Fetched => apply_policies(ctx, batch),
        Origin::Parked => (batch, Batch::default(), Vec::new()),
    };
    // Messages of a key waiting for its failed message join that key's lot; a failed
    // message coming back (or refused on its way back) brings its lot with it.
    let (batch, refused) = {
        let gone: Vec<u64> = refused.envelopes.iter().map(|e| e.jetstream().stream_sequence).collect();
        let mut parking = ctx.lock_parking();
        let batch = parking.admit(batch, &gone, ctx.config.delivery.batch_size);
        let refused = ctx.planner().plan(&mut parking, refused, rejections, Cause::Refused);
        ctx.note_parking(&parking);
        (batch, refused)
    };
    let batch = in_write_order(ctx, batch);
    let (outcomes, ()) = tokio::join!(write(ctx, &batch), settle::apply(ctx, refused));
    // A destination that is down: the batch waits for it, heartbeated, instead of using up
    // its deliveries.
    let outcomes = super::hold::ride_out(ctx, &batch.envelopes, &batch.handles, outcomes).await;
    // A holding sink's pending messages wait for their object; the rest settle now.
    let (batch, outcomes) = super::pending::hold(ctx, batch, outcomes);
    if batch.is_empty() {
        let _ = done.send(true);
        return;
    }
    if let Some(traces) = &ctx.traces {
        traces.written(&batch.envelopes, &outcomes);
    }
    let planned = plan_written(ctx, batch, outcomes);
    RunStats::add(&ctx.stats.held_back, planned.held_back);
    let _ = done.send(true);
    tracing::debug!(messages = planned.len(), write_ms = started.elapsed().as_millis() as u64, "batch written");
    settle::apply(ctx, planned).await;
}

/// Records the outcomes of written messages (counters, the outage log) and plans their
/// settlement under the parking lock: a batch just written, or pending messages whose
/// objects reported.
pub(super) fn plan_written(
    ctx: &Ctx,
    batch: Batch<AckHandle>,
    outcomes: Vec<MessageOutcome>,
) -> settle::Planned<AckHandle> {
    let now = Instant::now();
    record_outcomes(ctx, &batch.envelopes, &outcomes);
    track_outage(ctx, &batch.envelopes, &outcomes, now);
    let mut parking = ctx.lock_parking();
    let planned = ctx.planner().plan(&mut parking, batch, outcomes, Cause::Written(now));
    ctx.note_parking(&parking);
    planned
}

/// Writes `batch` through the sink within the write budget (poison messages isolated by
/// bisection), with in-progress heartbeats meanwhile: the configured ones when
/// `delivery.in_progress` is on, else one every third of AckWait once the write has taken
/// that long (a slow destination must not make the server redeliver messages being
/// written, which would burn their `max_deliver`).
async fn write(ctx: &Ctx, batch: &Batch<AckHandle>) -> Vec<MessageOutcome> {
    if batch.is_empty() {
        return Vec::new();
    }
    let writing = Instant::now();
    let span = ctx.traces.as_ref().map(|t| t.write_span(&batch.envelopes));
    let ids = span.as_ref().map(crate::otel::WriteSpan::ids);
    let write = sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &batch.envelopes, ctx.write_budget);
    let outcomes = if ctx.config.delivery.in_progress.enabled {
        let heartbeat = WriteHeartbeat::start(ctx, &batch.handles);
        let outcomes = crate::otel::scope(ids, write).await;
        heartbeat.stop(ctx).await;
        outcomes
    } else {
        keep_alive(ctx, &batch.handles, crate::otel::scope(ids, write)).await
    };
    let exemplar = ids.filter(|i| i.sampled).map(|i| (i.trace_hex(), i.span_hex()));
    ctx.metrics.observe_traced(TimingId::SinkBatchWriteSeconds, writing.elapsed().as_secs_f64(), exemplar);
    if let Some(span) = span {
        span.end(batch.len());
    }
    outcomes
}

/// Records a batch's outcomes: counts by class for the sink, written and failed messages,
/// and the freshness of the messages made durable (after the write, before the ack).
pub(super) fn record_outcomes(ctx: &Ctx, envelopes: &[Envelope], outcomes: &[MessageOutcome]) {
    if !ctx.metrics.enabled() {
        return;
    }
    let mut by_class = [0u64; CLASSES.len()];
    let mut durable = 0u64;
    let mut freshness = ctx.freshness.enabled().then(|| FreshnessBatch::new(ctx.freshness, OffsetDateTime::now_utc()));
    for (envelope, outcome) in envelopes.iter().zip(outcomes) {
        by_class[class_slot(outcome.class())] += 1;
        if outcome.is_durable() {
            durable += 1;
            if let Some(f) = &mut freshness {
                f.observe(envelope);
            }
        }
    }
    for (class, n) in CLASSES.iter().zip(by_class) {
        ctx.outcomes.add(*class, n);
    }
    let failed =
        by_class[class_slot(OutcomeClass::FailedTemporary)] + by_class[class_slot(OutcomeClass::FailedPermanent)];
    ctx.metrics.inc(CounterId::MessagesWritten, durable);
    ctx.metrics.inc(CounterId::SinkWriteErrors, failed);
    ctx.metrics.inc(CounterId::MessagesFailed, failed);
    ctx.metrics.inc(CounterId::MessagesHeldBack, by_class[class_slot(OutcomeClass::HeldBack)]);
    if durable > 0 {
        ctx.metrics.inc(CounterId::SinkBatchesWritten, 1);
    }
    if let Some(f) = freshness {
        f.record(&ctx.metrics);
    }
}

/// Runs the policy steps on every fresh message. Returns what goes to the sink, what was
/// refused, and the refused messages' permanent outcomes. A message on the consumer's last
/// allowed delivery loses its ordering key: it must not wait behind anything that could
/// outlast its last chance.
fn apply_policies<H>(ctx: &Ctx, batch: Batch<H>) -> (Batch<H>, Batch<H>, Vec<MessageOutcome>) {
    let mut kept = Batch::with_capacity(batch.len());
    let mut refused = Batch::default();
    let mut rejections = Vec::new();
    let mut tally = PolicyTally::default();
    for (position, (envelope, handle)) in batch.into_iter().enumerate() {
        match ctx.pipeline.prepare(envelope, position) {
            Prepared::Ready(envelope) => {
                tally.passed(&ctx.policy_steps, None);
                let envelope = if ctx.is_last_delivery(&envelope) { envelope.with_order_key(None) } else { envelope };
                kept.push(envelope, handle);
            }
            Prepared::Rejected { envelope, rejection } => {
                RunStats::add(&ctx.stats.rejected_by_policy, 1);
                tally.passed(&ctx.policy_steps, Some(rejection.step.section()));
                if let Some(traces) = &ctx.traces {
                    traces.refused(envelope.jetstream().stream_sequence, rejection.step.section(), &rejection.reason);
                }
                // With a DLQ, the dead-letter line names the policy and reason; without one
                // this line is the only trace of the refusal.
                let ids = ctx.traces.as_ref().and_then(|t| t.ids(envelope.jetstream().stream_sequence));
                crate::otel::sync_scope(ids, || {
                    if ctx.dlq.is_some() {
                        tracing::debug!(
                            stream_sequence = envelope.jetstream().stream_sequence,
                            policy = rejection.step.section(),
                            reason = %rejection.reason,
                            "message refused by policy"
                        );
                    } else {
                        tracing::warn!(
                            stream_sequence = envelope.jetstream().stream_sequence,
                            subject = envelope.subject(),
                            policy = rejection.step.section(),
                            reason = %rejection.reason,
                            "message refused by policy"
                        );
                    }
                });
                refused.push(envelope, handle);
                rejections.push(MessageOutcome::Failed(rejection.into_error()));
            }
        }
    }
    ctx.metrics.inc(CounterId::MessagesPrepared, kept.len() as u64);
    ctx.metrics.inc(CounterId::MessagesFailed, refused.len() as u64);
    tally.record(&ctx.metrics);
    (kept, refused, rejections)
}

/// The batch in priority-lane order (unchanged when lanes are off).
fn in_write_order<H>(ctx: &Ctx, batch: Batch<H>) -> Batch<H> {
    let Some(order) = ctx.pipeline.write_order(&batch.envelopes) else { return batch };
    let mut slots: Vec<Option<(Envelope, H)>> = batch.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}
