//! Review package sink of nats-sinks (`sink.type = "review_package"`): one self-describing,
//! hash-checked directory per JetStream message, for review and audit workflows that hand
//! one package per event to a person or another system. The Python reference 0.4.3's
//! `review_package` sink, field for field.
//!
//! **What is written where.** Each message becomes the directory `<root>/<package id>`, the
//! id being `pkg-` and the first 32 hex digits of the SHA-256 of the message's idempotency
//! key (`stream-sequence:{stream}:{seq}`; `{stream}.{epoch}` in a later epoch of the stream).
//! Inside: `metadata.json` (the standard metadata document), `payload.bin` (the message's
//! bytes, unless `include_payload` is off; a payload over `max_payload_bytes` fails
//! permanently), `mission_metadata.json`, `data_quality.json` and `artifact_references.json`
//! (from the mission metadata's standard profiles), `security_labels.json` and
//! `custody.json` when the message has them, then `manifest.json`
//! (`nats_sinks.review_package.v1`: what the package is and every file's SHA-256 and size)
//! and `hashes.json` (`nats_sinks.review_package.hashes.v1`: the same list plus the
//! manifest's). JSON files are written as the reference writes them (sorted keys, indented
//! unless `pretty` is off, a trailing newline), so their hashes agree with the reference's
//! ([`package`]).
//!
//! **Commit.** A package is built under the temporary name `.{id}.tmp`, every file and the
//! directory fsynced, renamed to its id without ever replacing one, and the root fsynced,
//! before its message counts as written. A temporary directory left by a crash is never taken
//! for a package: the message was not acknowledged, and its next delivery removes it and
//! writes the package again.
//!
//! **Idempotency.** A taken package id is judged by `sinks_contract::existing` against the
//! stored manifest's payload fingerprint: the same payload is a duplicate, a different one is
//! a reused stream sequence (refused, `sequence_reused`, the stored package kept), and a
//! package that cannot be compared is a duplicate under `skip_existing` and a permanent
//! failure under `fail`. The reference trusts the directory's name alone.
//!
//! **Checking.** [`verify`] reads packages back: every file against the hash list and the
//! manifest, nothing missing, nothing added (`nats-sink verify-packages`, and `nats-sink
//! reconcile` through the sink's read-back).
//!
//! **Capabilities.** Not atomic per batch (each message has its own outcome); reports
//! duplicates; detects conflicts (as reused sequences).

#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod factory;
mod json_text;
pub mod package;
mod sink;
pub mod verify;

pub use config::{DEFAULT_MAX_PAYLOAD_BYTES, DuplicatePolicy, MAX_MAX_PAYLOAD_BYTES, ReviewPackageSinkConfig};
pub use factory::ReviewPackageFactory;
pub use sink::ReviewPackageSink;
