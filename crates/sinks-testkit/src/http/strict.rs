//! The strict behaviours of the HTTP test server ([`Strict`], set with
//! `HttpTestServer::set_strict`): an endpoint as strict as the standards allow, for the tests
//! of what a sink sends and how it treats an endpoint's limits and its health checks.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::{Shared, lock};

/// How a health probe (`GET /health`) is answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HealthAnswer {
    /// 200, or 503 during an outage ([`HttpTestServer::set_down`](super::HttpTestServer::set_down)): the truth (default).
    #[default]
    Truthful,
    /// 200 whatever happens: a health URL served by something that stays up while writes
    /// fail.
    AlwaysHealthy,
    /// 503 whatever happens: a health URL that is broken while writes work.
    AlwaysFailing,
}

/// A throttle: 429 with `Retry-After` to `percent` % of write requests (spread evenly) until
/// `until`.
#[derive(Debug, Clone)]
pub struct Throttle {
    /// Share of write requests answered 429, 1–100.
    pub percent: u32,
    /// When the throttle ends (`None`: never).
    pub until: Option<Instant>,
    /// The `Retry-After` value sent with each 429.
    pub retry_after: String,
}

/// How strictly the server behaves (all off by default).
#[derive(Debug, Clone, Default)]
pub struct Strict {
    /// Fingerprint a key's whole first body (not just its payload): a repeat with any other
    /// body is a conflict (422).
    pub fingerprint_bodies: bool,
    /// Answer a repeat with the same body with the first answer (the success status), as the
    /// IETF draft and payment APIs do, instead of the duplicate status.
    pub replay_first_answer: bool,
    /// Store the first request of every key whose trailing number is a multiple of this,
    /// then drop the connection without answering: committed, the answer lost.
    pub lose_answer_every: Option<u64>,
    /// The status `OPTIONS` is answered with (default 204).
    pub options_status: Option<u16>,
    /// How `GET /health` answers.
    pub health: HealthAnswer,
    /// A throttle by share of requests.
    pub throttle: Option<Throttle>,
    /// At most this many write requests per second (a sliding second); the others are
    /// answered 429 with `Retry-After: 1`.
    pub max_per_second: Option<usize>,
}

/// A 429 for this write request when a throttle or the rate limit says so.
pub(super) fn throttled(shared: &Shared, strict: &Strict) -> Option<Response> {
    let answer = |retry_after: &str| {
        let mut response = StatusCode::TOO_MANY_REQUESTS.into_response();
        if let Ok(value) = HeaderValue::from_str(retry_after) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    };
    let n = shared.writes_seen.fetch_add(1, Ordering::SeqCst);
    if let Some(t) = &strict.throttle
        && t.until.is_none_or(|until| Instant::now() < until)
    {
        // Spread evenly: request n is throttled when its share crosses a whole request.
        let percent = t.percent.clamp(1, 100) as usize;
        if (n + 1) * percent / 100 != n * percent / 100 {
            return Some(answer(&t.retry_after));
        }
    }
    if let Some(max) = strict.max_per_second {
        let now = Instant::now();
        let mut admitted = lock(&shared.admitted);
        while admitted.front().is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1)) {
            admitted.pop_front();
        }
        if admitted.len() >= max {
            return Some(answer("1"));
        }
        admitted.push_back(now);
    }
    None
}

/// A whole body's identity (the IETF `Idempotency-Key` draft's request fingerprint).
pub(super) fn body_fingerprint(body: &[u8]) -> String {
    format!("body:{}", hex::encode(Sha256::digest(body)))
}
