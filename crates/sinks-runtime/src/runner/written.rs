//! A write's outcomes, once the sink (or a holding sink's flush) has given them: recorded
//! (counts by class, written and failed messages, freshness, the outage log), the rescue's
//! last-chance rule applied to rescued messages, and their settlement planned. The forward
//! path calls it for a batch just written, `pending` for messages whose objects reported.

use std::time::Instant;

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::{MessageOutcome, OutcomeClass};
use time::OffsetDateTime;

use super::batch::Batch;
use super::context::Ctx;
use super::handle::{Handle, last_chance};
use super::outage::track_outage;
use super::settle::{self, Cause, Planned};
use crate::freshness::FreshnessBatch;
use crate::metrics::{CLASSES, CounterId, class_slot};

/// Records the outcomes of written messages (counters, the outage log), applies the rescue's
/// last-chance rule to rescued ones ([`last_chance`]), and plans their settlement under the
/// parking lock: a batch just written, or pending messages whose objects reported (or were
/// released on shutdown).
pub(super) fn plan_written(ctx: &Ctx, batch: Batch<Handle>, outcomes: Vec<MessageOutcome>) -> Planned<Handle> {
    let now = Instant::now();
    record_outcomes(ctx, &batch.envelopes, &outcomes);
    track_outage(&ctx.outage, ctx.sink.name(), &ctx.metrics, &batch.envelopes, &outcomes, now);
    // A rescued message's write was its last chance: what is not durable is the exhaustion.
    let outcomes = batch
        .handles
        .iter()
        .zip(&batch.envelopes)
        .zip(outcomes)
        .map(|((handle, envelope), outcome)| match handle {
            Handle::Rescue(_) => last_chance(outcome, envelope.jetstream().delivered),
            Handle::Delivery(_) | Handle::Redrive(_) => outcome,
        })
        .collect();
    let mut parking = ctx.lock_parking();
    let planned = settle::planner(ctx).plan(&mut parking, batch, outcomes, Cause::Written(now));
    ctx.note_parking(&parking);
    planned
}

/// Records a batch's outcomes: counts by class for the sink, written and failed messages,
/// and the freshness of the messages made durable (after the write, before the ack).
fn record_outcomes(ctx: &Ctx, envelopes: &[Envelope], outcomes: &[MessageOutcome]) {
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
