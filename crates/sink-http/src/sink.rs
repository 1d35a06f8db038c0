//! [`HttpSink`]: sends each message (or each batch of envelopes) to one fixed endpoint and
//! reports per-message outcomes from the endpoint's answers.
//!
//! One `reqwest` client serves every write: a keep-alive pool, HTTP/1.1 and HTTP/2, rustls
//! (aws-lc-rs) with an optional CA bundle and client certificate, no proxy, and redirects
//! never followed. A write goes through three steps:
//! 1. **prepare**: each message's key and body are built (pure, `request.rs`); a message
//!    without a required key, with a payload the mode refuses or with a body over
//!    `max_request_bytes` fails permanently here, alone;
//! 2. **group**: one request per message, or (batch mode) chunks of up to `max_batch_items`
//!    envelopes and `max_request_bytes` bytes, in input order;
//! 3. **send**: up to `max_concurrent_requests` requests in flight. A request waits for the
//!    earlier requests that share an ordering key (the envelope's, from
//!    `delivery.ordering_key`: the subject by default, nothing with `none`) and is held back
//!    when one of them failed temporarily, so an endpoint never sees messages of one key
//!    overtake each other. A temporary failure is retried in place (same idempotency key)
//!    while the wait is short and the write's budget allows, else handed back with the wait
//!    it needs (`Retry-After` included) for a delayed redelivery.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, USER_AGENT};
use reqwest::{Method, Url};
use sinks_contract::existing::{self, KeyBasis, OnExisting, Stored};
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, IdempotencyKey, MessageOutcome,
    Presence, ReadBack, Sink, SinkError,
};
use sinks_toolkit::in_order::{self, Finished, Ran};
use sinks_toolkit::retry::{Attempt, Backoff, Budget, InPlace, Retriable};
use time::OffsetDateTime;

use crate::answers::{self, Answers, Settled};
use crate::config::{BatchMode, HttpSinkConfig, HttpVersion};
use crate::error::{classify, error_of_class, kind_of, status_error};
use crate::request::{self, StatusClass, StatusSets};

/// Delivers envelopes to one HTTP endpoint, idempotently.
#[derive(Debug, Clone)]
pub struct HttpSink {
    inner: Arc<Inner>,
}

struct Inner {
    config: HttpSinkConfig,
    client: reqwest::Client,
    url: Url,
    method: Method,
    health_url: Option<Url>,
    /// Accept, User-Agent and the static `headers`.
    base_headers: HeaderMap,
    /// `headers_env`: header and the variable holding its value.
    env_headers: Vec<(HeaderName, String)>,
    key_header: HeaderName,
    /// `response_id_header`, reported in ledger receipts.
    response_id_header: Option<HeaderName>,
    /// `inquiry_fingerprint_header`, read by reconcile.
    fingerprint_header: Option<HeaderName>,
    statuses: StatusSets,
    /// In-place retries: temporary failures only (`retry.*`).
    retry: InPlace,
    /// How recent messages were answered, for [`sinks_contract::Destinations::destination`]; kept only once
    /// [`sinks_contract::Destinations::enable`] was called (the delivery ledger is on).
    answers: Answers,
    reporting: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("url", &self.url.as_str())
            .field("method", &self.method)
            .field("batch_mode", &self.config.batch_mode)
            .field("max_concurrent_requests", &self.config.max_concurrent_requests)
            .finish_non_exhaustive()
    }
}

/// A message ready to be sent.
#[derive(Debug)]
struct Ready {
    index: usize,
    key: Option<IdempotencyKey>,
    body: Vec<u8>,
}

/// What one request did to its messages.
#[derive(Debug)]
enum UnitResult {
    /// One outcome per message of the request: `(input index, outcome)`.
    PerItem(Vec<(usize, MessageOutcome)>),
    /// A batch request (several envelopes) refused permanently: nothing says which
    /// envelope was bad, so the whole write fails and the runner bisects.
    BatchRejected(SinkError),
}

impl UnitResult {
    /// True when a later request sharing an ordering key must not overtake this one.
    fn failed_temporarily(&self) -> bool {
        match self {
            Self::PerItem(items) => {
                items.iter().any(|(_, o)| matches!(o, MessageOutcome::Failed(e) if !e.is_permanent()))
            }
            Self::BatchRejected(_) => false,
        }
    }
}

/// The same outcome for every message of a request.
fn all(items: &[Ready], outcome: &dyn Fn() -> MessageOutcome) -> UnitResult {
    UnitResult::PerItem(items.iter().map(|r| (r.index, outcome())).collect())
}

/// What a message's idempotency key is made of (no key: the publisher's, as nothing is
/// compared without one).
fn basis_of(key: Option<&IdempotencyKey>) -> KeyBasis {
    key.map_or(KeyBasis::Publisher, KeyBasis::of_key)
}

/// The outcome of a conflict status (the endpoint holds other content under the message's
/// key) for `envelope`, whose key is made of `basis` (`sinks_contract::existing`, logged):
/// under stream-sequence keys the sequence was used again by another event, which is
/// refused (`sequence_reused`, never acknowledged); under message id or payload keys the
/// endpoint's record is kept and the message acknowledged as a conflict.
fn conflict(envelope: &Envelope, basis: KeyBasis, status: u16) -> MessageOutcome {
    tracing::debug!(subject = envelope.subject(), status, "the endpoint answered a conflict status");
    existing::decide(OnExisting::Keep, envelope, basis, Stored::Different, "http endpoint key")
}

/// The answer to one request: status, the delay `Retry-After` asked for, and the response
/// id header's value.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    retry_after: Option<Duration>,
    response_id: Option<String>,
}

impl Answer {
    fn settled(&self) -> Settled {
        Settled { status: self.status, response_id: self.response_id.clone() }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
enum SendError {
    /// The request could not be formed (a `headers_env` variable is missing, ...).
    Setup(SinkError),
    /// The client failed (connect, timeout, reset, ...).
    Http(reqwest::Error),
}

/// What an inquiry found out about a key.
#[derive(Debug)]
enum Inquiry {
    Found,
    NotFound,
    Unknown(SinkError),
}

impl HttpSink {
    /// A sink for a validated `config`: builds the client (reading the CA bundle and client
    /// certificate files). Makes no network call; [`Sink::open`] checks `headers_env`.
    pub fn new(config: HttpSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let url = Url::parse(&config.url).map_err(|e| ConfigError::single("sink.url", e.to_string()))?;
        let health_url = match &config.health_url {
            Some(u) => Some(Url::parse(u).map_err(|e| ConfigError::single("sink.health_url", e.to_string()))?),
            None => None,
        };
        let method = Method::from_bytes(config.method.as_str().as_bytes())
            .map_err(|e| ConfigError::single("sink.method", e.to_string()))?;
        let mut base_headers = HeaderMap::new();
        base_headers.insert(ACCEPT, HeaderValue::from_static(request::CONTENT_TYPE_JSON));
        base_headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&config.user_agent)
                .map_err(|e| ConfigError::single("sink.user_agent", e.to_string()))?,
        );
        for (name, value) in &config.headers {
            let path = format!("sink.headers.{name}");
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| ConfigError::single(&path, e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| ConfigError::single(&path, e.to_string()))?;
            base_headers.insert(name, value);
        }
        let mut env_headers = Vec::new();
        for (name, variable) in &config.headers_env {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| ConfigError::single(format!("sink.headers_env.{name}"), e.to_string()))?;
            env_headers.push((header, variable.clone()));
        }
        let key_header = HeaderName::from_bytes(config.idempotency.header.as_bytes())
            .map_err(|e| ConfigError::single("sink.idempotency.header", e.to_string()))?;
        let optional_header = |name: &Option<String>, field: &str| match name {
            Some(name) => {
                HeaderName::from_bytes(name.as_bytes()).map(Some).map_err(|e| ConfigError::single(field, e.to_string()))
            }
            None => Ok(None),
        };
        let response_id_header = optional_header(&config.response_id_header, "sink.response_id_header")?;
        let fingerprint_header =
            optional_header(&config.inquiry_fingerprint_header, "sink.inquiry_fingerprint_header")?;
        let r = &config.retry;
        let backoff = Backoff {
            base: Duration::from_millis(r.backoff_ms),
            max: Duration::from_millis(r.max_backoff_ms),
            mode: r.backoff_mode,
            multiplier: r.backoff_multiplier,
            jitter: r.jitter,
        };
        let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
        let retry = InPlace::new(backoff, r.max_retries, timeout).retrying(Retriable::TemporaryOnly);
        let client = build_client(&config)?;
        let statuses = StatusSets::of(&config);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                client,
                url,
                method,
                health_url,
                base_headers,
                env_headers,
                key_header,
                response_id_header,
                fingerprint_header,
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

/// The client: pool, versions, timeouts, TLS roots and identity, no redirects, no proxy.
fn build_client(config: &HttpSinkConfig) -> Result<reqwest::Client, ConfigError> {
    let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(config.pool_max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(config.pool_idle_timeout_seconds))
        .tcp_nodelay(true)
        .https_only(!config.allow_http_for_local_testing);
    builder = match config.http_version {
        HttpVersion::Auto => builder,
        HttpVersion::Http1Only => builder.http1_only(),
        HttpVersion::Http2PriorKnowledge => builder.http2_prior_knowledge(),
    };
    if let Some(file) = &config.tls_ca_file {
        let pem = read_file(file, "sink.tls_ca_file")?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ConfigError::single("sink.tls_ca_file", format!("is not a PEM certificate bundle ({e})")))?;
        if certs.is_empty() {
            return Err(ConfigError::single("sink.tls_ca_file", "holds no certificate"));
        }
        builder = if config.tls_ca_only { builder.tls_certs_only(certs) } else { builder.tls_certs_merge(certs) };
    }
    if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) {
        let mut pem = read_file(cert, "sink.tls_cert_file")?;
        pem.push(b'\n');
        pem.extend(read_file(key, "sink.tls_key_file")?);
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            ConfigError::single("sink.tls_cert_file", format!("cannot use the client certificate and key ({e})"))
        })?;
        builder = builder.identity(identity);
    }
    builder.build().map_err(|e| ConfigError::single("sink", format!("cannot build the HTTP client ({e})")))
}

fn read_file(path: &Path, field: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::single(field, format!("cannot read {} ({e})", path.display())))
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
        Capabilities::new()
            .atomic_batch(!single)
            .reports_duplicates(single && keyed && !c.duplicate_statuses.is_empty())
            .detects_conflicts(single && keyed && !c.conflict_statuses.is_empty())
    }

    async fn open(&self) -> Result<(), SinkError> {
        // Fail start-up on a missing secret instead of at the first write; no network call.
        self.inner.add_env_headers(&mut HeaderMap::new())?;
        tracing::info!(url = %self.inner.url, batch_mode = ?self.inner.config.batch_mode, "http sink ready");
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
        for (index, envelope) in batch.iter().enumerate() {
            match inner.prepare(index, envelope, sent_at) {
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
        let units = match inner.config.batch_mode {
            BatchMode::Off => ready.into_iter().map(|r| vec![r]).collect(),
            mode => inner.chunks(ready, mode),
        };
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
        let (method, url) = match &inner.health_url {
            Some(url) => (Method::GET, url),
            None => (Method::OPTIONS, &inner.url),
        };
        let answer = inner.send(method, url, None, (None, None), request::CONTENT_TYPE_JSON, None).await.map_err(
            |e| match e {
                SendError::Setup(e) => e,
                SendError::Http(e) => {
                    let kind = kind_of(&e);
                    error_of_class(kind.class, format!("health check failed: {}", kind.what)).with_source(e)
                }
            },
        )?;
        let healthy = match inner.health_url {
            Some(_) => (200..300).contains(&answer.status) || inner.statuses.success.contains(&answer.status),
            None => request::options_answer_is_live(answer.status),
        };
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

#[async_trait]
impl ReadBack for HttpSink {
    fn checks(&self) -> String {
        let c = &self.inner.config;
        format!(
            "GET sink.inquiry_url per idempotency key ({} in parallel): 404 is missing, a 2xx is compared by \
             payload fingerprint ({})",
            c.max_concurrent_requests,
            match &c.inquiry_fingerprint_header {
                Some(h) => format!("the `{h}` header, else the returned document's payload"),
                None => "the returned document's payload".to_owned(),
            }
        )
    }

    /// One inquiry per envelope, up to `max_concurrent_requests` in flight, in input order.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let Some(template) = inner.config.inquiry_url.as_deref() else {
            return Err(SinkError::config("the http sink needs sink.inquiry_url to read its endpoint back"));
        };
        let mut checks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let check: std::pin::Pin<Box<dyn Future<Output = Result<Presence, SinkError>> + Send + '_>> =
                Box::pin(inner.presence(template, envelope));
            checks.push(check);
        }
        futures::stream::iter(checks).buffered(inner.config.max_concurrent_requests.max(1)).try_collect().await
    }
}

impl Inner {
    /// The key and body of one message; a permanent failure when it can never be sent.
    fn prepare(&self, index: usize, envelope: &Envelope, sent_at: OffsetDateTime) -> Result<Ready, SinkError> {
        let key = request::idempotency_key(envelope, &self.config.idempotency).map_err(|e| {
            SinkError::permanent(format!("no idempotency key for a required sink.idempotency: {e}"))
                .with_error_type("ValidationError")
        })?;
        let mut body = request::message_body(envelope, &self.config, key.as_ref(), sent_at).map_err(|e| {
            let error_type = match e {
                request::RequestError::Payload(_) | request::RequestError::Encode(_) => "SerializationError",
                request::RequestError::TooLarge { .. } => "PermanentSinkError",
                request::RequestError::Origin(_) => "ValidationError",
            };
            SinkError::permanent(format!("cannot build the request body: {e}")).with_error_type(error_type)
        })?;
        if self.config.batch_mode != BatchMode::Off {
            // A lone item must also fit with the batch framing around it.
            let framed = body.len() + request::batch_overhead(self.config.batch_mode) + request::BATCH_SEPARATOR_LEN;
            if framed as u64 > self.config.max_request_bytes {
                return Err(SinkError::permanent(format!(
                    "cannot build the request body: batch request of {framed} bytes exceeds sink.max_request_bytes ({})",
                    self.config.max_request_bytes
                )));
            }
        }
        body.shrink_to_fit();
        Ok(Ready { index, key, body })
    }

    /// Batch mode: consecutive chunks of at most `max_batch_items` envelopes and
    /// `max_request_bytes` bytes, in input order.
    fn chunks(&self, ready: Vec<Ready>, mode: BatchMode) -> Vec<Vec<Ready>> {
        let max_items = self.config.max_batch_items;
        let max_bytes = usize::try_from(self.config.max_request_bytes).unwrap_or(usize::MAX);
        let mut chunks = Vec::new();
        let mut current: Vec<Ready> = Vec::new();
        let mut size = request::batch_overhead(mode);
        for r in ready {
            let cost = r.body.len() + request::BATCH_SEPARATOR_LEN;
            if !current.is_empty() && (current.len() >= max_items || size + cost > max_bytes) {
                chunks.push(std::mem::take(&mut current));
                size = request::batch_overhead(mode);
            }
            size += cost;
            current.push(r);
        }
        if !current.is_empty() {
            chunks.push(current);
        }
        chunks
    }

    /// Sends every unit, at most `max_concurrent_requests` at once, in the order of the
    /// envelopes' ordering keys (see [`sinks_contract::ordering`]); a unit behind a temporary
    /// failure of one of its keys is held back. Results come back in unit order.
    async fn run(&self, batch: &[Envelope], units: Vec<Vec<Ready>>, deadline: Instant) -> Vec<UnitResult> {
        let indices: Vec<Vec<usize>> = units.iter().map(|items| items.iter().map(|r| r.index).collect()).collect();
        let keyed = units
            .into_iter()
            .map(|items| {
                let keys = items.iter().filter_map(|r| batch[r.index].order_key()).collect();
                (keys, items)
            })
            .collect();
        let ran = in_order::run_in_order(keyed, self.config.max_concurrent_requests, |items: Vec<Ready>| async move {
            let result = if items.len() == 1 && self.config.batch_mode == BatchMode::Off {
                match items.into_iter().next() {
                    Some(r) => UnitResult::PerItem(vec![(
                        r.index,
                        self.send_message(&batch[r.index], r.key, r.body, deadline).await,
                    )]),
                    None => UnitResult::PerItem(Vec::new()),
                }
            } else {
                self.send_batch(batch, items, deadline).await
            };
            Finished { failed_temporarily: result.failed_temporarily(), result }
        })
        .await;
        ran.into_iter()
            .zip(indices)
            .map(|(ran, indices)| match ran {
                Ran::Done(result) => result,
                Ran::HeldBack => {
                    UnitResult::PerItem(indices.into_iter().map(|i| (i, MessageOutcome::HeldBack)).collect())
                }
            })
            .collect()
    }

    /// One message, with in-place retries (`sinks_toolkit::retry::InPlace`: temporary
    /// failures only, the same idempotency key, each retry's timeout within the write's
    /// budget) and the inquiry after an ambiguous timeout.
    async fn send_message(
        &self,
        envelope: &Envelope,
        key: Option<IdempotencyKey>,
        body: Vec<u8>,
        deadline: Instant,
    ) -> MessageOutcome {
        let body = Bytes::from(body);
        let basis = basis_of(key.as_ref());
        let key = key.as_ref().map(IdempotencyKey::as_str);
        // One inquiry per message, whichever attempt timed out first.
        let inquired = AtomicBool::new(false);
        let attempt = |attempt| self.attempt_message(envelope, (key, basis), &body, attempt, &inquired);
        self.retry.write("http request", envelope, deadline, attempt).await
    }

    /// One attempt of one message: the outcome the endpoint's answer decides, or the failure
    /// (for the retry loop to judge). A timeout that may have committed is inquired about
    /// once: found is a duplicate, not found is sent again at once.
    async fn attempt_message(
        &self,
        envelope: &Envelope,
        (key, basis): (Option<&str>, KeyBasis),
        body: &Bytes,
        attempt: Attempt,
        inquired: &AtomicBool,
    ) -> Result<MessageOutcome, SinkError> {
        loop {
            let sent = self
                .send(
                    self.method.clone(),
                    &self.url,
                    Some(body.clone()),
                    (key, Some(envelope)),
                    request::CONTENT_TYPE_JSON,
                    attempt.timeout(),
                )
                .await;
            let err = match sent {
                Ok(answer) => return self.answered(envelope, (key, basis), &answer),
                Err(SendError::Setup(e)) => return Err(e),
                Err(SendError::Http(err)) => err,
            };
            let (Some(template), Some(key)) = (&self.config.inquiry_url, key) else { return Err(classify(err)) };
            if !kind_of(&err).ambiguous || inquired.swap(true, Ordering::Relaxed) {
                return Err(classify(err));
            }
            match self.inquire(template, key).await {
                Inquiry::Found => {
                    tracing::debug!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        "timed out, but the endpoint has the key: duplicate"
                    );
                    return Ok(MessageOutcome::Duplicate);
                }
                Inquiry::NotFound => {
                    tracing::debug!(
                        subject = envelope.subject(),
                        stream_sequence = envelope.jetstream().stream_sequence,
                        "timed out and the endpoint lacks the key: sending again"
                    );
                }
                Inquiry::Unknown(e) => return Err(e),
            }
        }
    }

    /// What the endpoint's answer to one message (its key, and what that key is made of)
    /// means.
    fn answered(
        &self,
        envelope: &Envelope,
        (key, basis): (Option<&str>, KeyBasis),
        answer: &Answer,
    ) -> Result<MessageOutcome, SinkError> {
        let outcome = match request::classify_status(answer.status, &self.statuses, key.is_some()) {
            StatusClass::Success => MessageOutcome::Committed,
            StatusClass::Duplicate => MessageOutcome::Duplicate,
            StatusClass::Conflict => conflict(envelope, basis, answer.status),
            class => match status_error(class, answer.status, answer.retry_after) {
                // A refusal is logged with the failure it becomes (`InPlace::write`).
                Some(e) => return Err(e),
                None => MessageOutcome::Committed,
            },
        };
        self.remember(envelope, answer);
        Ok(outcome)
    }

    /// Keeps the answer that settled `envelope` for [`sinks_contract::Destinations::destination`], when it will be
    /// asked.
    fn remember(&self, envelope: &Envelope, answer: &Answer) {
        if self.reporting.load(Ordering::Relaxed) {
            self.answers.record(envelope, answer.settled());
        }
    }

    /// Several envelopes in one request: the answer applies to all of them.
    async fn send_batch(&self, batch: &[Envelope], items: Vec<Ready>, deadline: Instant) -> UnitResult {
        let keys: Option<Vec<&str>> = items.iter().map(|r| r.key.as_ref().map(IdempotencyKey::as_str)).collect();
        let key = keys.map(request::batch_key);
        let key = key.as_ref().map(IdempotencyKey::as_str);
        let body = Bytes::from(request::batch_body(items.iter().map(|r| r.body.as_slice()), self.config.batch_mode));
        let attempt = |attempt| self.attempt_batch(batch, &items, key, &body, attempt);
        match self.retry.run("http batch request", Budget::Until(deadline), attempt).await {
            Ok(result) => result,
            Err(failure) => {
                tracing::debug!(messages = items.len(), error = %failure.display_chain(), "batch request failed");
                all(&items, &|| MessageOutcome::Failed(failure.duplicate()))
            }
        }
    }

    /// One attempt of a batch request: what the answer decides for all its envelopes, or the
    /// failure (for the retry loop to judge).
    async fn attempt_batch(
        &self,
        batch: &[Envelope],
        items: &[Ready],
        key: Option<&str>,
        body: &Bytes,
        attempt: Attempt,
    ) -> Result<UnitResult, SinkError> {
        let content_type = match self.config.batch_mode {
            BatchMode::Ndjson => request::CONTENT_TYPE_NDJSON,
            _ => request::CONTENT_TYPE_JSON,
        };
        let sent = self
            .send(self.method.clone(), &self.url, Some(body.clone()), (key, None), content_type, attempt.timeout())
            .await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(SendError::Setup(e)) => return Err(e),
            Err(SendError::Http(err)) => return Err(classify(err)),
        };
        let outcome: fn() -> MessageOutcome =
            match request::classify_status(answer.status, &self.statuses, key.is_some()) {
                StatusClass::Success => || MessageOutcome::Committed,
                StatusClass::Duplicate => || MessageOutcome::Duplicate,
                StatusClass::Conflict => {
                    // The batch key holds other content: every item is judged by its own key
                    // (under stream-sequence keys, a reused sequence is never acknowledged).
                    for r in items {
                        self.remember(&batch[r.index], &answer);
                    }
                    let judged = items
                        .iter()
                        .map(|r| (r.index, conflict(&batch[r.index], basis_of(r.key.as_ref()), answer.status)))
                        .collect();
                    return Ok(UnitResult::PerItem(judged));
                }
                class => match status_error(class, answer.status, answer.retry_after) {
                    // Nothing says which envelope was bad: the whole write fails and the runner
                    // bisects (one envelope alone is that envelope's failure).
                    Some(e) if e.is_permanent() && items.len() > 1 => return Ok(UnitResult::BatchRejected(e)),
                    Some(e) => return Err(e),
                    None => || MessageOutcome::Committed,
                },
            };
        for r in items {
            self.remember(&batch[r.index], &answer);
        }
        Ok(all(items, &outcome))
    }

    /// Asks `inquiry_url` whether `key` was committed.
    async fn inquire(&self, template: &str, key: &str) -> Inquiry {
        let unknown = |e: SinkError| {
            Inquiry::Unknown(
                SinkError::temporary(
                    "request timed out and the inquiry could not tell whether the endpoint committed it",
                )
                .with_source(e),
            )
        };
        let url = match Url::parse(&request::inquiry_url(template, key)) {
            Ok(url) => url,
            Err(e) => return unknown(SinkError::config(format!("sink.inquiry_url does not form a URL ({e})"))),
        };
        match self.send(Method::GET, &url, None, (None, None), request::CONTENT_TYPE_JSON, None).await {
            Ok(answer) if (200..300).contains(&answer.status) => Inquiry::Found,
            Ok(answer) if answer.status == 404 => Inquiry::NotFound,
            Ok(answer) => unknown(SinkError::temporary(format!("inquiry answered {}", answer.status))),
            Err(SendError::Setup(e)) => unknown(e),
            Err(SendError::Http(e)) => unknown(classify(e)),
        }
    }

    /// Adds the `headers_env` headers, read from the environment now. Values are marked
    /// sensitive and never logged.
    fn add_env_headers(&self, headers: &mut HeaderMap) -> Result<(), SinkError> {
        for (name, variable) in &self.env_headers {
            let problem = match std::env::var(variable) {
                Err(_) => "is not set",
                Ok(v) if v.trim().is_empty() => "is empty",
                Ok(v) if v != v.trim() => "has leading or trailing whitespace",
                Ok(v) => match HeaderValue::from_str(&v) {
                    Ok(mut value) if !v.chars().any(char::is_control) => {
                        value.set_sensitive(true);
                        headers.insert(name.clone(), value);
                        continue;
                    }
                    _ => "is not a valid header value",
                },
            };
            return Err(SinkError::config(format!("the environment variable of sink.headers_env.{name} {problem}")));
        }
        Ok(())
    }

    /// Sends one request and reads at most `max_response_bytes` of the answer's body.
    async fn send(
        &self,
        method: Method,
        url: &Url,
        body: Option<Bytes>,
        (key, attempt_of): (Option<&str>, Option<&Envelope>),
        content_type: &'static str,
        timeout: Option<Duration>,
    ) -> Result<Answer, SendError> {
        let mut headers = self.base_headers.clone();
        self.add_env_headers(&mut headers).map_err(SendError::Setup)?;
        if let Some(envelope) = attempt_of {
            let values = request::attempt_header_values(envelope, OffsetDateTime::now_utc());
            for (name, value) in request::ATTEMPT_HEADERS.iter().zip(values) {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(*name, value);
                }
            }
        }
        if let Some(key) = key {
            let value = HeaderValue::from_str(&request::header_value(key)).map_err(|e| {
                SendError::Setup(SinkError::permanent("idempotency key is not a header value").with_source(e))
            })?;
            headers.insert(self.key_header.clone(), value);
        }
        let mut builder = self.client.request(method, url.clone());
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(body) = body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            builder = builder.body(body);
        }
        let mut response = builder.headers(headers).send().await.map_err(SendError::Http)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| request::parse_retry_after(v, SystemTime::now()));
        let response_id = self
            .response_id_header
            .as_ref()
            .and_then(|name| response.headers().get(name))
            .and_then(|v| answers::response_id(v.as_bytes()));
        let mut left = usize::try_from(self.config.max_response_bytes).unwrap_or(usize::MAX);
        while left > 0 {
            match response.chunk().await {
                Ok(Some(chunk)) => left = left.saturating_sub(chunk.len()),
                Ok(None) => break,
                Err(e) => {
                    // The status already decided; a broken body only costs the connection.
                    tracing::debug!(status, error = %e, "cannot read the answer body");
                    break;
                }
            }
        }
        Ok(Answer { status, retry_after, response_id })
    }

    /// Whether `envelope` is stored at the endpoint with the same payload, per
    /// `inquiry_url` (reconcile; reads only). A message without a key cannot be asked about
    /// and is reported missing (only possible with `idempotency.required = false`).
    async fn presence(&self, template: &str, envelope: &Envelope) -> Result<Presence, SinkError> {
        let Ok(Some(key)) = request::idempotency_key(envelope, &self.config.idempotency) else {
            return Ok(Presence::Missing);
        };
        let url = Url::parse(&request::inquiry_url(template, key.as_str()))
            .map_err(|e| SinkError::config(format!("sink.inquiry_url does not form a URL ({e})")))?;
        let mut headers = self.base_headers.clone();
        self.add_env_headers(&mut headers)?;
        let mut response = self.client.get(url).headers(headers).send().await.map_err(|e| {
            let kind = kind_of(&e);
            error_of_class(kind.class, format!("inquiry failed: {}", kind.what)).with_source(e)
        })?;
        let status = response.status().as_u16();
        if status == 404 {
            return Ok(Presence::Missing);
        }
        if !(200..300).contains(&status) {
            tracing::warn!(
                status,
                stream_sequence = envelope.jetstream().stream_sequence,
                "inquiry answered an unexpected status"
            );
            return Err(SinkError::temporary(format!("inquiry answered {status}")));
        }
        let expected = request::sha256_hex(envelope.payload());
        if let Some(stored) =
            self.fingerprint_header.as_ref().and_then(|name| response.headers().get(name)).and_then(|v| v.to_str().ok())
        {
            let same = stored.trim().eq_ignore_ascii_case(&expected);
            return Ok(if same { Presence::Equal } else { Presence::Different });
        }
        // The body decides: read it whole (up to max_response_bytes; a cut body differs).
        let limit = usize::try_from(self.config.max_response_bytes).unwrap_or(usize::MAX);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(classify)? {
            if body.len() + chunk.len() > limit {
                tracing::warn!(
                    stream_sequence = envelope.jetstream().stream_sequence,
                    max_response_bytes = self.config.max_response_bytes,
                    "inquiry answer too large to compare"
                );
                return Ok(Presence::Different);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(request::stored_presence(&body, &expected))
    }
}
