//! A lock-free histogram ([`Timing`]) and its batch-local accumulator ([`LocalTiming`]).
//!
//! prometheus-client's own histogram takes a mutex per observation; here observations of one
//! batch are counted in a plain local value and merged with one atomic add per touched
//! bucket. Besides the buckets the histogram keeps min, max and last value, which the
//! reference's snapshot file reports for every observation series. Encoding goes through
//! prometheus-client's encoder (`encode_histogram`), never a hand-written formatter.

#[cfg(feature = "otel")]
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Set once OTLP metrics run: batch-local accumulators then keep their values, so that the
/// OpenTelemetry histograms see every observation (off: nothing is kept, nothing allocated).
static KEEP_VALUES: AtomicBool = AtomicBool::new(false);

/// Makes batch-local accumulators keep their values from now on (OTLP metrics).
#[cfg(feature = "otel")]
pub(crate) fn keep_values() {
    KEEP_VALUES.store(true, Ordering::Relaxed);
}

/// Most bucket bounds a histogram may have.
pub(crate) const MAX_BOUNDS: usize = 24;

/// Observations of one batch, not yet merged.
#[derive(Debug, Clone)]
pub struct LocalTiming {
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last slot is the overflow bucket.
    counts: [u64; MAX_BOUNDS + 1],
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    last: f64,
    /// The observations themselves, only while OTLP metrics run ([`keep_values`]).
    values: Option<Vec<f64>>,
}

impl LocalTiming {
    /// An empty accumulator over `bounds` (ascending, at most 24 bounds).
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.len() <= MAX_BOUNDS);
        Self {
            bounds,
            counts: [0; MAX_BOUNDS + 1],
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: 0.0,
            values: KEEP_VALUES.load(Ordering::Relaxed).then(Vec::new),
        }
    }

    /// Records `value` (non-finite values are dropped).
    pub fn observe(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        let slot = self.bounds.partition_point(|b| *b < value);
        self.counts[slot] += 1;
        self.count += 1;
        self.sum += value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.last = value;
        if let Some(values) = &mut self.values {
            values.push(value);
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// A histogram with atomic buckets, sum, min, max and last value.
#[derive(Debug)]
pub struct Timing {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    last: AtomicU64,
    /// The OpenTelemetry histogram that sees the same observations (OTLP metrics on).
    #[cfg(feature = "otel")]
    mirror: OnceLock<opentelemetry::metrics::Histogram<f64>>,
}

/// What the snapshot file reports for one observation series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Observations.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest (0 when there is none).
    pub min: f64,
    /// The largest (0 when there is none).
    pub max: f64,
    /// The latest merged (0 when there is none).
    pub last: f64,
}

fn update_f64(cell: &AtomicU64, f: impl Fn(f64) -> f64) {
    let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some(f(f64::from_bits(bits)).to_bits()));
}

impl Timing {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            min: AtomicU64::new(f64::INFINITY.to_bits()),
            max: AtomicU64::new(f64::NEG_INFINITY.to_bits()),
            last: AtomicU64::new(0f64.to_bits()),
            #[cfg(feature = "otel")]
            mirror: OnceLock::new(),
        }
    }

    /// Sends every later observation to `histogram` too (set once).
    #[cfg(feature = "otel")]
    pub(crate) fn mirror_to(&self, histogram: opentelemetry::metrics::Histogram<f64>) {
        let _ = self.mirror.set(histogram);
    }

    /// Records one value.
    pub fn observe(&self, value: f64) {
        let mut local = LocalTiming::new(self.bounds);
        local.values = None;
        local.observe(value);
        #[cfg(feature = "otel")]
        if let (Some(mirror), true) = (self.mirror.get(), value.is_finite()) {
            mirror.record(value, &[]);
        }
        self.merge(&local);
    }

    /// Adds everything `local` recorded (nothing when it is empty).
    pub fn merge(&self, local: &LocalTiming) {
        if local.count == 0 {
            return;
        }
        #[cfg(feature = "otel")]
        if let (Some(mirror), Some(values)) = (self.mirror.get(), &local.values) {
            for value in values {
                mirror.record(*value, &[]);
            }
        }
        debug_assert!(std::ptr::eq(local.bounds, self.bounds), "merging histograms with different buckets");
        for (cell, n) in self.counts.iter().zip(local.counts.iter()) {
            if *n > 0 {
                cell.fetch_add(*n, Ordering::Relaxed);
            }
        }
        update_f64(&self.sum, |s| s + local.sum);
        update_f64(&self.min, |m| m.min(local.min));
        update_f64(&self.max, |m| m.max(local.max));
        self.last.store(local.last.to_bits(), Ordering::Relaxed);
    }

    /// Count, sum, min, max and last value.
    pub fn summary(&self) -> Summary {
        let count = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        let get = |cell: &AtomicU64| f64::from_bits(cell.load(Ordering::Relaxed));
        if count == 0 {
            return Summary { count, sum: 0.0, min: 0.0, max: 0.0, last: 0.0 };
        }
        Summary { count, sum: get(&self.sum), min: get(&self.min), max: get(&self.max), last: get(&self.last) }
    }

    /// `(upper bound, observations in that bucket)`, the last bound being +Inf.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        self.bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect()
    }
}

impl EncodeMetric for Timing {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let buckets = self.buckets();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = if count == 0 { 0.0 } else { f64::from_bits(self.sum.load(Ordering::Relaxed)) };
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: &[f64] = &[0.1, 1.0, 10.0];

    #[test]
    fn buckets_are_upper_inclusive_and_summary_tracks_extremes() {
        let t = Timing::new(BOUNDS);
        let mut local = LocalTiming::new(BOUNDS);
        for v in [0.05, 0.1, 0.5, 1.0, 20.0, f64::NAN] {
            local.observe(v);
        }
        assert_eq!(local.count(), 5);
        t.merge(&local);
        t.observe(3.0);
        assert_eq!(t.buckets(), vec![(0.1, 2), (1.0, 2), (10.0, 1), (f64::INFINITY, 1)]);
        let s = t.summary();
        assert_eq!(s.count, 6);
        assert!((s.sum - 24.65).abs() < 1e-9);
        assert_eq!((s.min, s.max, s.last), (0.05, 20.0, 3.0));
        assert_eq!(Timing::new(BOUNDS).summary(), Summary { count: 0, sum: 0.0, min: 0.0, max: 0.0, last: 0.0 });
    }

    #[test]
    fn encodes_as_a_cumulative_histogram() {
        let mut registry = prometheus_client::registry::Registry::default();
        let t = std::sync::Arc::new(Timing::new(BOUNDS));
        t.observe(0.5);
        t.observe(50.0);
        registry.register("write_seconds", "How long", SharedTiming(std::sync::Arc::clone(&t)));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("# TYPE write_seconds histogram"), "{text}");
        assert!(text.contains("write_seconds_bucket{le=\"1\"} 1"), "{text}");
        assert!(text.contains("write_seconds_bucket{le=\"10\"} 1"), "{text}");
        assert!(text.contains("write_seconds_bucket{le=\"+Inf\"} 2"), "{text}");
        assert!(text.contains("write_seconds_count 2"), "{text}");
        assert!(text.contains("write_seconds_sum 50.5"), "{text}");
    }

    #[derive(Debug)]
    struct SharedTiming(std::sync::Arc<Timing>);

    impl EncodeMetric for SharedTiming {
        fn encode(&self, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
            self.0.encode(encoder)
        }

        fn metric_type(&self) -> MetricType {
            MetricType::Histogram
        }
    }
}
