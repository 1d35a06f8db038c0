//! File sink of nats-sinks (`sink.type = "file"`): one durable JSON file per JetStream message.
//!
//! **What is written where.** Each message becomes one file below `sink.directory` (the root,
//! canonicalized at start-up): `<root>/<subject>/<stem><extension>` with
//! `partition_by_subject` (the default), else `<root>/<stem><extension>`. The content is a
//! JSON record with sorted keys and a trailing newline (schema `nats_sinks.file.message.v1`):
//! the subject, JetStream sequences, message id, priority, classification, labels, the
//! normalized payload (published JSON kept byte for byte, other payloads wrapped per
//! `payload_mode`), `payload_info`, and the standard metadata document unless
//! `include_metadata` is false. With `compression = "gzip"` the file is deterministic gzip and
//! the default extension becomes `.json.gz`.
//!
//! **Idempotency.** The file name is the key, derived per `filename_strategy`:
//! `{stream}-{stream_sequence:020}`, `{message_id}-{sha256(message_id)[:16]}` or
//! `{subject}-{sha256(payload)}`. Every component goes through an allow-list sanitizer; a
//! value that sanitizing changed gets a digest suffix, so distinct values never share a name.
//! A file is written under a temp name, fsynced, then placed atomically: `link` (create if
//! absent) for `skip_existing` and `fail`, `rename` for `overwrite`. A redelivery finds the
//! file: under `skip_existing` it is a duplicate, or a conflict (first version kept) when the
//! stored `payload_info.sha256` differs; under `fail` it is a permanent failure. Directories
//! are fsynced once per batch before any outcome is reported, and symlinked partition
//! directories or final names are refused. Files are created owner-only (mode 0600), as the
//! reference's `mkstemp` does; temp and probe names start with `.`, which no final name does.
//!
//! **Batch mode** (`mode: batch`, see `sinks_toolkit::batch`): many messages per file,
//! NDJSON (optionally gzip or zstd) or Parquet (cargo feature `parquet`), at
//! `<root>/<partition>/<stream>-<first>-<last>.<ext>`. Each file is written into a dot-named
//! temporary file next to its final name, fsynced, committed by linking its manifest into
//! the partition's manifest log (`_nats-sinks/`), then linked to its final name; its
//! messages are acknowledged only after that. A redelivery is found through the manifests,
//! however it is grouped.
//!
//! **Capabilities.** Not atomic per batch (each message has its own outcome; files already
//! placed stay placed, which redelivery treats as duplicates); detects conflicts.

mod batch;
#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod path;
mod record;
mod sink;

pub use config::{Compression, DuplicatePolicy, FileSinkConfig, FilenameStrategy, WriteMode};
pub use sink::FileSink;
