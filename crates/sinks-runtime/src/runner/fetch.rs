//! The fetch loop: pulls batches (slow start), takes an in-flight permit, enters the
//! ordering gate and spawns each batch's task; or, while the batch spawned last still waits
//! at the gate, has the new batch join it (`ordering::Joinable`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::batch::Batch;
use super::context::Ctx;
use super::forward::{self, Joined, Origin, Turn};
use super::guard::live_now;
use super::handle::Handle;
use super::heartbeat::hold_while;
use super::ordering::{Joinable, OrderingGate, batch_keys, with_order_key};
use super::reconnect::{reconnect_backoff, sleep_or_stop};
use crate::config::OrderingKey;
use crate::metrics::{CounterId, GaugeId, RunStats, TimingId};
use crate::source::{Delivery, FetchError, Source};

/// Resolves once a stop was requested while the connection is down (a fetch in progress
/// then cannot bring anything, so it is abandoned instead of waiting for its timers).
async fn stopped_while_disconnected(stop: &watch::Receiver<bool>, client: &async_nats::Client) {
    let mut stop = stop.clone();
    let _ = stop.wait_for(|s| *s).await;
    while client.connection_state() == async_nats::connection::State::Connected {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Fetches batches until a stop is requested, and runs each in its own task (at most
/// `delivery.max_in_flight_batches` writing or settling, one more fetched and waiting);
/// returns once every batch task has finished. A failed fetch is logged and retried.
pub(super) async fn fetch_loop(
    ctx: &Arc<Ctx>,
    source: &Arc<Source>,
    stop: &watch::Receiver<bool>,
    client: &async_nats::Client,
) {
    let mut fetching = Fetching::new(ctx, source, stop, client);
    while fetching.running() && fetching.turn().await {}
    // A fetch asked for ahead and abandoned (a stop while disconnected) brings nothing.
    if let Some((_, task)) = fetching.ahead {
        task.abort();
    }
    // Wait until every batch task has returned its permit.
    let max = ctx.config.delivery.max_in_flight_batches;
    let _all = fetching.permits.acquire_many(max as u32).await;
}

/// What a step of the fetch loop tells it: go on with a value, start the next turn, or stop.
enum Step<T> {
    /// Go on with this.
    Go(T),
    /// Start the next turn (the loop's `continue`).
    Again,
    /// Leave the loop (its `break`).
    Stop,
}

/// The state of the fetch loop between its turns.
struct Fetching<'a> {
    ctx: &'a Arc<Ctx>,
    source: &'a Arc<Source>,
    stop: &'a watch::Receiver<bool>,
    client: &'a async_nats::Client,
    /// The in-flight slots, `delivery.max_in_flight_batches`.
    permits: Arc<Semaphore>,
    gate: OrderingGate,
    /// The batch spawned last, while later fetched batches may join it.
    tail: Option<Tail>,
    /// `delivery.batch_timeout_ms`.
    timeout: Duration,
    backoff: sinks_toolkit::retry::Backoff,
    /// Fetches failed in a row.
    failures: u64,
    /// The stream could not be read at the last look (deleted?): said once, looked at again
    /// every lag poll interval (`poll`), fetch failures meanwhile quiet.
    stream_gone: bool,
    poll: Duration,
    /// Slow start: the first batches are smaller (1/8, 1/4, 1/2 of batch_size), so the first
    /// commit and ack come quickly after a start or restart.
    size: usize,
    /// The next batch's fetch, already asked for (see [`Fetching::ask_ahead`]).
    ahead: Option<(Instant, Ahead)>,
    /// Its result once taken in while the current batch waits for a slot (then it is
    /// heartbeated with it).
    taken_in: Option<(Instant, Result<Vec<Delivery>, FetchError>)>,
}

impl<'a> Fetching<'a> {
    fn new(
        ctx: &'a Arc<Ctx>,
        source: &'a Arc<Source>,
        stop: &'a watch::Receiver<bool>,
        client: &'a async_nats::Client,
    ) -> Self {
        let delivery = &ctx.config.delivery;
        Self {
            ctx,
            source,
            stop,
            client,
            permits: Arc::new(Semaphore::new(delivery.max_in_flight_batches)),
            gate: OrderingGate::default(),
            tail: None,
            timeout: Duration::from_millis(delivery.batch_timeout_ms),
            backoff: reconnect_backoff(),
            failures: 0,
            stream_gone: false,
            poll: Duration::from_secs(ctx.config.metrics.lag_poll_interval_seconds.max(1)),
            size: delivery.batch_size.div_ceil(8),
            ahead: None,
            taken_in: None,
        }
    }

    /// Until a stop, and after it while a fetch asked for ahead or taken in is unprocessed.
    fn running(&self) -> bool {
        !*self.stop.borrow() || self.ahead.is_some() || self.taken_in.is_some()
    }

    /// One turn: a draining lot's next chunk, or a fetch admitted and spawned. `false` ends
    /// the loop.
    async fn turn(&mut self) -> bool {
        let ctx = self.ctx;
        match self.send_ready_chunk().await {
            Step::Go(()) => {}
            Step::Again => return true,
            Step::Stop => return false,
        }
        let (started, fetched, canary) = match self.fetch().await {
            Step::Go(fetched) => fetched,
            Step::Again => return true,
            Step::Stop => return false,
        };
        ctx.metrics.observe(TimingId::NatsFetchSeconds, started.elapsed().as_secs_f64());
        ctx.metrics.status().progress();
        let batch = match fetched {
            Ok(fetched) => match self.take_in(fetched, started).await {
                Some(batch) => batch,
                None => return true,
            },
            Err(e) => return self.fetch_failed(&e).await,
        };
        if batch.is_empty() {
            return true;
        }
        if canary {
            let seq = batch.envelopes[0].jetstream().stream_sequence;
            tracing::debug!(stream_sequence = seq, "fetched a canary while holding");
        }
        self.ask_ahead();
        RunStats::add(&ctx.stats.fetched, batch.len() as u64);
        ctx.metrics.inc(CounterId::MessagesFetched, batch.len() as u64);
        ctx.metrics.inc(CounterId::BatchesFetched, 1);
        ctx.metrics.set(GaugeId::CurrentBatchMessages, batch.len() as f64);
        if canary {
            // A canary takes no slot: the held batches keep theirs, and it must not wait for them.
            self.tail = spawn(ctx, &mut self.gate, batch, Origin::Canary, None);
            return true;
        }
        let Some(batch) = self.join_tail(batch) else { return true };
        let Some(permit) = self.permit_for(&batch).await else { return false };
        self.tail = spawn(ctx, &mut self.gate, batch, Origin::Fetched, Some(permit));
        true
    }

    /// Has `batch` join the batch spawned last if that one still waits at the gate and has
    /// room (`None`: joined); else gives it back, to be spawned. Joining takes no slot: the
    /// batch joined holds one, and never more than `batch_size` messages.
    fn join_tail(&mut self, batch: Batch<Handle>) -> Option<Batch<Handle>> {
        let Some(tail) = &self.tail else { return Some(batch) };
        let gate = &mut self.gate;
        let mut batch = Some(batch);
        let len = batch.as_ref().map_or(0, Batch::len);
        let joined = tail.join.offer(len, || {
            let batch = batch.take().unwrap_or_default();
            let waits = gate.join(batch_keys(&batch.envelopes), &tail.writer);
            Joined { batch, waits }
        });
        if joined {
            tracing::trace!(messages = len, "a fetched batch joined the batch waiting at the ordering gate");
            return None;
        }
        // It started writing or is full: the new batch is spawned, and is the tail now.
        self.tail = None;
        batch
    }

    /// A draining lot's next chunk leaves before anything new is fetched: it is older.
    /// `Go` when there is none.
    async fn send_ready_chunk(&mut self) -> Step<()> {
        let ctx = self.ctx;
        let ready = {
            let mut parking = ctx.lock_parking();
            if parking.has_ready() { parking.take_ready(ctx.config.delivery.batch_size) } else { Batch::default() }
        };
        if ready.is_empty() {
            return Step::Go(());
        }
        let Ok(permit) = hold_while(ctx, &[&ready.handles], Arc::clone(&self.permits).acquire_owned()).await else {
            return Step::Stop;
        };
        self.tail = spawn(ctx, &mut self.gate, ready, Origin::Parked, Some(permit));
        Step::Again
    }

    /// The next fetch's start, result and whether it is a canary: the one taken in or asked
    /// for ahead, else a new one. Fetch first, then wait for a free slot: the next batch is
    /// already here when the current one settles. Everything fetched is processed, even after
    /// a stop request.
    async fn fetch(&mut self) -> Step<(Instant, Result<Vec<Delivery>, FetchError>, bool)> {
        let ctx = self.ctx;
        if let Some((started, fetched)) = self.taken_in.take() {
            return Step::Go((started, fetched, false));
        }
        if let Some((started, task)) = self.ahead.take() {
            return Step::Go((started, task.await.unwrap_or_else(|e| Err(FetchError::from_task(&e))), false));
        }
        // The stream's identity changed and nothing was decided: nothing new is fetched
        // (what was fetched before goes on to its settlement).
        if ctx.guard.paused() {
            return if ctx.guard.wait_open(self.stop).await { Step::Again } else { Step::Stop };
        }
        if ctx.holds.paused() {
            return self.fetch_canary().await;
        }
        let started = Instant::now();
        let fetched = tokio::select! {
            fetched = self.source.fetch(self.size, self.timeout) => fetched,
            () = stopped_while_disconnected(self.stop, self.client) => return Step::Stop,
        };
        Step::Go((started, fetched, false))
    }

    /// A batch holds its messages through a destination outage or throttling: nothing new is
    /// fetched (what is still in the stream spends no delivery either), but one canary
    /// message now and then: a destination that takes writes again, or never stopped (a
    /// poison message held alone), shows it (`evidence`).
    async fn fetch_canary(&mut self) -> Step<(Instant, Result<Vec<Delivery>, FetchError>, bool)> {
        let ctx = self.ctx;
        match open_or_canary(ctx, self.stop).await {
            None => Step::Stop,
            Some(false) => Step::Again,
            Some(true) => {
                let started = Instant::now();
                match self.source.fetch(1, self.timeout.min(CANARY_WAIT)).await {
                    Ok(fetched) if fetched.is_empty() => {
                        ctx.evidence.canary_done();
                        Step::Again
                    }
                    fetched => {
                        let canary = fetched.is_ok();
                        if !canary {
                            ctx.evidence.canary_done();
                        }
                        Step::Go((started, fetched, canary))
                    }
                }
            }
        }
    }

    /// The runner owns the batch from here on; each message gets its ordering key, and its
    /// origin when the stream has any. A stream of an origin's chain that does not answer
    /// holds the batch (heartbeated, so the wait costs no delivery); a stop meanwhile leaves
    /// it unacknowledged, to be delivered again (`None`).
    async fn take_in(&mut self, fetched: Vec<Delivery>, started: Instant) -> Option<Batch<Handle>> {
        let ctx = self.ctx;
        // A fresh envelope carries its subject's key already (`Envelope::new`), which is the
        // default `delivery.ordering_key`'s: no second hash of the subject, no move.
        let keyed = !matches!(ctx.config.delivery.ordering_key, OrderingKey::Subject);
        let mut batch: Batch<Handle> = Batch::with_capacity(fetched.len());
        for (envelope, handle) in fetched {
            let envelope = if keyed { with_order_key(envelope, &ctx.config) } else { envelope };
            batch.push(envelope, Handle::Delivery(handle));
        }
        if let Some(origins) = &ctx.origins {
            let envelopes = std::mem::take(&mut batch.envelopes);
            let held = [&batch.handles[..]];
            let resolving = hold_while(ctx, &held, origins.resolve_all(envelopes));
            let mut stopped = self.stop.clone();
            tokio::select! {
                resolved = resolving => batch.envelopes = resolved,
                _ = stopped.wait_for(|s| *s) => return None,
            }
        }
        ctx.lock_parking().note_fetch(&batch.envelopes, started);
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "fetching recovered");
            self.failures = 0;
        }
        Some(batch)
    }

    /// A failed fetch: counted, logged, and retried after a backoff. Failing fetches may mean
    /// the consumer is gone (a deleted stream takes its consumers with it): look at once, and
    /// bind it again once the stream is there. `false` when a stop came while waiting.
    async fn fetch_failed(&mut self, e: &FetchError) -> bool {
        let ctx = self.ctx;
        self.failures += 1;
        let failures = self.failures;
        RunStats::add(&ctx.stats.fetch_failures, 1);
        ctx.metrics.inc(CounterId::FetchErrors, 1);
        let delay = self.backoff.delay(failures, 0.5);
        if self.stream_gone {
            tracing::debug!(error = %e, attempt = failures, "fetch failed while the stream cannot be read");
        } else {
            tracing::warn!(error = %e, attempt = failures, retry_in_ms = delay.as_millis() as u64, "fetch failed; retrying");
        }
        let wait = match rebind(ctx, self.source).await {
            Rebound::Bound => {
                (self.failures, self.stream_gone) = (0, false);
                return true;
            }
            Rebound::StreamGone(e) => {
                if !self.stream_gone {
                    tracing::warn!(
                        stream = %ctx.config.nats.stream,
                        error = %e,
                        every_s = self.poll.as_secs(),
                        "the stream cannot be read (deleted?); not ready, and looking for it again every \
                         metrics.lag_poll_interval_seconds"
                    );
                }
                self.stream_gone = true;
                self.poll
            }
            Rebound::No => delay,
        };
        !sleep_or_stop(wait, self.stop).await
    }

    /// Doubles the batch size up to `batch_size`. At full size, the next pull request goes
    /// out now, so the server fills it while this batch is admitted and spawned (one
    /// request/response round trip per batch is what a plain fetch loop loses against a
    /// continuous pull). It is awaited and processed before anything else is fetched, stop or
    /// not.
    fn ask_ahead(&mut self) {
        let ctx = self.ctx;
        let full = ctx.config.delivery.batch_size;
        self.size = (self.size * 2).min(full);
        if self.size == full && !*self.stop.borrow() && !ctx.guard.paused() && !ctx.holds.paused() {
            let task = tokio::spawn(prefetch(Arc::clone(self.source), self.size, self.timeout));
            self.ahead = Some((Instant::now(), task));
        }
    }

    /// An in-flight slot for `batch`; `None` when the wait ended without one. With no free
    /// slot, a fetch asked for ahead is taken in now, so its messages are heartbeated with
    /// this batch's while both wait (a long outage hold must not let them pass their AckWait
    /// unseen).
    async fn permit_for(&mut self, batch: &Batch<Handle>) -> Option<OwnedSemaphorePermit> {
        let ctx = self.ctx;
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Some(permit);
        }
        if let Some((started, task)) = self.ahead.take() {
            let fetched = hold_while(ctx, &[&batch.handles], task).await;
            self.taken_in = Some((started, fetched.unwrap_or_else(|e| Err(FetchError::from_task(&e)))));
        }
        let next: Vec<Handle> = match &self.taken_in {
            Some((_, Ok(deliveries))) => deliveries.iter().map(|(_, h)| Handle::Delivery(h.clone())).collect(),
            _ => Vec::new(),
        };
        hold_while(ctx, &[&batch.handles, &next], Arc::clone(&self.permits).acquire_owned()).await.ok()
    }
}

/// How often a canary may be fetched while a hold pauses fetching.
const CANARY_EVERY: Duration = Duration::from_secs(1);
/// How long a canary fetch waits for a message.
const CANARY_WAIT: Duration = Duration::from_millis(500);

/// Waits until fetching is open again (`Some(false)`), a canary may go (`Some(true)`, taken),
/// or a stop came (`None`).
async fn open_or_canary(ctx: &Ctx, stop: &watch::Receiver<bool>) -> Option<bool> {
    loop {
        tokio::select! {
            open = ctx.holds.wait_open(stop) => return open.then_some(false),
            () = tokio::time::sleep(CANARY_EVERY) => {
                if ctx.evidence.take_canary(Instant::now(), CANARY_EVERY) {
                    return Some(true);
                }
            }
        }
    }
}

/// What [`rebind`] found.
enum Rebound {
    /// The source fetches from a newly bound consumer.
    Bound,
    /// The stream cannot be read (deleted?): not ready until it is back.
    StreamGone(String),
    /// Nothing to do or not done now (the consumer is there, or binding failed).
    No,
}

/// Binds the consumer again when it is gone (its stream was deleted, or it was deleted), once
/// the stream is there; checks the stream's identity before anything is fetched from it.
/// While the stream or the consumer is missing, `/readyz` says the consumer is not bound.
async fn rebind(ctx: &Ctx, source: &Source) -> Rebound {
    let config = &ctx.config;
    let (name, consumer) = (&config.nats.stream, &config.nats.consumer);
    let stream = match ctx.js.get_stream(name).await {
        Ok(stream) => stream,
        Err(e) => {
            ctx.metrics.status().set_consumer_bound(false);
            return Rebound::StreamGone(e.to_string());
        }
    };
    if !config.nats.durable {
        return Rebound::No;
    }
    match stream.consumer_info(consumer).await {
        Ok(_) => return Rebound::No,
        Err(e) if e.kind() == async_nats::jetstream::context::ConsumerInfoErrorKind::NotFound => {
            ctx.metrics.status().set_consumer_bound(false);
        }
        Err(_) => return Rebound::No,
    }
    tracing::warn!(stream = %name, consumer = %consumer, "the consumer is gone (its stream deleted and created again?); binding it again");
    let bound = match crate::setup::ensure_consumer(&stream, config).await {
        Ok(bound) => bound,
        Err(e) => {
            tracing::error!(stream = %name, consumer = %consumer, error = %e, "cannot bind the consumer again; retrying");
            return Rebound::No;
        }
    };
    match live_now(&stream, &bound.consumer).await {
        Ok(live) => {
            if let Err(e) = ctx.guard.check(&live, &stream, &bound.consumer).await {
                tracing::error!(error = %e, "checking the stream's identity failed; not fetching from the new consumer yet");
                return Rebound::No;
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the stream failed; retrying");
            return Rebound::No;
        }
    }
    source.replace_consumer(bound.consumer);
    if let Some(origins) = &ctx.origins {
        origins.forget();
    }
    ctx.metrics.status().set_consumer_bound(true);
    tracing::info!(stream = %name, consumer = %consumer, action = bound.action, "consumer bound again");
    Rebound::Bound
}

/// The task of a fetch asked for ahead.
type Ahead = tokio::task::JoinHandle<Result<Vec<Delivery>, FetchError>>;

/// One fetch of `size` messages, as a task of its own (the fetch asked for ahead).
async fn prefetch(source: Arc<Source>, size: usize, timeout: Duration) -> Result<Vec<Delivery>, FetchError> {
    source.fetch(size, timeout).await
}

/// A batch waiting at the ordering gate that later fetched batches may join.
struct Tail {
    join: Arc<Joinable<Joined>>,
    /// Tells when its write is over (what later batches of its keys wait for).
    writer: watch::Receiver<bool>,
}

/// Enters `batch` into the ordering gate and runs it in a task of its own, which gives the
/// permit back (a canary has none) when the batch has settled. Returns where later fetched
/// batches may join it: a fetched batch that waits for an earlier write (one that waits for
/// nothing starts writing at once, and other origins take no company).
fn spawn(
    ctx: &Arc<Ctx>,
    gate: &mut OrderingGate,
    batch: Batch<Handle>,
    origin: Origin,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Option<Tail> {
    let (waits, done) = gate.enter(batch_keys(&batch.envelopes));
    let room = ctx.config.delivery.batch_size.saturating_sub(batch.len());
    let tail = (origin == Origin::Fetched && !waits.is_empty() && room > 0)
        .then(|| Tail { join: Arc::new(Joinable::new(room)), writer: done.subscribe() });
    let join = tail.as_ref().map(|t| Arc::clone(&t.join));
    let ctx = Arc::clone(ctx);
    ctx.metrics.add(GaugeId::BatchesInFlight, 1.0);
    tokio::spawn(async move {
        forward::process(&ctx, batch, origin, Turn { waits, done, join }, permit).await;
        if origin == Origin::Canary {
            ctx.evidence.canary_done();
        }
        ctx.metrics.add(GaugeId::BatchesInFlight, -1.0);
        ctx.metrics.status().progress();
    });
    tail
}
