//! Oracle Coherence CE sink of nats-sinks (`sink.type = "coherence"`): each JetStream
//! message becomes one entry of a Coherence cache (or map), written through the cluster's
//! gRPC proxy and acknowledged only after the proxy confirmed the put.
//!
//! **Keys.** `[key_prefix:]<raw>`, `<raw>` per `key_strategy` as in the reference
//! (`stream-sequence:S:N`, `message-id:ID`, `payload-sha256:SUBJ:HEX`; `idempotency_key`, the
//! default, picks the first the message has), sent as a JSON string. A key over
//! `max_key_bytes` fails its message permanently.
//!
//! **Values.** The reference's `nats_sinks.coherence.event.v1` document: identity,
//! timestamps, headers, the standard metadata document, the payload (published JSON as a
//! JSON value, other payloads wrapped per `payload_mode`) and `payload_info`. Because the
//! proxy re-encodes stored JSON (whitespace, number spellings, integers beyond 2^63), a
//! JSON payload is also stored byte for byte as the string `payload_exact`. Keys and values
//! travel in Coherence's `json` serialization format (`0x15` + JSON), so the official
//! clients read them as plain JSON objects.
//!
//! **Protocol.** gRPC (tonic, rustls on aws-lc-rs): the v1 `ProxyService.subChannel`
//! stream when the proxy offers it, else the legacy `NamedCacheService` (`protocol =
//! "auto"`, logged at start-up). The puts of a batch are pipelined on one stream; messages
//! of one ordering key, or of one entry key, go one after another.
//!
//! **Duplicates and conflicts.** `duplicate_policy = "skip_existing"` (default) and
//! `"fail_existing"` use `putIfAbsent`, so a redelivery never overwrites: the answer is the
//! entry already there, whose payload fingerprint decides duplicate (same payload) or
//! conflict (kept and logged, or dead-lettered with `fail_existing`). `"replace"` uses `put`.
//!
//! **Errors** (see `error.rs`): unreachable, restarting or overloaded proxies → temporary;
//! refused credentials, unknown scope or serializer, no gRPC proxy → fatal at start-up,
//! temporary later (never dead-lettered); an entry the proxy cannot deserialize → permanent
//! for that message. Proxy texts are never logged (they can quote keys and values).
//!
//! **Durability.** A confirmed put is held by the key's owning member and, when the cache
//! service has backups (`coherence.distributed.backupcount`, default 1) and a second
//! member, by a backup member; with active persistence it is also on disk. Neither is
//! visible through the gRPC proxy, so `durability = "operator_confirmed"` is the only value
//! and docs/coherence-sink.md says what to configure.

#[cfg(feature = "certify")]
pub mod certify;
mod client;
mod config;
mod entry;
mod error;
mod factory;
mod sink;

pub use config::{CoherenceSinkConfig, DuplicatePolicy, Durability, KeyStrategy, Protocol, Serializer, Storage};
pub use entry::{StoredEvent, decode_stored};
pub use factory::CoherenceFactory;
pub use sink::CoherenceSink;
