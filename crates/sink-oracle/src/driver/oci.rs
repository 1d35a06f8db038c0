//! [`OciDriver`]: the seam on the `oracle` crate (ODPI-C, vendored and compiled in; it loads
//! Oracle Instant Client's `libclntsh` when the first pool is created, so a binary without
//! Instant Client builds and starts, and fails with DPI-1047 only when it connects).
//!
//! Array DML uses `Batch` with `with_batch_errors()` and `with_row_counts()` (Oracle Client
//! and Database 12.1 or later): every row runs, rejected rows come back with their offsets,
//! and the affected-row count of each row tells a `MERGE … WHEN NOT MATCHED` insert (1) from
//! an existing key (0). JSON documents are bound as `CLOB` text.
//!
//! **Never run against a server here** (no Instant Client can be installed on the machines
//! this project builds on): only the DPI-1047 path is exercised by tests.

use std::time::Duration;

use oracle::pool::{GetMode, Pool, PoolBuilder};
use oracle::sql_type::{OracleType, ToSql};
use oracle::{ErrorKind, SqlValue};

use super::{ArrayOutcome, Connection, DbError, Driver, DriverError, SessionSetup, Statement, Value};

/// How long a thread waits for a pooled connection before the call fails (temporary).
const GET_TIMEOUT: Duration = Duration::from_secs(30);

/// Connection parameters of the pool.
#[derive(Clone, PartialEq, Eq)]
pub struct OciOptions {
    /// Database user.
    pub user: String,
    /// Password (resolved from the environment at start-up; never printed).
    pub password: String,
    /// Connect string (see `config::connection`).
    pub connect_string: String,
    /// `TNS_ADMIN` directory (`sink.config_dir`).
    pub config_dir: Option<String>,
    /// Connections opened at start-up.
    pub min: u32,
    /// Most connections.
    pub max: u32,
    /// Connections opened at a time.
    pub increment: u32,
    /// Run on every new session.
    pub setup: SessionSetup,
}

impl std::fmt::Debug for OciOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciOptions")
            .field("user", &self.user)
            .field("password", &"********")
            .field("connect_string", &"<connect string>")
            .field("config_dir", &self.config_dir)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

/// A session pool of the `oracle` crate.
pub struct OciDriver {
    pool: Pool,
    setup: SessionSetup,
}

impl std::fmt::Debug for OciDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciDriver").finish_non_exhaustive()
    }
}

/// Converts an `oracle` crate error.
fn convert(e: &oracle::Error) -> DriverError {
    if let Some(code) = e.dpi_code() {
        let message = e.db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
        return DriverError::Client { code, message };
    }
    match (e.kind(), e.db_error()) {
        (ErrorKind::OciError, Some(d)) => DriverError::Db(DbError::new(d.code(), d.offset() as usize, d.message())),
        _ => DriverError::Other(e.to_string()),
    }
}

impl OciDriver {
    /// Creates the pool (loading Instant Client the first time). Blocking.
    pub fn new(options: &OciOptions) -> Result<Self, DriverError> {
        if let Some(dir) = &options.config_dir {
            let mut params = oracle::InitParams::new();
            params.oracle_client_config_dir(dir.as_str()).map_err(|e| convert(&e))?;
            // `false`: the client was initialized before (by another sink); its settings stand.
            if !params.init().map_err(|e| convert(&e))? {
                tracing::warn!("oracle client already initialized; sink.config_dir of this sink is not applied");
            }
        }
        let mut builder = PoolBuilder::new(&options.user, &options.password, &options.connect_string);
        builder
            .min_connections(options.min)
            .max_connections(options.max)
            .connection_increment(options.increment)
            .get_mode(GetMode::TimedWait(GET_TIMEOUT))
            .stmt_cache_size(64)
            .driver_name("nats-sinks");
        let pool = builder.build().map_err(|e| convert(&e))?;
        Ok(Self { pool, setup: options.setup.clone() })
    }
}

impl Driver for OciDriver {
    fn connect(&self) -> Result<Box<dyn Connection>, DriverError> {
        let conn = self.pool.get().map_err(|e| convert(&e))?;
        let mut session = OciConnection { conn, broken: false };
        if session.conn.is_new_connection() {
            for sql in &self.setup.statements {
                session.conn.execute(sql, &[]).map_err(|e| session.fail(&e))?;
            }
        }
        Ok(Box::new(session))
    }

    fn close(&self) -> Result<(), DriverError> {
        self.pool.close(&oracle::pool::CloseMode::Default).map_err(|e| convert(&e))
    }
}

/// One pooled session; a session that saw a connection-level error is dropped from the pool
/// instead of being handed out again.
struct OciConnection {
    conn: oracle::Connection,
    broken: bool,
}

impl OciConnection {
    fn fail(&mut self, e: &oracle::Error) -> DriverError {
        let converted = convert(e);
        let fatal = match &converted {
            DriverError::Db(d) => crate::error::breaks_session(d.code),
            DriverError::Client { .. } => true,
            DriverError::Other(_) => false,
        };
        self.broken |= fatal;
        converted
    }
}

impl Drop for OciConnection {
    fn drop(&mut self) {
        if self.broken {
            let _ = self.conn.close_with_mode(oracle::conn::CloseMode::Drop);
        } else {
            // Returning a session with open work would hand it to the next batch.
            let _ = self.conn.rollback();
        }
    }
}

/// A bind value as the `oracle` crate sees it.
struct Bind<'a>(&'a Value);

impl Bind<'_> {
    fn oratype(&self) -> OracleType {
        match self.0 {
            Value::Text(_) => OracleType::Varchar2(4000),
            Value::Int(_) | Value::UInt(_) => OracleType::Number(0, -127),
            Value::Clob(_) => OracleType::CLOB,
        }
    }
}

impl ToSql for Bind<'_> {
    fn oratype(&self, _conn: &oracle::Connection) -> oracle::Result<OracleType> {
        Ok(Bind::oratype(self))
    }

    fn to_sql(&self, val: &mut SqlValue<'_>) -> oracle::Result<()> {
        match self.0 {
            Value::Text(Some(s)) | Value::Clob(Some(s)) => s.to_sql(val),
            Value::Int(Some(i)) => i.to_sql(val),
            Value::UInt(u) => u.to_sql(val),
            Value::Text(None) | Value::Int(None) | Value::Clob(None) => val.set_null(),
        }
    }
}

fn params(values: &[Value]) -> Vec<Bind<'_>> {
    values.iter().map(Bind).collect()
}

impl Connection for OciConnection {
    fn execute_array(&mut self, statement: &Statement, rows: &[Vec<Value>]) -> Result<ArrayOutcome, DriverError> {
        if rows.is_empty() {
            return Ok(ArrayOutcome::default());
        }
        let result = (|| {
            let mut batch =
                self.conn.batch(&statement.sql, rows.len()).with_batch_errors().with_row_counts().build()?;
            for (i, v) in rows[0].iter().enumerate() {
                batch.set_type(i + 1, &Bind(v).oratype())?;
            }
            for row in rows {
                let binds = params(row);
                let refs: Vec<&dyn ToSql> = binds.iter().map(|b| b as &dyn ToSql).collect();
                batch.append_row(&refs)?;
            }
            let row_errors = match batch.execute() {
                Ok(()) => Vec::new(),
                Err(e) if e.kind() == ErrorKind::BatchErrors => e
                    .batch_errors()
                    .map(|errors| {
                        errors.iter().map(|d| DbError::new(d.code(), d.offset() as usize, d.message())).collect()
                    })
                    .unwrap_or_default(),
                Err(e) => return Err(e),
            };
            let row_counts = batch.row_counts()?;
            Ok(ArrayOutcome { row_counts, row_errors })
        })();
        result.map_err(|e| self.fail(&e))
    }

    fn execute(&mut self, statement: &Statement, binds: &[Value]) -> Result<u64, DriverError> {
        let values = params(binds);
        let refs: Vec<&dyn ToSql> = values.iter().map(|b| b as &dyn ToSql).collect();
        let result = self.conn.execute(&statement.sql, &refs).and_then(|s| s.row_count());
        result.map_err(|e| self.fail(&e))
    }

    fn query(&mut self, statement: &Statement, binds: &[Value]) -> Result<Vec<Vec<Option<String>>>, DriverError> {
        let values = params(binds);
        let refs: Vec<&dyn ToSql> = values.iter().map(|b| b as &dyn ToSql).collect();
        let result = (|| {
            let rows = self.conn.query(&statement.sql, &refs)?;
            let mut out = Vec::new();
            for row in rows {
                let row = row?;
                let count = row.sql_values().len();
                let mut values = Vec::with_capacity(count);
                for i in 0..count {
                    values.push(row.get::<usize, Option<String>>(i)?);
                }
                out.push(values);
            }
            Ok(out)
        })();
        result.map_err(|e| self.fail(&e))
    }

    fn commit(&mut self) -> Result<(), DriverError> {
        let result = self.conn.commit();
        result.map_err(|e| self.fail(&e))
    }

    fn rollback(&mut self) -> Result<(), DriverError> {
        let result = self.conn.rollback();
        result.map_err(|e| self.fail(&e))
    }

    fn ping(&mut self) -> Result<(), DriverError> {
        let result = self.conn.ping();
        result.map_err(|e| self.fail(&e))
    }
}
