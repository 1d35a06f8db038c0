//! OTLP metrics: the catalogue of `/metrics`, read from the run's [`Metrics`] handle by
//! the OpenTelemetry SDK's periodic reader.
//!
//! Counters and gauges are observable instruments whose callbacks read the handle's values
//! when the reader collects (no cost between exports); the two labelled families are
//! observable counters with the same labels. Histograms are SDK histograms with the same
//! bucket bounds, fed every observation the handle's histograms get (see
//! `metrics::histogram::keep_values`). Names are the catalogue's with the namespace, without
//! Prometheus' `_total` (the Collector's Prometheus exporters add it back, so
//! `nats_sinks_messages_acked` arrives as `nats_sinks_messages_acked_total`); histograms
//! have unit `s`.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::exporter::Guarded;
use crate::config::otel::{OtlpMetricsConfig, name_matches};
use crate::metrics::{CounterId, FamilyId, GaugeId, Metrics, TimingId};

/// Whether the metric `name` (the reference's form) is exported under `config`'s lists.
pub(crate) fn exported(config: &OtlpMetricsConfig, name: &str) -> bool {
    let allowed = config.allowed_metrics.is_empty() || config.allowed_metrics.iter().any(|p| name_matches(p, name));
    allowed && !config.denied_metrics.iter().any(|p| name_matches(p, name))
}

/// An OTLP instrument name: the namespace and the name (`:` is not allowed there).
fn otlp_name(namespace: &str, name: &str) -> String {
    format!("{}_{name}", namespace.replace(':', "_"))
}

/// Starts the periodic export of `metrics` through `exporter`; the returned provider owns
/// the reader's thread (shut it down to stop).
pub(super) fn start(
    metrics: &Metrics,
    config: &OtlpMetricsConfig,
    exporter: Guarded<opentelemetry_otlp::MetricExporter>,
    resource: Resource,
) -> SdkMeterProvider {
    let reader = PeriodicReader::builder(exporter).with_interval(Duration::from_millis(config.interval_ms)).build();
    let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
    let meter = provider.meter("nats-sink");
    register(&meter, metrics, config);
    provider
}

/// Registers every exported metric of the catalogue on `meter`.
fn register(meter: &Meter, metrics: &Metrics, config: &OtlpMetricsConfig) {
    let namespace = metrics.config().namespace.clone();
    for &id in CounterId::ALL {
        if exported(config, &format!("{}_total", id.name())) {
            let m = metrics.clone();
            meter
                .u64_observable_counter(otlp_name(&namespace, id.name()))
                .with_description(id.help())
                .with_callback(move |o| o.observe(m.counter(id), &[]))
                .build();
        }
    }
    for &id in GaugeId::ALL {
        if exported(config, id.name()) {
            let m = metrics.clone();
            meter
                .f64_observable_gauge(otlp_name(&namespace, id.name()))
                .with_description(id.help())
                .with_callback(move |o| o.observe(m.gauge(id), &[]))
                .build();
        }
    }
    for &family in FamilyId::ALL {
        if !exported(config, &format!("{}_total", family.name())) {
            continue;
        }
        let m = metrics.clone();
        let series = move || -> Vec<(u64, Vec<KeyValue>)> {
            match family {
                FamilyId::Outcomes => m
                    .outcome_values()
                    .into_iter()
                    .map(|(sink, class, n)| (n, vec![KeyValue::new("class", class), KeyValue::new("sink", sink)]))
                    .collect(),
                FamilyId::DlqRecords => {
                    m.dlq_values().into_iter().map(|(reason, n)| (n, vec![KeyValue::new("reason", reason)])).collect()
                }
            }
        };
        meter
            .u64_observable_counter(otlp_name(&namespace, family.name()))
            .with_description(family.help())
            .with_callback(move |o| {
                for (n, labels) in series() {
                    o.observe(n, &labels);
                }
            })
            .build();
    }
    let mut mirrored = false;
    for &id in TimingId::ALL {
        let Some(timing) = metrics.timing(id).filter(|_| exported(config, id.name())) else { continue };
        let histogram = meter
            .f64_histogram(otlp_name(&namespace, id.name()))
            .with_description(id.help())
            .with_unit("s")
            .with_boundaries(id.buckets().to_vec())
            .build();
        timing.mirror_to(histogram);
        mirrored = true;
    }
    if mirrored {
        crate::metrics::histogram_keep_values();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_and_deny_lists_pick_the_exported_metrics() {
        let all = OtlpMetricsConfig::default();
        assert!(exported(&all, "messages_acked_total"));
        let some = OtlpMetricsConfig {
            allowed_metrics: vec!["messages_*".into(), "sink_batch_write_seconds".into()],
            denied_metrics: vec!["messages_nacked_total".into()],
            ..OtlpMetricsConfig::default()
        };
        assert!(exported(&some, "messages_acked_total"));
        assert!(exported(&some, "sink_batch_write_seconds"));
        assert!(!exported(&some, "messages_nacked_total"), "deny wins");
        assert!(!exported(&some, "nats_fetch_seconds"), "not allowed");
        assert_eq!(otlp_name("a:b", "messages_acked"), "a_b_messages_acked");
    }
}
