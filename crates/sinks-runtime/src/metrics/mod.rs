//! Observability: one [`Metrics`] handle per run holds the run's counters ([`RunStats`],
//! always kept), its health ([`Status`]: readiness, liveness, consumer lag, always kept) and,
//! when `metrics.enabled`, the Prometheus registry built from the catalogue
//! ([`catalogue`]).
//!
//! Observability reads, never steers: the runner records what already happened (outcomes,
//! settlements, timings) through this handle, passed in its context; nothing here is read
//! back to decide a write, an ack or a dead letter, and no sink talks to an exporter. With
//! metrics disabled every recording call is a branch on `None`.
//!
//! Exposition goes through prometheus-client's encoders: the Prometheus text format 0.0.4
//! ([`Format::Prometheus`]) or OpenMetrics 1.0 ([`Format::OpenMetrics`]). The reference's
//! JSON snapshot file is written by [`snapshot`].

pub mod catalogue;
mod histogram;
pub mod snapshot;
mod stats;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub use catalogue::{Aliased, CounterId, FamilyId, GaugeId, LEGACY_ALIASES, Origin, TimingId};
#[cfg(feature = "otel")]
pub(crate) use histogram::keep_values as histogram_keep_values;
pub use histogram::{LocalTiming, Summary, Timing};

use crate::config::MetricsConfig;
use sinks_contract::sink::OutcomeClass;
pub use stats::RunStats;

/// The exposition format of [`Metrics::encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text format.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// OpenMetrics when the `Accept` header asks for it, else Prometheus text.
    pub fn from_accept(accept: Option<&str>) -> Self {
        if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            Self::OpenMetrics
        } else {
            Self::Prometheus
        }
    }
}

/// The run's health: what `/healthz` and `/readyz` answer, and the consumer lag. Kept whether
/// or not metrics are enabled.
#[derive(Debug)]
pub struct Status {
    started: Instant,
    nats_connected: AtomicBool,
    connected_once: AtomicBool,
    consumer_bound: AtomicBool,
    sink_opened: AtomicBool,
    sink_healthy: AtomicBool,
    stopping: AtomicBool,
    identity_paused: AtomicBool,
    outage_paused: AtomicBool,
    last_progress_ms: AtomicU64,
    stall_after_ms: AtomicU64,
    lag_known: AtomicBool,
    num_pending: AtomicU64,
    num_ack_pending: AtomicU64,
}

/// The answer of `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Connected, consumer bound, sink opened and healthy, not stopping.
    pub ready: bool,
    /// What is missing, when not ready (`nats disconnected`, `consumer not bound`, …).
    pub missing: Vec<&'static str>,
}

/// The answer of `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// The runner made progress (or chose to idle) within the window.
    pub alive: bool,
    /// Time since the last progress.
    pub since_progress: Duration,
    /// How long without progress counts as wedged.
    pub window: Duration,
}

/// The window of liveness before the runner has measured its own (start-up).
const DEFAULT_STALL_WINDOW: Duration = Duration::from_secs(120);

impl Default for Status {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            nats_connected: AtomicBool::new(false),
            connected_once: AtomicBool::new(false),
            consumer_bound: AtomicBool::new(false),
            sink_opened: AtomicBool::new(false),
            sink_healthy: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            identity_paused: AtomicBool::new(false),
            outage_paused: AtomicBool::new(false),
            last_progress_ms: AtomicU64::new(0),
            stall_after_ms: AtomicU64::new(DEFAULT_STALL_WINDOW.as_millis() as u64),
            lag_known: AtomicBool::new(false),
            num_pending: AtomicU64::new(0),
            num_ack_pending: AtomicU64::new(0),
        }
    }
}

impl Status {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Readiness: connected to NATS, consumer bound, sink opened and its last health check
    /// good, and no stop requested.
    pub fn readiness(&self) -> Readiness {
        let mut missing = Vec::new();
        let load = |b: &AtomicBool| b.load(Ordering::Relaxed);
        if !load(&self.nats_connected) {
            missing.push("nats disconnected");
        }
        if !load(&self.consumer_bound) {
            missing.push("consumer not bound");
        }
        if !load(&self.sink_opened) {
            missing.push("sink not opened");
        } else if !load(&self.sink_healthy) {
            missing.push("sink unhealthy");
        }
        if load(&self.identity_paused) {
            missing.push("paused: the stream's identity changed");
        }
        if load(&self.outage_paused) {
            missing.push("paused: destination outage");
        }
        if load(&self.stopping) {
            missing.push("stopping");
        }
        Readiness { ready: missing.is_empty(), missing }
    }

    /// Liveness: the runner's loops made progress within the window.
    pub fn liveness(&self) -> Liveness {
        let since = self.now_ms().saturating_sub(self.last_progress_ms.load(Ordering::Relaxed));
        let window = self.stall_after_ms.load(Ordering::Relaxed);
        Liveness {
            alive: since <= window,
            since_progress: Duration::from_millis(since),
            window: Duration::from_millis(window),
        }
    }

    /// `(num_pending, num_ack_pending)` of the consumer at the last poll, once polled.
    pub fn lag(&self) -> Option<(u64, u64)> {
        self.lag_known
            .load(Ordering::Relaxed)
            .then(|| (self.num_pending.load(Ordering::Relaxed), self.num_ack_pending.load(Ordering::Relaxed)))
    }

    /// True while the NATS connection is up.
    pub fn nats_connected(&self) -> bool {
        self.nats_connected.load(Ordering::Relaxed)
    }

    /// Notes progress of the runner (a fetch returned, a batch settled, a start-up step ran).
    pub(crate) fn progress(&self) {
        self.last_progress_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// How long the runner may go without progress before `/healthz` fails.
    pub(crate) fn set_stall_window(&self, window: Duration) {
        self.stall_after_ms.store(window.as_millis() as u64, Ordering::Relaxed);
    }

    /// True the first time it is called: the connection event is the initial connection.
    pub(crate) fn first_connection(&self) -> bool {
        !self.connected_once.swap(true, Ordering::Relaxed)
    }

    pub(crate) fn set_nats_connected(&self, up: bool) {
        self.nats_connected.store(up, Ordering::Relaxed);
    }

    pub(crate) fn set_consumer_bound(&self, bound: bool) {
        self.consumer_bound.store(bound, Ordering::Relaxed);
    }

    pub(crate) fn set_sink_opened(&self, opened: bool) {
        self.sink_opened.store(opened, Ordering::Relaxed);
    }

    /// Records the destination's health; returns the previous value.
    pub(crate) fn set_sink_healthy(&self, healthy: bool) -> bool {
        self.sink_healthy.swap(healthy, Ordering::Relaxed)
    }

    /// Consumption is paused because the stream's identity changed (not ready until the
    /// operator decided).
    pub(crate) fn set_identity_paused(&self, paused: bool) {
        self.identity_paused.store(paused, Ordering::Relaxed);
    }

    /// Fetching is paused while messages are held through a destination outage.
    pub(crate) fn set_outage_paused(&self, paused: bool) {
        self.outage_paused.store(paused, Ordering::Relaxed);
    }

    pub(crate) fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub(crate) fn set_lag(&self, pending: u64, ack_pending: u64) {
        self.num_pending.store(pending, Ordering::Relaxed);
        self.num_ack_pending.store(ack_pending, Ordering::Relaxed);
        self.lag_known.store(true, Ordering::Relaxed);
    }
}

/// Labels of the outcome family.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    class: &'static str,
    sink: String,
}

/// Labels of the DLQ family.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// The exemplar labels of the write-latency histogram: the batch write's trace span.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TraceLabels {
    trace_id: String,
    span_id: String,
}

/// Most distinct DLQ reasons before further ones count as `other`.
const MAX_DLQ_REASONS: usize = 64;

/// The label value of an outcome class.
pub fn class_label(class: OutcomeClass) -> &'static str {
    match class {
        OutcomeClass::Committed => "committed",
        OutcomeClass::Duplicate => "duplicate",
        OutcomeClass::Conflict => "conflict",
        OutcomeClass::FailedTemporary => "failed_temporary",
        OutcomeClass::FailedPermanent => "failed_permanent",
        OutcomeClass::HeldBack => "held_back",
        OutcomeClass::Pending => "pending",
        _ => "other",
    }
}

/// Every outcome class, in the order of the outcome counters (and of per-batch tallies).
pub(crate) const CLASSES: [OutcomeClass; 7] = [
    OutcomeClass::Committed,
    OutcomeClass::Duplicate,
    OutcomeClass::Conflict,
    OutcomeClass::FailedTemporary,
    OutcomeClass::FailedPermanent,
    OutcomeClass::HeldBack,
    OutcomeClass::Pending,
];

/// The position of `class` in [`CLASSES`].
pub(crate) fn class_slot(class: OutcomeClass) -> usize {
    CLASSES.iter().position(|c| *c == class).unwrap_or(0)
}

/// The outcome counters of one sink (or, later, one fan-out target), resolved once.
#[derive(Debug, Clone, Default)]
pub struct OutcomeCounters(Option<[Counter; 7]>);

impl OutcomeCounters {
    /// Adds `n` outcomes of `class`.
    pub fn add(&self, class: OutcomeClass, n: u64) {
        if let (Some(c), true) = (&self.0, n > 0) {
            c[class_slot(class)].inc_by(n);
        }
    }
}

/// A metric whose value is read when encoded.
#[derive(Debug)]
enum Derived {
    /// An f64 gauge cell set by the runner.
    Cell(Arc<AtomicU64>),
    /// 1 while `/readyz` would answer 200.
    Ready(Arc<Status>),
    /// 1 while NATS is connected.
    Connected(Arc<Status>),
    /// The process-wide count of retries in place.
    RetriesInPlace,
    /// The process-wide seconds writes waited for a rate limit.
    RateLimitWait,
}

impl Derived {
    fn value(&self) -> f64 {
        match self {
            Self::Cell(c) => f64::from_bits(c.load(Ordering::Relaxed)),
            Self::Ready(s) => f64::from(u8::from(s.readiness().ready)),
            Self::Connected(s) => f64::from(u8::from(s.nats_connected())),
            Self::RetriesInPlace => sinks_toolkit::retry::retries_in_place() as f64,
            Self::RateLimitWait => crate::limit::waited_seconds(),
        }
    }
}

impl EncodeMetric for Derived {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        match self {
            Self::RetriesInPlace => encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                &sinks_toolkit::retry::retries_in_place(),
                None,
            ),
            Self::RateLimitWait => encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                &crate::limit::waited_seconds(),
                None,
            ),
            _ => encoder.encode_gauge(&self.value()),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self {
            Self::RetriesInPlace | Self::RateLimitWait => MetricType::Counter,
            _ => MetricType::Gauge,
        }
    }
}

/// A histogram shared between the registry and the recorder.
#[derive(Debug)]
struct SharedTiming(Arc<Timing>);

impl EncodeMetric for SharedTiming {
    fn encode(&self, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The registry and the metrics in it (present when `metrics.enabled`).
#[derive(Debug)]
struct Recorded {
    registry: Registry,
    counters: Vec<Counter>,
    gauges: Vec<Arc<AtomicU64>>,
    timings: Vec<Arc<Timing>>,
    outcomes: Family<OutcomeLabels, Counter>,
    /// The outcome counters handed out, by sink (read by the OTLP export).
    outcome_sinks: Mutex<Vec<(String, [Counter; 7])>>,
    dlq: Family<ReasonLabels, Counter>,
    /// The DLQ reason labels in use (at most [`MAX_DLQ_REASONS`] plus `other`) and their counters.
    dlq_reasons: Mutex<HashMap<String, Counter>>,
    /// `sink_batch_write_seconds` as exposed: the same observations as its [`Timing`], with
    /// the batch write's trace as an exemplar (OpenMetrics only).
    write_exemplars: HistogramWithExemplars<TraceLabels>,
}

impl Recorded {
    fn new(namespace: &str, status: &Arc<Status>) -> Self {
        let mut registry = Registry::with_prefix(namespace);
        let counters: Vec<Counter> = CounterId::ALL.iter().map(|_| Counter::default()).collect();
        for id in CounterId::ALL {
            match id {
                CounterId::RetriesInPlace => registry.register(id.name(), id.help(), Derived::RetriesInPlace),
                CounterId::RateLimitWait => registry.register(id.name(), id.help(), Derived::RateLimitWait),
                _ => registry.register(id.name(), id.help(), counters[id.index()].clone()),
            }
        }
        let gauges: Vec<Arc<AtomicU64>> =
            GaugeId::ALL.iter().map(|_| Arc::new(AtomicU64::new(0f64.to_bits()))).collect();
        for id in GaugeId::ALL {
            let metric = match id {
                GaugeId::Ready => Derived::Ready(Arc::clone(status)),
                GaugeId::NatsConnected => Derived::Connected(Arc::clone(status)),
                _ => Derived::Cell(Arc::clone(&gauges[id.index()])),
            };
            registry.register(id.name(), id.help(), metric);
        }
        let timings: Vec<Arc<Timing>> = TimingId::ALL.iter().map(|t| Arc::new(Timing::new(t.buckets()))).collect();
        let write_exemplars = HistogramWithExemplars::new(TimingId::SinkBatchWriteSeconds.buckets().iter().copied());
        for id in TimingId::ALL {
            match id {
                TimingId::SinkBatchWriteSeconds => registry.register(id.name(), id.help(), write_exemplars.clone()),
                _ => registry.register(id.name(), id.help(), SharedTiming(Arc::clone(&timings[id.index()]))),
            }
        }
        let outcomes = Family::<OutcomeLabels, Counter>::default();
        registry.register(FamilyId::Outcomes.name(), FamilyId::Outcomes.help(), outcomes.clone());
        let dlq = Family::<ReasonLabels, Counter>::default();
        registry.register(FamilyId::DlqRecords.name(), FamilyId::DlqRecords.help(), dlq.clone());
        Self {
            registry,
            counters,
            gauges,
            timings,
            outcomes,
            outcome_sinks: Mutex::new(Vec::new()),
            dlq,
            dlq_reasons: Mutex::new(HashMap::new()),
            write_exemplars,
        }
    }
}

#[derive(Debug)]
struct Inner {
    stats: Arc<RunStats>,
    status: Arc<Status>,
    config: MetricsConfig,
    recorded: Option<Recorded>,
}

/// The run's observability handle (cheap to clone): counters, health and, when enabled, the
/// metric registry.
#[derive(Debug, Clone)]
pub struct Metrics(Arc<Inner>);

impl Metrics {
    /// A handle for `config`: with a registry when `config.enabled`.
    pub fn new(config: &MetricsConfig) -> Self {
        let status = Arc::new(Status::default());
        let recorded = config.enabled.then(|| Recorded::new(&config.namespace, &status));
        Self(Arc::new(Inner { stats: Arc::new(RunStats::default()), status, config: config.clone(), recorded }))
    }

    /// True when metrics are recorded.
    pub fn enabled(&self) -> bool {
        self.0.recorded.is_some()
    }

    /// The `metrics` section this handle was made for.
    pub fn config(&self) -> &MetricsConfig {
        &self.0.config
    }

    /// The run's counters (kept with metrics disabled too).
    pub fn stats(&self) -> &Arc<RunStats> {
        &self.0.stats
    }

    /// The run's health.
    pub fn status(&self) -> &Status {
        &self.0.status
    }

    /// The metrics in `format`, or `None` when metrics are disabled.
    pub fn encode(&self, format: Format) -> Option<String> {
        let r = self.0.recorded.as_ref()?;
        let mut out = String::with_capacity(16 * 1024);
        let result = match format {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::encode(&mut out, &r.registry),
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &r.registry),
        };
        result.ok().map(|()| out)
    }

    /// Adds `n` to counter `id`.
    pub fn inc(&self, id: CounterId, n: u64) {
        if let (Some(r), true) = (&self.0.recorded, n > 0) {
            r.counters[id.index()].inc_by(n);
        }
    }

    /// The value of counter `id` (0 when disabled).
    pub fn counter(&self, id: CounterId) -> u64 {
        match (&self.0.recorded, id) {
            (Some(_), CounterId::RetriesInPlace) => sinks_toolkit::retry::retries_in_place(),
            (Some(_), CounterId::RateLimitWait) => crate::limit::waited_seconds() as u64,
            (Some(r), _) => r.counters[id.index()].get(),
            (None, _) => 0,
        }
    }

    /// Sets gauge `id` (derived gauges ignore this).
    pub fn set(&self, id: GaugeId, value: f64) {
        if let Some(r) = &self.0.recorded {
            r.gauges[id.index()].store(value.to_bits(), Ordering::Relaxed);
        }
    }

    /// Adds `delta` to gauge `id`.
    pub fn add(&self, id: GaugeId, delta: f64) {
        if let Some(r) = &self.0.recorded {
            let _ = r.gauges[id.index()].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + delta).to_bits())
            });
        }
    }

    /// The value of gauge `id` (0 when disabled).
    pub fn gauge(&self, id: GaugeId) -> f64 {
        let Some(r) = &self.0.recorded else { return 0.0 };
        match id {
            GaugeId::Ready => f64::from(u8::from(self.status().readiness().ready)),
            GaugeId::NatsConnected => f64::from(u8::from(self.status().nats_connected())),
            _ => f64::from_bits(r.gauges[id.index()].load(Ordering::Relaxed)),
        }
    }

    /// Records one value of histogram `id`.
    pub fn observe(&self, id: TimingId, value: f64) {
        self.observe_traced(id, value, None);
    }

    /// [`Metrics::observe`], with the trace and span ids (hex) of the span that made the
    /// value: an exemplar of the write-latency histogram in the OpenMetrics exposition.
    pub fn observe_traced(&self, id: TimingId, value: f64, trace: Option<(String, String)>) {
        if let Some(r) = &self.0.recorded {
            r.timings[id.index()].observe(value);
            if id == TimingId::SinkBatchWriteSeconds {
                let labels = trace.map(|(trace_id, span_id)| TraceLabels { trace_id, span_id });
                r.write_exemplars.observe(value, labels, None);
            }
        }
    }

    /// The histogram behind `id` (for the OTLP export; `None` when disabled).
    #[cfg(feature = "otel")]
    pub(crate) fn timing(&self, id: TimingId) -> Option<&Timing> {
        self.0.recorded.as_ref().map(|r| r.timings[id.index()].as_ref())
    }

    /// `(sink, class, count)` of every outcome series handed out so far.
    pub fn outcome_values(&self) -> Vec<(String, &'static str, u64)> {
        let Some(r) = &self.0.recorded else { return Vec::new() };
        let sinks = r.outcome_sinks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Vec::new();
        for (sink, counters) in sinks.iter() {
            for (class, counter) in CLASSES.iter().zip(counters) {
                out.push((sink.clone(), class_label(*class), counter.get()));
            }
        }
        out
    }

    /// `(reason, count)` of every DLQ reason series.
    pub fn dlq_values(&self) -> Vec<(String, u64)> {
        let Some(r) = &self.0.recorded else { return Vec::new() };
        let known = r.dlq_reasons.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<(String, u64)> = known.iter().map(|(reason, c)| (reason.clone(), c.get())).collect();
        out.sort();
        out
    }

    /// Merges a batch's observations of histogram `id`.
    pub fn merge(&self, id: TimingId, local: &LocalTiming) {
        if let Some(r) = &self.0.recorded {
            r.timings[id.index()].merge(local);
        }
    }

    /// A batch-local accumulator for histogram `id`.
    pub fn local(id: TimingId) -> LocalTiming {
        LocalTiming::new(id.buckets())
    }

    /// Count, sum, min, max and last of histogram `id` (zeros when disabled).
    pub fn summary(&self, id: TimingId) -> Summary {
        match &self.0.recorded {
            Some(r) => r.timings[id.index()].summary(),
            None => Summary { count: 0, sum: 0.0, min: 0.0, max: 0.0, last: 0.0 },
        }
    }

    /// The outcome counters of sink `sink` (no-ops when disabled).
    pub fn outcome_counters(&self, sink: &str) -> OutcomeCounters {
        let Some(r) = &self.0.recorded else { return OutcomeCounters(None) };
        let one =
            |class| r.outcomes.get_or_create_owned(&OutcomeLabels { class: class_label(class), sink: sink.to_owned() });
        let counters = CLASSES.map(one);
        let mut sinks = r.outcome_sinks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !sinks.iter().any(|(s, _)| s == sink) {
            sinks.push((sink.to_owned(), counters.clone()));
        }
        OutcomeCounters(Some(counters))
    }

    /// Counts one stored DLQ record with `reason` (a bounded label: see [`FamilyId::DlqRecords`]).
    pub fn dlq_record(&self, reason: &str) {
        let Some(r) = &self.0.recorded else { return };
        let well_formed = !reason.is_empty()
            && reason.len() <= 48
            && reason.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let mut known = r.dlq_reasons.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let named = known.keys().filter(|k| k.as_str() != "other").count();
        let label =
            if well_formed && (known.contains_key(reason) || named < MAX_DLQ_REASONS) { reason } else { "other" };
        let counter = known
            .entry(label.to_owned())
            .or_insert_with(|| r.dlq.get_or_create_owned(&ReasonLabels { reason: label.to_owned() }));
        counter.inc();
    }
}

/// One row of the generated catalogue: what the registry exports for one metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueRow {
    /// Exported name (with the default namespace and any `_total`).
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
    /// Labels, when the metric has any.
    pub labels: &'static str,
    /// `reference` or `extension`.
    pub origin: &'static str,
    /// Whether the snapshot file carries it.
    pub in_snapshot: bool,
    /// The help text as exported.
    pub help: String,
}

/// The catalogue as the registry exports it (default namespace), in registration order:
/// read back from the registry's own Prometheus text, not from the lists it was built from.
pub fn catalogue_rows() -> Vec<CatalogueRow> {
    let metrics = Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() });
    // A labelled family is exported only once it has a series: give each one.
    let _ = metrics.outcome_counters("any");
    metrics.dlq_record("sink_permanent");
    let text = metrics.encode(Format::Prometheus).unwrap_or_default();
    let mut rows = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map(|(_, h)| h.to_owned()).unwrap_or_default();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let Some((name, kind)) = rest.split_once(' ') else { continue };
            let short = name.strip_prefix(&format!("{}_", crate::config::metrics::DEFAULT_NAMESPACE)).unwrap_or(name);
            let bare = short.strip_suffix("_total").unwrap_or(short);
            let (origin, labels, in_snapshot) = if let Some(c) = CounterId::ALL.iter().find(|c| c.name() == bare) {
                (c.origin(), "", true)
            } else if let Some(g) = GaugeId::ALL.iter().find(|g| g.name() == short) {
                (g.origin(), "", true)
            } else if let Some(t) = TimingId::ALL.iter().find(|t| t.name() == short) {
                (t.origin(), "", true)
            } else if let Some(f) = FamilyId::ALL.iter().find(|f| f.name() == bare) {
                (Origin::Extension, f.labels(), false)
            } else {
                (Origin::Extension, "", false)
            };
            rows.push(CatalogueRow {
                name: name.to_owned(),
                kind: kind.to_owned(),
                labels,
                origin: origin.as_str(),
                in_snapshot,
                help: std::mem::take(&mut help),
            });
        }
    }
    rows
}

/// The catalogue as a Markdown table (the block `docs/observability.md` carries).
pub fn catalogue_markdown() -> String {
    let mut md =
        String::from("| metric | type | labels | origin | in snapshot | meaning |\n|---|---|---|---|---|---|\n");
    for r in catalogue_rows() {
        let labels = if r.labels.is_empty() { "–" } else { r.labels };
        let snapshot = if r.in_snapshot { "yes" } else { "no" };
        md.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            r.name, r.kind, labels, r.origin, snapshot, r.help
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> Metrics {
        Metrics::new(&MetricsConfig { enabled: true, ..MetricsConfig::default() })
    }

    #[test]
    fn disabled_metrics_record_nothing_and_encode_nothing() {
        let m = Metrics::new(&MetricsConfig::default());
        m.inc(CounterId::MessagesAcked, 3);
        m.observe(TimingId::NatsFetchSeconds, 0.1);
        m.dlq_record("x");
        m.outcome_counters("file").add(OutcomeClass::Committed, 1);
        assert!(!m.enabled());
        assert_eq!(m.counter(CounterId::MessagesAcked), 0);
        assert!(m.encode(Format::Prometheus).is_none());
    }

    #[test]
    fn counters_gauges_histograms_and_families_are_exported_with_the_namespace() {
        let m = Metrics::new(&MetricsConfig { enabled: true, namespace: "ns".into(), ..MetricsConfig::default() });
        m.inc(CounterId::MessagesAcked, 3);
        m.set(GaugeId::BatchesInFlight, 2.0);
        m.add(GaugeId::BatchesInFlight, -1.0);
        m.observe(TimingId::SinkBatchWriteSeconds, 0.02);
        m.outcome_counters("file").add(OutcomeClass::FailedTemporary, 5);
        m.dlq_record("signature_invalid");
        let text = m.encode(Format::Prometheus).unwrap();
        assert!(text.contains("ns_messages_acked_total 3"), "{text}");
        assert!(text.contains("ns_batches_in_flight 1"), "{text}");
        assert!(text.contains("ns_sink_batch_write_seconds_count 1"), "{text}");
        assert!(text.contains(r#"ns_outcomes_total{class="failed_temporary",sink="file"} 5"#), "{text}");
        assert!(text.contains(r#"ns_dlq_records_total{reason="signature_invalid"} 1"#), "{text}");
        assert!(text.contains("ns_ready 0"), "{text}");
        let open = m.encode(Format::OpenMetrics).unwrap();
        assert!(open.ends_with("# EOF\n"), "{open}");
    }

    #[test]
    fn the_write_latency_histogram_carries_the_batch_write_trace_as_an_exemplar_in_openmetrics() {
        let m = enabled();
        let (trace, span) = ("4bf92f3577b34da6a3ce929d0e0e4736".to_owned(), "00f067aa0ba902b7".to_owned());
        m.observe(TimingId::SinkBatchWriteSeconds, 0.2);
        m.observe_traced(TimingId::SinkBatchWriteSeconds, 0.003, Some((trace.clone(), span.clone())));
        let open = m.encode(Format::OpenMetrics).unwrap();
        let bucket =
            open.lines().find(|l| l.starts_with("nats_sinks_sink_batch_write_seconds_bucket{le=\"0.005\"}")).unwrap();
        assert!(bucket.contains(&format!("# {{trace_id=\"{trace}\",span_id=\"{span}\"}} 0.003")), "{bucket}");
        assert!(open.contains("nats_sinks_sink_batch_write_seconds_count 2"), "{open}");
        let text = m.encode(Format::Prometheus).unwrap();
        assert!(!text.contains(&trace), "no exemplars in the 0.0.4 text format: {text}");
        assert_eq!(m.summary(TimingId::SinkBatchWriteSeconds).count, 2, "the snapshot sees both");
    }

    #[test]
    fn outcome_and_dlq_series_can_be_read_back_for_the_otlp_export() {
        let m = enabled();
        m.outcome_counters("file").add(OutcomeClass::Committed, 4);
        let _ = m.outcome_counters("file");
        m.dlq_record("sink_permanent");
        m.dlq_record("Not A Code");
        let outcomes = m.outcome_values();
        assert_eq!(outcomes.len(), CLASSES.len(), "one sink, every class: {outcomes:?}");
        assert!(outcomes.contains(&("file".to_owned(), "committed", 4)));
        assert_eq!(m.dlq_values(), vec![("other".to_owned(), 1), ("sink_permanent".to_owned(), 1)]);
    }

    #[test]
    fn legacy_aliases_stay_out_of_the_exposition() {
        let m = enabled();
        m.inc(CounterId::MessagesPrepared, 9);
        let text = m.encode(Format::Prometheus).unwrap();
        assert!(text.contains("nats_sinks_messages_prepared_total 9"), "{text}");
        for (alias, _) in LEGACY_ALIASES {
            assert!(!text.contains(&format!("nats_sinks_{alias}")), "{alias} exported: {text}");
        }
    }

    #[test]
    fn dlq_reasons_are_bounded() {
        let m = enabled();
        m.dlq_record("Not A Code");
        for i in 0..100 {
            m.dlq_record(&format!("reason_{i}"));
        }
        let text = m.encode(Format::Prometheus).unwrap();
        let series = text.lines().filter(|l| l.starts_with("nats_sinks_dlq_records_total{")).count();
        assert_eq!(series, MAX_DLQ_REASONS + 1, "64 reasons plus `other`");
        assert!(text.contains(r#"nats_sinks_dlq_records_total{reason="other"} 37"#), "{text}");
    }

    #[test]
    fn readiness_needs_every_condition_and_liveness_a_recent_progress() {
        let s = Status::default();
        assert_eq!(s.readiness().missing, ["nats disconnected", "consumer not bound", "sink not opened"]);
        s.set_nats_connected(true);
        s.set_consumer_bound(true);
        s.set_sink_opened(true);
        assert!(s.readiness().ready);
        s.set_sink_healthy(false);
        assert_eq!(s.readiness().missing, ["sink unhealthy"]);
        s.set_sink_healthy(true);
        s.set_stopping();
        assert_eq!(s.readiness().missing, ["stopping"]);
        s.progress();
        assert!(s.liveness().alive);
        s.set_stall_window(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!s.liveness().alive);
        assert_eq!(s.lag(), None);
        s.set_lag(7, 2);
        assert_eq!(s.lag(), Some((7, 2)));
    }

    #[test]
    fn catalogue_rows_cover_every_metric_once() {
        let rows = catalogue_rows();
        assert_eq!(
            rows.len(),
            CounterId::ALL.len() + GaugeId::ALL.len() + TimingId::ALL.len() + FamilyId::ALL.len(),
            "{rows:#?}"
        );
        let acked = rows.iter().find(|r| r.name == "nats_sinks_messages_acked_total").unwrap();
        assert_eq!((acked.kind.as_str(), acked.origin), ("counter", "reference"));
        assert!(rows.iter().any(|r| r.name == "nats_sinks_end_to_end_latency_seconds" && r.kind == "histogram"));
        assert!(catalogue_markdown().contains("`nats_sinks_outcomes_total` | counter | `class`"));
    }
}
