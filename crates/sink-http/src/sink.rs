//! [`HttpSink`]: sends each message (or each batch of envelopes) to one fixed endpoint and
//! reports per-message outcomes from the endpoint's answers.
//!
//! One `reqwest` client serves every write (`endpoint.rs`: a keep-alive pool, HTTP/1.1 and
//! HTTP/2, rustls (aws-lc-rs) with an optional CA bundle and client certificate, no proxy,
//! and redirects never followed). A write goes through three steps:
//! 1. **prepare** (`plan.rs`): each message's key and body are built (pure, `request.rs`); a
//!    message without a required key, with a payload the mode refuses or with a body over
//!    `max_request_bytes` fails permanently here, alone;
//! 2. **group** (`plan.rs`): one request per message, or (batch mode) chunks of up to
//!    `max_batch_items` envelopes and `max_request_bytes` bytes, in input order;
//! 3. **send** (`deliver.rs`): up to `max_concurrent_requests` requests in flight. A request
//!    waits for the earlier requests that share an ordering key (the envelope's, from
//!    `delivery.ordering_key`: the subject by default, nothing with `none`) and is held back
//!    when one of them failed temporarily, so an endpoint never sees messages of one key
//!    overtake each other. A temporary failure is retried in place (same idempotency key)
//!    while the wait is short and the write's budget allows, else handed back with the wait
//!    it needs (`Retry-After` included) for a delayed redelivery. What each answer means is
//!    `outcome.rs`; reading the endpoint back for reconcile is `reconcile.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::Method;
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, MessageOutcome, ReadBack, Sink,
    SinkError,
};
use time::OffsetDateTime;

use crate::answers::Answers;
use crate::config::{BatchMode, HttpSinkConfig};
use crate::deliver::{self, Inner};
use crate::endpoint::{Endpoint, SendError};
use crate::error::{error_of_class, kind_of};
use crate::outcome::{self, UnitResult};
use crate::plan;
use crate::request::{self, StatusSets};

/// Why an HTTP sink without `inquiry_url` (or without idempotency keys) cannot read back.
const NO_READ_BACK: &str = "it reads its endpoint back only through sink.inquiry_url, with idempotency keys";

/// Delivers envelopes to one HTTP endpoint, idempotently.
#[derive(Debug, Clone)]
pub struct HttpSink {
    pub(crate) inner: Arc<Inner>,
}

impl HttpSink {
    /// A sink for a validated `config`: builds the client (reading the CA bundle and client
    /// certificate files). Makes no network call; [`Sink::open`] checks `headers_env`.
    pub fn new(config: HttpSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let endpoint = Endpoint::new(&config)?;
        let retry = deliver::in_place(&config);
        let statuses = StatusSets::of(&config);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                endpoint,
                statuses,
                retry,
                answers: Answers::default(),
                reporting: AtomicBool::new(false),
            }),
        })
    }

    /// The configuration in effect.
    pub fn config(&self) -> &HttpSinkConfig {
        &self.inner.config
    }
}

#[async_trait]
impl Sink for HttpSink {
    fn name(&self) -> &str {
        "http"
    }

    fn capabilities(&self) -> Capabilities {
        let c = &self.inner.config;
        let single = c.batch_mode == BatchMode::Off;
        let keyed = c.idempotency.enabled;
        let capabilities = Capabilities::new()
            .atomic_batch(!single)
            .reports_duplicates(single && keyed && !c.duplicate_statuses.is_empty())
            .detects_conflicts(single && keyed && !c.conflict_statuses.is_empty());
        if self.read_back().is_some() {
            return capabilities;
        }
        capabilities.read_back_note(NO_READ_BACK)
    }

    async fn open(&self) -> Result<(), SinkError> {
        // Fail start-up on a missing secret instead of at the first write; no network call.
        self.inner.endpoint.plain_headers()?;
        tracing::info!(url = %self.inner.endpoint.url, batch_mode = ?self.inner.config.batch_mode, "http sink ready");
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + budget;
        let inner = &self.inner;
        let sent_at = OffsetDateTime::now_utc();
        let mut outcomes: Vec<Option<MessageOutcome>> = batch.iter().map(|_| None).collect();
        let mut ready = Vec::with_capacity(batch.len());
        let mut size = plan::BodySize::default();
        for (index, envelope) in batch.iter().enumerate() {
            match plan::prepare(index, envelope, &inner.config, sent_at, &mut size) {
                Ok(r) => ready.push(r),
                Err(e) => {
                    tracing::warn!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        error = %e.display_chain(),
                        "message cannot be sent"
                    );
                    outcomes[index] = Some(MessageOutcome::Failed(e));
                }
            }
        }
        let units = plan::units(ready, &inner.config);
        let mut batch_error = None;
        for result in inner.run(batch, units, deadline).await {
            match result {
                UnitResult::PerItem(items) => {
                    for (index, outcome) in items {
                        outcomes[index] = Some(outcome);
                    }
                }
                UnitResult::BatchRejected(e) => {
                    batch_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = batch_error {
            tracing::warn!(messages = batch.len(), error = %e.display_chain(), "endpoint rejected a batch request");
            return Err(e);
        }
        let outcomes: Vec<MessageOutcome> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| MessageOutcome::temporary("message was not sent")))
            .collect();
        sinks_contract::sink::log_outcomes("http", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        let (method, url) = match &inner.endpoint.health_url {
            Some(url) => (Method::GET, url),
            None => (Method::OPTIONS, &inner.endpoint.url),
        };
        let answer =
            inner.endpoint.send(method, url, None, (None, None), request::CONTENT_TYPE_JSON, None).await.map_err(
                |e| match e {
                    SendError::Setup(e) => e,
                    SendError::Http(e) => {
                        let kind = kind_of(&e);
                        error_of_class(kind.class, format!("health check failed: {}", kind.what)).with_source(e)
                    }
                },
            )?;
        let healthy = outcome::healthy(answer.status, inner.endpoint.health_url.is_some(), &inner.statuses);
        if healthy { Ok(()) } else { Err(SinkError::temporary(format!("health check answered {}", answer.status))) }
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        let c = &self.inner.config;
        if c.inquiry_url.is_none() || !c.idempotency.enabled {
            return None;
        }
        Some(self)
    }
}

impl Destinations for HttpSink {
    fn enable(&self) {
        self.inner.reporting.store(true, Ordering::Relaxed);
    }

    /// The endpoint URL (validated to carry no credentials, query or fragment), with the
    /// status of the answer that settled the message and the `response_id_header` value,
    /// while the sink still remembers them (its last 65,536 messages, and only once
    /// [`sinks_contract::Destinations::enable`] was called).
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let settled = self.inner.answers.get(envelope);
        Some(DestinationRef::Http {
            url: self.inner.config.url.clone(),
            status: settled.as_ref().map(|s| s.status),
            response_id: settled.and_then(|s| s.response_id),
        })
    }
}
