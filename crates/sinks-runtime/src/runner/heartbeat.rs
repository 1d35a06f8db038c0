//! In-progress heartbeats (`+WPI`): of a batch being written ([`WriteHeartbeat`], with
//! `delivery.in_progress`), and of messages the runner holds without writing them
//! ([`hold_while`] for a batch waiting its turn, [`progress`] for the keeper's held-back
//! messages). A heartbeat that cannot be sent only means that message may be redelivered.

use std::future::Future;
use std::time::{Duration, Instant};

use async_nats::jetstream::AckKind;
use tokio::sync::watch;

use super::context::Ctx;
use super::handle::Handle;
use crate::metrics::{CounterId, GaugeId, TimingId};

/// Runs `wait` while keeping the messages of each group of `acks` alive: a fetched batch
/// waiting for a free slot or for an earlier batch of its keys (its messages to write and
/// those its policies refused) sends in-progress heartbeats every third of AckWait, and one
/// more when a long wait ends, so waiting costs no redelivery (and no delivery of
/// `max_deliver`) however slow the batches ahead of it are.
pub(super) async fn hold_while<T>(ctx: &Ctx, acks: &[&[Handle]], wait: impl Future<Output = T>) -> T {
    let mut beats = Beats::new(ctx);
    let out = beats.hold(acks, wait).await;
    beats.end(acks).await;
    out
}

/// The heartbeats of messages held through several waits in a row, on one schedule: a batch
/// waiting at the ordering gate that others join holds a group of messages that grows, and
/// each wait must not start the clock again (a message joining every second would otherwise
/// never be heartbeated).
#[derive(Debug)]
pub(super) struct Beats {
    every: Duration,
    started: Instant,
    next: Instant,
}

impl Beats {
    /// The schedule of a hold starting now: a heartbeat every third of AckWait.
    pub(super) fn new(ctx: &Ctx) -> Self {
        let every = ctx.heartbeat_every();
        let started = Instant::now();
        Self { every, started, next: started + every }
    }

    /// Runs `wait`, sending a heartbeat for each group of `acks` whenever one is due.
    pub(super) async fn hold<T>(&mut self, acks: &[&[Handle]], wait: impl Future<Output = T>) -> T {
        let mut wait = std::pin::pin!(wait);
        loop {
            tokio::select! {
                out = &mut wait => return out,
                () = tokio::time::sleep_until(self.next.into()) => {
                    beat(acks).await;
                    self.next = Instant::now() + self.every;
                }
            }
        }
    }

    /// Ends the hold: one more heartbeat when it was long (half the interval or more), so the
    /// messages go on with a fresh AckWait.
    pub(super) async fn end(self, acks: &[&[Handle]]) {
        if self.started.elapsed() >= self.every / 2 {
            beat(acks).await;
        }
    }
}

/// One heartbeat for each group of `acks`.
async fn beat(acks: &[&[Handle]]) {
    for group in acks {
        progress(group).await;
    }
}

/// Runs `work` (a write) while keeping the messages of `acks` alive: an in-progress heartbeat
/// every third of AckWait, none when `work` ends sooner (no trailing one: the messages are
/// settled right after).
pub(super) async fn keep_alive<T>(ctx: &Ctx, acks: &[Handle], work: impl Future<Output = T>) -> T {
    let every = ctx.heartbeat_every();
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = tokio::time::sleep(every) => progress(acks).await,
        }
    }
}

/// Sends an in-progress heartbeat for each of `acks` (a failure only means that message
/// may be redelivered, which the sinks absorb).
pub(super) async fn progress(acks: &[Handle]) {
    if let (_, Some(e)) = send_progress(acks).await {
        tracing::debug!(error = %e, "heartbeat of a held message failed; it may be redelivered");
    }
}

/// Sends `+WPI` for each of `acks`, one after another: a send only queues the message on the
/// connection, so awaiting them in turn costs no round trips, and a heartbeat for 20,000
/// pending messages allocates nothing per message (joining 20,000 send futures took over
/// 10 MiB for a moment). Returns how many failed and the first error.
async fn send_progress(acks: &[Handle]) -> (u64, Option<async_nats::Error>) {
    let mut failed = 0;
    let mut first = None;
    for handle in acks {
        if let Err(e) = handle.send(AckKind::Progress).await {
            failed += 1;
            first.get_or_insert(e);
        }
    }
    (failed, first)
}

/// The in-progress heartbeats of one batch's write (`delivery.in_progress`): every
/// `interval_ms`, at most `max_heartbeats` times; the first failed heartbeat stops them.
/// Nothing runs when heartbeats are off.
#[derive(Debug)]
pub(super) struct WriteHeartbeat(Option<(tokio::task::JoinHandle<()>, watch::Sender<bool>)>);

impl WriteHeartbeat {
    /// Starts heartbeating `acks` (when `delivery.in_progress` is on).
    pub(super) fn start(ctx: &Ctx, acks: &[Handle]) -> Self {
        let ip = &ctx.config.delivery.in_progress;
        if !ip.enabled {
            return Self(None);
        }
        let (tx, mut rx) = watch::channel(false);
        let interval = Duration::from_millis(ip.interval_ms);
        let max = ip.max_heartbeats;
        let handles = acks.to_vec();
        let metrics = ctx.metrics.clone();
        metrics.add(GaugeId::CurrentInProgressBatchesActive, 1.0);
        let task = tokio::spawn(async move {
            for beat in 1..=max {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    _ = rx.wait_for(|s| *s) => return,
                }
                let started = Instant::now();
                metrics.inc(CounterId::InProgressAttempts, 1);
                let (failed, first) = send_progress(&handles).await;
                metrics.observe(TimingId::InProgressHeartbeatSeconds, started.elapsed().as_secs_f64());
                metrics.inc(CounterId::InProgressSuccesses, handles.len() as u64 - failed);
                metrics.inc(CounterId::InProgressFailures, failed);
                if let Some(e) = first {
                    tracing::warn!(error = %e, "in-progress heartbeat failed; stopping heartbeats");
                    return;
                }
                if beat == max {
                    metrics.inc(CounterId::InProgressMaxHeartbeatsReached, 1);
                    tracing::warn!(max, "in-progress heartbeat limit reached");
                }
            }
        });
        Self(Some((task, tx)))
    }

    /// Stops the heartbeats before the batch is settled, waiting at most
    /// `delivery.in_progress.shutdown_timeout_ms` for the task.
    pub(super) async fn stop(self, ctx: &Ctx) {
        let Some((task, tx)) = self.0 else { return };
        ctx.metrics.add(GaugeId::CurrentInProgressBatchesActive, -1.0);
        let _ = tx.send(true);
        let limit = Duration::from_millis(ctx.config.delivery.in_progress.shutdown_timeout_ms);
        let abort = task.abort_handle();
        if tokio::time::timeout(limit, task).await.is_err() {
            abort.abort();
        }
    }
}
