//! [`CoherenceSink`]: writes one cache entry per message through the Coherence gRPC proxy
//! and reports per-message outcomes.
//!
//! A write goes through three steps:
//! 1. **prepare** (pure, `entry.rs`): the key, the value document and the payload
//!    fingerprint of each message; a message without the identity its key needs, with a
//!    payload the mode refuses, or over a size limit fails permanently here, alone;
//! 2. **order**: each message is keyed by its envelope's ordering key (from
//!    `delivery.ordering_key`) and by its entry key: messages sharing either are written one
//!    after another, in input order, and one behind a temporary failure is held back (see
//!    `sinks_contract::ordering`). The entry key is the destination's own requirement (one
//!    writer per key at a time), not an order of its own;
//! 3. **put**: up to `max_concurrent_requests` requests in flight on one gRPC stream. A
//!    temporary failure is retried in place while the wait is short and the write's budget
//!    allows, else handed back with the wait it needs for a delayed redelivery.
//!
//! `skip_existing` and `fail_existing` use `putIfAbsent`, which answers with the entry that
//! was already there: its `payload_info.sha256` against the message's decides duplicate
//! (same payload) or conflict (kept, or rejected for `fail_existing`). `replace` uses `put`.
//! The proxy ignores an expiry on `putIfAbsent`, so with `ttl_seconds` an inserted entry is
//! put once more, unchanged, with its expiry.
//! Success means the proxy answered the put: the owning member has the entry and, with
//! backups configured, the backup member too; with active persistence it is on disk.
//!
//! `nats-sink reconcile` reads entries back with one `get` per message, up to
//! `max_concurrent_requests` in flight (pipelined on the v1 streams, or concurrent legacy
//! calls); `entry::presence` compares what it finds. Nothing is written.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use sinks_contract::existing;
use sinks_contract::ordering::OrderKey;
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, MessageOutcome, Presence, ReadBack,
    Sink, SinkError,
};
use sinks_toolkit::in_order;
use sinks_toolkit::retry::InPlace;
use time::OffsetDateTime;

use crate::client::Client;
use crate::config::CoherenceSinkConfig;
use crate::entry::{self, Prepared};
use crate::error::{CohError, Stage, classify, classify_at_open};

/// Wait between start-up attempts while `ready_timeout_seconds` lasts.
const READY_POLL: Duration = Duration::from_millis(500);

/// Delivers envelopes to a Coherence cache, one entry per message.
#[derive(Debug, Clone)]
pub struct CoherenceSink {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<CoherenceSinkConfig>,
    client: OnceLock<Client>,
    retry: InPlace,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoherenceSink")
            .field("address", &self.config.address)
            .field("cache_name", &self.config.cache_name)
            .field("duplicate_policy", &self.config.duplicate_policy)
            .finish_non_exhaustive()
    }
}

impl CoherenceSink {
    /// A sink for a validated config (nothing is connected until `open` or the first write).
    pub fn new(config: CoherenceSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let retry = config.in_place();
        Ok(Self { inner: Arc::new(Inner { config: Arc::new(config), client: OnceLock::new(), retry }) })
    }

    /// The configuration in use.
    pub fn config(&self) -> &CoherenceSinkConfig {
        &self.inner.config
    }

    /// The gRPC protocol in use (`v1` or `legacy`), once decided by `open` or a write.
    pub fn protocol(&self) -> Option<&'static str> {
        let client = self.inner.client.get()?;
        client.protocol_if_known().map(crate::client::Chosen::as_str)
    }
}

#[async_trait]
impl Sink for CoherenceSink {
    fn name(&self) -> &str {
        "coherence"
    }

    fn capabilities(&self) -> Capabilities {
        let config = &self.inner.config;
        let basis = entry::strategy_basis(config.key_strategy);
        let conditional = existing::conditional(config.duplicate_policy.on_existing(), basis);
        Capabilities::new().atomic_batch(false).reports_duplicates(conditional).detects_conflicts(conditional)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        let client = inner.client().map_err(|e| classify_at_open(&e))?;
        let deadline = Instant::now() + Duration::from_secs_f64(inner.config.ready_timeout_seconds);
        let size = loop {
            match client.size().await {
                Ok(size) => break size,
                Err(e) => {
                    let error = classify_at_open(&e);
                    if error.class() == sinks_contract::ErrorClass::Config || Instant::now() + READY_POLL > deadline {
                        return Err(error);
                    }
                    tracing::debug!(error = %error, "coherence proxy not ready yet");
                    tokio::time::sleep(READY_POLL).await;
                }
            }
        };
        let info = client.proxy_info().unwrap_or_default();
        let protocol = client.protocol_if_known().map_or("unknown", crate::client::Chosen::as_str);
        tracing::info!(
            address = %inner.config.address,
            scope = %inner.config.scope,
            cache_name = %inner.config.cache_name,
            storage = ?inner.config.storage,
            protocol,
            proxy_version = %info.version,
            proxy_member_id = info.member_id,
            entries = size,
            duplicate_policy = inner.config.duplicate_policy.as_str(),
            backup_count = "not exposed by the gRPC proxy (operator-confirmed durability)",
            "coherence sink ready"
        );
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + budget;
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let prepare = |envelope: &Envelope| {
            entry::prepare(envelope, &inner.config, stored_at)
                .map(|prepared| (OrderKey::of(&[b"coherence-key", prepared.key.as_bytes()]), prepared))
        };
        let write = |envelope, prepared| async move { inner.write_one(envelope, prepared, deadline).await };
        let limit = inner.config.max_concurrent_requests;
        let outcomes = in_order::write_each("coherence entry", batch, limit, prepare, write).await;
        sinks_contract::sink::log_outcomes("coherence", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let client = self.inner.client().map_err(|e| classify(Stage::Read, &e))?;
        client.size().await.map(drop).map_err(|e| classify(Stage::Read, &e))
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }
}

impl Destinations for CoherenceSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let key = entry::entry_key(envelope, &self.inner.config).ok()?;
        Some(DestinationRef::Cache { cache: self.inner.config.cache_name.clone(), key })
    }
}

#[async_trait]
impl ReadBack for CoherenceSink {
    fn checks(&self) -> String {
        format!(
            "get of each entry key ({} in flight): missing, or the stored document's payload_info.sha256 and the \
             payload it holds (payload_exact, or the decoded envelope) compared with the message's",
            self.inner.config.max_concurrent_requests
        )
    }

    /// One `get` per envelope, up to `max_concurrent_requests` in flight, answers in input
    /// order. Reads only.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let client = inner.client().map_err(|e| classify(Stage::Read, &e))?;
        let mut checks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let check: Pin<Box<dyn Future<Output = Result<Presence, SinkError>> + Send + '_>> = Box::pin(async move {
                // A message without the identity its key needs was never written.
                let Ok(key) = entry::entry_key(envelope, &inner.config) else { return Ok(Presence::Missing) };
                let stored = client.get(entry::wire_key(&key)).await.map_err(|e| classify(Stage::Read, &e))?;
                Ok(entry::presence(envelope, &inner.config, stored.as_deref()))
            });
            checks.push(check);
        }
        futures::stream::iter(checks).buffered(inner.config.max_concurrent_requests.max(1)).try_collect().await
    }
}

impl Inner {
    /// The client, built on first use (TLS files are read then).
    fn client(&self) -> Result<&Client, CohError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = Client::new(Arc::clone(&self.config))?;
        Ok(self.client.get_or_init(|| built))
    }

    fn ttl_ms(&self) -> i64 {
        self.config.ttl_seconds.map_or(0, |s| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX))
    }

    /// One message, retried in place after temporary failures while the wait is short
    /// (≤ `retry_max_backoff_ms`, the proxy's wait included), the attempts last
    /// (`max_retries`) and the write's budget allows; otherwise the failure goes back with the
    /// wait it needs as `retry_after` (`sinks_toolkit::retry::InPlace`).
    async fn write_one(&self, envelope: &Envelope, prepared: Prepared, deadline: Instant) -> MessageOutcome {
        self.retry.write("coherence write", envelope, deadline, |_| self.attempt(envelope, &prepared)).await
    }

    /// One put, and what the entry it found (or replaced) means for this message
    /// (`sinks_contract::existing`).
    async fn attempt(&self, envelope: &Envelope, prepared: &Prepared) -> Result<MessageOutcome, SinkError> {
        let client = self.client().map_err(|e| classify(Stage::Write, &e))?;
        let policy = self.config.duplicate_policy.on_existing();
        let basis = entry::key_basis(envelope, self.config.key_strategy);
        // A replacing policy puts only if absent under stream-sequence keys: it must not
        // overwrite an earlier event before it was compared.
        let conditional = existing::conditional(policy, basis);
        let found = client
            .put(prepared.wire_key.clone(), prepared.wire_value.clone(), conditional, self.ttl_ms())
            .await
            .map_err(|e| classify(Stage::Write, &e))?;
        let Some(found) = found else {
            if conditional && self.config.ttl_seconds.is_some() {
                self.apply_expiry(client, prepared).await;
            }
            return Ok(MessageOutcome::Committed);
        };
        let stored = existing::Stored::compare(entry::stored_fingerprint(&found).as_deref(), &prepared.fingerprint);
        Ok(existing::decide(policy, envelope, basis, stored, "coherence key"))
    }
}

impl Inner {
    /// Coherence's `putIfAbsent` stores no expiry: right after inserting, the same value is
    /// put again with the TTL. The entry is durable either way, so a failure here is logged
    /// and the message still counts as committed (the entry then simply does not expire).
    async fn apply_expiry(&self, client: &Client, prepared: &Prepared) {
        let put = client.put(prepared.wire_key.clone(), prepared.wire_value.clone(), false, self.ttl_ms()).await;
        if let Err(e) = put {
            tracing::warn!(
                error = %classify(Stage::Write, &e),
                "coherence entry stored without its expiry (ttl_seconds): the follow-up put failed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use sinks_toolkit::retry::{Budget, Jitter};

    use super::*;

    /// The sink's own in-place retries (built from its config): no Coherence failure carries
    /// a wait today, so the rules for one are checked here, with paused time.
    async fn attempts(retry: &InPlace, failure: impl Fn() -> SinkError) -> (u32, Result<(), SinkError>, Duration) {
        let started = tokio::time::Instant::now();
        let calls = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let result = retry
            .run("coherence write", Budget::Until(deadline), |_| {
                let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
                let failed = first.then(&failure);
                async move { failed.map_or(Ok(()), Err) }
            })
            .await;
        (calls.into_inner(), result, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn in_place_retries_honour_retry_after_and_the_backoff_maximum() {
        let mut config = CoherenceSinkConfig::new("127.0.0.1:1408", "c");
        config.retry_backoff_ms = 100;
        config.retry_max_backoff_ms = 1000;
        config.retry_jitter = Jitter::None;
        let sink = CoherenceSink::new(config).unwrap();
        let retry = &sink.inner.retry;
        // A wait the failure asks for, within the maximum: spent, then retried.
        let asked = || SinkError::temporary("busy").with_retry_after(Duration::from_millis(600));
        let (calls, result, spent) = attempts(retry, asked).await;
        assert_eq!((calls, spent), (2, Duration::from_millis(600)), "{result:?}");
        // Over the maximum: not retried in place, handed back with the wait it needs.
        let long = || SinkError::temporary("busy").with_retry_after(Duration::from_secs(5));
        let (calls, result, spent) = attempts(retry, long).await;
        assert_eq!((calls, spent), (1, Duration::ZERO));
        assert_eq!(result.unwrap_err().retry_after(), Some(Duration::from_secs(5)));
    }
}
