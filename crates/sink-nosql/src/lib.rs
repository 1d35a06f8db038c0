//! Oracle NoSQL Database sink of nats-sinks (`sink.type = "oracle_nosql"`), on the official
//! Rust SDK (`oracle-nosql-rust-sdk`): each JetStream message becomes one row, acknowledged
//! only after the service confirmed the put.
//!
//! **Rows.** The table has the reference's three columns: the row key (`key_field`, STRING,
//! the primary key), the event document (`value_field`, JSON) and the time it was written
//! (`stored_at_field`, LONG, ns since the epoch). The row key is the raw key string of
//! `key_strategy` (`stream-sequence:S:N`, `message-id:ID`, `payload-sha256:SUBJECT:HEX`),
//! optionally behind `key_prefix:`. The event document is the reference's
//! `nats_sinks.oracle_nosql.event.v1` (identity, timestamps, headers, the standard metadata
//! document, the payload as a JSON value or wrapped per `payload_mode`, `payload_info`),
//! plus the published JSON text byte for byte (`payload_text`, with `store_payload_text`).
//!
//! **Duplicates and conflicts.** `duplicate_policy = "skip_existing"` (default) and
//! `"fail_existing"` put if absent with the existing row returned, so a redelivery can never
//! overwrite; the stored payload fingerprint decides: same payload → duplicate; different →
//! conflict, the stored row kept (`skip_existing`, acknowledged and logged) or the message
//! dead-lettered (`fail_existing`). `"replace"` overwrites.
//!
//! **Writes.** The rows of a batch are put concurrently (`max_concurrent_requests`), one
//! ordering key's and one row key's messages one after another in input order; each message
//! has its own outcome. Temporary failures are retried in place within the write's budget.
//!
//! **Errors** (see `error.rs`): throttling, timeouts and an unavailable service are
//! temporary; a row the service refuses is permanent for that message; a missing table,
//! refused credentials or a table whose columns do not match are configuration errors at
//! start-up and temporary later (never dead-lettered). Service texts are never logged (they
//! can quote values).
//!
//! **Durability.** By default every put asks an on-premises store for COMMIT_SYNC (the
//! store flushes its log before it answers), through the workspace's patch of the SDK
//! (`vendor/oracle-nosql-rust-sdk`: 0.1.5 could not send a durability), so an acknowledged
//! row survives a kill -9 of the store whatever the proxy's default. `durability:
//! operator_confirmed` sends none (the reference's behaviour). See `docs/nosql-sink.md`.

#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod factory;
mod row;
mod sink;

pub use config::{AuthMode, DeploymentMode, DuplicatePolicy, Durability, KeyStrategy, NoSqlSinkConfig};
pub use factory::NoSqlFactory;
pub use row::{EVENT_SCHEMA, field_to_json, map_to_json, stored_payload};
pub use sink::NoSqlSink;
