//! The OTLP exporters (opentelemetry-otlp) for the `opentelemetry` section, and the guard
//! every export goes through.
//!
//! The SDK exports from threads of its own (the batch span processor, the periodic metric
//! reader), never from a runner task: a slow or dead collector delays nothing but its own
//! exports. Those threads are not Tokio threads, so [`Guarded`] polls each export inside the
//! process's runtime (the reqwest and tonic clients need its reactor and timers), and counts
//! and logs failures: the first one, then at most one line every [`LOG_EVERY`] with the count
//! since, so a collector that is down for an hour costs a handful of lines.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::config::{ConfigError, OpenTelemetryConfig, OtlpProtocol};
use crate::metrics::{CounterId, Metrics};

/// At most one failure line per signal in this time.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(30);

/// Where and how to export, with the secrets already read.
#[derive(Clone)]
pub(super) struct Endpoint {
    protocol: OtlpProtocol,
    base: String,
    headers: Vec<(String, String)>,
    ca_pem: Option<Vec<u8>>,
    timeout: Duration,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are secrets: only their names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("protocol", &self.protocol)
            .field("base", &self.base)
            .field("headers", &names)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Reads the header variables and the CA file of `config`; a missing variable or an
    /// unreadable CA stops start-up, naming the field.
    pub(super) fn from_config(config: &OpenTelemetryConfig) -> Result<Self, ConfigError> {
        let mut headers = Vec::new();
        for (name, var) in &config.headers_env {
            match std::env::var(var) {
                Ok(v) if !v.is_empty() => headers.push((name.to_ascii_lowercase(), v)),
                _ => {
                    return Err(ConfigError::single(
                        format!("opentelemetry.headers_env.{name}"),
                        format!("environment variable {var} is not set or empty"),
                    ));
                }
            }
        }
        let ca_pem =
            match &config.tls_ca_file {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    ConfigError::single("opentelemetry.tls_ca_file", format!("cannot read {path}: {e}"))
                })?),
                None => None,
            };
        Ok(Self {
            protocol: config.protocol,
            base: config.endpoint().trim_end_matches('/').to_owned(),
            headers,
            ca_pem,
            timeout: Duration::from_millis(config.timeout_ms),
        })
    }

    /// The URL of one signal: the base for gRPC; for HTTP the base plus `/v1/{signal}` when
    /// the base has no path of its own.
    fn url(&self, signal: &str) -> String {
        let has_path = self.base.split_once("://").is_some_and(|(_, rest)| rest.contains('/'));
        match self.protocol {
            OtlpProtocol::HttpProtobuf if !has_path => format!("{}/v1/{signal}", self.base),
            _ => self.base.clone(),
        }
    }

    fn http_client(&self) -> Result<reqwest::Client, String> {
        let mut builder = reqwest::Client::builder().timeout(self.timeout);
        if let Some(pem) = &self.ca_pem {
            let ca = reqwest::Certificate::from_pem(pem).map_err(|e| format!("opentelemetry.tls_ca_file: {e}"))?;
            builder = builder.add_root_certificate(ca);
        }
        builder.build().map_err(|e| e.to_string())
    }

    fn metadata(&self) -> Result<tonic::metadata::MetadataMap, String> {
        use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
        let mut map = MetadataMap::new();
        for (name, value) in &self.headers {
            let key = MetadataKey::from_bytes(name.as_bytes()).map_err(|_| format!("bad header name `{name}`"))?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|_| format!("bad value of header `{name}`"))?;
            map.insert(key, value);
        }
        Ok(map)
    }

    fn tls(&self) -> Option<opentelemetry_otlp::tonic_types::transport::ClientTlsConfig> {
        use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
        if !self.base.starts_with("https://") {
            return None;
        }
        Some(match &self.ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_native_roots(),
        })
    }

    fn http_headers(&self) -> HashMap<String, String> {
        self.headers.iter().cloned().collect()
    }

    /// An OTLP/HTTP exporter builder for `signal`, configured.
    fn http<B: WithExportConfig + WithHttpConfig>(&self, builder: B, signal: &str) -> Result<B, String> {
        Ok(builder
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(self.url(signal))
            .with_timeout(self.timeout)
            .with_headers(self.http_headers())
            .with_http_client(self.http_client()?))
    }

    /// An OTLP/gRPC exporter builder for `signal`, configured.
    fn grpc<B: WithExportConfig + WithTonicConfig>(&self, builder: B, signal: &str) -> Result<B, String> {
        let builder =
            builder.with_endpoint(self.url(signal)).with_timeout(self.timeout).with_metadata(self.metadata()?);
        Ok(match self.tls() {
            Some(tls) => builder.with_tls_config(tls),
            None => builder,
        })
    }

    /// The span exporter.
    pub(super) fn spans(&self) -> Result<opentelemetry_otlp::SpanExporter, String> {
        let builder = opentelemetry_otlp::SpanExporter::builder();
        let built = match self.protocol {
            OtlpProtocol::HttpProtobuf => self.http(builder.with_http(), "traces")?.build(),
            OtlpProtocol::Grpc => self.grpc(builder.with_tonic(), "traces")?.build(),
        };
        built.map_err(|e| e.to_string())
    }

    /// The metric exporter (cumulative temporality, like `/metrics`).
    pub(super) fn metrics(&self) -> Result<opentelemetry_otlp::MetricExporter, String> {
        let builder = opentelemetry_otlp::MetricExporter::builder();
        let built = match self.protocol {
            OtlpProtocol::HttpProtobuf => {
                self.http(builder.with_http(), "metrics")?.with_temporality(Temporality::Cumulative).build()
            }
            OtlpProtocol::Grpc => {
                self.grpc(builder.with_tonic(), "metrics")?.with_temporality(Temporality::Cumulative).build()
            }
        };
        built.map_err(|e| e.to_string())
    }
}

/// A future polled inside a Tokio runtime, whatever thread polls it.
struct InRuntime<F> {
    handle: tokio::runtime::Handle,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.handle.enter();
        self.future.as_mut().poll(cx)
    }
}

/// Failures of one signal's exports: counted, and logged a few lines at a time.
#[derive(Debug)]
pub(super) struct Failures {
    signal: &'static str,
    metrics: Metrics,
    /// When the last line was logged, and the failures since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Failures {
    pub(super) fn new(signal: &'static str, metrics: Metrics) -> Self {
        Self { signal, metrics, state: Mutex::new((None, 0)) }
    }

    /// Records the result of one export.
    pub(super) fn note(&self, result: &OTelSdkResult) {
        let Err(e) = result else { return };
        self.metrics.inc(CounterId::TelemetryExportErrors, 1);
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.1 += 1;
        if state.0.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            tracing::warn!(
                signal = self.signal,
                failures = state.1,
                error = %e,
                "opentelemetry export failed; delivery is not affected (next line in 30 s at most)"
            );
            *state = (Some(Instant::now()), 0);
        }
    }
}

/// An exporter whose exports run in the process's runtime and whose failures are counted.
#[derive(Debug)]
pub(super) struct Guarded<E> {
    pub(super) inner: std::sync::Arc<E>,
    pub(super) handle: tokio::runtime::Handle,
    pub(super) failures: std::sync::Arc<Failures>,
}

impl SpanExporter for Guarded<opentelemetry_otlp::SpanExporter> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let inner = std::sync::Arc::clone(&self.inner);
        let failures = std::sync::Arc::clone(&self.failures);
        let future = Box::pin(async move { inner.export(batch).await });
        let run = InRuntime { handle: self.handle.clone(), future };
        async move {
            let result = run.await;
            failures.note(&result);
            result
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        if let Some(inner) = std::sync::Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

impl PushMetricExporter for Guarded<opentelemetry_otlp::MetricExporter> {
    fn export(&self, metrics: &ResourceMetrics) -> impl Future<Output = OTelSdkResult> + Send {
        let future = Box::pin(self.inner.export(metrics));
        let run = InRuntime { handle: self.handle.clone(), future };
        async move {
            let result = run.await;
            self.failures.note(&result);
            result
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_urls_follow_the_otlp_conventions() {
        let mut c = OpenTelemetryConfig { endpoint: Some("http://127.0.0.1:4318/".into()), ..Default::default() };
        let e = Endpoint::from_config(&c).unwrap();
        assert_eq!(e.url("traces"), "http://127.0.0.1:4318/v1/traces");
        c.endpoint = Some("https://otlp.example/ingest".into());
        assert_eq!(Endpoint::from_config(&c).unwrap().url("metrics"), "https://otlp.example/ingest");
        c.protocol = OtlpProtocol::Grpc;
        c.endpoint = Some("http://127.0.0.1:4317".into());
        assert_eq!(Endpoint::from_config(&c).unwrap().url("traces"), "http://127.0.0.1:4317");
    }

    #[test]
    fn a_missing_header_variable_names_the_field_and_values_are_never_shown() {
        let mut c = OpenTelemetryConfig::default();
        c.headers_env.insert("Authorization".into(), "NATS_SINKS_TEST_OTEL_UNSET_VAR".into());
        let e = Endpoint::from_config(&c).unwrap_err();
        assert_eq!(e.issues[0].path, "opentelemetry.headers_env.Authorization");
        let e = Endpoint {
            protocol: OtlpProtocol::HttpProtobuf,
            base: "http://x".into(),
            headers: vec![("authorization".into(), "Bearer s3cr3t".into())],
            ca_pem: None,
            timeout: Duration::from_secs(1),
        };
        let shown = format!("{e:?}");
        assert!(shown.contains("authorization") && !shown.contains("s3cr3t"), "{shown}");
    }
}
