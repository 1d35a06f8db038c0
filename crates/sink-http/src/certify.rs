//! [`HttpHarness`]: certifies the HTTP sink against `docs/sink-contract.md` (feature
//! `certify`), and [`TestServer`], the real HTTP endpoint it certifies against.
//!
//! The test server is axum on hyper, started in-process on `127.0.0.1:0`, plain or over
//! rustls (aws-lc-rs, optionally requiring a client certificate). It stores one record per
//! idempotency key, answers like an idempotent ingestion API (201 on first write, 409 for the
//! same key and payload, 422 for the same key with another payload), accepts batches (JSON
//! arrays or NDJSON of envelopes, all-or-nothing), names each record in an `X-Record-Id`
//! answer header, answers inquiries at `/records/{key}` (the stored document, with its
//! payload fingerprint in `X-Payload-Sha256`) and health probes at `/health`, logs every request, and can be told to misbehave: fail the
//! next requests with a status (with `Retry-After`), redirect, stall, commit and answer late,
//! drop the connection, answer everything slowly, refuse bodies with a marker, or demand a
//! header. Tests and benchmarks reuse it; the harness reads records back from it directly,
//! not through the sink.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sinks_contract::certify::{CERT_STREAM, CrashTarget, Fixture, Harness, ReadBack, Record};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::request::SCHEMA;
use crate::{HttpSink, HttpSinkConfig};

/// Path the test server ingests at (any path but `/health` and `/records/…` works).
pub const INGEST_PATH: &str = "/ingest";
/// Marker that makes the poison fixture's server refuse a body with 400.
pub const POISON_MARKER: &str = "NATS-SINKS-CERT-POISON";
/// Header the harness's sink sends from `headers_env`, checked by the server.
pub const SECRET_HEADER: &str = "X-Cert-Token";
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
pub enum Fault {
    /// Answer this status without storing (with the `Retry-After` set by
    /// [`TestServer::set_retry_after`], if any).
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

/// TLS settings of a [`TestServer`]: its certificate chain and key (PEM), and the CA that
/// client certificates must chain to (mutual TLS), if any.
#[derive(Debug, Clone)]
pub struct ServerTls {
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
    log: Mutex<Vec<LoggedRequest>>,
    faults: Mutex<VecDeque<Fault>>,
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
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A real HTTP server on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub struct TestServer {
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

impl TestServer {
    /// Starts a plain HTTP server (HTTP/1.1 and h2c) on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), None).await
    }

    /// Starts an HTTPS server (HTTP/1.1 and HTTP/2 by ALPN) on `127.0.0.1:0`.
    pub async fn start_tls(tls: ServerTls) -> std::io::Result<Self> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), Some(tls)).await
    }

    /// Starts a server on `addr` (port 0 picks a free one), over TLS when `tls` is given.
    pub async fn start_at(addr: SocketAddr, tls: Option<ServerTls>) -> std::io::Result<Self> {
        let acceptor = match tls {
            Some(tls) => Some(TlsAcceptor::from(Arc::new(server_config(&tls)?))),
            None => None,
        };
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            records: Mutex::new(BTreeMap::new()),
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
            }),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            unkeyed: AtomicUsize::new(0),
            next_id: AtomicUsize::new(1),
            connections: AtomicUsize::new(0),
            flaky_seen: Mutex::new(std::collections::HashSet::new()),
            successes: Mutex::new(BTreeMap::new()),
        });
        let app = Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/records/{key}", get(inquiry))
            .fallback(write)
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

    /// Queues `fault` for the next write request not already claimed by an earlier fault.
    pub fn push(&self, fault: Fault) {
        lock(&self.shared.faults).push_back(fault);
    }

    /// Queues `fault` for the next `n` write requests.
    pub fn push_n(&self, n: usize, fault: Fault) {
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

    /// How many times each key was answered with the success status (a correct client and
    /// endpoint pair gives every key exactly one).
    pub fn successes(&self) -> BTreeMap<String, usize> {
        lock(&self.shared.successes).clone()
    }

    /// Every write request waits this long before it is handled (default none).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.settings).delay = delay;
    }

    /// `Retry-After` value sent with [`Fault::Status`] answers (default none).
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
    /// from conflicts, but [`TestServer::read_records`] returns empty payloads.
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
    pub fn read_records(&self) -> Result<Vec<Record>, String> {
        self.records().iter().map(|r| Ok((r.key.clone(), payload_of(&r.body)?))).collect()
    }

    /// Stops accepting and closes every connection (also done on drop).
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn server_config(tls: &ServerTls) -> std::io::Result<rustls::ServerConfig> {
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
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let app = app.clone();
        let acceptor = acceptor.clone();
        let stop = stop.clone();
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
                    serve_connection(tls, app, stop).await;
                }
                None => serve_connection(tcp, app, stop).await,
            }
        });
    }
}

/// Serves one connection until it ends, the server stops, or a handler drops it.
async fn serve_connection<I>(io: I, app: Router, mut stop: watch::Receiver<bool>)
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
    match lock(&shared.records).get(&key) {
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
    let index = log_request(&shared, parts.method, path, parts.version, parts.headers.clone(), body.clone());
    let response = {
        let _in_flight = InFlight::enter(&shared);
        handle_write(&shared, &kill, &parts.headers, body).await
    };
    if let Some(i) = index
        && let Some(entry) = lock(&shared.log).get_mut(i)
    {
        entry.finished = Some(Instant::now());
        entry.status = Some(response.status().as_u16());
    }
    response
}

async fn handle_write(shared: &Shared, kill: &ConnKill, headers: &HeaderMap, body: Bytes) -> Response {
    let settings = lock(&shared.settings).clone();
    if !settings.delay.is_zero() {
        tokio::time::sleep(settings.delay).await;
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
        Some(Fault::Status(code)) => {
            let mut response = status(code).into_response();
            if let Some(value) = settings.retry_after.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(Fault::StatusRetryAfter(code, value)) => {
            let mut response = status(code).into_response();
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(Fault::Redirect(code, location)) => {
            let mut response = status(code).into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            return response;
        }
        Some(Fault::Drop) => {
            kill.0.notify_one();
            return std::future::pending().await;
        }
        Some(Fault::Stall(delay)) => {
            tokio::time::sleep(delay).await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        Some(Fault::CommitThenStall(delay)) => {
            let response = store(shared, &settings, headers, &body);
            tokio::time::sleep(delay).await;
            return response;
        }
    }
    store(shared, &settings, headers, &body)
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
    serde_json::from_slice::<EnvelopeView<'_>>(body).ok().filter(|e| e.schema.as_deref() == Some(SCHEMA))
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

/// Stores a write (single or batch) and answers like an idempotent ingestion API.
fn store(shared: &Shared, settings: &Settings, headers: &HeaderMap, body: &Bytes) -> Response {
    if let Some((name, value)) = &settings.required_header
        && headers.get(name.as_str()).and_then(|v| v.to_str().ok()) != Some(value.as_str())
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Some(marker) = &settings.reject_marker
        && body.windows(marker.len().max(1)).any(|w| w == marker.as_slice())
    {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let unkeyed = || format!("unkeyed:{}", shared.unkeyed.fetch_add(1, Ordering::SeqCst));
    if let Some(items) = batch_items(headers, body) {
        let mut records = lock(&shared.records);
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
    let fingerprint = fingerprint(body);
    let mut records = lock(&shared.records);
    let (code, id) = match records.get(&key) {
        Some(existing) if existing.fingerprint == fingerprint => (settings.duplicate_status, existing.id.clone()),
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

/// The idempotency key header, percent-decoded.
fn request_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| percent_decode_str(v).decode_utf8_lossy().into_owned())
}

/// Certification harness: every fixture is a fresh [`TestServer`].
#[derive(Debug, Default)]
pub struct HttpHarness;

/// Reads the records of a server it keeps alive.
struct ServerReadBack(Arc<TestServer>);

#[async_trait]
impl ReadBack for ServerReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        self.0.read_records()
    }
}

/// An environment variable whose value the harness sends as a secret header. The harness
/// cannot set one (that is `unsafe` in edition 2024), so it uses one that is always there.
fn secret_variable() -> Option<(&'static str, String)> {
    ["NATS_SINKS_CERT_HTTP_TOKEN", "PATH", "HOME", "USER"].into_iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| {
                v.len() >= 8 && v.len() <= 2048 && v == v.trim() && v.bytes().all(|b| (0x21..0x7f).contains(&b))
            })
            .map(|v| (name, v))
    })
}

impl HttpHarness {
    /// The sink configuration the harness uses against `server`: loopback HTTP, health URL,
    /// 16 MiB requests (the 1 MiB edge case grows in its envelope), 422 as the conflict
    /// status, and the secret header from the environment when one is available.
    pub fn config_for(server: &TestServer) -> HttpSinkConfig {
        let mut config = HttpSinkConfig::local(server.url());
        config.max_request_bytes = 16 * 1024 * 1024;
        config.conflict_statuses = vec![422];
        config.health_url = Some(server.health_url());
        config.inquiry_url = Some(server.inquiry_url());
        if let Some((variable, value)) = secret_variable() {
            config.headers_env.insert(SECRET_HEADER.to_owned(), variable.to_owned());
            server.set_required_header(SECRET_HEADER, &value);
        }
        config
    }

    async fn fixture(server: TestServer) -> Result<Fixture, String> {
        let sink = HttpSink::new(Self::config_for(&server)).map_err(|e| e.to_string())?;
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok(Fixture { sink: Arc::new(sink), read_back: Box::new(ServerReadBack(Arc::new(server))) })
    }
}

#[async_trait]
impl Harness for HttpHarness {
    fn name(&self) -> &'static str {
        "http"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        Self::fixture(TestServer::start().await.map_err(|e| e.to_string())?).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let server = TestServer::start().await.ok()?;
        server.set_reject_marker(Some(POISON_MARKER.as_bytes()));
        let fixture = Self::fixture(server).await.ok()?;
        let payload = format!("this payload is refused by the endpoint: {POISON_MARKER}");
        Some((fixture, envelope(CERT_STREAM, 7, "cert.poison", payload)))
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        // A port that was just free: connections are refused.
        let listener = TcpListener::bind("127.0.0.1:0").await.ok()?;
        let addr = listener.local_addr().ok()?;
        drop(listener);
        let mut config = HttpSinkConfig::local(format!("http://{addr}{INGEST_PATH}"));
        config.request_timeout_seconds = 2.0;
        let sink = HttpSink::new(config).ok()?;
        Some(Arc::new(sink))
    }

    fn secrets(&self) -> Vec<String> {
        secret_variable().map(|(_, value)| value).into_iter().collect()
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let server = TestServer::start().await.map_err(|e| e.to_string())?;
        let sink_section = serde_json::json!({
            "type": "http",
            "url": server.url(),
            "allow_http_for_local_testing": true,
            "max_request_bytes": 16 * 1024 * 1024,
            "conflict_statuses": [422],
            "health_url": server.health_url(),
            "inquiry_url": server.inquiry_url(),
        });
        Ok(CrashTarget { sink_section, read_back: Box::new(ServerReadBack(Arc::new(server))), env: Vec::new() })
    }
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
}
