//! [`HttpTestServer`]: a real HTTP ingestion endpoint for the HTTP sink's tests,
//! certification and benchmarks.
//!
//! axum on hyper, started in-process on `127.0.0.1:0`, plain or over rustls (aws-lc-rs,
//! optionally requiring a client certificate). It stores one record per idempotency key,
//! answers like an idempotent ingestion API (201 on first write, 409 for the same key and
//! payload, 422 for the same key with another payload), accepts batches (JSON arrays or
//! NDJSON of envelopes, all-or-nothing), names each record in an `X-Record-Id` answer header,
//! answers inquiries at `/records/{key}` (the stored document, with its payload fingerprint in
//! `X-Payload-Sha256`) and health probes at `/health`, logs every request, and can be told to
//! misbehave: fail the next requests with a status (with `Retry-After`), redirect, stall,
//! commit and answer late, drop the connection, answer everything slowly, refuse bodies with
//! a marker, or demand a header.
//!
//! It can also behave as strictly as the standards allow ([`HttpTestServer::set_strict`]):
//! fingerprint each key's whole first body and answer a repeat with another body 422 (the
//! IETF `Idempotency-Key` draft) and the same body with the first answer; lose the answer to
//! the first request of every n-th key after storing it; answer `OPTIONS` with a status of
//! its own (501, as Python's `http.server` does); let its health URL lie; throttle a share of
//! requests, or everything over a rate, with 429 and `Retry-After`; and refuse connections
//! (nothing listens) during an outage ([`HttpTestServer::set_refusing`]).
//!
//! Isolated **namespaces** (`/ns/{name}/ingest`, `/ns/{name}/records/{key}`), each with its
//! own records, refusal marker and required header, are made and read over a side channel
//! (`PUT /_test/ns/{name}`, `GET /_test/ns/{name}/records`), the way a harness gets fresh
//! buckets on an S3 server: the HTTP sink's certification harness uses one shared server
//! ([`shared_http`]) and a namespace per fixture, and never names this type.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

mod strict;

pub use strict::{HealthAnswer, Strict, Throttle};
use strict::{body_fingerprint, throttled};

/// The schema of the HTTP sink's envelope documents (`sink_http`'s `request::SCHEMA`; a test
/// there checks they agree): bodies with it are read as envelopes.
pub const ENVELOPE_SCHEMA: &str = "nats_sinks.http.message.v1";

/// Path the test server ingests at (any path but `/health`, `/records/…`, `/ns/…` and
/// `/_test/…` works).
pub const INGEST_PATH: &str = "/ingest";
/// Answer header naming the record a write created or found (`rec-N`): point the sink's
/// `response_id_header` at it.
pub const RESPONSE_ID_HEADER: &str = "X-Record-Id";
/// Inquiry answer header holding the stored record's payload fingerprint: point the sink's
/// `inquiry_fingerprint_header` at it.
pub const FINGERPRINT_HEADER: &str = "X-Payload-Sha256";
/// Largest request body the test server reads.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// How the test server answers one upcoming write request, instead of storing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpFault {
    /// Answer this status without storing (with the `Retry-After` set by
    /// [`HttpTestServer::set_retry_after`], if any).
    Status(u16),
    /// Answer this status with this `Retry-After` value, without storing.
    StatusRetryAfter(u16, String),
    /// Answer a redirect (`status`, `Location`) without storing.
    Redirect(u16, String),
    /// Close the connection without answering, without storing (with HTTP/2 this ends the
    /// other requests on the connection too).
    Drop,
    /// Wait, then answer 503 without storing: a slow endpoint that gave up.
    Stall(Duration),
    /// Store the record, then wait before answering: committed, answered late.
    CommitThenStall(Duration),
}

/// TLS settings of a [`HttpTestServer`]: its certificate chain and key (PEM), and the CA that
/// client certificates must chain to (mutual TLS), if any.
#[derive(Debug, Clone)]
pub struct HttpServerTls {
    /// Server certificate chain, leaf first (PEM).
    pub cert_chain_pem: String,
    /// Private key of the leaf (PEM).
    pub key_pem: String,
    /// When set, clients must present a certificate issued by this CA (PEM).
    pub client_ca_pem: Option<String>,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// HTTP version of the request.
    pub version: Version,
    /// Request headers.
    pub headers: HeaderMap,
    /// Request body.
    pub body: Bytes,
    /// When the handler started.
    pub started: Instant,
    /// When it answered (`None`: dropped or still running).
    pub finished: Option<Instant>,
    /// Status answered (`None`: dropped or still running).
    pub status: Option<u16>,
}

impl LoggedRequest {
    /// The idempotency key header, percent-decoded.
    pub fn key(&self) -> Option<String> {
        self.headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(|v| percent_decode_str(v).decode_utf8_lossy().into_owned())
    }
}

/// One stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Idempotency key (percent-decoded header, or the envelope's `idempotency_key` for
    /// batch items; `unkeyed:N` without either).
    pub key: String,
    /// The stored document: the envelope, or the payload for `body_format = "payload"`.
    pub body: Bytes,
    /// Record id (`rec-N`), sent in [`RESPONSE_ID_HEADER`].
    pub id: String,
    /// Payload identity used to tell duplicates from conflicts.
    fingerprint: String,
}

/// Knobs and state shared by the handlers.
#[derive(Debug)]
struct Shared {
    records: Mutex<BTreeMap<String, StoredRecord>>,
    /// Named namespaces (`/ns/{name}/…`), made over the side channel.
    spaces: Mutex<HashMap<String, Space>>,
    log: Mutex<Vec<LoggedRequest>>,
    faults: Mutex<VecDeque<HttpFault>>,
    settings: Mutex<Settings>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    unkeyed: AtomicUsize,
    /// Next record id.
    next_id: AtomicUsize,
    connections: AtomicUsize,
    /// Keys already seen by the flaky rule (their first request was answered 503).
    flaky_seen: Mutex<std::collections::HashSet<String>>,
    /// Success answers per key.
    successes: Mutex<BTreeMap<String, usize>>,
    /// Keys whose first answer was lost after the store ([`Strict::lose_answer_every`]).
    lost_seen: Mutex<std::collections::HashSet<String>>,
    /// Answers per status, every write request (see [`HttpTestServer::answers`]).
    answers: Mutex<BTreeMap<u16, usize>>,
    /// Admission times of the rate limit ([`Strict::max_per_second`]), the last second's.
    admitted: Mutex<VecDeque<Instant>>,
    /// Write requests seen, for the throttled share.
    writes_seen: AtomicUsize,
    /// True while nothing listens on the port ([`HttpTestServer::set_refusing`]).
    refusing: watch::Sender<bool>,
}

/// One namespace: its own records, refusal marker and required header.
#[derive(Debug, Default)]
struct Space {
    records: BTreeMap<String, StoredRecord>,
    reject_marker: Option<Vec<u8>>,
    required_header: Option<(String, String)>,
    /// A key's whole first body is its fingerprint ([`Strict::fingerprint_bodies`]).
    fingerprint_bodies: bool,
}

/// The side channel's settings of a namespace (`PUT /_test/ns/{name}`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpaceSettings {
    /// Bodies containing this text are refused with 400.
    #[serde(default)]
    reject_marker: Option<String>,
    /// Writes without this header (name, value) are refused with 401.
    #[serde(default)]
    required_header: Option<(String, String)>,
    /// A repeat of a key with any other body than its first is a conflict (422).
    #[serde(default)]
    fingerprint_bodies: bool,
}

/// Every key whose trailing number is a multiple of `every` fails its first request with
/// 503 (and `Retry-After: retry_after` when set); later requests of the key go through.
#[derive(Debug, Clone)]
struct Flaky {
    every: u64,
    retry_after: Option<String>,
}

#[derive(Debug, Clone)]
struct Settings {
    delay: Duration,
    retry_after: Option<String>,
    reject_marker: Option<Vec<u8>>,
    required_header: Option<(String, String)>,
    success_status: u16,
    duplicate_status: u16,
    conflict_status: u16,
    log_requests: bool,
    keep_bodies: bool,
    flaky: Option<Flaky>,
    /// Keys whose trailing number is a multiple of this are refused with 503, every time.
    refuse_every: Option<u64>,
    /// An outage: every request, health probes included, is answered 503.
    down: bool,
    /// The strict behaviours.
    strict: Strict,
}

/// Answers 503 to everything while the server plays an outage ([`HttpTestServer::set_down`]).
async fn outage(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (down, health, options) = {
        let settings = lock(&shared.settings);
        (settings.down, settings.strict.health, settings.strict.options_status)
    };
    let probe = request.uri().path() == "/health" || request.uri().path().ends_with("/health");
    match (probe, health) {
        (true, HealthAnswer::AlwaysHealthy) => return (StatusCode::OK, "ok").into_response(),
        (true, HealthAnswer::AlwaysFailing) => return (StatusCode::SERVICE_UNAVAILABLE, "failing").into_response(),
        _ => {}
    }
    if let Some(code) = options.filter(|_| request.method() == Method::OPTIONS) {
        return status(code).into_response();
    }
    if down {
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
    }
    next.run(request).await
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A real HTTP server on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub struct HttpTestServer {
    addr: SocketAddr,
    tls: bool,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

/// Closes one connection when notified (the `Drop` fault).
#[derive(Debug, Clone)]
struct ConnKill(Arc<Notify>);

/// Counts a write request in flight while alive.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl HttpTestServer {
    /// Starts a plain HTTP server (HTTP/1.1 and h2c) on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), None).await
    }

    /// Starts an HTTPS server (HTTP/1.1 and HTTP/2 by ALPN) on `127.0.0.1:0`.
    pub async fn start_tls(tls: HttpServerTls) -> std::io::Result<Self> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), Some(tls)).await
    }

    /// Starts a plain server on a thread of its own, with its own runtime, so it serves for
    /// as long as this process runs, whichever test's runtime asked first (see
    /// [`shared_http`]).
    pub fn start_detached() -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new().name("http-test-server".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let started = Self::start().await;
                let serving = started.is_ok();
                let _ = tx.send(started);
                if serving {
                    std::future::pending::<()>().await;
                }
            });
        })?;
        rx.recv().map_err(std::io::Error::other)?
    }

    /// Starts a server on `addr` (port 0 picks a free one), over TLS when `tls` is given.
    pub async fn start_at(addr: SocketAddr, tls: Option<HttpServerTls>) -> std::io::Result<Self> {
        let acceptor = match tls {
            Some(tls) => Some(TlsAcceptor::from(Arc::new(server_config(&tls)?))),
            None => None,
        };
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            records: Mutex::new(BTreeMap::new()),
            spaces: Mutex::new(HashMap::new()),
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(VecDeque::new()),
            settings: Mutex::new(Settings {
                delay: Duration::ZERO,
                retry_after: None,
                reject_marker: None,
                required_header: None,
                success_status: 201,
                duplicate_status: 409,
                conflict_status: 422,
                log_requests: true,
                keep_bodies: true,
                flaky: None,
                refuse_every: None,
                down: false,
                strict: Strict::default(),
            }),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            unkeyed: AtomicUsize::new(0),
            next_id: AtomicUsize::new(1),
            connections: AtomicUsize::new(0),
            flaky_seen: Mutex::new(std::collections::HashSet::new()),
            successes: Mutex::new(BTreeMap::new()),
            lost_seen: Mutex::new(std::collections::HashSet::new()),
            answers: Mutex::new(BTreeMap::new()),
            admitted: Mutex::new(VecDeque::new()),
            writes_seen: AtomicUsize::new(0),
            refusing: watch::Sender::new(false),
        });
        let app = Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/records/{key}", get(inquiry))
            .route("/ns/{space}/records/{key}", get(inquiry_in))
            .route("/ns/{space}/health", get(|| async { "ok" }))
            .route("/_test/ns/{space}", axum::routing::put(put_space))
            .route("/_test/ns/{space}/records", get(space_records))
            .fallback(write)
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&shared), outage))
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = watch::channel(false);
        let tls = acceptor.is_some();
        tokio::spawn(accept_loop(listener, acceptor, app, Arc::clone(&shared), stopped));
        Ok(Self { addr, tls, shared, stop })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn base_url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The ingest URL.
    pub fn url(&self) -> String {
        format!("{}{INGEST_PATH}", self.base_url())
    }

    /// The inquiry URL template (`…/records/{key}`).
    pub fn inquiry_url(&self) -> String {
        format!("{}/records/{{key}}", self.base_url())
    }

    /// The health URL (`GET` answers 200).
    pub fn health_url(&self) -> String {
        format!("{}/health", self.base_url())
    }

    /// The records of namespace `space` as `(key, payload bytes)` (see
    /// [`HttpTestServer::read_records`]); `None` for an unknown namespace.
    pub fn space_records(&self, space: &str) -> Option<Result<Vec<sinks_certify::Record>, String>> {
        let spaces = lock(&self.shared.spaces);
        let space = spaces.get(space)?;
        Some(space.records.values().map(|r| Ok((r.key.clone(), payload_of(&r.body)?))).collect())
    }

    /// Queues `fault` for the next write request not already claimed by an earlier fault.
    pub fn push(&self, fault: HttpFault) {
        lock(&self.shared.faults).push_back(fault);
    }

    /// Queues `fault` for the next `n` write requests.
    pub fn push_n(&self, n: usize, fault: HttpFault) {
        lock(&self.shared.faults).extend(std::iter::repeat_n(fault, n));
    }

    /// Faults still queued.
    pub fn pending_faults(&self) -> usize {
        lock(&self.shared.faults).len()
    }

    /// Makes the first request of every key whose trailing number (the stream sequence of
    /// `stream-sequence:S:N`) is a multiple of `every` fail with 503, with `Retry-After:
    /// retry_after` when given; the key's later requests are handled normally. `None` turns
    /// it off.
    pub fn set_flaky_every(&self, every: Option<u64>, retry_after: Option<&str>) {
        lock(&self.shared.settings).flaky =
            every.filter(|n| *n > 0).map(|every| Flaky { every, retry_after: retry_after.map(str::to_owned) });
    }

    /// Refuses every request of every key whose trailing number (the digits that end it:
    /// the stream sequence of `stream-sequence:S:N`, the `N` of a message id `msg-N`) is a
    /// multiple of `every`, with 503, for ever: a destination that keeps refusing some
    /// records. `None` turns it off.
    pub fn set_refuse_every(&self, every: Option<u64>) {
        lock(&self.shared.settings).refuse_every = every.filter(|n| *n > 0);
    }

    /// Starts (`true`) or ends an outage: while down every request, health probes
    /// included, is answered 503, as a destination behind a failing load balancer is.
    pub fn set_down(&self, down: bool) {
        lock(&self.shared.settings).down = down;
    }

    /// Behaves as strictly as `strict` says (see [`Strict`]); the default turns it all off.
    pub fn set_strict(&self, strict: Strict) {
        lock(&self.shared.settings).strict = strict;
    }

    /// Changes the strict behaviours in place.
    pub fn update_strict(&self, change: impl FnOnce(&mut Strict)) {
        change(&mut lock(&self.shared.settings).strict);
    }

    /// Starts (`true`) or ends an outage in which nothing listens on the port: connections
    /// are refused (and open ones closed), as when the endpoint's process is down. The port
    /// is bound again when it ends; the records stay.
    pub fn set_refusing(&self, refusing: bool) {
        self.shared.refusing.send_replace(refusing);
    }

    /// How many write requests were answered with each status (a lost answer counts as 0).
    pub fn answers(&self) -> BTreeMap<u16, usize> {
        lock(&self.shared.answers).clone()
    }

    /// How many times each key was answered with the success status (a correct client and
    /// endpoint pair gives every key exactly one).
    pub fn successes(&self) -> BTreeMap<String, usize> {
        lock(&self.shared.successes).clone()
    }

    /// Every write request waits this long before it is handled (default none).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.settings).delay = delay;
    }

    /// `Retry-After` value sent with [`HttpFault::Status`] answers (default none).
    pub fn set_retry_after(&self, value: Option<&str>) {
        lock(&self.shared.settings).retry_after = value.map(str::to_owned);
    }

    /// Bodies containing `marker` are refused with 400, without storing.
    pub fn set_reject_marker(&self, marker: Option<&[u8]>) {
        lock(&self.shared.settings).reject_marker = marker.map(<[u8]>::to_vec);
    }

    /// Write requests without header `name` equal to `value` are refused with 401.
    pub fn set_required_header(&self, name: &str, value: &str) {
        lock(&self.shared.settings).required_header = Some((name.to_ascii_lowercase(), value.to_owned()));
    }

    /// Status of a first write (default 201).
    pub fn set_success_status(&self, status: u16) {
        lock(&self.shared.settings).success_status = status;
    }

    /// Status of a repeated key with the same payload (default 409).
    pub fn set_duplicate_status(&self, status: u16) {
        lock(&self.shared.settings).duplicate_status = status;
    }

    /// Status of a repeated key with another payload (default 422).
    pub fn set_conflict_status(&self, status: u16) {
        lock(&self.shared.settings).conflict_status = status;
    }

    /// Keep a log of every request (default true; turn off for long benchmark runs).
    pub fn set_request_log(&self, enabled: bool) {
        lock(&self.shared.settings).log_requests = enabled;
    }

    /// Keep each record's body (default true). Without bodies, records still tell duplicates
    /// from conflicts, but [`HttpTestServer::read_records`] returns empty payloads.
    pub fn set_keep_bodies(&self, enabled: bool) {
        lock(&self.shared.settings).keep_bodies = enabled;
    }

    /// Number of stored records.
    pub fn record_count(&self) -> usize {
        lock(&self.shared.records).len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).clone()
    }

    /// Write requests (POST, PUT, PATCH) received so far, in arrival order.
    pub fn writes(&self) -> Vec<LoggedRequest> {
        self.requests().into_iter().filter(|r| is_write(&r.method)).collect()
    }

    /// TCP connections accepted so far (keep-alive reuses them).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Most write requests ever handled at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every stored record, by key.
    pub fn records(&self) -> Vec<StoredRecord> {
        lock(&self.shared.records).values().cloned().collect()
    }

    /// The stored record of `key`.
    pub fn record(&self, key: &str) -> Option<StoredRecord> {
        lock(&self.shared.records).get(key).cloned()
    }

    /// Removes the record of `key` (a record lost behind the sink's back); `None` when there
    /// was none.
    pub fn remove_record(&self, key: &str) -> Option<StoredRecord> {
        lock(&self.shared.records).remove(key)
    }

    /// Replaces the stored document of `key` with `body` (an edit behind the sink's back, or
    /// a restore), keeping its id; false when there is no such record.
    pub fn replace_record(&self, key: &str, body: impl Into<Bytes>) -> bool {
        match lock(&self.shared.records).get_mut(key) {
            Some(record) => {
                record.body = body.into();
                record.fingerprint = fingerprint(&record.body);
                true
            }
            None => false,
        }
    }

    /// Every record as `(key, payload bytes)`: a JSON payload as stored, a wrapped one
    /// unwrapped to its original bytes.
    pub fn read_records(&self) -> Result<Vec<sinks_certify::Record>, String> {
        self.records().iter().map(|r| Ok((r.key.clone(), payload_of(&r.body)?))).collect()
    }

    /// Stops accepting and closes every connection (also done on drop).
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for HttpTestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn server_config(tls: &HttpServerTls) -> std::io::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(tls.cert_chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(std::io::Error::other)?;
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes()).map_err(std::io::Error::other)?;
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?;
    let builder = match &tls.client_ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.map_err(std::io::Error::other)?).map_err(std::io::Error::other)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(std::io::Error::other)?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(std::io::Error::other)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    app: Router,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    // Nothing listens while the endpoint is down: connections are refused.
    let mut switched = crate::tcp_proxy::SwitchedListener::new(listener, shared.refusing.subscribe());
    while let Some(tcp) = switched.accept(&mut stop).await {
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let app = app.clone();
        let acceptor = acceptor.clone();
        let stop = stop.clone();
        let refusing = shared.refusing.subscribe();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            match acceptor {
                Some(acceptor) => {
                    let mut handshake_stop = stop.clone();
                    let tls = tokio::select! {
                        tls = acceptor.accept(tcp) => match tls {
                            Ok(tls) => tls,
                            Err(_) => return,
                        },
                        _ = handshake_stop.changed() => return,
                    };
                    serve_connection(tls, app, stop, refusing).await;
                }
                None => serve_connection(tcp, app, stop, refusing).await,
            }
        });
    }
}

/// Serves one connection until it ends, the server stops, or a handler drops it.
async fn serve_connection<I>(io: I, app: Router, mut stop: watch::Receiver<bool>, mut refusing: watch::Receiver<bool>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = Arc::new(Notify::new());
    let service = TowerToHyperService::new(app.layer(axum::Extension(ConnKill(Arc::clone(&kill)))));
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = connection => {}
        _ = kill.notified() => {}
        _ = stop.changed() => {}
        _ = refusing.wait_for(|r| *r) => {}
    }
}

fn is_write(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `GET /records/{key}`: 200 with the stored document and the SHA-256 of the payload it
/// holds in [`FINGERPRINT_HEADER`], or 404.
async fn inquiry(State(shared): State<Arc<Shared>>, Path(key): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    log_request(&shared, parts.method, path, parts.version, parts.headers, Bytes::new());
    inquiry_answer(lock(&shared.records).get(&key))
}

/// `GET /ns/{space}/records/{key}`: [`inquiry`] in a namespace (404 for an unknown one).
async fn inquiry_in(
    State(shared): State<Arc<Shared>>,
    Path((space, key)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    log_request(&shared, parts.method, path, parts.version, parts.headers, Bytes::new());
    inquiry_answer(lock(&shared.spaces).get(&space).and_then(|s| s.records.get(&key)))
}

/// `PUT /_test/ns/{space}` (side channel): makes (or empties) a namespace with the
/// settings in the JSON body ([`SpaceSettings`]); 204.
async fn put_space(State(shared): State<Arc<Shared>>, Path(space): Path<String>, body: Bytes) -> Response {
    let settings: SpaceSettings = if body.is_empty() {
        SpaceSettings::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(s) => s,
            Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        }
    };
    let space_state = Space {
        records: BTreeMap::new(),
        reject_marker: settings.reject_marker.map(String::into_bytes),
        required_header: settings.required_header.map(|(name, value)| (name.to_ascii_lowercase(), value)),
        fingerprint_bodies: settings.fingerprint_bodies,
    };
    lock(&shared.spaces).insert(space, space_state);
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /_test/ns/{space}/records` (side channel): every record of a namespace as
/// `[{"key": …, "payload_base64": …, "body_base64": …}]`, the payload as published and the
/// whole stored body (see
/// [`HttpTestServer::read_records`]); 404 for an unknown namespace.
async fn space_records(State(shared): State<Arc<Shared>>, Path(space): Path<String>) -> Response {
    let spaces = lock(&shared.spaces);
    let Some(space) = spaces.get(&space) else { return StatusCode::NOT_FOUND.into_response() };
    let mut out = Vec::with_capacity(space.records.len());
    for record in space.records.values() {
        match payload_of(&record.body) {
            Ok(payload) => out.push(serde_json::json!({
                "key": record.key,
                "payload_base64": base64::engine::general_purpose::STANDARD.encode(&payload),
                "body_base64": base64::engine::general_purpose::STANDARD.encode(&record.body),
            })),
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        }
    }
    ([(header::CONTENT_TYPE, "application/json")], serde_json::Value::Array(out).to_string()).into_response()
}

/// The inquiry answer for `record`: 200 with the stored document and the SHA-256 of the
/// payload it holds in [`FINGERPRINT_HEADER`], or 404.
fn inquiry_answer(record: Option<&StoredRecord>) -> Response {
    match record {
        Some(record) => {
            let mut response = (StatusCode::OK, record.body.clone()).into_response();
            // The hash of the payload held now (an edit shows), or the one recorded at the
            // write when bodies are not kept.
            let held = match payload_of(&record.body) {
                Ok(payload) if !record.body.is_empty() => hex::encode(Sha256::digest(&payload)),
                _ => record.fingerprint.clone(),
            };
            if let Ok(value) = HeaderValue::from_str(&held) {
                response.headers_mut().insert(FINGERPRINT_HEADER, value);
            }
            response
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn log_request(
    shared: &Shared,
    method: Method,
    path: String,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
) -> Option<usize> {
    if !lock(&shared.settings).log_requests {
        return None;
    }
    let mut log = lock(&shared.log);
    log.push(LoggedRequest {
        method,
        path,
        version,
        headers,
        body,
        started: Instant::now(),
        finished: None,
        status: None,
    });
    Some(log.len() - 1)
}

/// Every other route: writes (POST, PUT, PATCH), `OPTIONS` (204), anything else 405.
async fn write(
    State(shared): State<Arc<Shared>>,
    axum::Extension(kill): axum::Extension<ConnKill>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    if parts.method == Method::OPTIONS {
        log_request(&shared, parts.method, path, parts.version, parts.headers, Bytes::new());
        return (StatusCode::NO_CONTENT, [(header::ALLOW, "OPTIONS, POST, PUT, PATCH")]).into_response();
    }
    if !is_write(&parts.method) {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => return StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    let space = parts.uri.path().strip_prefix("/ns/").and_then(|rest| rest.split('/').next()).map(str::to_owned);
    let index = log_request(&shared, parts.method, path, parts.version, parts.headers.clone(), body.clone());
    let response = {
        let _in_flight = InFlight::enter(&shared);
        handle_write(&shared, &kill, &parts.headers, body, space.as_deref()).await
    };
    *lock(&shared.answers).entry(response.status().as_u16()).or_default() += 1;
    if let Some(i) = index
        && let Some(entry) = lock(&shared.log).get_mut(i)
    {
        entry.finished = Some(Instant::now());
        entry.status = Some(response.status().as_u16());
    }
    response
}

async fn handle_write(
    shared: &Shared,
    kill: &ConnKill,
    headers: &HeaderMap,
    body: Bytes,
    space: Option<&str>,
) -> Response {
    let settings = lock(&shared.settings).clone();
    if !settings.delay.is_zero() {
        tokio::time::sleep(settings.delay).await;
    }
    if let Some(response) = throttled(shared, &settings.strict) {
        return response;
    }
    if let Some(every) = settings.refuse_every
        && let Some(key) = request_key(headers)
        && trailing_number(&key).is_some_and(|n| n % every == 0)
    {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    if let Some(flaky) = &settings.flaky
        && let Some(key) = request_key(headers)
        && key.rsplit(':').next().and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n % flaky.every == 0)
        && lock(&shared.flaky_seen).insert(key)
    {
        let mut response = StatusCode::SERVICE_UNAVAILABLE.into_response();
        if let Some(value) = flaky.retry_after.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let fault = lock(&shared.faults).pop_front();
    match fault {
        None => {}
        Some(HttpFault::Status(code)) => {
            let mut response = status(code).into_response();
            if let Some(value) = settings.retry_after.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(HttpFault::StatusRetryAfter(code, value)) => {
            let mut response = status(code).into_response();
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(HttpFault::Redirect(code, location)) => {
            let mut response = status(code).into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            return response;
        }
        Some(HttpFault::Drop) => {
            kill.0.notify_one();
            return std::future::pending().await;
        }
        Some(HttpFault::Stall(delay)) => {
            tokio::time::sleep(delay).await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        Some(HttpFault::CommitThenStall(delay)) => {
            let response = store(shared, &settings, headers, &body, space);
            tokio::time::sleep(delay).await;
            return response;
        }
    }
    let response = store(shared, &settings, headers, &body, space);
    if let Some(every) = settings.strict.lose_answer_every
        && response.status().is_success()
        && let Some(key) = request_key(headers)
        && trailing_number(&key).is_some_and(|n| n % every == 0)
        && lock(&shared.lost_seen).insert(key)
    {
        // Stored; the answer never arrives (the classic ambiguous timeout).
        lock(&shared.answers).entry(0).and_modify(|n| *n += 1).or_insert(1);
        kill.0.notify_one();
        return std::future::pending().await;
    }
    response
}

#[derive(Deserialize)]
struct EnvelopeView<'a> {
    schema: Option<String>,
    idempotency_key: Option<String>,
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
    payload_info: Option<PayloadInfoView>,
}

#[derive(Deserialize)]
struct PayloadInfoView {
    wrapped: bool,
    sha256: String,
}

/// The envelope in `body`, if it is one.
fn as_envelope(body: &[u8]) -> Option<EnvelopeView<'_>> {
    serde_json::from_slice::<EnvelopeView<'_>>(body).ok().filter(|e| e.schema.as_deref() == Some(ENVELOPE_SCHEMA))
}

/// Payload identity: the envelope's payload hash, else the body's hash.
fn fingerprint(body: &[u8]) -> String {
    match as_envelope(body).and_then(|e| e.payload_info) {
        Some(info) => info.sha256,
        None => hex::encode(Sha256::digest(body)),
    }
}

/// The original payload bytes of a stored document (envelope or bare payload).
fn payload_of(body: &[u8]) -> Result<Bytes, String> {
    match as_envelope(body) {
        Some(EnvelopeView { payload: Some(raw), payload_info: Some(info), .. }) if info.wrapped => {
            Ok(Bytes::from(sinks_contract::payload::decode_stored(raw.get())))
        }
        Some(EnvelopeView { payload: Some(raw), payload_info: Some(_), .. }) => {
            Ok(Bytes::copy_from_slice(raw.get().as_bytes()))
        }
        Some(_) => Err("envelope without payload or payload_info".into()),
        // A bare payload body (`body_format: payload`): an envelope is decoded, JSON kept.
        None => Ok(Bytes::from(sinks_contract::payload::decode_stored(&String::from_utf8_lossy(body)))),
    }
}

/// The envelopes of a batch request, or `None` when the body is a single document.
fn batch_items<'a>(headers: &HeaderMap, body: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-ndjson"));
    if ndjson {
        return Some(body.split(|b| *b == b'\n').filter(|line| !line.trim_ascii().is_empty()).collect());
    }
    if body.trim_ascii_start().first() != Some(&b'[') {
        return None;
    }
    let items: Vec<&RawValue> = serde_json::from_slice(body).ok()?;
    let items: Vec<&[u8]> = items.into_iter().map(|raw| raw.get().as_bytes()).collect();
    items.iter().all(|item| as_envelope(item).is_some()).then_some(items)
}

/// Stores a write (single or batch) in the default namespace or in `space`, and answers like
/// an idempotent ingestion API (404 for an unknown namespace).
fn store(shared: &Shared, settings: &Settings, headers: &HeaderMap, body: &Bytes, space: Option<&str>) -> Response {
    let mut default_records;
    let mut spaces;
    let (records, required_header, reject_marker, strict_bodies) = match space {
        None => {
            default_records = lock(&shared.records);
            (&mut *default_records, settings.required_header.as_ref(), settings.reject_marker.as_ref(), false)
        }
        Some(name) => {
            spaces = lock(&shared.spaces);
            match spaces.get_mut(name) {
                Some(s) => (&mut s.records, s.required_header.as_ref(), s.reject_marker.as_ref(), s.fingerprint_bodies),
                None => return StatusCode::NOT_FOUND.into_response(),
            }
        }
    };
    let by_body = strict_bodies || settings.strict.fingerprint_bodies;
    if let Some((name, value)) = required_header
        && headers.get(name.as_str()).and_then(|v| v.to_str().ok()) != Some(value.as_str())
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Some(marker) = reject_marker
        && body.windows(marker.len().max(1)).any(|w| w == marker.as_slice())
    {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let unkeyed = || format!("unkeyed:{}", shared.unkeyed.fetch_add(1, Ordering::SeqCst));
    if let Some(items) = batch_items(headers, body) {
        let mut new = 0;
        for item in items {
            let key = as_envelope(item).and_then(|e| e.idempotency_key).unwrap_or_else(unkeyed);
            if let std::collections::btree_map::Entry::Vacant(slot) = records.entry(key.clone()) {
                let kept = if settings.keep_bodies { Bytes::copy_from_slice(item) } else { Bytes::new() };
                let id = next_id(shared);
                slot.insert(StoredRecord { key, body: kept, id, fingerprint: fingerprint(item) });
                new += 1;
            }
        }
        let code = if new == 0 { settings.duplicate_status } else { settings.success_status };
        return status(code).into_response();
    }
    let key = request_key(headers).unwrap_or_else(unkeyed);
    let fingerprint = if by_body { body_fingerprint(body) } else { fingerprint(body) };
    let repeat = if settings.strict.replay_first_answer { settings.success_status } else { settings.duplicate_status };
    let (code, id) = match records.get(&key) {
        Some(existing) if existing.fingerprint == fingerprint => (repeat, existing.id.clone()),
        Some(existing) => (settings.conflict_status, existing.id.clone()),
        None => {
            let kept = if settings.keep_bodies { body.clone() } else { Bytes::new() };
            *lock(&shared.successes).entry(key.clone()).or_default() += 1;
            let id = next_id(shared);
            records.insert(key.clone(), StoredRecord { key, body: kept, id: id.clone(), fingerprint });
            (settings.success_status, id)
        }
    };
    let mut response = status(code).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(RESPONSE_ID_HEADER, value);
    }
    response
}

fn next_id(shared: &Shared) -> String {
    format!("rec-{}", shared.next_id.fetch_add(1, Ordering::SeqCst))
}

/// The number that ends `key`, if it ends in digits.
fn trailing_number(key: &str) -> Option<u64> {
    let digits = key.len() - key.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    key[key.len() - digits..].parse().ok()
}

/// The idempotency key header, percent-decoded.
fn request_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| percent_decode_str(v).decode_utf8_lossy().into_owned())
}

/// The test process's HTTP test server (plain, request log off), started on first use on a
/// thread of its own and kept for the process; the certification harness makes a namespace
/// per fixture on it.
pub fn shared_http() -> &'static HttpTestServer {
    static SERVER: OnceLock<HttpTestServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let server = HttpTestServer::start_detached().unwrap_or_else(|e| panic!("http test server: {e}"));
        server.set_request_log(false);
        server
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_come_back_as_published() {
        for (stored, expected) in [
            (
                r#"{"schema":"nats_sinks.http.message.v1","payload":{"a": 1},"payload_info":{"wrapped":false,"sha256":"x"}}"#,
                r#"{"a": 1}"#.as_bytes().to_vec(),
            ),
            (
                r#"{"schema":"nats_sinks.http.message.v1","payload":{"_nats_sinks":{"payload_envelope_version":1,"payload_encoding":"base64"},"payload":"/w=="},"payload_info":{"wrapped":true,"sha256":"x"}}"#,
                vec![0xff],
            ),
            (
                r#"{"_nats_sinks":{"payload_envelope_version":1,"payload_encoding":"utf-8"},"payload":"hi"}"#,
                b"hi".to_vec(),
            ),
            (r#"[1, 2]"#, b"[1, 2]".to_vec()),
        ] {
            assert_eq!(payload_of(stored.as_bytes()).unwrap(), expected, "{stored}");
        }
    }

    #[test]
    fn batches_are_recognized() {
        let env = r#"{"schema":"nats_sinks.http.message.v1","idempotency_key":"k"}"#;
        let json = HeaderMap::new();
        let array = format!("[{env},{env}]");
        assert_eq!(batch_items(&json, array.as_bytes()).map(|i| i.len()), Some(2));
        assert_eq!(batch_items(&json, b"[1,2]"), None, "a JSON array payload is not a batch");
        assert_eq!(batch_items(&json, env.as_bytes()), None);
        let mut nd = HeaderMap::new();
        nd.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
        let lines = format!("{env}\n{env}\n");
        assert_eq!(batch_items(&nd, lines.as_bytes()).map(|i| i.len()), Some(2));
    }

    #[tokio::test]
    async fn a_refusing_endpoint_refuses_connections_and_takes_them_again_on_its_port() {
        let server = HttpTestServer::start().await.unwrap();
        let addr = server.addr();
        let connects = || async move { tokio::net::TcpStream::connect(addr).await.is_ok() };
        assert!(connects().await);
        server.set_refusing(true);
        let refused = async {
            while connects().await {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), refused).await.expect("the port still takes connections");
        server.set_refusing(false);
        let taken = async {
            while !connects().await {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), taken).await.expect("the port was not bound again");
        let served = reqwest::get(server.health_url()).await.unwrap();
        assert!(served.status().is_success(), "{}", served.status());
    }

    #[test]
    fn trailing_numbers() {
        assert_eq!(super::trailing_number("stream-sequence:S:50"), Some(50));
        assert_eq!(super::trailing_number("message-id:msg-7"), Some(7));
        assert_eq!(super::trailing_number("no-digits"), None);
    }
}
