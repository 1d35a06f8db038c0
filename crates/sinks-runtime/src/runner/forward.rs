//! A batch's one forward path: every message the runner settles takes it, fetched, released
//! from parking in chunks, read back by the rescue (with its advisory as its handle, see
//! `handle`), or brought back from its dead letter by `nats-sink redrive` (with its record's
//! ticket as its handle). [`process`] is a batch's task, and every step hands the batch on to the next
//! one, never back:
//!
//! 1. run the policy steps on each message ([`apply_policies`]): refused ones leave the batch
//!    (pure and per message, they need not wait for anything);
//! 2. wait (heartbeated) until earlier batches sharing one of its ordering keys have written;
//!    batches fetched meanwhile join it ([`Joined`], through their policy steps first), so
//!    that a flow of small fetches is written in one write instead of queueing write after
//!    write;
//! 3. admit it past the parking: messages of a key waiting for its failed message join that
//!    key's lot, and a failed message coming back (or refused on its way back) brings its lot;
//!    the refused messages' settlements are planned under the same lock;
//! 4. put it in priority-lane order and write it (with in-progress heartbeats), while the
//!    refused messages are dead-lettered;
//! 5. when the destination is down (every message failed temporarily) or throttled some
//!    messages, hold them and write them again (`hold`);
//! 6. keep what a holding sink took into objects not committed yet (`pending`), and plan the
//!    rest's settlement (`written`: outcomes recorded, the outage log, held-back messages
//!    parked), release the ordering gate, and apply the settlements (`settle`).

use std::sync::Arc;
use std::time::Instant;

use futures::future::join_all;
use sinks_contract::envelope::Envelope;
use sinks_contract::sink::MessageOutcome;
use sinks_policy::Prepared;
use tokio::sync::watch;

use super::batch::Batch;
use super::context::Ctx;
use super::handle::Handle;
use super::heartbeat::{Beats, WriteHeartbeat, hold_while, keep_alive};
use super::ordering::Joinable;
use super::settle::{self, Cause};
use super::tally::PolicyTally;
use crate::metrics::{CounterId, RunStats, TimingId};

/// Where a batch comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// Fetched from JetStream: the policy steps run on each message.
    Fetched,
    /// Fetched from JetStream as a canary while a hold paused fetching (`fetch`): a fetched
    /// message in every way, whose settlement lets the next canary go.
    Canary,
    /// A chunk of a draining lot ([`super::parking::Parking::take_ready`]): these messages
    /// went through the policy steps when they were fetched, and must not again (encryption,
    /// custody and the rest are not idempotent).
    Parked,
    /// Read back by the rescue (a message the server stopped redelivering): the policy
    /// steps run on each message, and none keeps an ordering key (its last chance must not
    /// wait behind anything).
    Rescued,
    /// Brought back from its dead letter by `nats-sink redrive` (the original, read from its
    /// stream or from a plain record payload): the policy steps run on each message, none
    /// keeps an ordering key. A record payload that is already an encryption envelope went
    /// through the steps before and comes as [`Origin::Parked`].
    Redriven,
}

/// A batch fetched while the one before it waits at the ordering gate, joining it: its
/// messages and the earlier writes of its other keys, which the batch it joins waits for too.
#[derive(Debug)]
pub(super) struct Joined {
    /// The messages that join, as fetched (their policy steps run when they are taken in).
    pub(super) batch: Batch<Handle>,
    /// The writes of earlier batches sharing one of their keys, besides the joined batch's.
    pub(super) waits: Vec<watch::Receiver<bool>>,
}

/// A batch's place at the ordering gate.
#[derive(Debug)]
pub(super) struct Turn {
    /// The writes of earlier batches sharing one of its keys.
    pub(super) waits: Vec<watch::Receiver<bool>>,
    /// Tells later batches that its own write is over.
    pub(super) done: watch::Sender<bool>,
    /// Where batches fetched while it waits join it (`None`: nothing joins it).
    pub(super) join: Option<Arc<Joinable<Joined>>>,
}

impl Turn {
    /// A batch that waits for nothing and that nothing joins (a rescued or redriven one).
    pub(super) fn alone(done: watch::Sender<bool>) -> Self {
        Self { waits: Vec::new(), done, join: None }
    }
}

/// What the policy steps made of a batch: the messages to write, those refused and the
/// refused ones' outcomes.
struct Policed {
    batch: Batch<Handle>,
    refused: Batch<Handle>,
    rejections: Vec<MessageOutcome>,
}

/// One batch's task (see the module documentation for its steps). `turn` is its place at the
/// ordering gate: the writes it waits for, how it tells later batches its own write is over,
/// and where batches fetched meanwhile join it. `permit` is its in-flight slot, given back
/// when it settles, or as soon as it is held through an outage (a held batch writes nothing
/// meanwhile).
pub(super) async fn process(
    ctx: &Ctx,
    batch: Batch<Handle>,
    origin: Origin,
    turn: Turn,
    mut permit: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    let Turn { waits, done, join } = turn;
    if let Some(traces) = &ctx.traces {
        traces.begin(&batch.envelopes);
    }
    // Policies first (encryption among them): from here on, sinks and dead-letter records
    // see only what the policies let through, encrypted when encryption is on. A refused
    // message is dead-lettered alone, while its batch-mates are written. The steps are pure
    // and per message, so they run before the wait for earlier batches of the same keys:
    // this batch's policy work overlaps their writes (on another core) instead of queueing
    // behind them. Nothing that depends on the earlier batches (parking, settlement) moves.
    let (batch, refused, rejections) = match origin {
        Origin::Fetched | Origin::Canary | Origin::Rescued | Origin::Redriven => {
            apply_policies(ctx, batch, matches!(origin, Origin::Rescued | Origin::Redriven))
        }
        Origin::Parked => (batch, Batch::default(), Vec::new()),
    };
    let Policed { batch, refused, rejections } =
        wait_turn(ctx, Policed { batch, refused, rejections }, waits, join.as_deref()).await;
    let started = Instant::now();
    // Messages of a key waiting for its failed message join that key's lot; a failed
    // message coming back (or refused on its way back) brings its lot with it.
    let (batch, refused) = {
        let gone: Vec<u64> = refused.envelopes.iter().map(|e| e.jetstream().stream_sequence).collect();
        let mut parking = ctx.lock_parking();
        let batch = parking.admit(batch, &gone, ctx.config.delivery.batch_size);
        let refused = settle::planner(ctx).plan(&mut parking, refused, rejections, Cause::Refused);
        ctx.note_parking(&parking);
        (batch, refused)
    };
    let batch = in_write_order(ctx, batch);
    let began = Instant::now();
    let (outcomes, ()) = tokio::join!(write(ctx, &batch), settle::apply(ctx, refused));
    if origin == Origin::Canary {
        ctx.evidence.canary_written(&outcomes, began);
    }
    // A destination that is down: the batch waits for it, heartbeated, instead of using up
    // its deliveries.
    let outcomes = super::hold::ride_out(ctx, &batch.envelopes, &batch.handles, outcomes, &mut permit).await;
    // A holding sink's pending messages wait for their object; the rest settle now.
    let (batch, outcomes) = super::pending::hold(ctx, batch, outcomes);
    if batch.is_empty() {
        let _ = done.send(true);
        return;
    }
    if let Some(traces) = &ctx.traces {
        traces.written(&batch.envelopes, &outcomes);
    }
    let planned = super::written::plan_written(ctx, batch, outcomes);
    RunStats::add(&ctx.stats.held_back, planned.held_back);
    let _ = done.send(true);
    tracing::debug!(messages = planned.len(), write_ms = started.elapsed().as_millis() as u64, "batch written");
    settle::apply(ctx, planned).await;
}

/// Waits (heartbeated) until the earlier batches sharing one of its keys have written. With
/// `join`, batches fetched meanwhile join it: their policy steps run, their messages are
/// written with it (after its own: they are later in the stream) and their waits are added to
/// its own. Its turn comes when every wait is over and nothing joined since the last look;
/// then nothing joins any more.
async fn wait_turn(
    ctx: &Ctx,
    mut held: Policed,
    mut waits: Vec<watch::Receiver<bool>>,
    join: Option<&Joinable<Joined>>,
) -> Policed {
    let Some(join) = join else {
        if !waits.is_empty() {
            hold_while(ctx, &[&held.batch.handles, &held.refused.handles], all_written(waits)).await;
        }
        return held;
    };
    let mut beats = Beats::new(ctx);
    loop {
        waits.retain(|w| !*w.borrow());
        let joined = join.take(waits.is_empty());
        if joined.is_empty() && waits.is_empty() {
            break;
        }
        for Joined { batch, waits: theirs } in joined {
            if let Some(traces) = &ctx.traces {
                traces.begin(&batch.envelopes);
            }
            let (kept, refused, rejections) = apply_policies(ctx, batch, false);
            held.batch.extend(kept);
            held.refused.extend(refused);
            held.rejections.extend(rejections);
            waits.extend(theirs);
        }
        if !waits.is_empty() {
            let earlier = all_written(waits.clone());
            let acks = [&held.batch.handles[..], &held.refused.handles[..]];
            beats
                .hold(&acks, async {
                    tokio::select! {
                        () = earlier => {}
                        () = join.joined() => {}
                    }
                })
                .await;
        }
    }
    beats.end(&[&held.batch.handles, &held.refused.handles]).await;
    held
}

/// Resolves when every one of `waits` has written.
async fn all_written(waits: Vec<watch::Receiver<bool>>) {
    join_all(waits.into_iter().map(|mut w| async move {
        let _ = w.wait_for(|d| *d).await;
    }))
    .await;
}

/// Writes `batch` through the sink within the write budget (poison messages isolated by
/// bisection), with in-progress heartbeats meanwhile: the configured ones when
/// `delivery.in_progress` is on, else one every third of AckWait once the write has taken
/// that long (a slow destination must not make the server redeliver messages being
/// written, which would burn their `max_deliver`).
async fn write(ctx: &Ctx, batch: &Batch<Handle>) -> Vec<MessageOutcome> {
    if batch.is_empty() {
        return Vec::new();
    }
    #[cfg(feature = "fault-injection")]
    if let Some(outcomes) = super::break_ack::write(ctx, batch).await {
        return outcomes;
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
    ctx.evidence.observe(&batch.envelopes, &outcomes, writing);
    ctx.holds.note_throttled(outcomes.iter().filter(|o| o.throttled()).count());
    let exemplar = ids.filter(|i| i.sampled).map(|i| (i.trace_hex(), i.span_hex()));
    ctx.metrics.observe_traced(TimingId::SinkBatchWriteSeconds, writing.elapsed().as_secs_f64(), exemplar);
    if let Some(span) = span {
        span.end(batch.len());
    }
    outcomes
}

/// Runs the policy steps on every fresh message. Returns what goes to the sink, what was
/// refused, and the refused messages' permanent outcomes. A message on the consumer's last
/// allowed delivery, or `rescued` (on its last chance), loses its ordering key: it must not
/// wait behind anything that could outlast its last chance.
fn apply_policies<H>(ctx: &Ctx, batch: Batch<H>, rescued: bool) -> (Batch<H>, Batch<H>, Vec<MessageOutcome>) {
    // No step configured and no message losing its key: every message is ready as it is, and
    // the batch goes on without moving each one through the pipeline into a new batch.
    if ctx.policy_steps.is_empty() && !rescued && !batch.envelopes.iter().any(|e| ctx.is_last_delivery(e)) {
        ctx.metrics.inc(CounterId::MessagesPrepared, batch.len() as u64);
        ctx.metrics.inc(CounterId::MessagesFailed, 0);
        PolicyTally::default().record(&ctx.metrics);
        return (batch, Batch::default(), Vec::new());
    }
    let mut kept = Batch::with_capacity(batch.len());
    let mut refused = Batch::default();
    let mut rejections = Vec::new();
    let mut tally = PolicyTally::default();
    for (position, (envelope, handle)) in batch.into_iter().enumerate() {
        match ctx.pipeline.prepare(envelope, position) {
            Prepared::Ready(envelope) => {
                tally.passed(&ctx.policy_steps, None);
                let last = rescued || ctx.is_last_delivery(&envelope);
                let envelope = if last { envelope.with_order_key(None) } else { envelope };
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
