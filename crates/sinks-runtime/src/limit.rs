//! `sink.rate_limit` (and `sinks.<name>.rate_limit`): staying under a destination's limits
//! instead of being throttled by it.
//!
//! [`RateLimit`] is the section (messages and payload bytes per second, each with a burst);
//! [`RateLimited`] wraps any sink and paces its writes with `sinks_toolkit::rate::Pace`
//! before they reach the sink: a batch goes in chunks of at most the message burst, each
//! when the pace allows it, in order. A message whose ordering key failed temporarily (or
//! was held back) in an earlier chunk is held back in the later ones, as within one write.
//! Time spent waiting is counted in `rate_limit_wait_seconds` ([`waited_seconds`]). A
//! destination that throttles anyway (429) is still handled by the runner's hold
//! (`runner/hold.rs`).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sinks_contract::config::{ConfigError, Issues};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{BatchResult, Capabilities, Destinations, Holding, MessageOutcome, ReadBack, Sink};
use sinks_toolkit::rate::Pace;

/// The key of the section in a sink section.
pub const SECTION: &str = "rate_limit";

/// Microseconds writes waited for a rate limit, process-wide.
static WAITED_US: AtomicU64 = AtomicU64::new(0);

/// Seconds writes waited for a rate limit since the process started (the
/// `rate_limit_wait_seconds` counter).
pub fn waited_seconds() -> f64 {
    WAITED_US.load(Ordering::Relaxed) as f64 / 1e6
}

/// A sink's `rate_limit` section: at most so many messages and payload bytes per second
/// reach the destination. At least one of the two rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Messages per second (> 0), sustained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_per_second: Option<f64>,
    /// Payload bytes per second (> 0), sustained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<f64>,
    /// Messages that may go at once after a quiet spell (default: a tenth of a second's
    /// worth, at least 1); also the largest chunk a batch is written in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_messages: Option<u64>,
    /// Payload bytes that may go at once after a quiet spell (default: a tenth of a second's
    /// worth, at least 1). A larger message waits for its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
}

impl RateLimit {
    /// Parses the `rate_limit` member of a sink section at `path` (`sink.rate_limit`,
    /// `sinks.<name>.rate_limit`) and checks it, naming every bad field.
    pub fn parse(path: &str, value: serde_json::Value) -> Result<Self, ConfigError> {
        let limit: Self = sinks_contract::config::deserialize_at(path, value)?;
        let mut issues = Issues::default();
        let mut positive = |field: &str, value: Option<f64>| {
            if value.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                issues.push(&format!("{path}.{field}"), "must be a number above 0");
            }
        };
        positive("messages_per_second", limit.messages_per_second);
        positive("bytes_per_second", limit.bytes_per_second);
        for (field, burst) in [("burst_messages", limit.burst_messages), ("burst_bytes", limit.burst_bytes)] {
            if burst == Some(0) {
                issues.push(&format!("{path}.{field}"), "must be at least 1");
            }
        }
        if limit.messages_per_second.is_none() && limit.bytes_per_second.is_none() {
            issues.push(path, "sets neither messages_per_second nor bytes_per_second");
        }
        if limit.burst_messages.is_some() && limit.messages_per_second.is_none() {
            issues.push(&format!("{path}.burst_messages"), "needs messages_per_second");
        }
        if limit.burst_bytes.is_some() && limit.bytes_per_second.is_none() {
            issues.push(&format!("{path}.burst_bytes"), "needs bytes_per_second");
        }
        issues.finish()?;
        Ok(limit)
    }

    /// The message burst in force.
    pub fn message_burst(&self) -> Option<u64> {
        self.messages_per_second.map(|rate| self.burst_messages.unwrap_or_else(|| tenth(rate)))
    }

    /// The byte burst in force.
    pub fn byte_burst(&self) -> Option<u64> {
        self.bytes_per_second.map(|rate| self.burst_bytes.unwrap_or_else(|| tenth(rate)))
    }

    /// The pace this section asks for.
    fn pace(&self) -> Pace {
        Pace::new(
            self.messages_per_second.zip(self.message_burst()).map(|(r, b)| (r, b as f64)),
            self.bytes_per_second.zip(self.byte_burst()).map(|(r, b)| (r, b as f64)),
        )
    }

    /// What `nats-sink validate` says of it.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let (Some(rate), Some(burst)) = (self.messages_per_second, self.message_burst()) {
            parts.push(format!("{rate} messages/s (burst {burst})"));
        }
        if let (Some(rate), Some(burst)) = (self.bytes_per_second, self.byte_burst()) {
            parts.push(format!("{rate} payload bytes/s (burst {burst})"));
        }
        format!("at most {} reach the destination", parts.join(" and "))
    }
}

/// A tenth of a second's worth of `rate`, at least 1.
fn tenth(rate: f64) -> u64 {
    ((rate / 10.0).ceil() as u64).max(1)
}

/// A sink whose writes are paced by a [`RateLimit`] (see the module documentation).
#[derive(Debug)]
pub struct RateLimited {
    inner: std::sync::Arc<dyn Sink>,
    pace: Mutex<Pace>,
    /// The largest chunk of a batch written at once.
    chunk: usize,
}

impl RateLimited {
    /// `inner`, paced by `limit`.
    pub fn new(inner: std::sync::Arc<dyn Sink>, limit: &RateLimit) -> Self {
        let chunk = limit.message_burst().map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)).max(1);
        Self { inner, pace: Mutex::new(limit.pace()), chunk }
    }

    /// Waits until `batch` may go.
    async fn wait_for(&self, batch: &[Envelope]) {
        let bytes: u64 = batch.iter().map(|e| e.payload().len() as u64).sum();
        let wait = self.pace.lock().unwrap_or_else(std::sync::PoisonError::into_inner).reserve(
            batch.len() as u64,
            bytes,
            tokio::time::Instant::now().into_std(),
        );
        if !wait.is_zero() {
            WAITED_US.fetch_add(u64::try_from(wait.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
    }
}

/// Every method forwards to the paced sink (the lint fails the build on a forgotten one).
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl Sink for RateLimited {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn open(&self) -> Result<(), SinkError> {
        self.inner.open().await
    }

    /// The batch in chunks of at most the message burst, each when the pace allows it, in
    /// order; a chunk's messages whose ordering key failed or was held back in an earlier
    /// chunk are held back without being sent. A batch-level error of a chunk fails only that
    /// chunk's messages, unless it is the only chunk (then it is the batch's, as the runner's
    /// bisection expects).
    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.len() <= self.chunk {
            self.wait_for(batch).await;
            return self.inner.write(batch, budget).await;
        }
        let deadline = tokio::time::Instant::now() + budget;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut blocked = HashSet::new();
        for chunk in batch.chunks(self.chunk) {
            let (go, held): (Vec<usize>, Vec<usize>) =
                (0..chunk.len()).partition(|&i| chunk[i].order_key().is_none_or(|k| !blocked.contains(&k)));
            let sending: Vec<Envelope> = go.iter().map(|&i| chunk[i].clone()).collect();
            let mut written: Vec<MessageOutcome> = (0..chunk.len()).map(|_| MessageOutcome::HeldBack).collect();
            if !sending.is_empty() {
                self.wait_for(&sending).await;
                let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(budget / 4);
                let got = match self.inner.write(&sending, left).await {
                    Ok(got) if got.len() == sending.len() => got,
                    Ok(_) => sending
                        .iter()
                        .map(|_| MessageOutcome::temporary("sink returned a misaligned outcome list"))
                        .collect(),
                    Err(e) => sending.iter().map(|_| MessageOutcome::Failed(e.duplicate())).collect(),
                };
                for (&i, outcome) in go.iter().zip(got) {
                    written[i] = outcome;
                }
            }
            for (i, outcome) in written.iter().enumerate() {
                if (outcome.failed_temporarily() || matches!(outcome, MessageOutcome::HeldBack) || held.contains(&i))
                    && let Some(key) = chunk[i].order_key()
                {
                    blocked.insert(key);
                }
            }
            outcomes.extend(written);
        }
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        self.inner.health_check().await
    }

    async fn close(&self) -> Result<(), SinkError> {
        self.inner.close().await
    }

    fn holding(&self) -> Option<&dyn Holding> {
        self.inner.holding()
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        self.inner.read_back()
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        self.inner.destinations()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sinks_contract::testing::envelope;

    fn limit(value: serde_json::Value) -> Result<RateLimit, Vec<String>> {
        RateLimit::parse("sink.rate_limit", value).map_err(|e| e.issues.into_iter().map(|i| i.path).collect())
    }

    #[test]
    fn the_section_is_checked_field_by_field() {
        let ok = limit(serde_json::json!({"messages_per_second": 200, "bytes_per_second": 1e6})).unwrap();
        assert_eq!((ok.message_burst(), ok.byte_burst()), (Some(20), Some(100_000)));
        assert!(ok.describe().contains("200 messages/s (burst 20)"), "{}", ok.describe());
        assert_eq!(limit(serde_json::json!({})).unwrap_err(), ["sink.rate_limit"]);
        assert_eq!(
            limit(serde_json::json!({"messages_per_second": 0, "bytes_per_second": -1, "burst_bytes": 0})).unwrap_err(),
            ["sink.rate_limit.messages_per_second", "sink.rate_limit.bytes_per_second", "sink.rate_limit.burst_bytes"]
        );
        assert_eq!(
            limit(serde_json::json!({"bytes_per_second": 10, "burst_messages": 5})).unwrap_err(),
            ["sink.rate_limit.burst_messages"]
        );
        assert_eq!(
            limit(serde_json::json!({"messages_per_secnd": 5})).unwrap_err(),
            ["sink.rate_limit.messages_per_secnd"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_goes_in_paced_chunks_in_order() {
        let memory = Arc::new(sinks_certify::MemorySink::new());
        let limit = limit(serde_json::json!({"messages_per_second": 100, "burst_messages": 10})).unwrap();
        let sink = RateLimited::new(Arc::clone(&memory) as Arc<dyn Sink>, &limit);
        let batch: Vec<Envelope> = (1..=50).map(|s| envelope("S", s, "s.a", format!("{{\"s\":{s}}}"))).collect();
        let t0 = tokio::time::Instant::now();
        let outcomes = sink.write(&batch, Duration::from_secs(30)).await.unwrap();
        assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)));
        // 10 at once, then 40 more at 100/s: 400 ms.
        assert_eq!(t0.elapsed().as_millis(), 400);
        let order: Vec<u64> = memory.commits().into_iter().map(|(s, _)| s).collect();
        assert_eq!(order, (1..=50).collect::<Vec<_>>(), "in stream order");
        assert_eq!(memory.write_calls(), 5, "in chunks of the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_failed_in_an_earlier_chunk_is_held_back_in_the_later_ones() {
        let memory = Arc::new(sinks_certify::MemorySink::new());
        memory.faults.fail_once.lock().unwrap().insert(3);
        let limit = limit(serde_json::json!({"messages_per_second": 1000, "burst_messages": 4})).unwrap();
        let sink = RateLimited::new(Arc::clone(&memory) as Arc<dyn Sink>, &limit);
        // Two keys: odd and even sequences.
        let batch: Vec<Envelope> =
            (1..=10).map(|s| envelope("S", s, &format!("s.k{}", s % 2), format!("{{\"s\":{s}}}"))).collect();
        let outcomes = sink.write(&batch, Duration::from_secs(30)).await.unwrap();
        let classes: String = outcomes
            .iter()
            .map(|o| match o {
                MessageOutcome::Committed => 'c',
                MessageOutcome::HeldBack => 'h',
                o if o.failed_temporarily() => 't',
                _ => '?',
            })
            .collect();
        // 3 failed: the odd key's later messages (5, 7, 9) are held back, in its chunk and after.
        assert_eq!(classes, "cctchchchc");
    }
}
