//! The Coherence sink's certification harness (feature `certify`): fresh, uniquely named
//! caches on a running Coherence member, read back page by page without the sink.
//!
//! The harness is given the member's gRPC proxy address; tests and `cargo xtask certify`
//! get it from `sinks_testkit::shared_coherence()`. Every fixture gets its own cache,
//! destroyed when its reader is dropped. [`CoherenceHarness::with_protocol`] certifies the
//! legacy protocol as well as v1.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::{Envelope, Sink};

use crate::client::Client;
use crate::config::{CoherenceSinkConfig, Protocol};
use crate::entry;
use crate::sink::CoherenceSink;

/// Certifies the Coherence sink against one running member.
#[derive(Debug, Clone)]
pub struct CoherenceHarness {
    address: String,
    protocol: Protocol,
}

impl CoherenceHarness {
    /// A harness for the gRPC proxy at `address` (`host:port`), protocol `auto`.
    pub fn new(address: impl Into<String>) -> Self {
        Self { address: address.into(), protocol: Protocol::Auto }
    }

    /// The same harness speaking `protocol`.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The proxy address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A new, unique cache name.
    pub fn cache_name() -> String {
        format!("t-{}-{:016x}", std::process::id(), rand::random::<u64>())
    }

    /// The configuration of a fresh cache on this member: the defaults, except values up to
    /// 4 MiB (the contract's 1 MiB payloads) and this harness's protocol.
    pub fn config(&self) -> CoherenceSinkConfig {
        let mut config = CoherenceSinkConfig::new(self.address.clone(), Self::cache_name());
        config.max_value_bytes = 4 * 1024 * 1024;
        config.protocol = self.protocol;
        config.ready_timeout_seconds = 20.0;
        config
    }

    /// A sink for `config` (not opened).
    pub fn sink(&self, config: CoherenceSinkConfig) -> Result<CoherenceSink, String> {
        CoherenceSink::new(config).map_err(|e| e.to_string())
    }

    /// A reader of the cache `config` names (destroyed when the reader is dropped).
    pub fn read_back(&self, config: &CoherenceSinkConfig) -> Result<CacheReadBack, String> {
        let mut config = config.clone();
        config.request_timeout_seconds = 30.0;
        let client = Client::new(Arc::new(config.clone())).map_err(|e| e.to_string())?;
        Ok(CacheReadBack { client: Some(client), config })
    }

    async fn fixture(&self, adjust: impl FnOnce(&mut CoherenceSinkConfig)) -> Result<Fixture, String> {
        let mut config = self.config();
        adjust(&mut config);
        let sink = self.sink(config.clone())?;
        sink.open().await.map_err(|e| e.display_chain())?;
        let read_back = self.read_back(&config)?;
        Ok(Fixture { sink: Arc::new(sink), records: Box::new(read_back) })
    }
}

/// Reads a cache without going through the sink; destroys it on drop.
#[derive(Debug)]
pub struct CacheReadBack {
    client: Option<Client>,
    config: CoherenceSinkConfig,
}

impl CacheReadBack {
    fn client(&self) -> Result<&Client, String> {
        self.client.as_ref().ok_or_else(|| "reader closed".to_owned())
    }

    /// Every entry: `(key text, stored wire value)`, sorted by key.
    pub async fn entries(&self) -> Result<Vec<(String, Bytes)>, String> {
        let raw = self.client()?.entries().await.map_err(|e| format!("reading entries failed: {e}"))?;
        let mut out = Vec::with_capacity(raw.len());
        for (key, value) in raw {
            out.push((key_text(&key)?, value));
        }
        out.sort();
        Ok(out)
    }

    /// The stored wire value of the entry under `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, String> {
        self.client()?.get(entry::wire_key(key)).await.map_err(|e| format!("get failed: {e}"))
    }

    /// Removes the entry under `key` (an entry lost behind the sink's back); true when there
    /// was one.
    pub async fn remove(&self, key: &str) -> Result<bool, String> {
        self.client()?.remove(entry::wire_key(key)).await.map_err(|e| format!("remove failed: {e}"))
    }

    /// Replaces the value under `key` with `json` in the sink's wire format (an entry altered
    /// behind the sink's back).
    pub async fn overwrite(&self, key: &str, json: &[u8]) -> Result<(), String> {
        let put = self.client()?.put(entry::wire_key(key), entry::to_wire(json), false, 0);
        put.await.map(drop).map_err(|e| format!("put failed: {e}"))
    }

    /// The number of entries.
    pub async fn size(&self) -> Result<i32, String> {
        self.client()?.size().await.map_err(|e| format!("size failed: {e}"))
    }

    /// The stored JSON document under `key`, parsed.
    pub async fn document(&self, key: &str) -> Result<Option<serde_json::Value>, String> {
        let Some(wire) = self.get(key).await? else { return Ok(None) };
        let json = entry::from_wire(&wire).ok_or("stored value is not in the json format")?;
        serde_json::from_slice(json).map(Some).map_err(|e| e.to_string())
    }
}

/// The text of a JSON-string key on the wire.
fn key_text(wire: &[u8]) -> Result<String, String> {
    let json = entry::from_wire(wire).ok_or("stored key is not in the json format")?;
    serde_json::from_slice::<String>(json).map_err(|e| format!("stored key is not a JSON string: {e}"))
}

impl Drop for CacheReadBack {
    fn drop(&mut self) {
        drop(self.client.take());
        let mut config = self.config.clone();
        config.request_timeout_seconds = 10.0;
        // Drop may run inside a runtime (whose tasks the channel of `client` needs, and which
        // this blocks): destroy from a thread with its own runtime and client.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async {
                let client = Client::new(Arc::new(config)).ok()?;
                tokio::time::timeout(Duration::from_secs(15), client.destroy()).await.ok()
            })
        })
        .join();
    }
}

#[async_trait]
impl Records for CacheReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let entries = self.entries().await?;
        let mut out = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let stored = entry::decode_stored(&value)?;
            out.push((key, stored.payload));
        }
        Ok(out)
    }

    /// Every entry's whole value as the cache holds it.
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        self.entries().await.map(Some)
    }
}

#[async_trait]
impl Harness for CoherenceHarness {
    fn name(&self) -> &'static str {
        match self.protocol {
            Protocol::Legacy => "coherence-legacy",
            _ => "coherence",
        }
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture(|_| {}).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // Values over max_value_bytes are refused before any request.
        let fixture = self.fixture(|c| c.max_value_bytes = 8192).await.ok()?;
        let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(16_384));
        Some((fixture, sinks_contract::testing::envelope("CERT", 900, "cert.poison", big)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(self.fixture(|c| c.key_strategy = crate::config::KeyStrategy::OriginSequence).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let mut config = CoherenceSinkConfig::new(format!("127.0.0.1:{closed}"), "unreachable");
        config.protocol = self.protocol;
        config.request_timeout_seconds = 2.0;
        config.ready_timeout_seconds = 0.0;
        Some(Arc::new(self.sink(config).ok()?))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let config = self.config();
        let mut sink_section = serde_json::to_value(&config).map_err(|e| e.to_string())?;
        sink_section["type"] = "coherence".into();
        let read_back = self.read_back(&config)?;
        Ok(CrashTarget { sink_section, records: Box::new(read_back), env: Vec::new() })
    }
}
