//! A fault-injecting HTTP proxy for tests: forwards every request to an upstream server
//! unchanged (the `Host` header too, so S3 signatures stay valid) and answers 503 itself to
//! the first `PUT` of every n-th object, as a busy S3 endpoint does now and then.
//!
//! "Every n-th object": the number that ends the request path's last segment, before any
//! `~` and extension (the stream sequence of `…/stream-sequence/S/42.json` and of
//! `…/idempotency-key/stream-sequence_S_42~1f2e….json`), is a multiple of n. Multipart
//! part uploads (`partNumber` in the query) are never failed.
//!
//! It can also play an outage ([`FaultProxy::set_down`]): while down, every request is
//! answered 503, as an endpoint behind a failing load balancer is.
//!
//! It also counts the requests it forwards by S3 operation ([`FaultProxy::requests`]), which
//! is what the benchmark reports as requests per 1,000 messages.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

#[derive(Debug)]
struct Shared {
    upstream: String,
    every: u64,
    retry_after: Option<String>,
    seen: Mutex<HashSet<String>>,
    injected: AtomicUsize,
    down: std::sync::atomic::AtomicBool,
    requests: Mutex<std::collections::BTreeMap<&'static str, usize>>,
    client: reqwest::Client,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: watch::Sender<bool>,
}

impl FaultProxy {
    /// Proxies to `upstream` (`http://127.0.0.1:PORT`), failing the first `PUT` of every
    /// `every`-th object with 503 (and `Retry-After: retry_after` when given); `every = 0`
    /// injects nothing.
    pub async fn start(upstream: &str, every: u64, retry_after: Option<&str>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            every,
            retry_after: retry_after.map(str::to_owned),
            seen: Mutex::new(HashSet::new()),
            injected: AtomicUsize::new(0),
            down: std::sync::atomic::AtomicBool::new(false),
            requests: Mutex::new(std::collections::BTreeMap::new()),
            client,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = axum::Router::new().fallback(forward).with_state(Arc::clone(&shared));
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            let _ = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
        });
        Ok(Self { addr, shared, _stop: stop })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests forwarded so far, by S3 operation: `PutObject`, `UploadPart`,
    /// `CreateMultipartUpload`, `CompleteMultipartUpload`, `AbortMultipartUpload`,
    /// `CopyObject`, `ListObjects`, `GetObject`, `HeadObject`, `DeleteObject`.
    pub fn requests(&self) -> std::collections::BTreeMap<&'static str, usize> {
        self.shared.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Starts (`true`) or ends an outage: while down, every request is answered 503.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// How many requests were answered 503 by the proxy.
    pub fn injected(&self) -> usize {
        self.shared.injected.load(Ordering::Relaxed)
    }
}

/// Headers that describe one connection or body framing, set anew on each side.
const HOP_BY_HOP: &[&str] = &["connection", "content-length", "transfer-encoding", "keep-alive"];

/// The number ending the path's last segment before `~` and the extension (`42` of
/// `…/42.json` and of `…/stream-sequence_S_42~ab12.json`).
fn object_number(path: &str) -> Option<u64> {
    let last = path.rsplit('/').next()?;
    let stem = last.split('~').next()?.split('.').next()?;
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    stem[stem.len() - digits..].parse().ok()
}

/// The S3 operation a request is (by method, query and headers).
fn operation(method: &Method, query: Option<&str>, copy: bool) -> &'static str {
    let q = query.unwrap_or_default();
    let has = |name: &str| q.split('&').any(|kv| kv == name || kv.starts_with(&format!("{name}=")));
    match *method {
        Method::PUT if has("partNumber") => "UploadPart",
        Method::PUT if copy => "CopyObject",
        Method::PUT => "PutObject",
        Method::POST if has("uploads") => "CreateMultipartUpload",
        Method::POST if has("uploadId") => "CompleteMultipartUpload",
        Method::DELETE if has("uploadId") => "AbortMultipartUpload",
        Method::DELETE => "DeleteObject",
        Method::GET if has("list-type") || q.contains("prefix=") || q.contains("delimiter=") => "ListObjects",
        Method::GET => "GetObject",
        Method::HEAD => "HeadObject",
        _ => "Other",
    }
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    let is_part = query.as_deref().is_some_and(|q| q.contains("partNumber"));
    let op = operation(&parts.method, query.as_deref(), parts.headers.contains_key("x-amz-copy-source"));
    *shared.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(op).or_default() += 1;
    if shared.down.load(Ordering::SeqCst) {
        shared.injected.fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>",
        )
            .into_response();
    }
    if parts.method == Method::PUT
        && shared.every > 0
        && !is_part
        && object_number(&path).is_some_and(|n| n % shared.every == 0)
        && shared.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(path.clone())
    {
        shared.injected.fetch_add(1, Ordering::Relaxed);
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
        )
            .into_response();
        if let Some(value) = shared.retry_after.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let body: Bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
    };
    let url = match query {
        Some(q) => format!("{}{path}?{q}", shared.upstream),
        None => format!("{}{path}", shared.upstream),
    };
    let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut out = shared.client.request(method, url).body(body);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            out = out.header(name.as_str(), value.as_bytes());
        }
    }
    match out.send().await {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut response = Response::builder().status(status);
            for (name, value) in answer.headers() {
                if !HOP_BY_HOP.contains(&name.as_str()) {
                    response = response.header(name.as_str(), value.as_bytes());
                }
            }
            let bytes = answer.bytes().await.unwrap_or_default();
            response.body(Body::from(bytes)).unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::object_number;

    #[test]
    fn object_numbers() {
        assert_eq!(object_number("/bucket/p/stream-sequence/S/42.json"), Some(42));
        assert_eq!(object_number("/bucket/p/stream-sequence/S/7"), Some(7));
        assert_eq!(object_number("/b/idempotency-key/stream-sequence_S_1_ab_42~1f2e3d.json"), Some(42));
        assert_eq!(object_number("/bucket/p/message-id/abc.json"), None);
    }
}
