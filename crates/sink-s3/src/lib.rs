//! S3-compatible object sink of nats-sinks (`sink.type = "s3"`): each JetStream message
//! becomes one object under a deterministic key, acknowledged only after the object store
//! confirmed the write.
//!
//! **Keys.** `[prefix/][key_prefix:]<raw><object_suffix>`, `<raw>` per `key_strategy`:
//! `idempotency-key/<key>` (default; `stream-sequence:S:N`, else `message-id:ID`, else
//! `payload-sha256:SUBJ:HEX`), `stream-sequence/<stream>/<seq>`, `message-id/<id>` or
//! `payload-sha256/<subject>/<hex>`. External values keep their text when it is made of
//! `[A-Za-z0-9._-]` (the reference's key for the same value); any other value is sanitized
//! the reference's way and marked with `~` and 128 bits of its SHA-256, so two different
//! values never share a key (the reference's W3 silently dropped the second of `a/b` and
//! `a_b`). A key over `max_key_bytes` fails its message permanently.
//!
//! **Bodies.** `object_format = "envelope"` (default) stores the `nats_sinks.s3.object.v1`
//! document: identity, timestamps, headers, the standard metadata document, the payload
//! (published JSON byte for byte, other payloads wrapped per `payload_mode`) and
//! `payload_info`; `"payload"` stores the normalized payload alone. Optional gzip (mtime 0,
//! deterministic). `metadata_mode` adds low-sensitivity user metadata (default) or a
//! `<key><sidecar_suffix>` sidecar document written after the object.
//!
//! **Duplicates and conflicts.** `duplicate_policy = "skip_existing"` (default) and
//! `"fail_existing"` put with `If-None-Match: *`, so a redelivery can never overwrite: the
//! store answers "already exists". With `content_check` (default on) the stored object's
//! payload fingerprint (`nats-sinks-payload-sha256` metadata, or read from the body for
//! objects written without it) decides: same payload → duplicate; different payload →
//! conflict, the stored object kept (`skip_existing`, acknowledged and logged) or the message
//! dead-lettered (`fail_existing`). `"replace"` overwrites unconditionally.
//!
//! **Writes.** The objects of a batch are put concurrently (`max_concurrent_requests`),
//! messages sharing an object key one after another in input order; each message has its own
//! outcome. Bodies from `multipart_threshold_bytes` up go as multipart uploads (a conditional
//! create stages the upload and copies it into place with a conditional `CopyObject`).
//!
//! **Batch mode** (`mode: batch`, see `sinks_toolkit::batch`): many messages per object,
//! NDJSON (optionally gzip or zstd) or Parquet (cargo feature `parquet`), at
//! `[prefix/]<partition>/<stream>-<first>-<last>.<ext>`. An object is built in an unnamed
//! local spill file, uploaded as a multipart upload to its final key (invisible until
//! completed), committed by a conditional put of its manifest into the partition's manifest
//! log (`_nats-sinks/`), then completed; its messages are acknowledged only after that. A
//! redelivery is found through the manifests, however it is grouped.
//!
//! **Errors** (see `error.rs`): transport errors, 5xx, 408, 409, 425, 429 → temporary (a
//! timed-out put may have committed; the redelivery then finds it and is a duplicate);
//! credentials refused or bucket missing → fatal at start-up, temporary later (never
//! dead-lettered); other 4xx → permanent for that message. Server texts are never logged
//! (they quote object keys).
//!
//! **Credentials.** `credential_mode = "default_chain"` (AWS environment variables, web
//! identity, ECS, instance metadata), `"environment"` (variables named by the `*_env`
//! fields) or `"profile"` (static keys from the shared credentials file). Secrets never
//! appear in the configuration, logs or `show-effective-config`.

mod batch;
#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod error;
mod object;
mod sink;
mod store;

pub use config::{
    Compression, CredentialMode, DuplicatePolicy, Durability, KeyStrategy, MetadataMode, ObjectFormat, S3SinkConfig,
    ServerSideEncryption, WriteMode,
};
pub use sink::S3Sink;
pub use store::S3Credentials;
