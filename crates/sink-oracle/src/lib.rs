//! Oracle Database sink of nats-sinks (`sink.type = "oracle"`), on the `oracle` crate
//! (ODPI-C; Oracle Instant Client is loaded at run time).
//!
//! **What is written where.** One row per message in `table`, or in the first
//! `table_routes` entry whose subject pattern matches; the reference's column layout
//! (`STREAM_NAME`, `STREAM_SEQUENCE`, `SUBJECT`, `MESSAGE_ID`, …, `PAYLOAD_JSON`,
//! `HEADERS_JSON`, `METADATA_JSON`), renameable through `columns`. Every routed table of a
//! batch is written in one transaction, committed before any outcome is reported.
//!
//! **Per-row outcomes.** Rows are written with array DML with batch errors and per-row
//! counts: a new key is committed, an existing key is a duplicate (or, with
//! `conflict_policy`, a conflict that is kept, overwritten or dead-lettered), and a row the
//! database rejects (ORA-12899, ORA-01400, ORA-02290, ORA-40441, …) fails permanently alone
//! while its batch-mates commit. The optional staging path array-loads a staging table and
//! moves the batch with one set-based `MERGE` (see [`write`](crate)'s documentation in
//! docs/oracle-sink.md).
//!
//! **Layout.** `config` (fields, validation, connect string), `sql` (every statement, pure),
//! `ddl` (tables from the mapping), `row` (envelope → binds), `error` (ORA-code table),
//! `driver` (the seam, with the `oracle`-crate and the scripted implementations), `pool`
//! (the sink's own blocking threads), `write` (the transaction), `sink` (the async
//! [`Sink`](sinks_contract::Sink)), `lineage` (read-only queries), `certify` (harnesses).
//!
//! **Capabilities.** Atomic per batch; reports duplicates (except in `append` mode); detects
//! conflicts with `conflict_policy`. Identifiers are allow-listed; every value is bound.

#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod ddl;
pub mod driver;
mod error;
mod factory;
pub mod lineage;
mod pool;
mod row;
mod sink;
mod sql;
mod write;

pub use config::connection::{ConnectString, connect_string};
pub use config::{
    ColumnMapping, ConflictPolicy, IdempotencyConfig, JsonColumnType, OracleSinkConfig, StagingCleanup, StagingConfig,
    TableRoute, WriteMode,
};
pub use factory::OracleFactory;
pub use sink::OracleSink;
