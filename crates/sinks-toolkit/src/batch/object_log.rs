//! What a sink supplies to the batch mode, and how it configured it: [`ObjectLog`], the I/O
//! of one destination (a directory, a bucket) in keys relative to the sink's root or prefix,
//! with the [`TempObject`] an object is written into; and the writer's [`Settings`].

use std::fs::File;

use async_trait::async_trait;

use super::config::BatchConfig;
use crate::existing::OnExisting;
use sinks_contract::error::SinkError;
use sinks_contract::payload::PayloadMode;
use sinks_contract::sink::DestinationRef;

/// A local temporary file an object is written into.
#[derive(Debug)]
pub struct TempObject {
    /// The open file.
    pub file: File,
    /// Its name, when it has one (the file sink's, next to the final name; removed when
    /// dropped unless kept); `None` for an anonymous file (the S3 sink's spill file).
    pub path: Option<tempfile::TempPath>,
}

/// The I/O of one destination, in keys relative to the sink's root or prefix
/// (`partition/name`). Errors carry the sink's own classes.
#[async_trait]
pub trait ObjectLog: Send + Sync + std::fmt::Debug + 'static {
    /// The names directly under `dir` (objects, files, subdirectories); none when `dir`
    /// does not exist.
    async fn list(&self, dir: &str) -> Result<Vec<String>, SinkError>;
    /// A small object's bytes (a manifest); `None` when it does not exist.
    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, SinkError>;
    /// Creates `key` with `body` only when it does not exist yet, atomically: `true` when
    /// this call created it, `false` when it exists.
    async fn create(&self, key: &str, body: Vec<u8>) -> Result<bool, SinkError>;
    /// Writes `key` with `body`, replacing what is there, atomically: a reader sees the old
    /// bytes or the new ones, whole (table mode's `_delta_log/_last_checkpoint`).
    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), SinkError>;
    /// A new temporary file for an object of `partition` (blocking; called off the async
    /// workers).
    fn temp(&self, partition: &str) -> Result<TempObject, SinkError>;
    /// Makes the finished temporary file the durable staging of object `key` (`size`
    /// bytes), without making `key` visible; returns what completing it needs, recorded in
    /// the manifest.
    async fn stage(&self, key: &str, temp: TempObject, size: u64) -> Result<serde_json::Value, SinkError>;
    /// Makes the staged object visible at `key`; idempotent. `true` when `key` is visible
    /// now, `false` when it is not and its staging is gone.
    async fn complete(&self, key: &str, staging: &serde_json::Value) -> Result<bool, SinkError>;
    /// Discards a staging no manifest names (best effort; logs on failure).
    async fn discard(&self, key: &str, staging: &serde_json::Value);
    /// The object `key` in a local file, to read its rows; `None` when it does not exist.
    async fn fetch(&self, key: &str) -> Result<Option<File>, SinkError>;
    /// Where object `key` is, for delivery receipts.
    fn destination(&self, key: &str) -> DestinationRef;
}

/// How a sink configured its batch mode.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `sink.batch` section.
    pub batch: BatchConfig,
    /// The sink's payload mode.
    pub payload_mode: PayloadMode,
    /// What an existing record means (`keep` or `refuse`; batch mode never replaces).
    pub policy: OnExisting,
    /// Compare a redelivery's payload fingerprint with the stored row's.
    pub content_check: bool,
    /// The largest row one message may make, besides `max_bytes` (a sink's own limit).
    pub max_row_bytes: u64,
    /// Sink name used in logs.
    pub sink: &'static str,
    /// What a stored object is called in messages (`batch object`, `batch file`).
    pub record: &'static str,
}
