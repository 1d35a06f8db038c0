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
//!
//! Where things are: this file holds the entry points ([`run`], [`run_with`],
//! [`run_observed`]), start-up and shutdown; `fetch` the fetch loop; `forward` a batch's one
//! forward path (policies, parking, write, hold, pending, plan, settle), which fetched
//! batches, parked chunks and rescued messages all take; `written` what a write's outcomes
//! do (recorded, the outage log, planned); `settle` the settlement plan (the one call site of
//! the ACK gate) and its application; `handle` what a message is settled through (its ack
//! handle, or a rescued message's advisory) and the rescue's last-chance rule; `ordering` the
//! ordering keys and the gate between batches; `parking` the held-back messages; `pending`
//! the messages a holding sink keeps in objects not committed yet; `keeper` the task that
//! heartbeats and releases held-back messages; `heartbeat` the in-progress heartbeats;
//! `hold` riding out a destination outage (fetching paused, the batch held with heartbeats,
//! the destination probed); `outage` the outage log and the holds' state; `tally` the policy
//! step counts; `guard` the stream guard (the stream's identity, its epochs and the pause
//! when it changed; lag and retention headroom); `health` the destination probe; `reconnect`
//! the retries of start-up steps; `rescue` the intake of messages the server stopped
//! redelivering; `redrive` the run of `nats-sink redrive` (dead-lettered messages brought
//! back, each settled through its record's ticket); `context` the per-run context the tasks share; `batch` the batch type;
//! and the run's counters (`RunStats`) sit below it, in `metrics`.
//!
//! The modules form layers, never a cycle (`tests/runner_modules.rs` checks it): the leaves
//! (`batch`, `handle`, `parking`, `outage`, `guard`, `ordering`, `tally`, …) know
//! no task; `context` names only leaves; every task depends on `context` and the leaves, and
//! on tasks below it (`forward` on `written`, `pending`, `hold` and `settle`; `rescue`,
//! `redrive` and `fetch` on `forward`); this file wires them together and nothing depends on it.

mod batch;
#[cfg(feature = "fault-injection")]
pub mod break_ack;
mod context;
mod evidence;
mod fetch;
mod forward;
mod guard;
mod handle;
mod health;
mod heartbeat;
mod hold;
mod keeper;
mod ordering;
mod outage;
mod parking;
mod pending;
mod reconnect;
mod redrive;
mod rescue;
mod settle;
mod startup;
mod tally;
mod written;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sinks_contract::error::ErrorClass;
use sinks_contract::sink::Sink;
use sinks_policy::Pipeline;
use tokio::sync::watch;

use self::context::{Ctx, write_budget};
use self::fetch::fetch_loop;
use self::guard::{Guard, live_now, watch_stream};
pub use self::handle::{RedriveEnd, RedriveMarker};
use self::health::probe_sink;
use self::keeper::keep_parking;
use self::outage::{Holds, Outage};
use self::parking::Parking;
use self::reconnect::{Reaching, Retry, retry_until};
pub use self::redrive::RedriveItem;
use crate::ack::{AfterDeadLetter, GatePolicy};
use crate::config::{Config, ConfigError};
use crate::connect::{self, ConnectError};
use crate::dlq::DeadLetterPublisher;
use crate::freshness::Freshness;
use crate::ledger::LedgerPublisher;
use crate::metrics::Metrics;
pub use crate::metrics::RunStats;
pub use crate::setup::StartAt;
use crate::setup::{self, SetupError};
use crate::source::Source;

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
    /// The NATS server could not be reached (`check_against_server`): exit code 1.
    #[error("{0}")]
    Unreachable(String),
}

/// The start-up warnings of `config` as far as it alone tells (`nats-sink validate`): the
/// consumer's `max_ack_pending` and AckWait as configured, the DLQ state.
pub fn config_warnings(config: &Config) -> Vec<String> {
    let cm = &config.consumer_management;
    let ack_wait = Duration::from_secs_f64(cm.ack_wait_seconds.unwrap_or(30.0).max(0.0));
    let mut warnings = startup::warnings(config, cm.max_ack_pending, ack_wait);
    // Offline, which stream captures the dead letters is unknown (`setup::consumed_again`).
    let filters = cm.effective_filters(&config.nats.subject);
    if let (true, Some(dlq)) = (config.dead_letter.enabled, config.dead_letter.subject.as_deref())
        && let Some(filter) = filters.iter().find(|f| sinks_toolkit::subject::matches(f, dlq))
    {
        warnings.push(format!(
            "dead_letter.subject `{dlq}` is matched by the consumer's filter `{filter}`: fine while a stream of its own \
             captures it, refused when stream `{}` does (its records would be consumed again); `validate --connect` and \
             `run` check which",
            config.nats.stream
        ));
    }
    warnings
}

/// Checks `config` against the NATS server it names without consuming or changing
/// anything (`nats-sink validate --connect`): connects (one attempt), then
/// `setup::preflight`. Returns what start-up would do, as lines.
pub async fn check_against_server(config: &Config) -> Result<Vec<String>, RunError> {
    let servers = startup::servers(config);
    let client = match connect::connect(&config.nats).await {
        Ok(c) => c,
        Err(ConnectError::Config(e)) => return Err(e.into()),
        Err(ConnectError::Unreachable(e)) => {
            return Err(RunError::Unreachable(format!("cannot reach nats at {servers}: {e}")));
        }
    };
    let js = async_nats::jetstream::new(client.clone());
    let notes = match setup::preflight(&js, config).await {
        Ok(notes) => notes,
        Err(SetupError::Config(e)) => return Err(e.into()),
        Err(SetupError::Unavailable(e)) => return Err(RunError::Unreachable(format!("nats at {servers}: {e}"))),
    };
    let _ = client.drain().await;
    Ok(std::iter::once(format!("connected to nats at {servers}")).chain(notes).collect())
}

/// `nats-sink stream-identity`: the stream's identity record and the live stream, and, with a
/// decision, the decision applied to a change that waits for one (see
/// `identity::operate`).
pub async fn stream_identity(
    config: &Config,
    decision: Option<crate::identity::Decision>,
) -> Result<Vec<String>, RunError> {
    let servers = startup::servers(config);
    let client = match connect::connect(&config.nats).await {
        Ok(c) => c,
        Err(ConnectError::Config(e)) => return Err(e.into()),
        Err(ConnectError::Unreachable(e)) => {
            return Err(RunError::Unreachable(format!("cannot reach nats at {servers}: {e}")));
        }
    };
    let js = async_nats::jetstream::new(client.clone());
    let lines = match crate::identity::operate(&js, config, decision).await {
        Ok(lines) => lines,
        Err(SetupError::Config(e)) => return Err(e.into()),
        Err(SetupError::Unavailable(e)) => return Err(RunError::Unreachable(format!("nats at {servers}: {e}"))),
    };
    let _ = client.drain().await;
    Ok(lines)
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
    pub start: Option<StartAt>,
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
    // OTLP exporters (nothing when the section enables nothing), stopped after the run.
    let telemetry = crate::otel::Telemetry::start(&config, &metrics, sink.name())?;
    let traces = telemetry.traces();
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
        tracing::info!("stopping: finishing and settling the batches in flight");
        status_metrics.status().set_stopping();
        let _ = stop_tx.send(true);
    };
    let work = run_inner(config, sink, options, stop_rx, metrics, traces);
    tokio::pin!(work);
    let result = tokio::select! {
        result = &mut work => result,
        () = signal => work.await,
    };
    let _ = done_tx.send(true);
    if let Some(task) = snapshot {
        let _ = task.await;
    }
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    result.map(|()| stats)
}

async fn run_inner(
    config: Config,
    sink: Arc<dyn Sink>,
    options: RunOptions,
    stop: watch::Receiver<bool>,
    metrics: Metrics,
    traces: Option<Arc<crate::otel::Traces>>,
) -> Result<(), RunError> {
    let stats = Arc::clone(metrics.stats());
    metrics.status().progress();
    // Keys are read once, before anything else: a missing or malformed one stops start-up.
    let pipeline = load_pipeline(&config, &sink)?;
    let destination = startup::destination(&config.sink);
    let servers = startup::servers(&config);
    // The destination and NATS are made ready side by side: a configuration error of either
    // stops start-up at once, naming its field, even while the other is still unreachable
    // (and retried), so `run` refuses exactly what `validate --connect` refuses.
    let opened = open_sink(&sink, &destination, &stop, &metrics);
    let prepared = prepare_nats(&config, &options, &servers, &stop, &metrics);
    let (opened, prepared) = tokio::try_join!(opened, prepared)?;
    let (Some(()), Some(Prepared { client, js, advisories, bound, capture, stream, guard })) = (opened, prepared)
    else {
        return Ok(());
    };
    announce_consuming(&config, &servers, &destination, &bound, capture.is_some(), guard.paused());
    warn_at_startup(&config, &bound, &stream).await;
    check_in_progress(&config, bound.ack_wait)?;

    let holding = sink.holding().map(|h| h.settings());
    let max_ack_pending = usize::try_from(bound.consumer.cached_info().config.max_ack_pending).ok().filter(|m| *m > 0);
    if let Some(holding) = holding {
        pending::check(&config, holding, bound.ack_wait, max_ack_pending)?;
    }

    let policy = gate_policy(&config, bound.max_deliver);
    let budget = write_budget(&config, bound.ack_wait);
    watch_liveness(&metrics, &config, budget);
    let policy_steps: Vec<&'static str> = pipeline.steps();
    let guard = Arc::new(guard);
    let source = Arc::new(Source::new(bound.consumer, pipeline.intake().clone(), client.clone(), guard.watch()));
    // Mirrors and sources: where each event was first stored (nothing to do for a plain stream
    // outside any domain).
    let origins = crate::origin::Resolver::prepare(client.clone(), js.clone(), &config.nats.stream).await.map(Arc::new);
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
        rescue: capture.is_some(),
        traces,
        pending: std::sync::Mutex::new(Default::default()),
        flush_wake: tokio::sync::Notify::new(),
        guard: Arc::clone(&guard),
        js: js.clone(),
        holds: Holds::new(metrics.clone(), sink.name(), config.delivery.outage_hold_seconds),
        evidence: Default::default(),
        origins,
        stop: stop.clone(),
    });
    let lag = tokio::spawn(watch_stream(
        Arc::clone(&guard),
        source.consumer(),
        stream,
        metrics.clone(),
        config.clone(),
        stop.clone(),
    ));
    let background = Background::spawn(&ctx, &stop, [Some(lag), advisories], capture, holding, max_ack_pending);
    fetch_loop(&ctx, &source, &stop, &client).await;
    background.finish(&ctx).await;
    drain_connection(&client, Duration::from_secs(config.nats.drain_timeout_seconds)).await;
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

/// The policy pipeline of `config`, its keys read once (a missing or malformed one stops
/// start-up), announced; with the ledger on, the sink is told to keep what a receipt names
/// of each message's destination.
fn load_pipeline(config: &Config, sink: &Arc<dyn Sink>) -> Result<Pipeline, RunError> {
    let pipeline = Pipeline::from_config(config.policy_sections())?;
    if let Some(e) = pipeline.encryption() {
        let keys: Vec<&str> = e.keyring().key_ids().collect();
        tracing::info!(key_ids = ?keys, version = config.encryption.format_version, "payload encryption on");
    }
    let steps = pipeline.steps();
    if !steps.is_empty() {
        tracing::info!(steps = ?steps, "message policies on");
    }
    if config.ledger.enabled {
        // Receipts name each message's destination: the sink keeps what it needs for that.
        if let Some(destinations) = sink.destinations() {
            destinations.enable();
        }
    }
    Ok(pipeline)
}

/// The start-up line once the consumer is bound: "consuming" only when it is; a stream whose
/// identity changed undecided (`paused`) pauses fetching from the start (the guard said why,
/// once), and the line says so instead.
fn announce_consuming(
    config: &Config,
    servers: &str,
    destination: &str,
    bound: &setup::BoundConsumer,
    rescue: bool,
    paused: bool,
) {
    let delivery = &config.delivery;
    let state = if paused {
        "bound, not fetching: paused until the stream's identity is decided (stream-identity --accept)"
    } else {
        "consuming"
    };
    tracing::info!(
        servers = %servers,
        stream = %config.nats.stream,
        consumer = %bound.consumer.cached_info().name,
        filter = %config.consumer_management.effective_filters(&config.nats.subject).join(","),
        action = bound.action,
        ack_policy = "explicit",
        max_deliver = bound.max_deliver,
        ack_wait_ms = bound.ack_wait.as_millis() as u64,
        batch_size = delivery.batch_size,
        max_in_flight_batches = delivery.max_in_flight_batches,
        dead_letter = %if config.dead_letter.enabled { config.dead_letter.subject.as_deref().unwrap_or("?") } else { "off" },
        rescue,
        destination = %destination,
        "{state}"
    );
}

/// The start-up warnings of the bound consumer and the broker's durability lint.
async fn warn_at_startup(
    config: &Config,
    bound: &setup::BoundConsumer,
    stream: &async_nats::jetstream::stream::Stream,
) {
    for warning in startup::warnings(config, bound.max_ack_pending, bound.ack_wait) {
        tracing::warn!("{warning}");
    }
    let sync = crate::durability::server_sync(config.nats.monitoring_url.as_deref()).await;
    if let Some(warning) = crate::durability::lint(&config.nats.stream, stream.cached_info().config.num_replicas, &sync)
    {
        tracing::warn!("{warning}");
    }
}

/// In-progress heartbeats must come well within the consumer's effective AckWait.
fn check_in_progress(config: &Config, ack_wait: Duration) -> Result<(), RunError> {
    let ip = &config.delivery.in_progress;
    if ip.enabled && (ip.interval_ms as f64) >= ack_wait.as_secs_f64() * 1000.0 * 0.8 {
        return Err(ConfigError::single(
            "delivery.in_progress.interval_ms",
            format!("must be below 80% of the consumer's effective AckWait ({} ms)", ack_wait.as_millis()),
        )
        .into());
    }
    Ok(())
}

/// What the ACK gate decides by in a run bound to a consumer with `max_deliver`.
fn gate_policy(config: &Config, max_deliver: Option<u64>) -> GatePolicy {
    GatePolicy {
        backoff: config.delivery.backoff(),
        max_retries: config.delivery.max_retries,
        temporary_action: config.delivery.temporary_failure_action,
        dead_letter: config.dead_letter.enabled.then_some(if config.dead_letter.ack_term_after_publish {
            AfterDeadLetter::Term
        } else {
            AfterDeadLetter::Ack
        }),
        max_deliver,
    }
}

/// Liveness: a fetch returns within its timeout plus 15 s, and a batch slot frees up within
/// one write's `budget`; anything much longer is a wedged loop. Marks the consumer bound.
fn watch_liveness(metrics: &Metrics, config: &Config, budget: Duration) {
    let fetch_guard = Duration::from_millis(config.delivery.batch_timeout_ms) + Duration::from_secs(15);
    metrics.status().set_stall_window((budget + fetch_guard) * 2 + Duration::from_secs(30));
    metrics.status().set_consumer_bound(true);
}

/// The tasks a run keeps beside its fetch loop.
struct Background {
    /// Ended with the stop: the stream watch, the advisories, the health probe, the rescue.
    watchers: Vec<tokio::task::JoinHandle<()>>,
    /// Heartbeats and releases held-back messages.
    keeper: tokio::task::JoinHandle<()>,
    /// A holding sink's flusher and heartbeat.
    holders: Option<[tokio::task::JoinHandle<()>; 2]>,
}

impl Background {
    /// Starts the health probe (with metrics on), the keeper, the rescue (with a capture) and
    /// a holding sink's tasks beside `started` (the stream watch, the advisories).
    fn spawn(
        ctx: &Arc<Ctx>,
        stop: &watch::Receiver<bool>,
        started: [Option<tokio::task::JoinHandle<()>>; 2],
        capture: Option<setup::Capture>,
        holding: Option<sinks_contract::sink::HoldingSettings>,
        max_ack_pending: Option<usize>,
    ) -> Self {
        let health = ctx.metrics.enabled().then(|| tokio::spawn(probe_sink(Arc::clone(ctx), stop.clone())));
        let keeper = tokio::spawn(keep_parking(Arc::clone(ctx), stop.clone()));
        let rescue = capture.map(|capture| tokio::spawn(rescue::rescue_loop(Arc::clone(ctx), capture, stop.clone())));
        let holders = holding.map(|holding| {
            let pressure = max_ack_pending.map(pending::pressure_at);
            [
                tokio::spawn(pending::flusher(Arc::clone(ctx), holding, pressure, stop.clone())),
                tokio::spawn(pending::heartbeat(Arc::clone(ctx), stop.clone())),
            ]
        });
        let [lag, advisories] = started;
        let watchers = [lag, health, advisories, rescue].into_iter().flatten().collect();
        Self { watchers, keeper, holders }
    }

    /// Once every batch has settled: waits for the tasks, sends messages still parked back
    /// for redelivery (the next process writes them after the messages they wait for), and
    /// commits a holding sink's open objects, settling their messages, while the connection
    /// is still up; `close` comes after the drain and holds nothing any more.
    async fn finish(self, ctx: &Arc<Ctx>) {
        let _ = self.keeper.await;
        for task in self.watchers {
            let _ = task.await;
        }
        let parked = keeper::release(ctx, true, Duration::ZERO);
        if !parked.is_empty() {
            tracing::info!(messages = parked.len(), "releasing held-back messages for redelivery");
            settle::apply(ctx, parked).await;
        }
        for task in self.holders.into_iter().flatten() {
            let _ = task.await;
        }
        pending::finish(ctx).await;
    }
}

/// Every batch has settled (the fetch loop took back every permit): pushes the acks out and
/// drains, within `drain`; with the server unreachable there is nothing to wait for: unsent
/// acks only mean redeliveries.
async fn drain_connection(client: &async_nats::Client, drain: Duration) {
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
}

/// `nats-sink redrive`: writes dead-lettered messages the caller brought back (`items`)
/// through `sink` with the run's whole discipline (policies, write, ACK gate, receipts, a new
/// dead letter with the redrive count when one fails again), and tells `marker` how each
/// ended once that end is durable. No consumer is bound: the messages come from the caller,
/// and what is not done stays for another run. A destination outage is not ridden out
/// (`delivery.outage_hold_seconds` is 0 here): its messages end `NotDone` at once. Returns
/// how many messages were handed to the write (fewer when `shutdown` came first).
pub async fn redrive(
    mut config: Config,
    sink: Arc<dyn Sink>,
    items: Vec<RedriveItem>,
    marker: Arc<dyn RedriveMarker>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<usize, RunError> {
    config.delivery.outage_hold_seconds = 0;
    let metrics = Metrics::new(&config.metrics);
    let pipeline = Pipeline::from_config(config.policy_sections())?;
    if config.ledger.enabled
        && let Some(destinations) = sink.destinations()
    {
        destinations.enable();
    }
    let client = match connect::connect(&config.nats).await {
        Ok(c) => c,
        Err(ConnectError::Config(e)) => return Err(e.into()),
        Err(ConnectError::Unreachable(e)) => {
            return Err(RunError::Unreachable(format!("cannot reach nats at {}: {e}", startup::servers(&config))));
        }
    };
    match sink.open().await {
        Ok(()) => {}
        Err(e) if e.class() == ErrorClass::Config => {
            return Err(ConfigError::single(e.field().unwrap_or("sink"), e.display_chain()).into());
        }
        Err(e) => return Err(RunError::SinkOpen(e.display_chain())),
    }
    let js = async_nats::jetstream::new(client.clone());
    let origins = crate::origin::Resolver::prepare(client.clone(), js.clone(), &config.nats.stream).await.map(Arc::new);
    let ack_wait = Duration::from_secs_f64(config.consumer_management.ack_wait_seconds.unwrap_or(30.0).max(1.0));
    let policy = GatePolicy {
        backoff: config.delivery.backoff(),
        max_retries: config.delivery.max_retries,
        temporary_action: config.delivery.temporary_failure_action,
        dead_letter: config.dead_letter.enabled.then_some(AfterDeadLetter::Ack),
        max_deliver: None,
    };
    let (stop_tx, stop) = watch::channel(false);
    let stats = Arc::clone(metrics.stats());
    let ctx = Ctx {
        sink: Arc::clone(&sink),
        policy,
        dlq: DeadLetterPublisher::new(js.clone(), config.dead_letter.clone()),
        stats,
        outcomes: metrics.outcome_counters(sink.name()),
        freshness: Freshness::new(&config.metrics),
        metrics: metrics.clone(),
        policy_steps: pipeline.steps(),
        outage: std::sync::Mutex::new(Outage::default()),
        parking: std::sync::Mutex::new(Parking::default()),
        ack_wait,
        write_budget: write_budget(&config, ack_wait),
        pipeline,
        ledger: LedgerPublisher::new(js.clone(), config.ledger.clone()),
        rescue: false,
        traces: None,
        pending: std::sync::Mutex::new(Default::default()),
        flush_wake: tokio::sync::Notify::new(),
        guard: Arc::new(Guard::off(&config, metrics.clone())),
        js,
        holds: Holds::new(metrics.clone(), sink.name(), 0),
        evidence: Default::default(),
        origins,
        stop,
        config,
    };
    let work = redrive::drive(&ctx, items, &marker);
    tokio::pin!(work);
    let signal = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let handed = tokio::select! {
        handed = &mut work => handed,
        () = signal => work.await,
    };
    if let Err(e) = client.flush().await {
        tracing::warn!(error = %e, "flushing the nats connection failed");
    }
    let _ = tokio::time::timeout(Duration::from_secs(ctx.config.nats.drain_timeout_seconds), client.drain()).await;
    if let Err(e) = sink.close().await {
        tracing::warn!(error = %e.display_chain(), "closing the sink failed");
    }
    Ok(handed)
}

/// Opens the sink, retrying what a retry can fix; `None` when a stop came first.
async fn open_sink(
    sink: &Arc<dyn Sink>,
    destination: &str,
    stop: &watch::Receiver<bool>,
    metrics: &Metrics,
) -> Result<Option<()>, ConfigError> {
    let opening = Reaching { what: "sink open", target: destination, hint: "the `sink` section" };
    // What only a config change can fix (a path under a regular file, a permission, an
    // unknown table, bad credentials) stops start-up naming the field; the rest is retried.
    let opened = retry_until(opening, stop, metrics, async || match sink.open().await {
        Ok(()) => Ok(()),
        Err(e) if e.class() == ErrorClass::Config || e.is_permanent() => {
            Err(Retry::Fatal(ConfigError::single(e.field().unwrap_or("sink"), e.display_chain())))
        }
        Err(e) => Err(Retry::Again(e.display_chain())),
    })
    .await?;
    if opened.is_some() {
        tracing::info!(sink = sink.name(), destination = %destination, "sink opened");
        metrics.status().set_sink_opened(true);
    }
    Ok(opened)
}

/// What start-up made ready on the NATS side.
struct Prepared {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    advisories: Option<tokio::task::JoinHandle<()>>,
    bound: setup::BoundConsumer,
    capture: Option<setup::Capture>,
    stream: async_nats::jetstream::stream::Stream,
    guard: Guard,
}

/// Connects to NATS and sets up the streams, the consumer, the exhaustion capture and the
/// stream guard (checking the stream's identity before the first fetch), retrying what a
/// retry can fix; `None` when a stop came first.
async fn prepare_nats(
    config: &Config,
    options: &RunOptions,
    servers: &str,
    stop: &watch::Receiver<bool>,
    metrics: &Metrics,
) -> Result<Option<Prepared>, ConfigError> {
    let nats = &config.nats;
    let hint = if config.nats.urls.is_empty() { "nats.url" } else { "nats.urls" };
    let connecting = Reaching { what: "nats connect", target: servers, hint };
    let Some(client) = retry_until(connecting, stop, metrics, || async move {
        match connect::connect_observed(nats, Some(metrics.clone())).await {
            Ok(c) => Ok(c),
            Err(ConnectError::Config(e)) => Err(Retry::Fatal(e)),
            Err(ConnectError::Unreachable(e)) => Err(Retry::Again(e)),
        }
    })
    .await?
    else {
        return Ok(None);
    };
    let info = client.server_info();
    tracing::info!(
        servers = %servers,
        server = %startup::host_port(&format!("{}:{}", info.host, info.port)),
        server_name = %info.server_name,
        version = %info.version,
        "connected to nats"
    );
    let js = async_nats::jetstream::new(client.clone());
    // Advisories are observed from here on (the consumer's own creation included).
    let advisories = if config.advisories.enabled {
        let subscriptions = crate::advisories::subscribe(&client, &config.advisories).await;
        let task = crate::advisories::monitor(subscriptions, config.advisories.clone(), metrics.clone(), stop.clone());
        Some(tokio::spawn(task))
    } else {
        None
    };
    let js_ref = &js;
    let setting_up = Reaching { what: "consumer setup", target: servers, hint: "nats.stream and nats.consumer" };
    let Some((bound, capture, stream, guard)) = retry_until(setting_up, stop, metrics, || async move {
        let stream = setup::ensure_streams(js_ref, config).await.map_err(setup_retry)?;
        let bound = setup::ensure_consumer_from(&stream, config, options.start, options.consumer_name.clone())
            .await
            .map_err(setup_retry)?;
        // Exhaustions are captured before the first fetch, so none is missed.
        let capture = setup::ensure_capture(js_ref, &stream, config, bound.max_deliver).await.map_err(setup_retry)?;
        // The stream's identity is checked before the first fetch: a stream re-created or
        // rewound while the sink was down pauses it (or starts a new epoch) right here.
        let replicas = stream.cached_info().config.num_replicas;
        let guard = Guard::open(js_ref, config, replicas, metrics.clone()).await.map_err(setup_retry)?;
        let live = live_now(&stream, &bound.consumer).await.map_err(setup_retry)?;
        guard.check(&live, &stream, &bound.consumer).await.map_err(setup_retry)?;
        Ok((bound, capture, stream, guard))
    })
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(Prepared { client, js, advisories, bound, capture, stream, guard }))
}

fn setup_retry(e: SetupError) -> Retry<String> {
    match e {
        SetupError::Config(c) => Retry::Fatal(c),
        SetupError::Unavailable(m) => Retry::Again(m),
    }
}
