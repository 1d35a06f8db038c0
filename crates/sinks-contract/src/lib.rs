//! The sink contract of nats-sinks: what a sink implements, and nothing that talks to NATS.
//!
//! A sink crate implements [`Sink`]: it receives [`Envelope`]s and reports one
//! [`MessageOutcome`] per envelope. It never sees an acknowledgement handle, a JetStream
//! client or the runner; Cargo enforces that, because this crate does not depend on
//! async-nats (nor on figment or prometheus-client) and a sink crate depends on this crate,
//! the toolkit and nothing of the runtime (`xtask/src/tidy.rs` checks both).
//!
//! The contract is small on purpose, and stable: the trait and its outcomes ([`sink`]), the
//! envelope ([`envelope`]), errors ([`error`]), what to report when a key already holds a
//! record ([`existing`]), idempotency keys ([`idempotency`]), payload
//! modes ([`payload`]) with strict JSON ([`json`]), ordering keys ([`ordering`]) and the
//! configuration types a sink parses its section with ([`config`]), and the factory a binary
//! builds the sinks of a kind with ([`factory`]). The mechanics sinks share (the batch
//! engine, relational rows, encryption, retries, …) are in `sinks-toolkit`, which a sink opts
//! into; the certification suite is `sinks-certify`.

pub mod config;
pub mod envelope;
pub mod error;
pub mod existing;
pub mod factory;
pub mod idempotency;
pub mod json;
mod key;
pub mod ordering;
pub mod payload;
pub mod sink;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{ConfigError, ConfigIssue, Issues, SinkSection};
pub use envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
pub use error::{BoxError, ErrorClass, SinkError};
pub use factory::{BuiltSink, Creation, DynSinkFactory, Reach, SinkFactory};
pub use idempotency::{IdempotencyKey, IdempotencyStrategy};
pub use ordering::OrderKey;
pub use payload::{NormalizedPayload, PayloadMode};
pub use sink::{
    BatchResult, Capabilities, ConflictResolution, DEFAULT_BUDGET, DestinationRef, Destinations, FlushScope, Holding,
    HoldingSettings, MessageOutcome, OutcomeClass, Presence, ReadBack, Settled, Sink, cannot_read_back,
    write_isolating,
};
