//! The driver seam: the one narrow interface between the sink's logic and an Oracle driver.
//!
//! Everything the sink does to a database goes through [`Driver`] and [`Connection`]:
//! array DML with per-row batch errors and per-row counts ([`Connection::execute_array`]),
//! one statement ([`Connection::execute`], for the staging merge and cleanup, DDL), a query
//! ([`Connection::query`], for start-up checks, lineage and reconcile), commit, rollback and ping. All
//! calls are blocking; the sink runs them on its own thread pool (`pool.rs`), never on the
//! async workers.
//!
//! Implementations:
//! - [`oci::OciDriver`]: the `oracle` crate (ODPI-C, which loads Oracle Instant Client at run
//!   time).
//! - [`scripted::ScriptedDriver`] (feature `scripted`): an in-memory database that executes
//!   each statement's [`Op`], records every statement and bind, and replays real ORA error
//!   codes and batch-error offsets from a script. The certification suite and the benchmark
//!   run the sink against it.
//!
//! The pure-Rust thin driver (`oracledb` 26.0.0-beta.5) is not an implementation: it has no
//! per-row batch errors (its response decoder `todo!()`s on them) and no per-row counts, which
//! the sink needs to report one bad row as that message's failure. See docs/oracle-sink.md.

pub mod oci;
#[cfg(any(test, feature = "scripted"))]
pub mod scripted;

/// One bind value. The variant fixes the bind type, also for NULL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// `VARCHAR2` text; `None` is NULL.
    Text(Option<String>),
    /// `NUMBER` from a signed integer; `None` is NULL.
    Int(Option<i64>),
    /// `NUMBER` from an unsigned counter (stream sequences).
    UInt(u64),
    /// `CLOB` text (JSON documents, which can exceed 32 KiB); `None` is NULL.
    Clob(Option<String>),
}

impl Value {
    /// The value as text (numbers in decimal), as a query would return it; `None` for NULL.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Self::Text(v) | Self::Clob(v) => v.clone(),
            Self::Int(v) => v.map(|i| i.to_string()),
            Self::UInt(u) => Some(u.to_string()),
        }
    }
}

/// What a statement does, in terms the scripted driver can execute without parsing SQL.
/// Built next to the SQL text by the same function (`sql.rs`), and pinned with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Inserts one row per bind row (`columns`, in bind order). `if_absent`: a row whose
    /// `key` exists is skipped (count 0); otherwise it raises ORA-00001.
    Insert {
        /// Target table.
        table: String,
        /// Bound columns, in order.
        columns: Vec<String>,
        /// Key columns (empty for `append`).
        key: Vec<String>,
        /// `MERGE … WHEN NOT MATCHED` rather than `INSERT`.
        if_absent: bool,
    },
    /// Updates the row whose `key` equals the binds after the `set` binds; with `only_if`,
    /// the row must also hold the last bind in that column (count 0 otherwise).
    Update {
        /// Target table.
        table: String,
        /// Updated columns (bound first).
        set: Vec<String>,
        /// Key columns (bound next).
        key: Vec<String>,
        /// Column compared with the last bind.
        only_if: Option<String>,
    },
    /// Appends staged rows (the first column is the batch id).
    StageInsert {
        /// Staging table.
        table: String,
        /// Bound columns, in order.
        columns: Vec<String>,
    },
    /// Query: the keys of the staged batch (bind: batch id) that exist in the target.
    StagedExisting {
        /// Staging table.
        staging: String,
        /// Target table.
        target: String,
        /// Key columns.
        key: Vec<String>,
        /// Batch id column.
        batch_column: String,
    },
    /// Set-based merge of the staged batch (bind: batch id) into the target; count is rows
    /// inserted plus rows updated.
    StageMerge {
        /// Staging table.
        staging: String,
        /// Target table.
        target: String,
        /// Merged columns.
        columns: Vec<String>,
        /// Key columns.
        key: Vec<String>,
        /// Columns updated on an existing key.
        update: Vec<String>,
        /// Batch id column.
        batch_column: String,
    },
    /// Deletes the staged batch (bind: batch id).
    StageDelete {
        /// Staging table.
        table: String,
        /// Batch id column.
        batch_column: String,
    },
    /// Query returning no rows; fails when the table or a column is missing.
    Probe {
        /// Table.
        table: String,
        /// Columns.
        columns: Vec<String>,
    },
    /// Query: `(constraint, column)` of the table's PRIMARY KEY and UNIQUE constraints.
    KeyConstraints {
        /// Table.
        table: String,
    },
    /// `CREATE TABLE`; raises ORA-00955 when the table exists.
    CreateTable {
        /// Table.
        table: String,
        /// Columns.
        columns: Vec<String>,
        /// Primary key columns (empty: none).
        key: Vec<String>,
    },
    /// `CREATE INDEX`; raises ORA-00955 when the index exists.
    CreateIndex {
        /// Index name.
        name: String,
    },
    /// Query: lineage records (see `lineage.rs`). Binds: the looked-up value.
    Lineage {
        /// Table.
        table: String,
        /// Selected columns, in order.
        select: Vec<String>,
        /// Column compared with the bind, or the mission-metadata column and JSON field.
        filter: LineageFilter,
        /// Row limit.
        limit: usize,
        /// Order: received-at column, then sequence column.
        order: Vec<String>,
    },
    /// Query (reconcile): the `select` columns of the rows whose `key` equals one of the
    /// bound key tuples. Binds: the key values, one tuple after another.
    Stored {
        /// Table.
        table: String,
        /// Key columns.
        key: Vec<String>,
        /// Selected columns, in order (a JSON column's text, serialized).
        select: Vec<String>,
    },
    /// A session setting (`ALTER SESSION …`).
    Session,
}

/// How a lineage query selects rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineageFilter {
    /// `column = :1`.
    Column(String),
    /// `JSON_VALUE(column, '$.field') = :1`.
    JsonField {
        /// The JSON column.
        column: String,
        /// Top-level field name.
        field: String,
    },
}

/// A statement: its SQL text and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL text sent to the database.
    pub sql: String,
    /// Its structured description (executed by the scripted driver).
    pub op: Op,
}

impl Statement {
    /// A statement of `sql` doing `op`.
    pub fn new(sql: String, op: Op) -> Self {
        Self { sql, op }
    }
}

/// An error raised by the database (`ORA-nnnnn`), or one row's error of an array execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    /// The ORA error number (1 for ORA-00001).
    pub code: i32,
    /// For a row of an array execution: its index in the bound rows.
    pub offset: usize,
    /// The server's message (may quote identifiers and, for some errors, values: never
    /// logged whole, see `error.rs`).
    pub message: String,
}

impl DbError {
    /// An error with `code` and `message` at row `offset`.
    pub fn new(code: i32, offset: usize, message: impl Into<String>) -> Self {
        Self { code, offset, message: message.into() }
    }
}

/// A failed driver call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverError {
    /// The database (or Oracle Net) raised an `ORA-` error for the whole call.
    Db(DbError),
    /// The client library raised a `DPI-nnnn` error (DPI-1047: Instant Client not found).
    Client {
        /// The DPI error number.
        code: i32,
        /// Its message.
        message: String,
    },
    /// Anything else (driver misuse, conversion); treated as temporary.
    Other(String),
}

impl DriverError {
    /// The ORA code, when the database raised this error.
    pub fn ora_code(&self) -> Option<i32> {
        match self {
            Self::Db(e) => Some(e.code),
            _ => None,
        }
    }
}

/// The result of an array execution that ran to its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayOutcome {
    /// Rows affected, per bound row (0 for a row in `row_errors`).
    pub row_counts: Vec<u64>,
    /// The rows the database rejected (batch errors), each with its offset.
    pub row_errors: Vec<DbError>,
}

/// Options every connection gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSetup {
    /// Statements run once on each new session (e.g. `ALTER SESSION DISABLE PARALLEL DML`).
    pub statements: Vec<String>,
}

/// A source of connections (a session pool).
pub trait Driver: Send + Sync + std::fmt::Debug {
    /// Takes a connection from the pool (opening one if needed). Blocking.
    fn connect(&self) -> Result<Box<dyn Connection>, DriverError>;

    /// Closes the pool (connections in use are closed when returned). Blocking.
    fn close(&self) -> Result<(), DriverError> {
        Ok(())
    }
}

/// One session, used by one thread at a time. Changes are uncommitted until
/// [`Connection::commit`]; dropping a connection with uncommitted changes rolls them back.
pub trait Connection {
    /// Executes `statement` once per row of `rows` in one round trip, with batch errors and
    /// per-row counts: rows the database rejects are reported in
    /// [`ArrayOutcome::row_errors`] and the other rows' changes stand. `Err` when the whole
    /// call failed (nothing of it stands).
    fn execute_array(&mut self, statement: &Statement, rows: &[Vec<Value>]) -> Result<ArrayOutcome, DriverError>;

    /// Executes `statement` once; returns the rows affected.
    fn execute(&mut self, statement: &Statement, binds: &[Value]) -> Result<u64, DriverError>;

    /// Runs a query; every column as text (`None` for NULL).
    fn query(&mut self, statement: &Statement, binds: &[Value]) -> Result<Vec<Vec<Option<String>>>, DriverError>;

    /// Commits the transaction.
    fn commit(&mut self) -> Result<(), DriverError>;

    /// Rolls the transaction back.
    fn rollback(&mut self) -> Result<(), DriverError>;

    /// Checks the session is alive (a round trip).
    fn ping(&mut self) -> Result<(), DriverError>;
}
