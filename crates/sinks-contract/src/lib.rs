//! The sink contract of nats-sinks: everything a sink implements and may use, and nothing
//! that talks to NATS.
//!
//! A sink crate implements [`Sink`]: it receives [`Envelope`]s and reports one
//! [`MessageOutcome`] per envelope. It never sees an acknowledgement handle, a JetStream
//! client or the runner; Cargo enforces that, because this crate does not depend on
//! async-nats (nor on figment or prometheus-client) and a sink crate depends on this crate
//! only (`xtask/src/tidy.rs` checks both).
//!
//! Besides the trait and its outcomes, the contract holds the mechanics more than one sink
//! needs, each once and with its own tests: idempotency keys ([`idempotency`]), payload
//! modes ([`payload`]), the standard metadata document ([`metadata`]), payload encryption
//! ([`encryption`]), ordering within a write ([`ordering`]), backoff and in-place retries
//! ([`retry`]), what to report when a key already holds a record ([`existing`]), the column
//! mapping of relational sinks ([`columns`]) and the rest they share ([`relational`]: key
//! settings, table routes, neutral row cells), the batch mode of the object sinks
//! ([`batch`]: partitions, naming, manifests, NDJSON and Parquet encoders, the writer) and
//! what holding sinks need ([`holding`]), create-if-absent file placement ([`files`]), compression, blocking
//! work, strict JSON, and the configuration types a sink parses its section with
//! ([`config`]).

pub mod batch;
pub mod blocking;
#[cfg(feature = "certify")]
pub mod certify;
pub mod columns;
pub mod compression;
pub mod config;
pub mod encryption;
pub mod envelope;
pub mod error;
pub mod existing;
pub mod files;
pub mod holding;
pub mod idempotency;
pub mod json;
pub mod metadata;
pub mod ordering;
pub mod payload;
pub mod relational;
pub mod retry;
pub mod sink;
pub mod subject;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{ConfigError, ConfigIssue, Issues, SinkSection};
pub use envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
pub use error::{BoxError, ErrorClass, SinkError};
pub use idempotency::{IdempotencyKey, IdempotencyStrategy};
pub use ordering::OrderKey;
pub use payload::{NormalizedPayload, PayloadMode};
pub use sink::{
    BatchResult, Capabilities, ConflictResolution, DestinationRef, FlushScope, Holding, MessageOutcome, OutcomeClass,
    Presence, ReadBack, Settled, Sink,
};
