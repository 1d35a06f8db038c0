//! Encrypted edge spool of nats-sinks (`sink.type = "spool"`): local custody of messages
//! while the real destination is unreachable, and replay into it later.
//!
//! **What is written where.** One file per message directly in `sink.directory`, named
//! `sha256(idempotency key).spool.json`: a small clear wrapper (`priority_rank`,
//! `spooled_at_epoch_ns`, `idempotency_key_sha256`) around the whole record encrypted with
//! the spool's own key (`sink.encryption`; AES-GCM or AES-CCM, the reference's envelope, or
//! the AAD-bound version 2 that ties a record to its file). Records are written under a
//! temp name, fsynced, moved into place (create-if-absent) and the directory fsynced
//! before a message counts as spooled, as the file sink does. The formats are the
//! reference's (`record.rs`), so spools move between implementations in both directions.
//!
//! **Idempotency.** The file name is the key: a redelivery finds its file and is a
//! duplicate (a conflict, first version kept, when the stored payload differs); `fail`
//! refuses it permanently.
//!
//! **Capacity.** `max_records` and `max_bytes` are enforced with counters (one directory
//! scan at start-up, another only when a write would go over); a full spool fails writes
//! temporarily, so nothing is acknowledged that was not spooled.
//!
//! **Replay** (`replay.rs`, `nats-sink replay-spool`): records in priority or FIFO order,
//! in batches through any other sink; a record is deleted only after the target committed
//! it.
//!
//! **Capabilities.** Not atomic per batch; reports duplicates; detects conflicts.

#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod factory;
pub mod record;
pub mod replay;
mod sink;

pub use config::{DrainOrdering, DuplicatePolicy, SpoolSinkConfig};
pub use factory::SpoolFactory;
pub use replay::{ReplayOptions, ReplayReport, replay};
pub use sink::{Entry, SpoolSink, Usage};
