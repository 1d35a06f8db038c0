//! The NoSQL sink's certification harness (feature `certify`): a fresh, uniquely named table
//! per fixture on one NoSQL service, read back without the sink.
//!
//! The service is the real Oracle NoSQL Database (KVLite + the HTTP proxy, started by
//! `sinks_testkit::KvLite`; read back with a `SELECT *` query and changed behind the sink's
//! back through the SDK), or, for fault-injection tests only, the testkit's fault-injection
//! server (`sinks_testkit::NoSqlTestServer`, which speaks the proxy's protocol; read back
//! through its `/_test/rows/<table>` side channel). Tables are created by the sink itself
//! (`auto_create`) and dropped when the fixture's reader is dropped.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use oracle_nosql_rust_sdk::types::MapValue;
use oracle_nosql_rust_sdk::{DeleteRequest, Handle, HandleMode, PutRequest, QueryRequest, TableRequest};
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::{Envelope, Sink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::NoSqlSinkConfig;
use crate::row::{map_to_json, stored_payload};
use crate::sink::NoSqlSink;

/// How a harness reads tables back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// The fault-injection server's side channel.
    TestServer,
    /// A `SELECT *` query through the SDK (real proxies).
    Query,
}

/// Certifies the NoSQL sink against one NoSQL service.
#[derive(Debug, Clone)]
pub struct NoSqlHarness {
    endpoint: String,
    reader: Reader,
}

/// A unique table name for one test.
pub fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}_{:08x}", std::process::id(), rand::random::<u32>())
}

impl NoSqlHarness {
    /// A harness over the testkit's fault-injection server at `endpoint`.
    pub fn test_server(endpoint: impl Into<String>) -> Self {
        Self { endpoint: endpoint.into(), reader: Reader::TestServer }
    }

    /// A harness over a real, non-secure proxy at `endpoint` (KVLite + httpproxy).
    pub fn live(endpoint: impl Into<String>) -> Self {
        Self { endpoint: endpoint.into(), reader: Reader::Query }
    }

    /// The service endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// True for a real proxy.
    pub fn is_live(&self) -> bool {
        self.reader == Reader::Query
    }

    /// The default configuration for a new table on this service: `auto_create`, quick DDL
    /// polling, and room for clause C8's 1 MiB binary payload (its base64 envelope makes a
    /// 1.4 MB event document, over the reference's default `max_value_bytes` of 1 MiB).
    pub fn config(&self, table: &str) -> NoSqlSinkConfig {
        NoSqlSinkConfig {
            auto_create: true,
            table_poll_interval_ms: 100,
            max_value_bytes: 4 * 1024 * 1024,
            ..NoSqlSinkConfig::new(self.endpoint.clone(), table)
        }
    }

    /// A sink for `config` (not opened).
    pub fn sink(&self, config: NoSqlSinkConfig) -> Result<NoSqlSink, String> {
        NoSqlSink::new(config).map_err(|e| e.to_string())
    }

    /// A reader of the table `config` names (dropped with the reader).
    pub fn read_back(&self, config: &NoSqlSinkConfig) -> TableReadBack {
        TableReadBack { harness: self.clone(), config: config.clone() }
    }

    async fn fixture(&self, adjust: impl FnOnce(&mut NoSqlSinkConfig)) -> Result<Fixture, String> {
        let mut config = self.config(&unique_table("cert"));
        adjust(&mut config);
        let read_back = self.read_back(&config);
        let sink = self.sink(config)?;
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok(Fixture { sink: Arc::new(sink), records: Box::new(read_back) })
    }

    async fn handle(&self) -> Result<Handle, String> {
        let client = crate::sink::http_client(Duration::from_secs(30)).map_err(|e| e.to_string())?;
        Handle::builder()
            .reqwest_client(&client)
            .and_then(|b| b.mode(HandleMode::Onprem))
            .and_then(|b| b.endpoint(&self.endpoint))
            .and_then(|b| b.timeout(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?
            .build()
            .await
            .map_err(|e| e.to_string())
    }

    /// Every row of `table` as JSON.
    pub async fn rows(&self, table: &str) -> Result<Vec<serde_json::Value>, String> {
        match self.reader {
            Reader::TestServer => side_channel_rows(&self.endpoint, table).await,
            Reader::Query => {
                let handle = self.handle().await?;
                let mut query = QueryRequest::new(&format!("SELECT * FROM {table}"));
                let mut result = query.execute(&handle).await.map_err(|e| format!("query {table}: {e}"))?;
                Ok(result.take_rows().iter().map(map_to_json).collect())
            }
        }
    }

    /// Runs `DROP TABLE IF EXISTS table`.
    pub async fn drop_table(&self, table: &str) -> Result<(), String> {
        self.ddl(&format!("DROP TABLE IF EXISTS {table}")).await
    }

    /// Runs one table DDL statement (`DROP TABLE …`) and waits until it is done.
    pub async fn ddl(&self, statement: &str) -> Result<(), String> {
        let handle = self.handle().await?;
        let mut result = TableRequest::new("")
            .statement(statement)
            .execute(&handle)
            .await
            .map_err(|e| format!("{statement}: {e}"))?;
        result.wait_for_completion_ms(&handle, 30_000, 100).await.map_err(|e| format!("{statement}: {e}"))
    }
}

/// `GET /_test/rows/<table>` of the test server at `endpoint`.
async fn side_channel_rows(endpoint: &str, table: &str) -> Result<Vec<serde_json::Value>, String> {
    let body = side_channel(endpoint, "GET", &format!("/_test/rows/{table}")).await?;
    serde_json::from_slice(&body).map_err(|e| format!("side channel body: {e}"))
}

/// One request to the test server's side channel; the body of a 200 answer.
async fn side_channel(endpoint: &str, method: &str, path: &str) -> Result<Vec<u8>, String> {
    let authority = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream =
        tokio::net::TcpStream::connect(authority).await.map_err(|e| format!("connect {authority}: {e}"))?;
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.map_err(|e| e.to_string())?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("malformed side-channel response")?;
    let head = String::from_utf8_lossy(&response[..split]);
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("side channel: {}", head.lines().next().unwrap_or_default()));
    }
    Ok(response[split + 4..].to_vec())
}

/// `text` as one URL path segment (everything but unreserved characters percent-encoded).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Reads one table without going through the sink; drops it when dropped.
#[derive(Debug)]
pub struct TableReadBack {
    harness: NoSqlHarness,
    config: NoSqlSinkConfig,
}

impl TableReadBack {
    /// The table's name.
    pub fn table(&self) -> &str {
        &self.config.table_name
    }

    /// Every row as JSON.
    pub async fn rows(&self) -> Result<Vec<serde_json::Value>, String> {
        self.harness.rows(&self.config.qualified_table()).await
    }

    /// Deletes the row `key` behind the sink's back (the test server's side channel, or a
    /// delete through the SDK on a real proxy); true when there was one.
    pub async fn delete(&self, key: &str) -> Result<bool, String> {
        let table = self.config.qualified_table();
        match self.harness.reader {
            Reader::TestServer => {
                let path = format!("/_test/rows/{}/{}", path_segment(&table), path_segment(key));
                match side_channel(&self.harness.endpoint, "DELETE", &path).await {
                    Ok(_) => Ok(true),
                    Err(e) if e.contains("404") => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Reader::Query => {
                let handle = self.harness.handle().await?;
                let key = MapValue::new().str(&self.config.key_field, key);
                let result = DeleteRequest::new(&table, key).execute(&handle).await.map_err(|e| e.to_string())?;
                Ok(result.success())
            }
        }
    }

    /// Replaces the event document of the row `key` with `document` (a plain put through
    /// the SDK, as another writer would), keeping the row's key.
    pub async fn overwrite(&self, key: &str, document: &serde_json::Value) -> Result<(), String> {
        let handle = self.harness.handle().await?;
        let value = crate::row::json_to_field(&document.to_string())?;
        let mut row = MapValue::new();
        row.put_str(&self.config.key_field, key);
        row.put_field_value(&self.config.value_field, value);
        row.put_i64(&self.config.stored_at_field, 0);
        PutRequest::new(&self.config.qualified_table()).value(row).execute(&handle).await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The event document of the row `key`.
    pub async fn document(&self, key: &str) -> Result<Option<serde_json::Value>, String> {
        Ok(self
            .rows()
            .await?
            .into_iter()
            .find(|r| r.get(&self.config.key_field).and_then(|k| k.as_str()) == Some(key))
            .and_then(|r| r.get(&self.config.value_field).cloned()))
    }
}

impl Drop for TableReadBack {
    fn drop(&mut self) {
        let harness = self.harness.clone();
        let table = self.config.qualified_table();
        // Drop may run inside a runtime: drop the table from a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(harness.drop_table(&table)).ok()
        })
        .join();
    }
}

#[async_trait]
impl Records for TableReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let rows = self.rows().await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let key = row.get(&self.config.key_field).and_then(|k| k.as_str()).ok_or("row without a key")?.to_owned();
            let document = row.get(&self.config.value_field).ok_or("row without an event document")?;
            let payload = stored_payload(document).ok_or("event document without a payload")?;
            out.push((key, Bytes::from(payload)));
        }
        Ok(out)
    }

    /// Every row's event document as the store gives it back (the stored-at column is the
    /// row's one insert, not part of what a delivery sends).
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        let mut out = Vec::new();
        for row in self.rows().await? {
            let key = row.get(&self.config.key_field).and_then(|k| k.as_str()).ok_or("row without a key")?.to_owned();
            let document = row.get(&self.config.value_field).ok_or("row without an event document")?;
            out.push((key, Bytes::from(serde_json::to_vec(document).map_err(|e| e.to_string())?)));
        }
        Ok(Some(out))
    }
}

#[async_trait]
impl Harness for NoSqlHarness {
    fn name(&self) -> &'static str {
        if self.is_live() { "nosql" } else { "nosql-fault-server" }
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture(|_| {}).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // Event documents over max_value_bytes are refused before any request.
        let fixture = self.fixture(|c| c.max_value_bytes = 8192).await.ok()?;
        let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(16_384));
        Some((fixture, sinks_contract::testing::envelope("CERT", 900, "cert.poison", big)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(self.fixture(|c| c.key_strategy = crate::config::KeyStrategy::OriginSequence).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let mut config = NoSqlSinkConfig::new(format!("http://127.0.0.1:{closed}"), "unreachable_table");
        config.request_timeout_seconds = 2.0;
        Some(Arc::new(self.sink(config).ok()?))
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let config = self.config(&unique_table("crash"));
        let mut sink_section = serde_json::to_value(&config).map_err(|e| e.to_string())?;
        sink_section["type"] = "oracle_nosql".into();
        let read_back = self.read_back(&config);
        Ok(CrashTarget { sink_section, records: Box::new(read_back), env: Vec::new() })
    }
}
