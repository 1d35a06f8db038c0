//! The runner: fetch → write → settle, pipelined, until asked to stop.
//!
//! One fetch loop pulls batches (at most `delivery.max_in_flight_batches` fetched but not yet
//! settled). Each batch runs in its own task: it waits until every earlier batch that shares
//! an ordering key has finished writing, writes through the sink (with in-progress
//! heartbeats for long writes), isolates poison messages by bisection when the sink reports
//! a batch-level permanent failure, and finally settles each message from its own outcome
//! through the ACK gate. Fetch, ack and DLQ failures are logged and retried; they never end
//! the process. On shutdown the loop stops fetching, lets in-flight batches finish and
//! settle, flushes and drains the connection.
//!
//! Observability reads, never steers: outcomes, settlements and timings are recorded through
//! the run's [`Metrics`] handle where they already happen, and nothing recorded is read back
//! to decide anything. Under failure the log stays readable: a destination outage is one
//! line when it starts, one summary per interval (counts, first and last sequence, error
//! class and reason) and one when it ends; per-message detail is at debug level, except the
//! lines that matter per message (a dead letter, a conflict).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::AckKind;
use futures::future::join_all;
use time::OffsetDateTime;
use tokio::sync::{Semaphore, watch};

use crate::ack::{self, AfterDeadLetter, GatePolicy, Settlement};
use crate::config::{Config, ConfigError, OrderingKey};
use crate::connect::{self, ConnectError};
use crate::dlq::DeadLetterPublisher;
use crate::freshness::{Freshness, FreshnessBatch};
use crate::ledger::{LedgerMode, LedgerPublisher};
use crate::metrics::{CLASSES, CounterId, GaugeId, Metrics, OutcomeCounters, TimingId, class_slot};
use crate::setup::{self, SetupError};
use crate::source::{AckHandle, Fetched, Source};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::{ErrorClass, SinkError};
use sinks_contract::ordering::OrderKey;
use sinks_contract::retry::{Backoff, BackoffMode, Jitter};
use sinks_contract::sink::{ConflictResolution, MessageOutcome, OutcomeClass, Sink};
use sinks_policy::{Pipeline, Prepared};

/// Why the runner stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Configuration does not match reality (missing stream, drift, bad secret, sink
    /// misconfigured): exit code 2.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The sink could not be opened for a reason other than configuration: exit code 1.
    #[error("sink failed to open: {0}")]
    SinkOpen(String),
}

/// Counters of what the runner did, for logs and tests.
#[derive(Debug, Default)]
pub struct RunStats {
    /// Messages fetched.
    pub fetched: AtomicU64,
    /// Messages acked after a durable outcome.
    pub acked: AtomicU64,
    /// Messages NAKed.
    pub naked: AtomicU64,
    /// Messages left for AckWait.
    pub left_unacked: AtomicU64,
    /// DLQ records stored.
    pub dead_lettered: AtomicU64,
    /// DLQ publishes that failed (original NAKed).
    pub dead_letter_failures: AtomicU64,
    /// Ack, nak or term sends that failed (message will be redelivered).
    pub ack_failures: AtomicU64,
    /// Fetches that failed.
    pub fetch_failures: AtomicU64,
    /// Conflicting redeliveries reported by the sink.
    pub conflicts: AtomicU64,
    /// Duplicates reported by the sink.
    pub duplicates: AtomicU64,
    /// Messages held back behind a temporary failure of their ordering key (released).
    pub held_back: AtomicU64,
    /// Messages refused by a policy step (authenticity, size, pre-sink, …) and
    /// dead-lettered without reaching the sink.
    pub rejected_by_policy: AtomicU64,
}

impl RunStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A plain snapshot `(name, value)` of every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        [
            ("fetched", &self.fetched),
            ("acked", &self.acked),
            ("naked", &self.naked),
            ("left_unacked", &self.left_unacked),
            ("dead_lettered", &self.dead_lettered),
            ("dead_letter_failures", &self.dead_letter_failures),
            ("ack_failures", &self.ack_failures),
            ("fetch_failures", &self.fetch_failures),
            ("conflicts", &self.conflicts),
            ("duplicates", &self.duplicates),
            ("held_back", &self.held_back),
            ("rejected_by_policy", &self.rejected_by_policy),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.load(Ordering::Relaxed)))
        .collect()
    }
}

/// Shared, immutable per-run context of batch tasks.
#[derive(Debug)]
struct Ctx {
    sink: Arc<dyn Sink>,
    policy: GatePolicy,
    dlq: Option<DeadLetterPublisher>,
    config: Config,
    stats: Arc<RunStats>,
    /// The run's observability handle (records only; never read back to decide).
    metrics: Metrics,
    /// The sink's outcome counters, resolved once.
    outcomes: OutcomeCounters,
    /// Event freshness settings.
    freshness: Freshness,
    /// The policy steps whose pass and reject counts the reference reports, in pipeline order.
    policy_steps: Vec<&'static str>,
    /// The current destination outage, if any (for its log lines).
    outage: std::sync::Mutex<Outage>,
    /// Messages held back behind a temporary failure of their key (see [`Parking`]).
    parking: std::sync::Mutex<Parking>,
    /// The consumer's effective AckWait (when an unacked message comes back).
    ack_wait: Duration,
    /// Time a write may take, retries in place included (see [`write_budget`]).
    write_budget: Duration,
    /// The policy steps (metadata, authenticity, encryption, size, pre-sink, custody,
    /// priority lanes), applied before the sink (and the DLQ) sees a message.
    pipeline: Pipeline,
    /// Delivery receipts (`ledger` section), when enabled.
    ledger: Option<LedgerPublisher>,
}

impl Ctx {
    fn is_last_delivery(&self, envelope: &Envelope) -> bool {
        self.policy.max_deliver.is_some_and(|max| envelope.jetstream().delivered >= max)
    }

    /// How often the runner heartbeats messages it holds without writing them (parked, or
    /// in a batch waiting its turn): a third of AckWait, at least 200 ms.
    fn heartbeat_every(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_millis(200))
    }

    fn lock_parking(&self) -> std::sync::MutexGuard<'_, Parking> {
        self.parking.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Updates the held-back gauge from `parking` (called with the lock held).
    fn note_parking(&self, parking: &Parking) {
        self.metrics.set(GaugeId::HeldBackMessages, parking.kept.len() as f64);
    }
}

/// How long one write may take, in-place retries included: 80 % of the consumer's AckWait,
/// or, with in-progress heartbeats, as long as the heartbeats keep the batch alive; never
/// less than one second.
fn write_budget(config: &Config, ack_wait: Duration) -> Duration {
    let ip = &config.delivery.in_progress;
    let budget = if ip.enabled {
        Duration::from_millis(ip.interval_ms).saturating_mul(ip.max_heartbeats) + ack_wait.mul_f64(0.8)
    } else {
        ack_wait.mul_f64(0.8)
    };
    budget.max(Duration::from_secs(1))
}

/// Runs `sink` under `config` until `shutdown` resolves. Returns the counters.
pub async fn run(
    config: Config,
    sink: Arc<dyn Sink>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Arc<RunStats>, RunError> {
    let metrics = Metrics::new(&config.metrics);
    run_observed(config, sink, metrics, RunOptions::default(), shutdown).await
}

/// What a run does differently from `nats-sink run` (used by `nats-sink replay`).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Where a new (ephemeral) consumer starts, instead of `consumer_management.deliver_policy`.
    pub start: Option<async_nats::jetstream::consumer::DeliverPolicy>,
    /// Name of an ephemeral consumer (the server picks one when `None`).
    pub consumer_name: Option<String>,
}

/// [`run`] with [`RunOptions`].
pub async fn run_with(
    config: Config,
    sink: Arc<dyn Sink>,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Arc<RunStats>, RunError> {
    let metrics = Metrics::new(&config.metrics);
    run_observed(config, sink, metrics, options, shutdown).await
}

/// [`run_with`] recording into `metrics` (made from `config.metrics` by the caller, which may
/// serve it while the run goes on). Writes the snapshot file, when configured, every
/// `metrics.snapshot_interval_seconds` and once more at the end.
pub async fn run_observed(
    config: Config,
    sink: Arc<dyn Sink>,
    metrics: Metrics,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Arc<RunStats>, RunError> {
    let stats = Arc::clone(metrics.stats());
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(false);
    let snapshot = match (&config.metrics.snapshot_file, metrics.enabled()) {
        (Some(path), true) => {
            let every = Duration::from_secs(config.metrics.snapshot_interval_seconds);
            let task = crate::metrics::snapshot::keep_writing(metrics.clone(), path.into(), every, done_rx);
            Some(tokio::spawn(task))
        }
        (Some(_), false) => {
            tracing::info!("metrics.enabled is false: metrics.snapshot_file is not written");
            None
        }
        (None, _) => None,
    };
    let status_metrics = metrics.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutdown requested; finishing in-flight batches");
        status_metrics.status().set_stopping();
        let _ = stop_tx.send(true);
    };
    let work = run_inner(config, sink, options, stop_rx, metrics);
    tokio::pin!(work);
    let result = tokio::select! {
        result = &mut work => result,
        () = signal => work.await,
    };
    let _ = done_tx.send(true);
    if let Some(task) = snapshot {
        let _ = task.await;
    }
    result.map(|()| stats)
}

/// Retries `attempt` with backoff until it succeeds, fails for a configuration reason, or a
/// stop is requested (then `None`).
async fn retry_until<T, E: std::fmt::Display, F: Future<Output = Result<T, Retry<E>>>>(
    what: &str,
    stop: &watch::Receiver<bool>,
    metrics: &Metrics,
    mut attempt: impl FnMut() -> F,
) -> Result<Option<T>, ConfigError> {
    let backoff = reconnect_backoff();
    let mut failures = 0u64;
    loop {
        metrics.status().progress();
        match attempt().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(what, failures, "recovered");
                }
                return Ok(Some(v));
            }
            Err(Retry::Fatal(e)) => return Err(e),
            Err(Retry::Again(e)) => {
                failures += 1;
                let delay = backoff.delay(failures, 0.5);
                tracing::warn!(what, error = %e, attempt = failures, retry_in_ms = delay.as_millis() as u64, "not ready; retrying");
                if sleep_or_stop(delay, stop).await {
                    return Ok(None);
                }
            }
        }
    }
}

enum Retry<E> {
    Fatal(ConfigError),
    Again(E),
}

fn reconnect_backoff() -> Backoff {
    Backoff {
        base: Duration::from_millis(200),
        max: Duration::from_secs(5),
        mode: BackoffMode::Exponential,
        multiplier: 2.0,
        jitter: Jitter::Equal,
    }
}

/// Sleeps `d`; returns true when a stop was requested meanwhile.
async fn sleep_or_stop(d: Duration, stop: &watch::Receiver<bool>) -> bool {
    let mut watcher = stop.clone();
    tokio::select! {
        () = tokio::time::sleep(d) => *stop.borrow(),
        _ = watcher.wait_for(|s| *s) => true,
    }
}

async fn run_inner(
    config: Config,
    sink: Arc<dyn Sink>,
    options: RunOptions,
    stop: watch::Receiver<bool>,
    metrics: Metrics,
) -> Result<(), RunError> {
    let stats = Arc::clone(metrics.stats());
    metrics.status().progress();
    // Keys are read once, before anything else: a missing or malformed one stops start-up.
    let pipeline = Pipeline::from_config(config.policy_sections())?;
    if let Some(e) = pipeline.encryption() {
        let keys: Vec<&str> = e.keyring().key_ids().collect();
        tracing::info!(key_ids = ?keys, version = config.encryption.format_version, "payload encryption on");
    }
    let steps = pipeline.steps();
    if !steps.is_empty() {
        tracing::info!(steps = ?steps, "message policies on");
    }
    let Some(()) = retry_until("sink open", &stop, &metrics, async || match sink.open().await {
        Ok(()) => Ok(()),
        Err(e) if e.class() == ErrorClass::Config => Err(Retry::Fatal(ConfigError::single("sink", e.display_chain()))),
        Err(e) if e.is_permanent() => Err(Retry::Fatal(ConfigError::single("sink", e.display_chain()))),
        Err(e) => Err(Retry::Again(e.display_chain())),
    })
    .await?
    else {
        return Ok(());
    };
    tracing::info!(sink = sink.name(), "sink opened");
    metrics.status().set_sink_opened(true);

    let nats = &config.nats;
    let observed = &metrics;
    let Some(client) = retry_until("nats connect", &stop, &metrics, || async move {
        match connect::connect_observed(nats, Some(observed.clone())).await {
            Ok(c) => Ok(c),
            Err(ConnectError::Config(e)) => Err(Retry::Fatal(e)),
            Err(ConnectError::Unreachable(e)) => Err(Retry::Again(e)),
        }
    })
    .await?
    else {
        return Ok(());
    };
    let js = async_nats::jetstream::new(client.clone());
    // Advisories are observed from here on (the consumer's own creation included).
    let advisories = if config.advisories.enabled {
        let subscriptions = crate::advisories::subscribe(&client, &config.advisories).await;
        let task = crate::advisories::monitor(subscriptions, config.advisories.clone(), metrics.clone(), stop.clone());
        Some(tokio::spawn(task))
    } else {
        None
    };

    let (js_ref, config_ref, options_ref) = (&js, &config, &options);
    let Some(bound) = retry_until("consumer setup", &stop, &metrics, || async move {
        let stream = setup::ensure_streams(js_ref, config_ref).await.map_err(setup_retry)?;
        setup::ensure_consumer_from(&stream, config_ref, options_ref.start, options_ref.consumer_name.clone())
            .await
            .map_err(setup_retry)
    })
    .await?
    else {
        return Ok(());
    };
    tracing::info!(
        stream = %config.nats.stream,
        consumer = %config.nats.consumer,
        action = bound.action,
        max_deliver = bound.max_deliver,
        ack_wait_ms = bound.ack_wait.as_millis() as u64,
        "consumer ready"
    );
    let ip = &config.delivery.in_progress;
    if ip.enabled && (ip.interval_ms as f64) >= bound.ack_wait.as_secs_f64() * 1000.0 * 0.8 {
        return Err(ConfigError::single(
            "delivery.in_progress.interval_ms",
            format!("must be below 80% of the consumer's effective AckWait ({} ms)", bound.ack_wait.as_millis()),
        )
        .into());
    }

    let policy = GatePolicy {
        backoff: config.delivery.backoff(),
        max_retries: config.delivery.max_retries,
        temporary_action: config.delivery.temporary_failure_action,
        dead_letter: config.dead_letter.enabled.then_some(if config.dead_letter.ack_term_after_publish {
            AfterDeadLetter::Term
        } else {
            AfterDeadLetter::Ack
        }),
        max_deliver: bound.max_deliver,
    };
    let budget = write_budget(&config, bound.ack_wait);
    // Liveness: a fetch returns within its timeout plus 15 s, and a batch slot frees up
    // within one write's budget; anything much longer is a wedged loop.
    let fetch_guard = Duration::from_millis(config.delivery.batch_timeout_ms) + Duration::from_secs(15);
    metrics.status().set_stall_window((budget + fetch_guard) * 2 + Duration::from_secs(30));
    metrics.status().set_consumer_bound(true);
    let policy_steps: Vec<&'static str> = pipeline.steps();
    let ctx = Arc::new(Ctx {
        sink: Arc::clone(&sink),
        policy,
        dlq: DeadLetterPublisher::new(js.clone(), config.dead_letter.clone()),
        stats: Arc::clone(&stats),
        outcomes: metrics.outcome_counters(sink.name()),
        freshness: Freshness::new(&config.metrics),
        metrics: metrics.clone(),
        policy_steps,
        outage: std::sync::Mutex::new(Outage::default()),
        config: config.clone(),
        parking: std::sync::Mutex::new(Parking::default()),
        ack_wait: bound.ack_wait,
        write_budget: budget,
        pipeline,
        ledger: LedgerPublisher::new(js.clone(), config.ledger.clone()),
    });
    let lag = tokio::spawn(poll_lag(bound.consumer.clone(), metrics.clone(), config.metrics.clone(), stop.clone()));
    let health = metrics.enabled().then(|| tokio::spawn(probe_sink(Arc::clone(&ctx), stop.clone())));
    let source = Source::new(bound.consumer, config.message_metadata.clone());
    let keeper = tokio::spawn(keep_parking(Arc::clone(&ctx), stop.clone()));
    fetch_loop(&ctx, &source, &stop, &client).await;
    // Every batch has settled; messages still parked go back for redelivery (the next
    // process writes them after the messages they wait for).
    let _ = keeper.await;
    for task in [Some(lag), health, advisories].into_iter().flatten() {
        let _ = task.await;
    }
    let parked = {
        let mut parking = ctx.lock_parking();
        let parked = parking.release(true, Duration::ZERO);
        ctx.note_parking(&parking);
        parked
    };
    if !parked.is_empty() {
        tracing::info!(messages = parked.len(), "releasing held-back messages for redelivery");
        release_parked(&ctx, parked).await;
    }

    // Every batch has settled (fetch_loop took back every permit). Push the acks out and
    // drain, within `nats.drain_timeout_seconds`; with the server unreachable there is
    // nothing to wait for: unsent acks only mean redeliveries.
    let drain = Duration::from_secs(config.nats.drain_timeout_seconds);
    if client.connection_state() == async_nats::connection::State::Connected {
        let finish = async {
            if let Err(e) = client.flush().await {
                tracing::warn!(error = %e, "flushing acks failed; unsettled messages will be redelivered");
            }
            client.drain().await
        };
        match tokio::time::timeout(drain, finish).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "draining the nats connection failed"),
            Err(_) => tracing::warn!(timeout_s = drain.as_secs(), "draining the nats connection timed out"),
        }
    } else {
        tracing::warn!("nats is unreachable while stopping; unsent acks mean those messages will be redelivered");
    }
    if let Err(e) = sink.close().await {
        tracing::warn!(error = %e.display_chain(), "closing the sink failed");
    }
    if let Some(ledger) = &ctx.ledger {
        let (recorded, unrecorded) = ledger.counts();
        tracing::info!(recorded, unrecorded, "delivery ledger");
    }
    let counts: Vec<String> = stats.snapshot().iter().map(|(k, v)| format!("{k}={v}")).collect();
    tracing::info!(counts = %counts.join(" "), "stopped");
    Ok(())
}

fn setup_retry(e: SetupError) -> Retry<String> {
    match e {
        SetupError::Config(c) => Retry::Fatal(c),
        SetupError::Unavailable(m) => Retry::Again(m),
    }
}

/// Polls the consumer's `num_pending` and `num_ack_pending` every
/// `metrics.lag_poll_interval_seconds` until a stop is requested (for the lag gauges and the
/// summary line; kept with metrics disabled too). A failed poll keeps the last values.
async fn poll_lag(
    mut consumer: async_nats::jetstream::consumer::PullConsumer,
    metrics: Metrics,
    config: crate::config::MetricsConfig,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_secs(config.lag_poll_interval_seconds);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), consumer.info()).await {
            Ok(Ok(info)) => {
                let (pending, ack_pending) = (info.num_pending, info.num_ack_pending as u64);
                metrics.status().set_lag(pending, ack_pending);
                metrics.set(GaugeId::ConsumerNumPending, pending as f64);
                metrics.set(GaugeId::ConsumerNumAckPending, ack_pending as f64);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "consumer info poll failed"),
            Err(_) => tracing::debug!("consumer info poll timed out"),
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Runs the sink's health check every `metrics.health_check_interval_seconds` for
/// `/readyz`, until a stop is requested. Only reads: a failed check changes no delivery.
async fn probe_sink(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_secs(ctx.config.metrics.health_check_interval_seconds);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let healthy = match tokio::time::timeout(every.min(Duration::from_secs(10)), ctx.sink.health_check()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(sink = ctx.sink.name(), error = %e.display_chain(), "sink health check failed");
                false
            }
            Err(_) => {
                tracing::debug!(sink = ctx.sink.name(), "sink health check timed out");
                false
            }
        };
        if ctx.metrics.status().set_sink_healthy(healthy) != healthy {
            if healthy {
                tracing::info!(sink = ctx.sink.name(), "sink health check passes again");
            } else {
                tracing::warn!(sink = ctx.sink.name(), "sink health check fails; /readyz reports not ready");
            }
        }
    }
}

/// Tracks, per ordering key, the write of the latest batch that contains it.
#[derive(Debug, Default)]
struct OrderingGate {
    last_writer: HashMap<OrderKey, watch::Receiver<bool>>,
}

impl OrderingGate {
    /// Registers a batch with `keys`; returns the writes it must wait for and the sender
    /// it signals when its own write is done.
    fn enter(&mut self, keys: Vec<OrderKey>) -> (Vec<watch::Receiver<bool>>, watch::Sender<bool>) {
        if self.last_writer.len() > 4096 {
            self.last_writer.retain(|_, rx| !*rx.borrow());
        }
        let (tx, rx) = watch::channel(false);
        let mut waits = Vec::new();
        for key in keys {
            if let Some(prev) = self.last_writer.insert(key, rx.clone())
                && !*prev.borrow()
            {
                waits.push(prev);
            }
        }
        (waits, tx)
    }
}

/// Messages held back behind a temporary failure of their ordering key. The runner keeps
/// them (with in-progress heartbeats, so AckWait does not redeliver them) instead of
/// releasing them to the server: they cost no delivery, and are written right after the
/// failed message when it comes back, in stream order. A lot whose failed message does not
/// come back in time (taken by another process on the same consumer, dropped by the
/// server) is released for redelivery; so are all lots on shutdown.
#[derive(Debug, Default)]
struct Parking {
    lots: HashMap<OrderKey, Lot>,
    /// The lot each failed message is waiting in, by its stream sequence. A failed message is
    /// recognised by its sequence when it comes back, not by its key: on its last allowed
    /// delivery it comes back without one.
    blockers: HashMap<u64, OrderKey>,
    /// Every message that was held back and is not settled yet, parked or back in a write
    /// behind its failed message: the keeper heartbeats all of them.
    kept: HashMap<u64, AckHandle>,
    /// When the latest completed fetch started: a failed message due before it that did not
    /// come in it (the server hands out redeliveries first) is not coming back to us.
    last_fetch: Option<Instant>,
}

/// The messages of one ordering key waiting for its failed message.
#[derive(Debug)]
struct Lot {
    /// Stream sequence of the failed message the lot waits for.
    blocker: u64,
    /// When the failed message is expected back.
    back: Instant,
    /// The failed message has been fetched again (its batch may still be waiting for an
    /// earlier one): the lot is never released as overdue.
    arrived: bool,
    /// Parked messages by stream sequence.
    parked: BTreeMap<u64, (Envelope, AckHandle)>,
}

impl Parking {
    /// Sorts a fetched batch into what is written now and what joins a lot: a message of a
    /// key with a lot waits, unless it is the lot's failed message coming back (then the
    /// lot's messages are written right after it) or older than it. Lots whose failed
    /// message was settled otherwise (`gone`: refused by a policy on its way back) are
    /// written now as well. The result is in stream-sequence order, so a key's messages are
    /// written in order.
    fn admit(&mut self, batch: Fetched, gone: &[u64]) -> Fetched {
        let mut work: Vec<(Envelope, AckHandle)> = Vec::with_capacity(batch.len());
        let mut returning: Vec<u64> = gone.iter().copied().filter(|seq| self.blockers.contains_key(seq)).collect();
        for (e, ack) in batch.envelopes.into_iter().zip(batch.acks) {
            let seq = e.jetstream().stream_sequence;
            if self.blockers.contains_key(&seq) {
                returning.push(seq);
                work.push((e, ack));
                continue;
            }
            match e.order_key().and_then(|k| self.lots.get_mut(&k)) {
                Some(lot) if seq > lot.blocker => {
                    // A second copy (a heartbeat was lost) replaces the first.
                    self.kept.insert(seq, ack.clone());
                    if lot.parked.insert(seq, (e, ack)).is_some() {
                        tracing::debug!(stream_sequence = seq, "a held-back message was delivered again");
                    }
                }
                _ => work.push((e, ack)),
            }
        }
        for blocker in returning {
            if let Some(lot) = self.blockers.remove(&blocker).and_then(|key| self.lots.remove(&key)) {
                tracing::debug!(
                    stream_sequence = lot.blocker,
                    held_back = lot.parked.len(),
                    "failed message came back; the messages held back behind it follow"
                );
                work.extend(lot.parked.into_values());
            }
        }
        work.sort_by_key(|(e, _)| e.jetstream().stream_sequence);
        let (envelopes, acks) = work.into_iter().unzip();
        Fetched { envelopes, acks }
    }

    /// Opens a lot for `key` behind the failed message at `blocker`, expected back at `back`.
    fn block(&mut self, key: OrderKey, blocker: u64, back: Instant) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.lots.entry(key) {
            slot.insert(Lot { blocker, back, arrived: false, parked: BTreeMap::new() });
            self.blockers.insert(blocker, key);
        }
    }

    /// Parks a held-back message in its key's lot; gives it back when there is no lot.
    fn park(&mut self, envelope: Envelope, ack: AckHandle) -> Option<(Envelope, AckHandle)> {
        match envelope.order_key().and_then(|k| self.lots.get_mut(&k)) {
            Some(lot) => {
                let seq = envelope.jetstream().stream_sequence;
                self.kept.insert(seq, ack.clone());
                lot.parked.insert(seq, (envelope, ack));
                None
            }
            None => Some((envelope, ack)),
        }
    }

    /// Notes a completed fetch that started at `started`, and the failed messages it brought
    /// back: a slow machine may take longer than AckWait to get to their batch, and their
    /// lots must wait for them, not be released.
    fn note_fetch(&mut self, fetched: &[Envelope], started: Instant) {
        self.last_fetch = Some(started);
        if self.lots.is_empty() {
            return;
        }
        for e in fetched {
            if let Some(lot) = self.blockers.get(&e.jetstream().stream_sequence).and_then(|k| self.lots.get_mut(k)) {
                lot.arrived = true;
            }
        }
    }

    /// Stops heartbeating the message at `sequence`: it is about to be settled.
    fn settling(&mut self, sequence: u64) {
        self.kept.remove(&sequence);
    }

    /// The ack handles of every held-back message not settled yet (for heartbeats).
    fn handles(&self) -> Vec<AckHandle> {
        self.kept.values().cloned().collect()
    }

    /// Removes and returns the parked messages of lots whose failed message was due `grace`
    /// before the latest fetch started and has not come back (every lot when `all`). Time
    /// is measured by fetches, so a fetch loop that waits for a slow batch releases nothing.
    fn release(&mut self, all: bool, grace: Duration) -> Vec<(Envelope, AckHandle)> {
        let fetched = self.last_fetch;
        let overdue: Vec<OrderKey> = self
            .lots
            .iter()
            .filter(|(_, lot)| all || (!lot.arrived && fetched.is_some_and(|f| lot.back + grace < f)))
            .map(|(k, _)| *k)
            .collect();
        let mut released = Vec::new();
        for key in overdue {
            if let Some(lot) = self.lots.remove(&key) {
                self.blockers.remove(&lot.blocker);
                released.extend(lot.parked.into_values());
            }
        }
        for (e, _) in &released {
            self.kept.remove(&e.jetstream().stream_sequence);
        }
        released
    }
}

/// How much later than the message it waits for a released held-back message comes back.
const HELD_BACK_MARGIN: Duration = Duration::from_millis(50);

/// The ordering key of `envelope` under `delivery.ordering_key`.
fn order_key_of(envelope: &Envelope, config: &Config) -> Option<OrderKey> {
    match config.delivery.ordering_key {
        OrderingKey::None => None,
        OrderingKey::Subject => Some(OrderKey::subject(envelope.subject())),
        OrderingKey::PayloadField => {
            let path = config.delivery.ordering_payload_field.as_deref().unwrap_or_default();
            let field = std::str::from_utf8(envelope.payload())
                .ok()
                .and_then(|text| sinks_contract::json::parse_strict(text).ok())
                .and_then(|v| sinks_contract::idempotency::payload_field(&v, path).ok());
            // Messages without the field are ordered by subject.
            Some(field.map_or_else(|| OrderKey::subject(envelope.subject()), |f| OrderKey::field(&f)))
        }
    }
}

/// The distinct ordering keys of a batch.
fn batch_keys(envelopes: &[Envelope]) -> Vec<OrderKey> {
    let mut keys: Vec<OrderKey> = envelopes.iter().filter_map(Envelope::order_key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Keeps parked messages alive (in-progress heartbeats well inside AckWait) and releases
/// the lots whose failed message is overdue by two AckWaits (one for a copy that another
/// process took and dropped, one to spare), until a stop is requested.
async fn keep_parking(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let every = ctx.heartbeat_every();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let handles = ctx.lock_parking().handles();
        tracing::trace!(messages = handles.len(), "heartbeat for held-back messages");
        progress(&handles).await;
        let overdue = {
            let mut parking = ctx.lock_parking();
            let overdue = parking.release(false, ctx.ack_wait.saturating_mul(2));
            ctx.note_parking(&parking);
            overdue
        };
        if !overdue.is_empty() {
            tracing::warn!(
                messages = overdue.len(),
                "the message these were held back for did not come back; releasing them for redelivery"
            );
            release_parked(&ctx, overdue).await;
        }
    }
}

/// Settles released held-back messages: NAKed to come back promptly (dead-lettered with
/// the reason on the consumer's last allowed delivery, when a DLQ is configured).
async fn release_parked(ctx: &Ctx, parked: Vec<(Envelope, AckHandle)>) {
    let sends = parked.iter().map(|(envelope, ack)| {
        let settlement = ack::settle_held_back(envelope.jetstream().delivered, &ctx.policy, HELD_BACK_MARGIN);
        settle_one(ctx, envelope, ack, &MessageOutcome::HeldBack, settlement, None)
    });
    let settled = join_all(sends).await;
    let envelopes: Vec<&Envelope> = parked.iter().map(|(e, _)| e).collect();
    record_settled(ctx, &envelopes, &settled, None);
}

/// Resolves once a stop was requested while the connection is down (a fetch in progress
/// then cannot bring anything, so it is abandoned instead of waiting for its timers).
async fn stopped_while_disconnected(stop: &watch::Receiver<bool>, client: &async_nats::Client) {
    let mut stop = stop.clone();
    let _ = stop.wait_for(|s| *s).await;
    while client.connection_state() == async_nats::connection::State::Connected {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn fetch_loop(ctx: &Arc<Ctx>, source: &Source, stop: &watch::Receiver<bool>, client: &async_nats::Client) {
    let delivery = &ctx.config.delivery;
    let permits = Arc::new(Semaphore::new(delivery.max_in_flight_batches));
    let mut gate = OrderingGate::default();
    let timeout = Duration::from_millis(delivery.batch_timeout_ms);
    let backoff = reconnect_backoff();
    let mut failures = 0u64;
    // Slow start: the first batches are smaller (1/8, 1/4, 1/2 of batch_size), so the first
    // commit and ack come quickly after a start or restart.
    let mut size = delivery.batch_size.div_ceil(8);
    while !*stop.borrow() {
        // Fetch first, then wait for a free slot: the next batch is already here when the
        // current one settles. Everything fetched is processed, even after a stop request.
        let started = Instant::now();
        let fetched = tokio::select! {
            fetched = source.fetch(size, timeout) => fetched,
            () = stopped_while_disconnected(stop, client) => break,
        };
        ctx.metrics.observe(TimingId::NatsFetchSeconds, started.elapsed().as_secs_f64());
        ctx.metrics.status().progress();
        let batch = match fetched {
            Ok(batch) => {
                ctx.lock_parking().note_fetch(&batch.envelopes, started);
                if failures > 0 {
                    tracing::info!(failures, "fetching recovered");
                    failures = 0;
                }
                batch
            }
            Err(e) => {
                failures += 1;
                RunStats::add(&ctx.stats.fetch_failures, 1);
                ctx.metrics.inc(CounterId::FetchErrors, 1);
                let delay = backoff.delay(failures, 0.5);
                tracing::warn!(error = %e, attempt = failures, retry_in_ms = delay.as_millis() as u64, "fetch failed; retrying");
                if sleep_or_stop(delay, stop).await {
                    break;
                }
                continue;
            }
        };
        if batch.is_empty() {
            continue;
        }
        size = (size * 2).min(delivery.batch_size);
        RunStats::add(&ctx.stats.fetched, batch.len() as u64);
        ctx.metrics.inc(CounterId::MessagesFetched, batch.len() as u64);
        ctx.metrics.inc(CounterId::BatchesFetched, 1);
        ctx.metrics.set(GaugeId::CurrentBatchMessages, batch.len() as f64);
        let mut batch = batch;
        batch.envelopes = std::mem::take(&mut batch.envelopes)
            .into_iter()
            .map(|e| {
                let key = order_key_of(&e, &ctx.config);
                e.with_order_key(key)
            })
            .collect();
        let Ok(permit) = hold_while(ctx, &batch.acks, Arc::clone(&permits).acquire_owned()).await else { break };
        let (waits, done) = gate.enter(batch_keys(&batch.envelopes));
        let ctx = Arc::clone(ctx);
        ctx.metrics.add(GaugeId::BatchesInFlight, 1.0);
        tokio::spawn(async move {
            process_batch(&ctx, batch, waits, done).await;
            ctx.metrics.add(GaugeId::BatchesInFlight, -1.0);
            ctx.metrics.status().progress();
            drop(permit);
        });
    }
    // Wait until every batch task has returned its permit.
    let _all = permits.acquire_many(delivery.max_in_flight_batches as u32).await;
}

/// Runs `wait` while keeping the messages of `acks` alive: a fetched batch waiting for a free
/// slot or for an earlier batch of its keys sends in-progress heartbeats every third of
/// AckWait, and one more when a long wait ends, so waiting costs no redelivery (and no
/// delivery of `max_deliver`) however slow the batches ahead of it are.
async fn hold_while<T>(ctx: &Ctx, acks: &[AckHandle], wait: impl Future<Output = T>) -> T {
    let every = ctx.heartbeat_every();
    let started = Instant::now();
    let mut wait = std::pin::pin!(wait);
    let out = loop {
        tokio::select! {
            out = &mut wait => break out,
            () = tokio::time::sleep(every) => progress(acks).await,
        }
    };
    if started.elapsed() >= every / 2 {
        progress(acks).await;
    }
    out
}

/// Sends an in-progress heartbeat for each of `acks` (a failure only means that message
/// may be redelivered, which the sinks absorb).
async fn progress(acks: &[AckHandle]) {
    let sends = join_all(acks.iter().map(|h| h.send(AckKind::Progress))).await;
    if let Some(Err(e)) = sends.into_iter().find(Result::is_err) {
        tracing::debug!(error = %e, "heartbeat of a held message failed; it may be redelivered");
    }
}

async fn process_batch(ctx: &Ctx, batch: Fetched, waits: Vec<watch::Receiver<bool>>, done: watch::Sender<bool>) {
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

/// Runs the policy steps on every fresh message. Returns what goes to the sink and what was
/// refused (with its permanent outcome). A message on the consumer's last allowed delivery
/// loses its ordering key: it must not wait behind anything that could outlast its last
/// chance.
fn apply_policies(ctx: &Ctx, batch: Fetched) -> (Fetched, Vec<(Envelope, AckHandle, MessageOutcome)>) {
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

/// The policy steps the reference counts, with their counters: (section, messages passed,
/// messages rejected, batches passed, batches rejected).
const COUNTED_STEPS: [(&str, [CounterId; 4]); 3] = [
    (
        "message_authenticity",
        [
            CounterId::MessageAuthenticityMessagesPassed,
            CounterId::MessageAuthenticityMessagesRejected,
            CounterId::MessageAuthenticityBatchesPassed,
            CounterId::MessageAuthenticityBatchesRejected,
        ],
    ),
    (
        "size_policy",
        [
            CounterId::SizePolicyMessagesPassed,
            CounterId::SizePolicyMessagesRejected,
            CounterId::SizePolicyBatchesPassed,
            CounterId::SizePolicyBatchesRejected,
        ],
    ),
    (
        "pre_sink_policy",
        [
            CounterId::PolicyMessagesPassed,
            CounterId::PolicyMessagesRejected,
            CounterId::PolicyBatchesPassed,
            CounterId::PolicyBatchesRejected,
        ],
    ),
];

/// Pass and reject counts of one batch for [`COUNTED_STEPS`].
#[derive(Debug, Default)]
struct PolicyTally {
    passed: [u64; 3],
    rejected: [u64; 3],
}

impl PolicyTally {
    /// Counts one message: every enabled step before `rejected_by` (all of them when `None`)
    /// passed it; `rejected_by` refused it.
    fn passed(&mut self, steps: &[&'static str], rejected_by: Option<&str>) {
        for step in steps {
            if Some(*step) == rejected_by {
                if let Some(i) = COUNTED_STEPS.iter().position(|(s, _)| s == step) {
                    self.rejected[i] += 1;
                }
                return;
            }
            if let Some(i) = COUNTED_STEPS.iter().position(|(s, _)| s == step) {
                self.passed[i] += 1;
            }
        }
    }

    fn record(&self, metrics: &Metrics) {
        for (i, (_, [msg_ok, msg_no, batch_ok, batch_no])) in COUNTED_STEPS.iter().enumerate() {
            metrics.inc(*msg_ok, self.passed[i]);
            metrics.inc(*msg_no, self.rejected[i]);
            metrics.inc(*batch_ok, u64::from(self.passed[i] > 0));
            metrics.inc(*batch_no, u64::from(self.rejected[i] > 0));
        }
    }
}

/// Dead-letters (or, without a DLQ, leaves for redelivery) the messages a policy refused.
async fn settle_refused(ctx: &Ctx, refused: Vec<(Envelope, AckHandle, MessageOutcome)>) {
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

/// The batch in priority-lane order (unchanged when lanes are off).
fn in_write_order(ctx: &Ctx, batch: Fetched) -> Fetched {
    let Some(order) = ctx.pipeline.write_order(&batch.envelopes) else { return batch };
    let mut slots: Vec<Option<(Envelope, AckHandle)>> = batch.envelopes.into_iter().zip(batch.acks).map(Some).collect();
    let (envelopes, acks) = order.into_iter().filter_map(|i| slots[i].take()).unzip();
    Fetched { envelopes, acks }
}

/// The settlement of every message (pure gate decisions). A temporary failure that will
/// come back opens a lot for its key, and the messages held back behind it are parked
/// there instead of settled (they are removed from what is returned).
fn decide(
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

/// How often a continuing destination outage is summarized in the log.
const OUTAGE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A destination outage in progress: batches in which nothing could be written.
#[derive(Debug, Default)]
struct Outage {
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
struct Failures {
    batches: u64,
    messages: u64,
    first_sequence: u64,
    last_sequence: u64,
    class: Option<ErrorClass>,
    reason: String,
}

impl Failures {
    /// The failures of one batch (sequences, the first failure's class and reason).
    fn of(envelopes: &[Envelope], outcomes: &[MessageOutcome]) -> Self {
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
    fn add(&mut self, other: Self) {
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

    fn class_name(&self) -> &'static str {
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
fn track_outage(ctx: &Ctx, envelopes: &[Envelope], outcomes: &[MessageOutcome], now: Instant) {
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

type Heartbeat = Option<(tokio::task::JoinHandle<()>, watch::Sender<bool>)>;

fn start_heartbeat(ctx: &Ctx, acks: &[AckHandle]) -> Heartbeat {
    let ip = &ctx.config.delivery.in_progress;
    if !ip.enabled {
        return None;
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
            let sends = join_all(handles.iter().map(|h| h.send(AckKind::Progress))).await;
            metrics.observe(TimingId::InProgressHeartbeatSeconds, started.elapsed().as_secs_f64());
            let failed = sends.iter().filter(|r| r.is_err()).count() as u64;
            metrics.inc(CounterId::InProgressSuccesses, sends.len() as u64 - failed);
            metrics.inc(CounterId::InProgressFailures, failed);
            if let Some(Err(e)) = sends.into_iter().find(Result::is_err) {
                tracing::warn!(error = %e, "in-progress heartbeat failed; stopping heartbeats");
                return;
            }
            if beat == max {
                metrics.inc(CounterId::InProgressMaxHeartbeatsReached, 1);
                tracing::warn!(max, "in-progress heartbeat limit reached");
            }
        }
    });
    Some((task, tx))
}

async fn stop_heartbeat(ctx: &Ctx, heartbeat: Heartbeat) {
    let Some((task, tx)) = heartbeat else { return };
    ctx.metrics.add(GaugeId::CurrentInProgressBatchesActive, -1.0);
    let _ = tx.send(true);
    let limit = Duration::from_millis(ctx.config.delivery.in_progress.shutdown_timeout_ms);
    let abort = task.abort_handle();
    if tokio::time::timeout(limit, task).await.is_err() {
        abort.abort();
    }
}

async fn settle_batch(ctx: &Ctx, batch: Fetched, outcomes: Vec<MessageOutcome>, settlements: Vec<Settlement>) {
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

/// Records a batch's settlements (counts, redelivery delays, end-to-end latency of messages
/// acked after a durable outcome) and logs settlements that could not be sent, once for the
/// batch. `outcomes` are the write outcomes, when the messages were written.
fn record_settled(ctx: &Ctx, envelopes: &[&Envelope], settled: &[Settled], outcomes: Option<&[MessageOutcome]>) {
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

async fn settle_one(
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
fn dlq_reason(outcome: &MessageOutcome) -> &str {
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
async fn dead_letter(
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
