//! [`MySqlHarness`]: certifies the MySQL sink against `docs/sink-contract.md` on a live
//! server (feature `certify`). Every fixture is a fresh, uniquely named table, read back with
//! plain `SELECT`s and dropped afterwards.
//!
//! The server is a [`TestServer`] the caller names (the test run's private MariaDB, see
//! `sinks_testkit::shared_mysql`), database `test`, administered as `root` without a
//! password. Fixtures write as a dedicated user with a generated password, so clause C11 can
//! look for that secret in the logs. When the server cannot be reached, every live clause is
//! skipped with the reason.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::config::SinkSection;
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};

use crate::{MySqlSink, MySqlSinkConfig, quoted_table};

/// Database used by the certification.
pub const DATABASE: &str = "test";
const CERT_USER: &str = "nats_sinks_cert";

/// A MySQL-compatible server for tests: `root` without a password, database `test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestServer {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl TestServer {
    /// The server at `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self { host: host.into(), port }
    }

    fn admin_opts(&self) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some("root"))
            .db_name(Some(DATABASE))
            .into()
    }

    /// An administrative connection, or why there is none.
    pub async fn admin(&self) -> Result<Conn, String> {
        let (host, port) = (&self.host, self.port);
        match tokio::time::timeout(std::time::Duration::from_secs(5), Conn::new(self.admin_opts())).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(format!("mysql at {host}:{port} is not usable: {e}")),
            Err(_) => Err(format!("mysql at {host}:{port} did not answer within 5 s")),
        }
    }

    /// Every row of `table` as `(stream-sequence key, original payload bytes)`.
    pub async fn read_table(&self, table: &str) -> Result<Vec<Record>, String> {
        let mut c = self.admin().await?;
        let sql = format!("SELECT STREAM_NAME, STREAM_SEQUENCE, PAYLOAD_JSON FROM {}", quoted_table(table));
        let rows: Vec<(String, u64, String)> = c.query(sql).await.map_err(|e| e.to_string())?;
        let _ = c.disconnect().await;
        Ok(rows
            .into_iter()
            .map(|(s, n, p)| {
                (format!("stream-sequence:{s}:{n}"), Bytes::from(sinks_contract::payload::decode_stored(&p)))
            })
            .collect())
    }

    /// Every row of `table` whole, as `(stream-sequence key, "COLUMN=value" lines)`, without
    /// the two columns a row records its one insert in (`RECEIVED_AT_EPOCH_NS`,
    /// `STORED_AT_EPOCH_NS`: a redelivery never rewrites a row).
    pub async fn read_rows_whole(&self, table: &str) -> Result<Vec<Record>, String> {
        let mut c = self.admin().await?;
        let rows: Vec<mysql_async::Row> =
            c.query(format!("SELECT * FROM {}", quoted_table(table))).await.map_err(|e| e.to_string())?;
        let _ = c.disconnect().await;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut lines = String::new();
            let (mut stream, mut sequence) = (String::new(), String::new());
            for (i, column) in row.columns_ref().iter().enumerate() {
                let name = column.name_str();
                let value = row.as_ref(i).map(|v| v.as_sql(true)).unwrap_or_default();
                match name.as_ref() {
                    "RECEIVED_AT_EPOCH_NS" | "STORED_AT_EPOCH_NS" => continue,
                    "STREAM_NAME" => stream = value.trim_matches('\'').to_owned(),
                    "STREAM_SEQUENCE" => sequence.clone_from(&value),
                    _ => {}
                }
                lines.push_str(&format!("{name}={value}\n"));
            }
            out.push((format!("stream-sequence:{stream}:{sequence}"), Bytes::from(lines)));
        }
        Ok(out)
    }
}

/// A unique table name.
pub fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}_{:08x}", std::process::id(), rand::random::<u32>())
}

/// Harness over fresh tables of a live server.
#[derive(Debug)]
pub struct MySqlHarness {
    password: String,
    server: Result<TestServer, String>,
}

impl MySqlHarness {
    /// A harness over `server`.
    pub fn new(server: TestServer) -> Self {
        Self::with(Ok(server))
    }

    /// A harness without a server: every live clause is skipped with `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::with(Err(reason.into()))
    }

    fn with(server: Result<TestServer, String>) -> Self {
        // The same for every process: concurrent test processes must not change the user's
        // password under each other. It only has to be recognizable in logs, not unguessable
        // (the user can only reach the `test` database).
        Self { password: "nats-sinks-cert-password-5f3a9c".to_owned(), server }
    }

    fn server(&self) -> Result<&TestServer, String> {
        self.server.as_ref().map_err(Clone::clone)
    }
}

/// Reads a table back; drops it when dropped.
struct TableReadBack {
    table: String,
    server: TestServer,
}

#[async_trait]
impl Records for TableReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        self.server.read_table(&self.table).await
    }

    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        self.server.read_rows_whole(&self.table).await.map(Some)
    }
}

impl Drop for TableReadBack {
    fn drop(&mut self) {
        let sql = format!("DROP TABLE IF EXISTS {}", quoted_table(&self.table));
        let server = self.server.clone();
        // Drop runs outside async code: use a short-lived runtime on its own thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async {
                let mut c = server.admin().await.ok()?;
                c.query_drop(sql).await.ok()?;
                c.disconnect().await.ok()
            })
        })
        .join();
    }
}

fn section(value: serde_json::Value) -> SinkSection {
    match value {
        serde_json::Value::Object(m) => SinkSection(m),
        _ => SinkSection(serde_json::Map::new()),
    }
}

impl MySqlHarness {
    async fn ensure_user(&self) -> Result<(), String> {
        let mut c = self.server()?.admin().await?;
        for sql in [
            format!("CREATE USER IF NOT EXISTS '{CERT_USER}'@'%' IDENTIFIED BY '{}'", self.password),
            format!("ALTER USER '{CERT_USER}'@'%' IDENTIFIED BY '{}'", self.password),
            format!("GRANT ALL ON `{DATABASE}`.* TO '{CERT_USER}'@'%'"),
        ] {
            c.query_drop(sql).await.map_err(|e| format!("preparing the certification user: {e}"))?;
        }
        c.disconnect().await.map_err(|e| e.to_string())
    }

    fn config(&self, table: &str, extra: serde_json::Value) -> Result<MySqlSinkConfig, String> {
        let server = self.server()?;
        let (host, port) = (&server.host, server.port);
        let mut v = serde_json::json!({
            "type": "mysql", "host": host, "port": port, "database": DATABASE, "user": CERT_USER,
            "table": table, "auto_create": true, "mode": "upsert", "conflict_policy": "keep_first",
        });
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        MySqlSinkConfig::from_section(&section(v)).map_err(|e| e.to_string())
    }

    async fn fixture(&self, extra: serde_json::Value) -> Result<(Fixture, String), String> {
        self.ensure_user().await?;
        let table = unique_table("cert");
        let read_back = TableReadBack { table: table.clone(), server: self.server()?.clone() };
        let sink =
            MySqlSink::new(self.config(&table, extra)?).map_err(|e| e.to_string())?.with_password(&self.password);
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok((Fixture { sink: Arc::new(sink), records: Box::new(read_back) }, table))
    }
}

#[async_trait]
impl Harness for MySqlHarness {
    fn name(&self) -> &'static str {
        "mysql"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture(serde_json::json!({})).await.map(|(f, _)| f)
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // A table whose SUBJECT column is too narrow: the server rejects a long subject
        // with "data too long" (1406) for that row only.
        let (fx, table) = self.fixture(serde_json::json!({})).await.ok()?;
        let mut c = self.server().ok()?.admin().await.ok()?;
        let alter = format!("ALTER TABLE {} MODIFY `SUBJECT` varchar(24) NOT NULL", quoted_table(&table));
        c.query_drop(alter).await.ok()?;
        let subject = "cert.poison.this.subject.is.far.too.long.for.the.column";
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, subject, r#"{"poison":true}"#)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        let by_origin = serde_json::json!({"idempotency": {"strategy": "origin_sequence"}});
        Some(self.fixture(by_origin).await.map(|(f, _)| f))
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let config = self.config("unreachable", serde_json::json!({"port": 1, "connection_timeout": 2.0})).ok()?;
        Some(Arc::new(MySqlSink::new(config).ok()?.with_password(&self.password)))
    }

    fn secrets(&self) -> Vec<String> {
        vec![self.password.clone()]
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let server = self.server()?;
        server.admin().await?.disconnect().await.map_err(|e| e.to_string())?;
        let table = unique_table("crash");
        let (host, port) = (&server.host, server.port);
        let sink_section = serde_json::json!({
            "type": "mysql", "host": host, "port": port, "database": DATABASE, "user": "root",
            "table": table, "auto_create": true, "mode": "upsert", "conflict_policy": "keep_first",
        });
        let read_back = Box::new(TableReadBack { table, server: server.clone() });
        Ok(CrashTarget { sink_section, records: read_back, env: Vec::new() })
    }
}
