//! HTTP sink of nats-sinks (`sink.type = "http"`): each JetStream message becomes an
//! idempotent request to one fixed endpoint, acknowledged only after the endpoint answered
//! a success (or already-committed) status.
//!
//! **What is sent where.** Every message goes to `sink.url` with `sink.method` (`POST` by
//! default), `Content-Type: application/json`, `Accept: application/json`, the configured
//! `User-Agent`, the static `headers`, the `headers_env` headers (values read from the
//! environment at every request, never logged) and the idempotency key header. The body is
//! the `nats_sinks.http.message.v1` envelope (sorted keys, compact UTF-8): `schema`,
//! `schema_version`, `idempotency_key`, `subject`, `stream`, `stream_sequence`, `consumer`,
//! `consumer_sequence`, `message_id`, `priority`, `classification`, `labels` (`"a;b"` or
//! null), `labels_list`, `payload` (published JSON kept byte for byte; other payloads
//! wrapped per `payload_mode`), `payload_info`, and, per the `include_*` switches, the
//! standard `metadata` document and `mission_metadata` / `security_labels` / `custody`
//! (null in this build). With `body_format = "payload"` the body is the normalized payload
//! alone. Up to `max_concurrent_requests` requests are in flight per write; messages that
//! share a subject are sent one after another, in order, over a keep-alive pool (HTTP/1.1,
//! or HTTP/2 by ALPN or prior knowledge), with rustls (aws-lc-rs), an optional CA bundle
//! and an optional client certificate. Redirects are never followed; no proxy is used.
//!
//! **Batch mode** (`batch_mode = "json_array"` or `"ndjson"`): one request carries up to
//! `max_batch_items` envelopes (and at most `max_request_bytes`), for endpoints that accept
//! batches. A request is all-or-nothing: a success status commits every envelope in it, a
//! retry status or transport error fails every envelope temporarily, a duplicate status
//! marks every envelope a duplicate, and any other status fails the whole write with a
//! batch-level permanent error, so the runner splits the batch until the refused envelope
//! stands alone (a request of one envelope fails that envelope permanently). The endpoint
//! must deduplicate items by their `idempotency_key` field: a redelivered batch may be
//! composed differently. The request's key header is `batch-sha256:{hex}` over the item
//! keys (absent when an item has none).
//!
//! **Idempotency.** The key is derived from the event identity, never from the attempt:
//! `idempotency.strategy` `idempotency_key` (the envelope default: `stream-sequence:S:N`,
//! else `message-id:ID`, else `payload-sha256:SUBJ:HEX`), `stream_sequence`, `origin_sequence`
//! (one key per event through a mirror or a source), `message_id` or
//! `payload_sha256`. The header carries it with controls, space, `%` and non-ASCII bytes
//! percent-encoded (one-to-one; the usual keys are unchanged); the envelope's
//! `idempotency_key` field carries it verbatim. With `idempotency.required` (default), a
//! message without a key fails permanently. A status in `duplicate_statuses` (409, 412) on a
//! keyed request means "already committed" (duplicate, acknowledged); `conflict_statuses`
//! (none by default) mean "this key holds other content" (conflict, stored version kept).
//!
//! **Timeouts are ambiguous.** A request that timed out after it was sent may have been
//! committed. The endpoint must therefore honour the key, so the redelivery is a duplicate.
//! For endpoints that can answer "do you have this key?", `inquiry_url` (a template with
//! `{key}`) is asked first: a 2xx means committed (duplicate), 404 means the message is sent
//! again once at once, anything else leaves it temporary.
//!
//! **Ledger and reconcile.** The delivery ledger's receipts name the URL, the status of the
//! answer that settled the message and, with `response_id_header`, that header's value.
//! With an `inquiry_url`, `nats-sink reconcile` asks it for every message's key (up to
//! `max_concurrent_requests` at once): 404 is missing; a 2xx is compared by payload
//! fingerprint, from `inquiry_fingerprint_header` when the answer has it, else by hashing
//! the payload of the returned document.
//!
//! **Outcomes** (see `error.rs`): success status → committed; retry statuses (408, 425,
//! 429, 500, 502, 503, 504), timeouts and connection errors → temporary, `Retry-After`
//! (seconds or HTTP-date, capped at an hour) honoured as the redelivery delay; any other
//! status, 3xx included → permanent for that message only.
//!
//! **Capabilities.** Not atomic per write (each message has its own outcome), except in
//! batch mode where each request is all-or-nothing; reports duplicates when
//! `duplicate_statuses` is not empty, detects conflicts when `conflict_statuses` is not empty
//! (both only with one request per message and keys enabled).

mod answers;
#[cfg(feature = "certify")]
pub mod certify;
mod config;
mod deliver;
mod endpoint;
mod error;
mod factory;
mod outcome;
mod plan;
mod reconcile;
mod request;
mod sink;

pub use config::{
    BatchMode, BodyFormat, HttpMethod, HttpSinkConfig, HttpVersion, IdempotencyConfig, KeyStrategy, RetryConfig,
};
pub use factory::HttpFactory;
pub use sink::HttpSink;
