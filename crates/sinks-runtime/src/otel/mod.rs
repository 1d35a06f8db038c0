//! OpenTelemetry: OTLP export of the metric catalogue, one trace span per message, and the
//! trace ids that log lines, dead-letter records and receipts carry.
//!
//! [`Telemetry::start`] reads the `opentelemetry` section; with nothing enabled it starts
//! nothing and the runner holds no [`Traces`], so the per-message path does no work at all
//! (no allocation, lock or clock read). Exports run on the SDK's own threads (see
//! `exporter`): no ack, NAK or dead letter ever waits on a collector.
//!
//! While the runner settles a message (and while a batch is written) it runs that work in
//! [`scope`] with the span's ids: [`current`] then names them, for the JSON log lines of
//! `nats-sink` and for the `trace_id` of dead-letter records and receipts.

#[cfg(feature = "otel")]
mod exporter;
#[cfg(feature = "otel")]
mod metrics;
#[cfg(not(feature = "otel"))]
mod off;
#[cfg(feature = "otel")]
mod spans;
#[cfg(feature = "otel")]
pub mod traceparent;

use std::future::Future;
#[cfg(feature = "otel")]
use std::sync::Arc;
#[cfg(feature = "otel")]
use std::time::Duration;

#[cfg(feature = "otel")]
use opentelemetry::KeyValue;
#[cfg(feature = "otel")]
use opentelemetry::trace::TracerProvider as _;
#[cfg(feature = "otel")]
use opentelemetry_sdk::Resource;
#[cfg(feature = "otel")]
use opentelemetry_sdk::metrics::SdkMeterProvider;
#[cfg(feature = "otel")]
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use sinks_contract::sink::MessageOutcome;

#[cfg(not(feature = "otel"))]
pub(crate) use off::{MessageSpan, WriteSpan, finish};
#[cfg(not(feature = "otel"))]
pub use off::{Telemetry, Traces};
#[cfg(feature = "otel")]
pub use spans::Traces;
#[cfg(feature = "otel")]
pub(crate) use spans::{MessageSpan, WriteSpan, finish};

#[cfg(feature = "otel")]
use self::exporter::{Endpoint, Failures, Guarded};
#[cfg(feature = "otel")]
use crate::config::{Config, ConfigError};
#[cfg(feature = "otel")]
use crate::metrics::Metrics;

/// The ids of a span, for log lines, dead-letter records, receipts and exemplars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The trace id.
    pub trace_id: u128,
    /// The span id.
    pub span_id: u64,
    /// Whether the span is exported (its trace id then names a trace in the backend).
    pub sampled: bool,
}

impl Ids {
    /// The trace id as 32 lowercase hex digits.
    pub fn trace_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }
}

/// What became of a message, as its span's last attributes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fate {
    /// `committed`, `duplicate`, `conflict`, `failed_temporary`, `failed_permanent`,
    /// `held_back`, or `refused` (a policy step).
    pub(crate) outcome: &'static str,
    /// `ack`, `nak`, `term`, `left_unacked` or `not_sent`.
    pub(crate) settlement: &'static str,
    /// A dead-letter record was stored.
    pub(crate) dead_lettered: bool,
}

impl Fate {
    /// The outcome label of `outcome` (a failure with a policy reason is `refused`).
    pub(crate) fn outcome_label(outcome: &MessageOutcome) -> &'static str {
        match outcome {
            MessageOutcome::Failed(e) if e.reason().is_some() => "refused",
            other => crate::metrics::class_label(other.class()),
        }
    }
}

tokio::task_local! {
    static CURRENT: Ids;
}

/// Runs `future` with `ids` (when given) as the current trace: log lines and records made
/// meanwhile carry them.
pub async fn scope<F: Future>(ids: Option<Ids>, future: F) -> F::Output {
    match ids {
        Some(ids) => CURRENT.scope(ids, future).await,
        None => future.await,
    }
}

/// Runs `f` with `ids` (when given) as the current trace (see [`scope`]).
pub fn sync_scope<R>(ids: Option<Ids>, f: impl FnOnce() -> R) -> R {
    match ids {
        Some(ids) => CURRENT.sync_scope(ids, f),
        None => f(),
    }
}

/// The ids of the span whose work is running (inside [`scope`]), for log lines.
pub fn current() -> Option<Ids> {
    CURRENT.try_with(|ids| *ids).ok()
}

/// The trace id of the message being settled, when its trace is exported: what its
/// dead-letter record and receipt carry.
pub(crate) fn current_trace_id() -> Option<String> {
    current().filter(|ids| ids.sampled).map(|ids| ids.trace_hex())
}

/// How long stopping may wait for the last exports.
#[cfg(feature = "otel")]
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The exporters of one run (none when the section enables nothing).
#[cfg(feature = "otel")]
#[derive(Debug, Default)]
pub struct Telemetry {
    meter: Option<SdkMeterProvider>,
    tracer: Option<SdkTracerProvider>,
    traces: Option<Arc<Traces>>,
}

/// The resource of every export: `service.name`, `service.version` and the configured
/// attributes.
#[cfg(feature = "otel")]
fn resource(config: &Config) -> Resource {
    let mut attributes =
        vec![KeyValue::new("service.name", "nats-sink"), KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))];
    for (key, value) in &config.opentelemetry.resource_attributes {
        attributes.retain(|kv| kv.key.as_str() != key);
        attributes.push(KeyValue::new(key.clone(), value.clone()));
    }
    Resource::builder_empty().with_attributes(attributes).build()
}

#[cfg(feature = "otel")]
impl Telemetry {
    /// Starts what `config.opentelemetry` enables, recording into `metrics`, for sink
    /// `sink`. Must run inside the Tokio runtime (the exporters use it). A missing header
    /// variable or an unreadable CA file is a configuration error.
    pub fn start(config: &Config, metrics: &Metrics, sink: &str) -> Result<Self, ConfigError> {
        let section = &config.opentelemetry;
        if !section.active() {
            return Ok(Self::default());
        }
        let endpoint = Endpoint::from_config(section)?;
        let handle = tokio::runtime::Handle::current();
        let failed = |signal: &str, e: String| ConfigError::single(format!("opentelemetry.{signal}"), e);
        let mut telemetry = Self::default();
        if section.metrics.enabled && metrics.enabled() {
            let inner = Arc::new(endpoint.metrics().map_err(|e| failed("metrics", e))?);
            let failures = Arc::new(Failures::new("metrics", metrics.clone()));
            let exporter = Guarded { inner, handle: handle.clone(), failures };
            telemetry.meter = Some(metrics::start(metrics, &section.metrics, exporter, resource(config)));
        }
        if section.traces.enabled {
            let inner = Arc::new(endpoint.spans().map_err(|e| failed("traces", e))?);
            let failures = Arc::new(Failures::new("traces", metrics.clone()));
            let exporter = Guarded { inner, handle, failures };
            let links = u32::try_from(config.delivery.batch_size).unwrap_or(u32::MAX).max(128);
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(section.traces.sample_ratio))))
                .with_max_links_per_span(links)
                .with_resource(resource(config))
                .build();
            let tracer = provider.tracer("nats-sink");
            telemetry.traces = Some(Arc::new(Traces::new(tracer, sink, &config.nats.stream, &config.nats.consumer)));
            telemetry.tracer = Some(provider);
        }
        tracing::info!(
            endpoint = section.endpoint(),
            protocol = ?section.protocol,
            metrics = telemetry.meter.is_some(),
            traces = telemetry.tracer.is_some(),
            "opentelemetry export on"
        );
        Ok(telemetry)
    }

    /// The run's spans, when traces are on.
    pub fn traces(&self) -> Option<Arc<Traces>> {
        self.traces.clone()
    }

    /// Exports what is left and stops the exporters, waiting at most a few seconds (a dead
    /// collector delays the exit, never a settlement). Blocks: call it off the runtime's
    /// worker threads.
    pub fn shutdown(self) {
        drop(self.traces);
        if let Some(tracer) = self.tracer {
            let _ = tracer.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        }
        if let Some(meter) = self.meter {
            let _ = meter.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        }
    }
}
