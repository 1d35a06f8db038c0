//! Certification harnesses of the Oracle sink for `docs/sink-contract.md` (feature
//! `certify`).
//!
//! - [`ScriptedHarness`] (`oracle-scripted`): every fixture is a fresh
//!   [`ScriptedDriver`] database; the sink is the real one (mapping, statements, write path,
//!   thread pool), only the seam is scripted. Its results are reported as scripted, never as
//!   a pass against a live database. It has no crash target: the scripted database lives in
//!   the test process, not in `nats-sink`.
//! - [`LiveHarness`] (`oracle`): a real database named by `NATS_SINKS_TEST_ORACLE_DSN`,
//!   `NATS_SINKS_TEST_ORACLE_USER` and `NATS_SINKS_TEST_ORACLE_PASSWORD`, through Oracle
//!   Instant Client. Without them, or when Instant Client cannot be loaded, every clause is
//!   skipped with that reason. Fixtures are fresh tables (JSON columns as `CLOB IS JSON`, so
//!   payloads read back byte for byte), dropped afterwards.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use sinks_certify::skips::ORACLE_DATABASE;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records, Unavailable};
use sinks_contract::config::SinkSection;
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};

use crate::driver::oci::{OciDriver, OciOptions};
use crate::driver::scripted::{Fault, FaultPoint, RowRule, ScriptedDriver};
use crate::driver::{Driver, DriverError, Op, SessionSetup, Statement};
use crate::{OracleSink, OracleSinkConfig};

/// Variable naming the live test database (Easy Connect string, alias or descriptor).
pub const DSN_ENV: &str = "NATS_SINKS_TEST_ORACLE_DSN";
/// Variable naming the live test user.
pub const USER_ENV: &str = "NATS_SINKS_TEST_ORACLE_USER";
/// Variable holding the live test user's password.
pub const PASSWORD_ENV: &str = "NATS_SINKS_TEST_ORACLE_PASSWORD";

/// A unique table name.
pub fn unique_table(prefix: &str) -> String {
    format!("{}_{}_{:08X}", prefix.to_ascii_uppercase(), std::process::id(), rand::random::<u32>())
}

fn section(value: serde_json::Value) -> SinkSection {
    match value {
        serde_json::Value::Object(m) => SinkSection(m),
        _ => SinkSection(serde_json::Map::new()),
    }
}

/// `(stream-sequence key, original payload bytes)` of stored rows given as
/// `(stream, sequence, payload JSON)`.
fn records(rows: impl IntoIterator<Item = (Option<String>, Option<String>, Option<String>)>) -> Vec<Record> {
    rows.into_iter()
        .map(|(stream, seq, payload)| {
            let key = format!("stream-sequence:{}:{}", stream.unwrap_or_default(), seq.unwrap_or_default());
            (key, Bytes::from(sinks_contract::payload::decode_stored(&payload.unwrap_or_default())))
        })
        .collect()
}

/// The scripted harness: the real sink over a [`ScriptedDriver`].
#[derive(Debug, Default)]
pub struct ScriptedHarness;

struct ScriptedReadBack {
    driver: ScriptedDriver,
    table: String,
}

#[async_trait]
impl Records for ScriptedReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let rows = self.driver.committed(&self.table);
        Ok(records(rows.into_iter().map(|r| {
            let get = |c: &str| r.get(c).cloned().flatten();
            (get("STREAM_NAME"), get("STREAM_SEQUENCE"), get("PAYLOAD_JSON"))
        })))
    }

    /// Every committed row whole, as `COLUMN=value` lines, without the two columns a row
    /// records its one insert in (`RECEIVED_AT_EPOCH_NS`, `STORED_AT_EPOCH_NS`).
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        let rows = self.driver.committed(&self.table);
        Ok(Some(
            rows.into_iter()
                .map(|r| {
                    let get = |c: &str| r.get(c).cloned().flatten().unwrap_or_default();
                    let key = format!("stream-sequence:{}:{}", get("STREAM_NAME"), get("STREAM_SEQUENCE"));
                    let lines: String = r
                        .iter()
                        .filter(|(column, _)| !matches!(column.as_str(), "RECEIVED_AT_EPOCH_NS" | "STORED_AT_EPOCH_NS"))
                        .map(|(column, value)| format!("{column}={}\n", value.as_deref().unwrap_or("NULL")))
                        .collect();
                    (key, Bytes::from(lines))
                })
                .collect(),
        ))
    }
}

/// The section members that key each row by `origin_sequence` (clause C14).
fn by_origin() -> serde_json::Value {
    serde_json::json!({"idempotency": {"strategy": "origin_sequence"}})
}

impl ScriptedHarness {
    /// The configuration of a scripted fixture writing `table`.
    pub fn config(table: &str, extra: serde_json::Value) -> Result<OracleSinkConfig, String> {
        let mut v = serde_json::json!({
            "type": "oracle", "dsn": "scripted:1521/CERT", "user": "NATS_SINK_CERT", "password_env": "NATS_SINKS_CERT_UNUSED",
            "table": table, "auto_create": true, "mode": "merge", "conflict_policy": "keep_first",
        });
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        OracleSinkConfig::from_section(&section(v)).map_err(|e| e.to_string())
    }

    /// A fresh scripted database and an opened sink over it, writing `table`.
    pub async fn sink(table: &str, extra: serde_json::Value) -> Result<(OracleSink, ScriptedDriver), String> {
        let config = Self::config(table, extra)?;
        let setup = SessionSetup { statements: vec![crate::sql::DISABLE_PARALLEL_DML.to_owned()] };
        let driver = ScriptedDriver::new().with_setup(setup);
        let sink = OracleSink::with_driver(config, Arc::new(driver.clone())).map_err(|e| e.to_string())?;
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok((sink, driver))
    }

    async fn fixture(&self) -> Result<(Fixture, ScriptedDriver, String), String> {
        self.fixture_with(serde_json::json!({})).await
    }

    async fn fixture_with(&self, extra: serde_json::Value) -> Result<(Fixture, ScriptedDriver, String), String> {
        let table = unique_table("cert");
        let (sink, driver) = Self::sink(&table, extra).await?;
        let read_back = ScriptedReadBack { driver: driver.clone(), table: table.clone() };
        Ok((Fixture { sink: Arc::new(sink), records: Box::new(read_back) }, driver, table))
    }
}

#[async_trait]
impl Harness for ScriptedHarness {
    fn name(&self) -> &'static str {
        "oracle-scripted"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture().await.map(|(f, _, _)| f)
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // A SUBJECT column of 24 characters: the database rejects a long subject with
        // ORA-12899 at that row's batch-error offset.
        let (fx, driver, table) = self.fixture().await.ok()?;
        driver.reject_rows(RowRule::too_large(Some(&table), "SUBJECT", 24));
        let subject = "cert.poison.this.subject.is.far.too.long.for.the.column";
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, subject, r#"{"poison":true}"#)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(self.fixture_with(by_origin()).await.map(|(f, _, _)| f))
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let driver = ScriptedDriver::new();
        let no_listener = DriverError::Db(crate::driver::DbError::new(12541, 0, "ORA-12541: TNS:no listener"));
        driver.fail(Fault { point: FaultPoint::Connect, error: no_listener, times: usize::MAX });
        let config = Self::config("UNREACHABLE", serde_json::json!({})).ok()?;
        Some(Arc::new(OracleSink::with_driver(config, Arc::new(driver)).ok()?))
    }

    fn crash_unavailable(&self) -> Option<Unavailable> {
        Some(Unavailable {
            allowed: ORACLE_DATABASE,
            detail: "the scripted database lives in the test process; the crash certification runs the real \
                     binary, which needs a live database"
                .into(),
        })
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        Err("the scripted database lives in the test process; crash certification needs a live database".into())
    }
}

/// A live database, or why there is none.
#[derive(Debug, Clone)]
struct Live {
    dsn: String,
    user: String,
    password: String,
}

impl Live {
    fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
        Ok(Self { dsn: var(DSN_ENV)?, user: var(USER_ENV)?, password: var(PASSWORD_ENV)? })
    }

    fn driver(&self) -> Result<OciDriver, String> {
        let options = OciOptions {
            user: self.user.clone(),
            password: self.password.clone(),
            connect_string: self.dsn.clone(),
            config_dir: None,
            min: 1,
            max: 2,
            increment: 1,
            setup: SessionSetup::default(),
        };
        OciDriver::new(&options)
            .map_err(|e| crate::error::classify(&e, "connecting to the live test database").message().to_owned())
    }

    /// Runs `sql` (DDL or a query without binds) on a fresh connection, off the async workers.
    async fn run(&self, sql: String, query: bool) -> Result<Vec<Vec<Option<String>>>, String> {
        let live = self.clone();
        tokio::task::spawn_blocking(move || {
            let driver = live.driver()?;
            let mut conn = driver.connect().map_err(|e| format!("{e:?}"))?;
            let statement = Statement::new(sql, Op::Session);
            let out = if query {
                conn.query(&statement, &[]).map_err(|e| format!("{e:?}"))?
            } else {
                conn.execute(&statement, &[]).map_err(|e| format!("{e:?}"))?;
                Vec::new()
            };
            drop(conn);
            let _ = driver.close();
            Ok(out)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Runs one DML statement without binds on a fresh connection and commits it.
    async fn change(&self, sql: String) -> Result<u64, String> {
        let live = self.clone();
        tokio::task::spawn_blocking(move || {
            let driver = live.driver()?;
            let mut conn = driver.connect().map_err(|e| format!("{e:?}"))?;
            let count = conn.execute(&Statement::new(sql, Op::Session), &[]).map_err(|e| format!("{e:?}"))?;
            conn.commit().map_err(|e| format!("{e:?}"))?;
            drop(conn);
            let _ = driver.close();
            Ok(count)
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

/// The live harness (see the module documentation).
#[derive(Debug)]
pub struct LiveHarness {
    live: Result<Live, String>,
    /// Set when the environment names no database (the allow-listed reason to skip); a
    /// database that is named but cannot be reached is a failure instead.
    unset: Option<String>,
}

impl LiveHarness {
    /// A harness over the database the environment names; checks that Instant Client loads
    /// and the database answers, and otherwise skips every clause with the reason.
    pub async fn from_env() -> Self {
        let live = match Live::from_env() {
            Ok(live) => live,
            Err(reason) => return Self { live: Err(reason.clone()), unset: Some(reason) },
        };
        let probe = live.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let driver = probe.driver()?;
            let mut conn = driver.connect().map_err(|e| format!("{e:?}"))?;
            conn.ping().map_err(|e| format!("{e:?}"))
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        Self { live: checked.map(|()| live), unset: None }
    }

    fn live(&self) -> Result<&Live, String> {
        self.live.as_ref().map_err(Clone::clone)
    }

    /// Why there is no live database (a variable unset, Instant Client missing, the
    /// database not answering), or `None` when there is one.
    pub fn why_not_live(&self) -> Option<&str> {
        self.live.as_ref().err().map(String::as_str)
    }

    /// Asserts that the harness can run, or records an allow-listed skip of `test` when the
    /// environment names no database (then returns false). Panics when a database is named
    /// but cannot be used.
    pub fn runs(&self, test: &str) -> bool {
        match (&self.unset, &self.live) {
            (Some(unset), _) => {
                sinks_certify::skips::record_allowed_skip(ORACLE_DATABASE, test, unset);
                false
            }
            (None, Err(reason)) => panic!("{test}: the live Oracle database is named but cannot be used: {reason}"),
            (None, Ok(_)) => true,
        }
    }

    /// An opened sink writing a fresh table (the harness's settings, `CLOB` JSON columns,
    /// with `extra` on top), and that table, dropped with the returned [`LiveTable`].
    pub async fn table_sink(&self, extra: serde_json::Value) -> Result<(OracleSink, LiveTable), String> {
        let live = self.live()?.clone();
        let table = unique_table("it");
        let config =
            OracleSinkConfig::from_section(&section(self.section(&table, extra)?)).map_err(|e| e.to_string())?;
        let sink = OracleSink::new(config).map_err(|e| e.to_string())?.with_password(&live.password);
        let owned = LiveTable { read_back: LiveReadBack { live, table } };
        sink.open().await.map_err(|e| e.display_chain())?;
        Ok((sink, owned))
    }

    fn section(&self, table: &str, extra: serde_json::Value) -> Result<serde_json::Value, String> {
        let live = self.live()?;
        let mut v = serde_json::json!({
            "type": "oracle", "dsn": live.dsn, "user": live.user, "password_env": PASSWORD_ENV,
            "table": table, "auto_create": true, "json_column_type": "clob", "mode": "merge", "conflict_policy": "keep_first",
        });
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        Ok(v)
    }

    async fn fixture(&self) -> Result<(Fixture, String), String> {
        self.fixture_with(serde_json::json!({})).await
    }

    async fn fixture_with(&self, extra: serde_json::Value) -> Result<(Fixture, String), String> {
        let live = self.live()?.clone();
        let table = unique_table("cert");
        let config =
            OracleSinkConfig::from_section(&section(self.section(&table, extra)?)).map_err(|e| e.to_string())?;
        let sink = OracleSink::new(config).map_err(|e| e.to_string())?.with_password(&live.password);
        sink.open().await.map_err(|e| e.display_chain())?;
        let read_back = LiveReadBack { live, table: table.clone() };
        Ok((Fixture { sink: Arc::new(sink), records: Box::new(read_back) }, table))
    }
}

/// A live test table (see [`LiveHarness::table_sink`]); dropped when dropped.
pub struct LiveTable {
    read_back: LiveReadBack,
}

impl std::fmt::Debug for LiveTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTable").field("table", &self.read_back.table).finish_non_exhaustive()
    }
}

impl LiveTable {
    /// The table's name (upper case, unquoted).
    pub fn name(&self) -> &str {
        &self.read_back.table
    }

    /// Runs one DML statement (no binds) and commits it: a change behind the sink's back.
    /// Returns the rows affected.
    pub async fn change(&self, sql: &str) -> Result<u64, String> {
        self.read_back.live.change(sql.to_owned()).await
    }
}

/// Reads a live table back; drops it when dropped.
struct LiveReadBack {
    live: Live,
    table: String,
}

#[async_trait]
impl Records for LiveReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let sql = format!("SELECT \"STREAM_NAME\", \"STREAM_SEQUENCE\", \"PAYLOAD_JSON\" FROM \"{}\"", self.table);
        let rows = self.live.run(sql, true).await?;
        Ok(records(rows.into_iter().map(|r| {
            let mut it = r.into_iter();
            (it.next().flatten(), it.next().flatten(), it.next().flatten())
        })))
    }
}

impl Drop for LiveReadBack {
    fn drop(&mut self) {
        let (live, table) = (self.live.clone(), self.table.clone());
        let _ = std::thread::spawn(move || {
            let driver = live.driver().ok()?;
            let mut conn = driver.connect().ok()?;
            let statement = Statement::new(format!("DROP TABLE \"{table}\" PURGE"), Op::Session);
            conn.execute(&statement, &[]).ok()
        })
        .join();
    }
}

#[async_trait]
impl Harness for LiveHarness {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn unavailable(&self) -> Option<Unavailable> {
        self.unset.as_ref().map(|unset| Unavailable { allowed: ORACLE_DATABASE, detail: unset.clone() })
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture().await.map(|(f, _)| f)
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // A check constraint on the subject's length: ORA-02290 for that row only.
        let (fx, table) = self.fixture().await.ok()?;
        let sql = format!(
            "ALTER TABLE \"{table}\" ADD CONSTRAINT \"{table}_SL\" CHECK (DBMS_LOB.GETLENGTH(\"SUBJECT\") <= 24)"
        );
        self.live().ok()?.run(sql, false).await.ok()?;
        let subject = "cert.poison.this.subject.is.far.too.long.for.the.column";
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, subject, r#"{"poison":true}"#)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(self.fixture_with(by_origin()).await.map(|(f, _)| f))
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let live = self.live().ok()?;
        let v = self
            .section("UNREACHABLE", serde_json::json!({"dsn": "127.0.0.1:1/NOPE", "tcp_connect_timeout": 2.0}))
            .ok()?;
        let config = OracleSinkConfig::from_section(&section(v)).ok()?;
        Some(Arc::new(OracleSink::new(config).ok()?.with_password(&live.password)))
    }

    fn secrets(&self) -> Vec<String> {
        self.live.as_ref().map(|l| vec![l.password.clone()]).unwrap_or_default()
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        let live = self.live()?.clone();
        let table = unique_table("crash");
        let sink_section = self.section(&table, serde_json::json!({}))?;
        let env = vec![(PASSWORD_ENV.to_owned(), live.password.clone())];
        Ok(CrashTarget { sink_section, records: Box::new(LiveReadBack { live, table }), env })
    }
}
