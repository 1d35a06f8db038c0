//! Delivery core of nats-sinks: everything between a JetStream pull consumer and a
//! destination, except the write itself.
//!
//! A sink crate implements [`Sink`]: it receives [`Envelope`]s and reports one
//! [`MessageOutcome`] per envelope. The core owns delivery: it fetches (`source`), writes
//! through the sink, isolates poison messages, and settles every message from its own outcome
//! through the pure ACK gate ([`ack::settle`]), publishing dead-letter records ([`dlq`]) and
//! acknowledging only after every required durable effect has committed.
//!
//! Invariants (see `ARCHITECTURE.md`): a sink never sees an ack handle; only the ACK gate
//! decides a settlement; a DLQ record is acknowledged by its stream before the original is
//! acked; transient NATS and DLQ failures are retried, never fatal; observability
//! ([`metrics`]) reads, never steers.

pub mod ack;
pub mod advisories;
pub mod blackhole;
pub mod blocking;
pub mod canonical;
#[cfg(feature = "certify")]
pub mod certify;
pub mod columns;
pub mod compression;
pub mod config;
pub mod connect;
pub mod dlq;
pub mod encryption;
pub mod envelope;
pub mod error;
pub mod fanout;
pub mod freshness;
pub mod idempotency;
pub mod json;
pub mod ledger;
pub mod metadata;
pub mod metrics;
pub mod ordering;
pub mod payload;
pub mod policy;
pub mod reconcile;
pub mod retry;
pub mod runner;
pub mod setup;
pub mod sink;
mod source;
pub mod subject;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{Config, ConfigError};
pub use envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
pub use error::{BoxError, ErrorClass, SinkError};
pub use idempotency::{IdempotencyKey, IdempotencyStrategy};
pub use ordering::OrderKey;
pub use payload::{NormalizedPayload, PayloadMode};
pub use runner::{RunError, RunOptions, RunStats, run, run_observed, run_with};
pub use sink::{
    BatchResult, Capabilities, ConflictResolution, DestinationRef, MessageOutcome, OutcomeClass, Presence, ReadBack,
    Sink,
};
