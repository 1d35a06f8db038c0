//! One batch's task: wait for earlier writers of its keys, run the policies, admit it past
//! the parking, write it, and settle it.

use std::time::Instant;

use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::{MessageOutcome, OutcomeClass};
use sinks_policy::Prepared;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::RunStats;
use super::context::Ctx;
use super::heartbeat::{hold_while, start_heartbeat, stop_heartbeat};
use super::outage::track_outage;
use super::settle::{decide, settle_batch, settle_refused};
use super::tally::PolicyTally;
use crate::freshness::FreshnessBatch;
use crate::metrics::{CLASSES, CounterId, TimingId, class_slot};
use crate::source::{AckHandle, Fetched};

pub(super) async fn process_batch(
    ctx: &Ctx,
    batch: Fetched,
    waits: Vec<watch::Receiver<bool>>,
    done: watch::Sender<bool>,
) {
    if !waits.is_empty() {
        let earlier = join_all(waits.into_iter().map(|mut w| async move {
            let _ = w.wait_for(|d| *d).await;
        }));
        hold_while(ctx, &batch.acks, earlier).await;
    }
    let started = Instant::now();
    // Policies first (encryption among them): from here on, sinks and dead-letter records
    // see only what the policies let through, encrypted when encryption is on. A refused
    // message is dead-lettered alone, while its batch-mates are written.
    let (batch, refused) = apply_policies(ctx, batch);
    // Messages of a key waiting for its failed message join that key's lot; a failed
    // message coming back (or refused on its way back) brings its lot with it.
    let batch = {
        let gone: Vec<u64> = refused.iter().map(|(e, _, _)| e.jetstream().stream_sequence).collect();
        let mut parking = ctx.lock_parking();
        let batch = parking.admit(batch, &gone);
        ctx.note_parking(&parking);
        batch
    };
    let batch = in_write_order(ctx, batch);
    let write = async {
        if batch.is_empty() {
            return Vec::new();
        }
        let heartbeat = start_heartbeat(ctx, &batch.acks);
        let writing = Instant::now();
        let outcomes =
            sinks_contract::sink::write_isolating(ctx.sink.as_ref(), &batch.envelopes, ctx.write_budget).await;
        ctx.metrics.observe(TimingId::SinkBatchWriteSeconds, writing.elapsed().as_secs_f64());
        stop_heartbeat(ctx, heartbeat).await;
        outcomes
    };
    let (outcomes, ()) = tokio::join!(write, settle_refused(ctx, refused));
    if batch.is_empty() {
        let _ = done.send(true);
        return;
    }
    record_outcomes(ctx, &batch.envelopes, &outcomes);
    track_outage(ctx, &batch.envelopes, &outcomes, Instant::now());
    let (batch, outcomes, settlements) = decide(ctx, batch, outcomes, Instant::now());
    let _ = done.send(true);
    tracing::debug!(messages = batch.len(), write_ms = started.elapsed().as_millis() as u64, "batch written");
    settle_batch(ctx, batch, outcomes, settlements).await;
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

/// Runs the policy steps on every fresh message. Returns what goes to the sink and what was
/// refused (with its permanent outcome). A message on the consumer's last allowed delivery
/// loses its ordering key: it must not wait behind anything that could outlast its last
/// chance.
pub(super) fn apply_policies(ctx: &Ctx, batch: Fetched) -> (Fetched, Vec<(Envelope, AckHandle, MessageOutcome)>) {
    let mut kept = Fetched { envelopes: Vec::with_capacity(batch.len()), acks: Vec::with_capacity(batch.len()) };
    let mut refused = Vec::new();
    let mut tally = PolicyTally::default();
    for (position, (envelope, ack)) in batch.envelopes.into_iter().zip(batch.acks).enumerate() {
        match ctx.pipeline.prepare(envelope, position) {
            Prepared::Ready(envelope) => {
                tally.passed(&ctx.policy_steps, None);
                let envelope = if ctx.is_last_delivery(&envelope) { envelope.with_order_key(None) } else { envelope };
                kept.envelopes.push(envelope);
                kept.acks.push(ack);
            }
            Prepared::Rejected { envelope, rejection } => {
                RunStats::add(&ctx.stats.rejected_by_policy, 1);
                tally.passed(&ctx.policy_steps, Some(rejection.step.section()));
                // With a DLQ, the dead-letter line names the policy and reason; without one
                // this line is the only trace of the refusal.
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
                refused.push((envelope, ack, MessageOutcome::Failed(rejection.into_error())));
            }
        }
    }
    ctx.metrics.inc(CounterId::MessagesPrepared, kept.len() as u64);
    ctx.metrics.inc(CounterId::MessagesFailed, refused.len() as u64);
    tally.record(&ctx.metrics);
    (kept, refused)
}

/// The batch in priority-lane order (unchanged when lanes are off).
pub(super) fn in_write_order(ctx: &Ctx, batch: Fetched) -> Fetched {
    let Some(order) = ctx.pipeline.write_order(&batch.envelopes) else { return batch };
    let mut slots: Vec<Option<(Envelope, AckHandle)>> = batch.envelopes.into_iter().zip(batch.acks).map(Some).collect();
    let (envelopes, acks) = order.into_iter().filter_map(|i| slots[i].take()).unzip();
    Fetched { envelopes, acks }
}
