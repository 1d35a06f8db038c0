//! MySQL / MariaDB sink of nats-sinks (`sink.type = "mysql"`), on `mysql_async`.
//!
//! **What is written where.** One row per message in `table`, or in the first
//! `table_routes` entry whose subject pattern matches; the reference's column layout
//! (`STREAM_NAME`, `STREAM_SEQUENCE`, `SUBJECT`, `MESSAGE_ID`, …, `PAYLOAD_JSON`,
//! `HEADERS_JSON`, `METADATA_JSON`), renameable through `columns`. Every routed table of a
//! batch is written in one transaction, committed before any outcome is reported.
//!
//! **Idempotency.** The key columns (`idempotency.columns`, default
//! `STREAM_NAME, STREAM_SEQUENCE`) must carry a PRIMARY KEY or UNIQUE index (checked at
//! start-up). A redelivered key is reported as a duplicate; with `conflict_policy`, a
//! `PAYLOAD_SHA256` fingerprint column also tells a conflicting redelivery (same key,
//! different content), which is kept, overwritten or dead-lettered. A row the server rejects
//! (data too long, invalid JSON, NOT NULL) fails alone; its batch-mates commit.
//!
//! **Capabilities.** Atomic per batch; reports duplicates (except in `append` mode); detects
//! conflicts with `conflict_policy`. Identifiers are allow-listed; every value is bound.

#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod factory;
mod row;
mod sink;
mod sql;

pub use config::{ColumnMapping, ConflictPolicy, IdempotencyConfig, MySqlSinkConfig, TableRoute, WriteMode};
pub use factory::MySqlFactory;
pub use sink::{MySqlSink, quoted_table};
