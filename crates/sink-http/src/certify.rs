//! [`HttpHarness`]: certifies the HTTP sink against `docs/sink-contract.md` (feature
//! `certify`), on a running HTTP test server (the testkit's `HttpTestServer`, which the
//! caller starts and this crate never names).
//!
//! Every fixture is a fresh namespace on that server (`/ns/{name}/ingest`), made over its side
//! channel (`PUT /_test/ns/{name}` with the namespace's refusal marker and required header)
//! and read back over it (`GET /_test/ns/{name}/records`), not through the sink: the way the
//! S3 harness gets fresh buckets on a running SeaweedFS.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use sinks_certify::{CERT_STREAM, CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};
use tokio::net::TcpListener;

use crate::{HttpSink, HttpSinkConfig};

/// Marker that makes the poison fixture's namespace refuse a body with 400.
pub const POISON_MARKER: &str = "NATS-SINKS-CERT-POISON";
/// Header the harness's sink sends from `headers_env`, checked by the server.
pub const SECRET_HEADER: &str = "X-Cert-Token";

/// Certification harness over the HTTP test server at `base` (`http://127.0.0.1:PORT`).
#[derive(Debug, Clone)]
pub struct HttpHarness {
    base: String,
    client: reqwest::Client,
}

/// One namespace of the test server: where the sink writes, and how it is read back.
#[derive(Debug, Clone)]
struct Space {
    base: String,
    name: String,
    client: reqwest::Client,
}

impl Space {
    fn url(&self) -> String {
        format!("{}/ns/{}/ingest", self.base, self.name)
    }

    fn health_url(&self) -> String {
        format!("{}/ns/{}/health", self.base, self.name)
    }

    fn inquiry_url(&self) -> String {
        format!("{}/ns/{}/records/{{key}}", self.base, self.name)
    }
}

#[derive(serde::Deserialize)]
struct StoredItem {
    key: String,
    payload_base64: String,
    body_base64: String,
}

#[async_trait]
impl Records for Space {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        self.read(|item| item.payload_base64).await
    }

    /// The whole body each key's first request stored.
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        self.read(|item| item.body_base64).await.map(Some)
    }
}

impl Space {
    /// Every record of the namespace as `(key, pick(its item))`, base64-decoded.
    async fn read(&self, pick: fn(StoredItem) -> String) -> Result<Vec<Record>, String> {
        let url = format!("{}/_test/ns/{}/records", self.base, self.name);
        let response = self.client.get(&url).send().await.map_err(|e| format!("reading {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("reading {url}: status {}", response.status()));
        }
        let body = response.bytes().await.map_err(|e| format!("reading {url}: {e}"))?;
        let items: Vec<StoredItem> = serde_json::from_slice(&body).map_err(|e| format!("reading {url}: {e}"))?;
        items
            .into_iter()
            .map(|item| {
                let key = item.key.clone();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(pick(item))
                    .map_err(|e| format!("reading {url}: {e}"))?;
                Ok((key, bytes.into()))
            })
            .collect()
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
    /// A harness over the HTTP test server at `base` (`http://127.0.0.1:PORT`, plain).
    pub fn new(base: impl Into<String>) -> Self {
        Self { base: base.into().trim_end_matches('/').to_owned(), client: reqwest::Client::new() }
    }

    /// A fresh namespace refusing bodies that contain `reject_marker`, and requiring the
    /// secret header when `secret` and the harness sends one.
    async fn space(&self, reject_marker: Option<&str>, secret: bool) -> Result<Space, String> {
        let name = format!("cert-{}-{:016x}", std::process::id(), rand::random::<u64>());
        let required_header = secret_variable().filter(|_| secret).map(|(_, value)| (SECRET_HEADER, value));
        // A strict endpoint: a key's whole first body is its fingerprint, and a repeat with any
        // other body is refused with 422 (the IETF `Idempotency-Key` draft).
        let settings = serde_json::json!({
            "reject_marker": reject_marker, "required_header": required_header, "fingerprint_bodies": true,
        });
        let url = format!("{}/_test/ns/{name}", self.base);
        let response = self
            .client
            .put(&url)
            .body(settings.to_string())
            .send()
            .await
            .map_err(|e| format!("making namespace {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("making namespace {url}: status {}", response.status()));
        }
        Ok(Space { base: self.base.clone(), name, client: self.client.clone() })
    }

    /// The sink configuration the harness uses against `space`: loopback HTTP, health URL,
    /// 16 MiB requests (the 1 MiB edge case grows in its envelope), 422 as the conflict
    /// status, and the secret header from the environment when one is available.
    fn config_for(space: &Space) -> HttpSinkConfig {
        let mut config = HttpSinkConfig::local(space.url());
        config.max_request_bytes = 16 * 1024 * 1024;
        config.conflict_statuses = vec![422];
        config.health_url = Some(space.health_url());
        config.inquiry_url = Some(space.inquiry_url());
        if let Some((variable, _)) = secret_variable() {
            config.headers_env.insert(SECRET_HEADER.to_owned(), variable.to_owned());
        }
        config
    }

    async fn fixture(space: Space) -> Result<Fixture, String> {
        Self::fixture_with(space, |_| {}).await
    }

    async fn fixture_with(space: Space, adjust: impl FnOnce(&mut HttpSinkConfig)) -> Result<Fixture, String> {
        let mut config = Self::config_for(&space);
        adjust(&mut config);
        let sink = HttpSink::new(config).map_err(|e| e.to_string())?;
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok(Fixture { sink: Arc::new(sink), records: Box::new(space) })
    }
}

#[async_trait]
impl Harness for HttpHarness {
    fn name(&self) -> &'static str {
        "http"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        Self::fixture(self.space(None, true).await?).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fixture = Self::fixture(self.space(Some(POISON_MARKER), true).await.ok()?).await.ok()?;
        let payload = format!("this payload is refused by the endpoint: {POISON_MARKER}");
        Some((fixture, envelope(CERT_STREAM, 7, "cert.poison", payload)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        let space = match self.space(None, true).await {
            Ok(space) => space,
            Err(e) => return Some(Err(e)),
        };
        let by_origin = |c: &mut HttpSinkConfig| c.idempotency.strategy = crate::config::KeyStrategy::OriginSequence;
        Some(Self::fixture_with(space, by_origin).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        // A port that was just free: connections are refused.
        let listener = TcpListener::bind("127.0.0.1:0").await.ok()?;
        let addr = listener.local_addr().ok()?;
        drop(listener);
        let mut config = HttpSinkConfig::local(format!("http://{addr}/ingest"));
        config.request_timeout_seconds = 2.0;
        let sink = HttpSink::new(config).ok()?;
        Some(Arc::new(sink))
    }

    fn secrets(&self) -> Vec<String> {
        secret_variable().map(|(_, value)| value).into_iter().collect()
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let space = self.space(None, false).await?;
        let sink_section = serde_json::json!({
            "type": "http",
            "url": space.url(),
            "allow_http_for_local_testing": true,
            "max_request_bytes": 16 * 1024 * 1024,
            "conflict_statuses": [422],
            "health_url": space.health_url(),
            "inquiry_url": space.inquiry_url(),
        });
        Ok(CrashTarget { sink_section, records: Box::new(space), env: Vec::new() })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_test_server_reads_this_sink_s_envelopes() {
        assert_eq!(
            crate::request::SCHEMA,
            sinks_testkit::http::ENVELOPE_SCHEMA,
            "the test server reads envelopes by it"
        );
    }
}
