//! Event freshness (the reference's §3.10): how old an event was when this process received
//! it and when the sink made it durable, how far in the future a creation time was, and how
//! many events were stale, had no creation time or a malformed one.
//!
//! The creation time is the `Nats-Time-Stamp` header when it is RFC 3339, else the JetStream
//! timestamp (a malformed header is counted and falls back). Recorded for messages with a
//! durable outcome, after the write and before the ack, aggregated per batch; never per
//! subject or any other label. Observation only: nothing here touches a settlement.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::MetricsConfig;
use crate::metrics::{CounterId, LocalTiming, Metrics, TimingId};
use sinks_contract::envelope::Envelope;

/// The creation time of an event, as far as it can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// Unix time in nanoseconds, when known.
    pub epoch_ns: Option<i128>,
    /// A `Nats-Time-Stamp` header was present but not RFC 3339.
    pub malformed_header: bool,
}

/// The creation time of `envelope`: `Nats-Time-Stamp` when valid, else the JetStream
/// timestamp.
pub fn created(envelope: &Envelope) -> Created {
    let header = envelope.headers().get(sinks_contract::envelope::CREATED_AT_HEADER);
    let parsed = header.and_then(|v| OffsetDateTime::parse(v.trim(), &Rfc3339).ok());
    let epoch_ns = parsed.or(envelope.jetstream().timestamp).map(OffsetDateTime::unix_timestamp_nanos);
    Created { epoch_ns, malformed_header: header.is_some() && parsed.is_none() }
}

/// The freshness settings of `metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Freshness {
    enabled: bool,
    stale_after: Option<f64>,
    skew_tolerance: f64,
}

impl Freshness {
    /// From the `metrics` section (off unless metrics and `event_freshness_enabled` are on).
    pub fn new(config: &MetricsConfig) -> Self {
        Self {
            enabled: config.enabled && config.event_freshness_enabled,
            stale_after: config.event_stale_after_seconds,
            skew_tolerance: config.event_future_skew_tolerance_seconds,
        }
    }

    /// True when observations are recorded.
    pub fn enabled(&self) -> bool {
        self.enabled
    }
}

/// The freshness observations of one batch, merged into the registry at once.
#[derive(Debug, Clone)]
pub struct FreshnessBatch {
    settings: Freshness,
    stored_at_ns: i128,
    age_at_receive: LocalTiming,
    age_at_store: LocalTiming,
    skew: LocalTiming,
    stale_at_receive: u64,
    stale_at_store: u64,
    missing: u64,
    malformed: u64,
    future: u64,
}

fn seconds(ns: i128) -> f64 {
    ns as f64 / 1e9
}

impl FreshnessBatch {
    /// An empty batch whose messages became durable at `stored_at`.
    pub fn new(settings: Freshness, stored_at: OffsetDateTime) -> Self {
        Self {
            settings,
            stored_at_ns: stored_at.unix_timestamp_nanos(),
            age_at_receive: Metrics::local(TimingId::EventAgeAtReceiveSeconds),
            age_at_store: Metrics::local(TimingId::EventAgeAtStoreSeconds),
            skew: Metrics::local(TimingId::EventSourceClockSkewSeconds),
            stale_at_receive: 0,
            stale_at_store: 0,
            missing: 0,
            malformed: 0,
            future: 0,
        }
    }

    /// Observes one durable message.
    pub fn observe(&mut self, envelope: &Envelope) {
        if !self.settings.enabled {
            return;
        }
        let created = created(envelope);
        if created.malformed_header {
            self.malformed += 1;
        }
        let Some(created_ns) = created.epoch_ns else {
            self.missing += 1;
            return;
        };
        let received_ns = envelope.received_at().unix_timestamp_nanos();
        let skew = seconds(created_ns - received_ns);
        if skew > 0.0 {
            self.skew.observe(skew);
            if skew > self.settings.skew_tolerance {
                self.future += 1;
            }
        }
        let at_receive = seconds(received_ns - created_ns).max(0.0);
        let at_store = seconds(self.stored_at_ns - created_ns).max(0.0);
        self.age_at_receive.observe(at_receive);
        self.age_at_store.observe(at_store);
        if let Some(stale) = self.settings.stale_after {
            self.stale_at_receive += u64::from(at_receive >= stale);
            self.stale_at_store += u64::from(at_store >= stale);
        }
    }

    /// Adds the batch to `metrics`.
    pub fn record(&self, metrics: &Metrics) {
        if !self.settings.enabled {
            return;
        }
        metrics.merge(TimingId::EventAgeAtReceiveSeconds, &self.age_at_receive);
        metrics.merge(TimingId::EventAgeAtStoreSeconds, &self.age_at_store);
        metrics.merge(TimingId::EventSourceClockSkewSeconds, &self.skew);
        metrics.inc(CounterId::EventsStaleAtReceive, self.stale_at_receive);
        metrics.inc(CounterId::EventsStaleAtStore, self.stale_at_store);
        metrics.inc(CounterId::EventCreationTimestampMissing, self.missing);
        metrics.inc(CounterId::EventCreationTimestampMalformed, self.malformed);
        metrics.inc(CounterId::EventCreationTimestampFuture, self.future);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use time::Duration;

    use super::*;
    use sinks_contract::envelope::{Headers, JetStreamInfo};

    fn envelope(header: Option<&str>, js: Option<OffsetDateTime>, received: OffsetDateTime) -> Envelope {
        let mut headers = Headers::new();
        if let Some(h) = header {
            headers.append("Nats-Time-Stamp", h);
        }
        let info = JetStreamInfo {
            stream: "S".into(),
            consumer: "c".into(),
            stream_sequence: 1,
            consumer_sequence: 1,
            delivered: 1,
            pending: 0,
            timestamp: js,
            domain: None,
        };
        Envelope::new("a.b", Bytes::from_static(b"{}"), headers, info).with_received_at(received)
    }

    fn metrics(stale: Option<f64>) -> Metrics {
        Metrics::new(&MetricsConfig { enabled: true, event_stale_after_seconds: stale, ..MetricsConfig::default() })
    }

    #[test]
    fn header_wins_then_jetstream_timestamp_then_missing() {
        let t = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let js = t + Duration::seconds(10);
        let e = envelope(Some("2023-11-14T22:13:20Z"), Some(js), t);
        assert_eq!(created(&e), Created { epoch_ns: Some(t.unix_timestamp_nanos()), malformed_header: false });
        let e = envelope(Some("yesterday"), Some(js), t);
        assert_eq!(created(&e), Created { epoch_ns: Some(js.unix_timestamp_nanos()), malformed_header: true });
        assert_eq!(created(&envelope(None, None, t)), Created { epoch_ns: None, malformed_header: false });
    }

    #[test]
    fn ages_skew_staleness_and_counts() {
        let m = metrics(Some(300.0));
        let now = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let mut batch = FreshnessBatch::new(Freshness::new(m.config()), now + Duration::seconds(2));
        // Created 400 s before it was received: stale at receive and at store.
        batch.observe(&envelope(None, Some(now - Duration::seconds(400)), now));
        // Created 60 s in the future: skew observed and counted, ages clamp to 0.
        batch.observe(&envelope(Some("2023-11-14T22:14:20Z"), None, now));
        // Malformed header and no JetStream timestamp: both counted.
        batch.observe(&envelope(Some("soon"), None, now));
        batch.record(&m);
        assert_eq!(m.counter(CounterId::EventsStaleAtReceive), 1);
        assert_eq!(m.counter(CounterId::EventsStaleAtStore), 1);
        assert_eq!(m.counter(CounterId::EventCreationTimestampFuture), 1);
        assert_eq!(m.counter(CounterId::EventCreationTimestampMalformed), 1);
        assert_eq!(m.counter(CounterId::EventCreationTimestampMissing), 1);
        let receive = m.summary(TimingId::EventAgeAtReceiveSeconds);
        assert_eq!((receive.count, receive.max, receive.min), (2, 400.0, 0.0));
        assert_eq!(m.summary(TimingId::EventAgeAtStoreSeconds).max, 402.0);
        assert_eq!(m.summary(TimingId::EventSourceClockSkewSeconds).max, 60.0);
    }

    #[test]
    fn nothing_is_recorded_when_freshness_or_staleness_is_off() {
        let m =
            Metrics::new(&MetricsConfig { enabled: true, event_freshness_enabled: false, ..MetricsConfig::default() });
        let now = OffsetDateTime::now_utc();
        let mut batch = FreshnessBatch::new(Freshness::new(m.config()), now);
        batch.observe(&envelope(None, Some(now - Duration::hours(1)), now));
        batch.record(&m);
        assert_eq!(m.summary(TimingId::EventAgeAtReceiveSeconds).count, 0);
        let m = metrics(None);
        let mut batch = FreshnessBatch::new(Freshness::new(m.config()), now);
        batch.observe(&envelope(None, Some(now - Duration::hours(1)), now));
        batch.record(&m);
        assert_eq!(m.summary(TimingId::EventAgeAtReceiveSeconds).count, 1);
        assert_eq!(m.counter(CounterId::EventsStaleAtReceive), 0, "no threshold, nothing is stale");
    }
}
