//! The SQLite sink against the contract's certification suite (`sinks-certify`): one test
//! per clause, C1 to C14. Every fixture is a fresh database in a temporary directory, read
//! back with a connection of its own, not through the sink.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use sinks_certify::{Fixture, Harness, Record, Records};
use sinks_contract::testing::envelope;
use sinks_contract::{Envelope, Sink};
use sqlite_sink::{SqliteSink, SqliteSinkConfig};

/// Fresh databases in temporary directories.
struct SqliteHarness;

/// Reads every row of a database it owns (removed on drop).
struct Rows {
    dir: tempfile::TempDir,
}

impl Rows {
    fn path(&self) -> PathBuf {
        self.dir.path().join("sink.db")
    }
}

#[async_trait]
impl Records for Rows {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        let conn = rusqlite::Connection::open_with_flags(self.path(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| e.to_string())?;
        let mut select = conn.prepare("SELECT idempotency_key, payload FROM messages").map_err(|e| e.to_string())?;
        let rows = select
            .query_map([], |r| Ok((r.get::<_, String>(0)?, Bytes::from(r.get::<_, Vec<u8>>(1)?))))
            .map_err(|e| e.to_string())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
    }
}

/// A fresh database, and an opened sink on it configured by `configure`.
async fn fixture(configure: impl FnOnce(&mut SqliteSinkConfig)) -> Result<Fixture, String> {
    let rows = Rows { dir: tempfile::tempdir().map_err(|e| e.to_string())? };
    let mut config = SqliteSinkConfig::new(rows.path());
    configure(&mut config);
    let sink = SqliteSink::new(config);
    sink.open().await.map_err(|e| e.display_chain())?;
    Ok(Fixture { sink: Arc::new(sink), records: Box::new(rows) })
}

#[async_trait]
impl Harness for SqliteHarness {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        fixture(|_| {}).await
    }

    /// A payload over `max_payload_bytes` is refused permanently.
    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        let fx = fixture(|c| c.max_payload_bytes = 256).await.ok()?;
        let big = format!("{{\"pad\":\"{}\"}}", "p".repeat(300));
        Some((fx, envelope(sinks_certify::CERT_STREAM, 7, "cert.poison", big)))
    }

    /// Rows keyed by where each event was first stored (`key: origin_sequence`).
    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(fixture(|c| c.key = sinks_contract::idempotency::KeySource::OriginSequence).await)
    }

    /// The database's directory does not exist (a volume that is not mounted).
    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let dir = tempfile::tempdir().ok()?;
        let sink = SqliteSink::new(SqliteSinkConfig::new(dir.path().join("not-mounted/sink.db")));
        drop(dir);
        Some(Arc::new(sink))
    }
}

sinks_certify::certify_tests!(SqliteHarness);
