//! The runtime of nats-sinks: everything that talks to NATS and runs a pipeline.
//!
//! It loads the configuration ([`config`]), connects ([`connect`]), finds the stream and
//! binds, creates or reconciles the durable consumer ([`setup`]), fetches batches (`source`),
//! runs the message policies of `sinks_policy` on each message, writes through a
//! [`sinks_contract::Sink`], and settles every message from its own outcome through the pure
//! ACK gate ([`ack::settle`]), publishing dead-letter records ([`dlq`]) and delivery receipts
//! ([`ledger`]) and acknowledging only after every required durable effect has committed
//! ([`runner`]). It also reads a stream back against a destination ([`reconcile`]), brings
//! dead-lettered messages back through the same path ([`redrive`]), composes
//! named sinks into one ([`fanout`]), observes ([`metrics`], [`advisories`], [`freshness`])
//! exports over OTLP ([`otel`]), lets the operator commands look at a stream ([`inspect`])
//! and carries the `blackhole` sink, for overhead measurements.
//!
//! No async-nats type is part of this crate's public API (`xtask/src/tidy.rs` checks it): a
//! caller starts a run at a [`StartAt`], looks at a stream through an opaque
//! [`inspect::Connection`], and everything that holds a NATS client is private.
//!
//! Invariants (see `ARCHITECTURE.md`): a sink never sees an ack handle (`AckHandle` is
//! private to this crate, and sink crates cannot depend on it); only the ACK gate decides a
//! settlement; a DLQ record is acknowledged by its stream before the original is acked;
//! transient NATS and DLQ failures are retried, never fatal; observability reads, never
//! steers; this crate names no sink kind (the binary's registrations do, see `sinks-cli`).

pub mod ack;
mod ack_subject;
pub mod advisories;
pub mod blackhole;
pub mod config;
pub mod connect;
pub mod dlq;
pub mod durability;
pub mod fanout;
pub mod freshness;
pub mod identity;
pub mod inspect;
pub mod ledger;
pub mod limit;
pub mod metrics;
pub mod origin;
pub mod otel;
pub mod program;
mod reasons;
pub mod reconcile;
pub mod redrive;
pub mod runner;
pub mod setup;
mod source;
mod wsrelay;

pub use config::Config;
pub use runner::{RunError, RunOptions, RunStats, StartAt, run, run_observed, run_with};
