//! An example sink for nats-sinks, written out of tree: every message becomes one row of a
//! SQLite table, keyed by its idempotency key. A teaching example; the walk-through is
//! `docs/writing-a-sink.md` in the nats-sinks repository.
//!
//! The crate has the file roles of the repository's own sink crates: [`config`] (the `sink`
//! section), [`error`] (SQLite errors into the contract's classes), [`sink`] (the
//! [`sinks_contract::Sink`] implementation) and [`factory`] (what a binary registers). The
//! binary is `src/main.rs`; the certification is `tests/certify.rs`.

pub mod config;
pub mod error;
pub mod factory;
pub mod sink;

pub use config::{ConflictPolicy, SqliteSinkConfig};
pub use factory::SqliteFactory;
pub use sink::SqliteSink;
