//! Pure: what is sent for a message, and what an answer means. No I/O here.
//!
//! - The body per `body_format`: the `nats_sinks.http.message.v1` envelope (sorted keys,
//!   compact, UTF-8, the payload embedded as its normalized raw JSON text) or the normalized
//!   payload alone; in batch mode a JSON array or NDJSON of envelopes.
//! - The idempotency key per `idempotency.strategy`, always derived from the event identity,
//!   never from the attempt, so a retry or redelivery sends the same key; and its header form.
//! - The class of a response status, and the delay a `Retry-After` header asks for.
//! - What a document returned by `inquiry_url` says about a payload (reconcile).

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sinks_contract::idempotency::IdempotencyError;
use sinks_contract::payload::{self, PayloadError};
use sinks_contract::{Envelope, IdempotencyKey, Presence};
use sinks_toolkit::metadata;
use time::OffsetDateTime;

use crate::config::{BatchMode, BodyFormat, HttpSinkConfig, IdempotencyConfig, KEY_PLACEHOLDER};

/// `schema` of every envelope body.
pub(crate) const SCHEMA: &str = "nats_sinks.http.message.v1";
/// `schema_version` of every envelope body.
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// Longest delay a `Retry-After` header can ask for; longer values are capped.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Content type of single bodies and JSON-array batches.
pub(crate) const CONTENT_TYPE_JSON: &str = "application/json";
/// Content type of NDJSON batches.
pub(crate) const CONTENT_TYPE_NDJSON: &str = "application/x-ndjson";

/// Whether an answer to the health check's `OPTIONS` request (no `health_url`) shows a live
/// endpoint: any status below 500, and 501 (Not Implemented) or 505 (HTTP Version Not
/// Supported), which a running server answers for a method or version it does not serve
/// (Python's `http.server` answers OPTIONS with 501). 500, 502, 503, 504 and the rest of the
/// 5xx say the endpoint cannot serve now.
pub(crate) fn options_answer_is_live(status: u16) -> bool {
    status < 500 || matches!(status, 501 | 505)
}

/// Headers carrying the facts of one attempt of one message, beside its body (which under
/// `metadata_scope: message` holds none of them, so an endpoint that fingerprints a key's body
/// sees the same bytes on every attempt): when it was received (RFC 3339), its JetStream
/// delivery count, the consumer and its sequence there, and when this attempt was sent.
pub(crate) const ATTEMPT_HEADERS: [&str; 5] = [
    "Nats-Sinks-Attempt-Received-At",
    "Nats-Sinks-Attempt-Delivered",
    "Nats-Sinks-Attempt-Consumer",
    "Nats-Sinks-Attempt-Consumer-Sequence",
    "Nats-Sinks-Attempt-Sent-At",
];

/// [`ATTEMPT_HEADERS`] as header names, made once (a name is sent in lower case either way).
pub(crate) const ATTEMPT_HEADER_NAMES: [HeaderName; 5] = [
    HeaderName::from_static("nats-sinks-attempt-received-at"),
    HeaderName::from_static("nats-sinks-attempt-delivered"),
    HeaderName::from_static("nats-sinks-attempt-consumer"),
    HeaderName::from_static("nats-sinks-attempt-consumer-sequence"),
    HeaderName::from_static("nats-sinks-attempt-sent-at"),
];

/// The values of [`ATTEMPT_HEADERS`] for one attempt of `envelope` sent at `now`, in that
/// order: `None` for a value that is no header value (the consumer name is taken as given,
/// and left out when `HeaderValue::from_str` refuses it, as before).
pub(crate) fn attempt_header_values(envelope: &Envelope, now: OffsetDateTime) -> [Option<HeaderValue>; 5] {
    let js = envelope.jetstream();
    [
        HeaderValue::from_str(&metadata::rfc3339(envelope.received_at())).ok(),
        Some(HeaderValue::from(js.delivered)),
        HeaderValue::from_str(&js.consumer).ok(),
        Some(HeaderValue::from(js.consumer_sequence)),
        HeaderValue::from_str(&metadata::rfc3339(now)).ok(),
    ]
}

/// Bytes escaped in the header form of a key: controls, space, `%` and (implicitly) every
/// non-ASCII byte. Escaping `%` keeps the mapping one-to-one.
const HEADER_ESCAPES: &AsciiSet = &CONTROLS.add(b' ').add(b'%');

/// The envelope body. Fields are declared in alphabetical order, which is the order serde
/// writes them in: the output has sorted keys like the reference's `sort_keys=True`.
#[derive(Serialize)]
struct EnvelopeBody<'a> {
    classification: Option<&'a str>,
    /// This delivery's consumer and sequence: only under `metadata_scope: delivery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_sequence: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    custody: Option<Option<&'a Value>>,
    idempotency_key: Option<&'a str>,
    labels: Option<String>,
    labels_list: &'a [String],
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<metadata::MetadataDoc<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mission_metadata: Option<Option<&'a Value>>,
    payload: &'a RawValue,
    payload_info: PayloadInfo<'a>,
    priority: Option<&'a str>,
    schema: &'static str,
    schema_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    security_labels: Option<Option<&'a Value>>,
    stream: &'a str,
    /// Only in a later epoch of the stream (`Envelope::stream_epoch`): the document of a
    /// stream that never changed is the reference's.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_epoch: Option<&'a str>,
    stream_sequence: u64,
    subject: &'a str,
}

/// `payload_info` of the envelope body: the members of
/// [`sinks_contract::payload::NormalizedPayload::info_json`], declared in the order that
/// object writes them (sorted: it is a `BTreeMap`), written without building the map.
#[derive(Serialize)]
struct PayloadInfo<'a> {
    original_format: payload::OriginalFormat,
    sha256: &'a str,
    size_bytes: u64,
    wrapped: bool,
}

impl<'a> PayloadInfo<'a> {
    fn of(normalized: &'a payload::NormalizedPayload) -> Self {
        Self {
            original_format: normalized.original_format,
            sha256: &normalized.sha256,
            size_bytes: normalized.size_bytes,
            wrapped: normalized.wrapped,
        }
    }
}

/// Why no request body could be built for a message. Permanent for that message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The payload cannot be represented under the configured payload mode.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The body is larger than `max_request_bytes`.
    #[error("request body of {size} bytes exceeds sink.max_request_bytes ({max})")]
    TooLarge {
        /// Body size.
        size: usize,
        /// The limit.
        max: u64,
    },
    /// Serializing the body failed.
    #[error("request body cannot be encoded ({0})")]
    Encode(String),
    /// Keyed by `origin_sequence`, and where the event was first stored cannot be told.
    #[error(transparent)]
    Origin(#[from] IdempotencyError),
}

/// The idempotency key of `envelope` under `config`: `Ok(None)` when keys are disabled, or
/// when none can be derived and keys are not required; `Err` when one is required and none
/// can be derived (a permanent failure for that message).
pub(crate) fn idempotency_key(
    envelope: &Envelope,
    config: &IdempotencyConfig,
) -> Result<Option<IdempotencyKey>, IdempotencyError> {
    if !config.enabled {
        return Ok(None);
    }
    let derived = config.strategy.key_of(envelope);
    match derived {
        Ok(key) => Ok(Some(key)),
        Err(e) if config.required => Err(e),
        Err(_) => Ok(None),
    }
}

/// [`message_body_sized`] with no idea of the body's size.
#[cfg(test)]
pub(crate) fn message_body(
    envelope: &Envelope,
    config: &HttpSinkConfig,
    key: Option<&IdempotencyKey>,
    sent_at: OffsetDateTime,
) -> Result<Vec<u8>, RequestError> {
    message_body_sized(envelope, config, key, sent_at, 0)
}

/// The request body of one message per `body_format`, checked against `max_request_bytes`.
/// `sent_at` is the `stored_at` of the metadata document. The envelope body is written into
/// one buffer of `capacity` bytes (the caller's guess of its size; it grows when short).
pub(crate) fn message_body_sized(
    envelope: &Envelope,
    config: &HttpSinkConfig,
    key: Option<&IdempotencyKey>,
    sent_at: OffsetDateTime,
    capacity: usize,
) -> Result<Vec<u8>, RequestError> {
    let normalized = payload::normalize(envelope.payload(), config.payload_mode)?;
    let body = match config.body_format {
        BodyFormat::Payload => normalized.value.get().as_bytes().to_vec(),
        BodyFormat::Envelope => {
            // Keyed by the origin, the body is the event as its origin stored it, whatever
            // the path: one key, one body.
            let origin_keyed = config.idempotency.strategy == crate::config::KeyStrategy::OriginSequence;
            let event = config.metadata_scope.content_of(envelope, origin_keyed)?;
            let envelope = &*event;
            let js = envelope.jetstream();
            let app = envelope.app();
            let delivery = metadata::DeliveryFields::of(envelope, sent_at, config.metadata_scope);
            let doc = EnvelopeBody {
                classification: app.classification.as_deref(),
                consumer: delivery.consumer,
                consumer_sequence: delivery.consumer_sequence,
                custody: config.include_custody.then(|| envelope.custody()),
                idempotency_key: key.map(IdempotencyKey::as_str),
                labels: app.labels_string(),
                labels_list: &app.labels,
                message_id: envelope.message_id(),
                metadata: config
                    .include_metadata
                    .then(|| metadata::MetadataDoc::scoped(envelope, sent_at, config.metadata_scope)),
                mission_metadata: config.include_mission_metadata.then(|| envelope.mission_metadata()),
                payload: &normalized.value,
                payload_info: PayloadInfo::of(&normalized),
                priority: app.priority.as_deref(),
                schema: SCHEMA,
                schema_version: SCHEMA_VERSION,
                security_labels: config.include_security_labels.then(|| envelope.security_labels()),
                stream: &js.stream,
                stream_epoch: envelope.stream_epoch(),
                stream_sequence: js.stream_sequence,
                subject: envelope.subject(),
            };
            let mut body = Vec::with_capacity(capacity);
            serde_json::to_writer(&mut body, &doc).map_err(|e| RequestError::Encode(e.to_string()))?;
            if config.batch_mode == BatchMode::Ndjson {
                one_line(&mut body);
            }
            body
        }
    };
    let max = config.max_request_bytes;
    if body.len() as u64 > max {
        return Err(RequestError::TooLarge { size: body.len(), max });
    }
    Ok(body)
}

/// Makes a compact JSON document one line. Serialized strings escape every control
/// character, so a raw CR or LF can only be insignificant whitespace kept from a published
/// JSON payload, and a space means the same there.
fn one_line(json: &mut [u8]) {
    for b in json.iter_mut() {
        if matches!(*b, b'\n' | b'\r') {
            *b = b' ';
        }
    }
}

/// Bytes a batch item adds to the request besides its own: a `,` (JSON array) or a `\n`
/// (NDJSON).
pub(crate) const BATCH_SEPARATOR_LEN: usize = 1;
/// Bytes of an empty batch request: `[]` for a JSON array, nothing for NDJSON.
pub(crate) fn batch_overhead(mode: BatchMode) -> usize {
    match mode {
        BatchMode::JsonArray => 2,
        BatchMode::Off | BatchMode::Ndjson => 0,
    }
}

/// Joins envelope bodies into one batch request body.
pub(crate) fn batch_body<'a>(items: impl IntoIterator<Item = &'a [u8]>, mode: BatchMode) -> Vec<u8> {
    let mut out = Vec::new();
    match mode {
        BatchMode::JsonArray => {
            out.push(b'[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(item);
            }
            out.push(b']');
        }
        BatchMode::Off | BatchMode::Ndjson => {
            for item in items {
                out.extend_from_slice(item);
                out.push(b'\n');
            }
        }
    }
    out
}

/// The key of a batch request: `batch-sha256:{hex}` over the item keys, one per line, so
/// the same set of messages in the same order always carries the same key.
pub(crate) fn batch_key<'a>(keys: impl IntoIterator<Item = &'a str>) -> IdempotencyKey {
    let mut hasher = Sha256::new();
    for key in keys {
        hasher.update(key.as_bytes());
        hasher.update(b"\n");
    }
    IdempotencyKey::from_raw(format!("batch-sha256:{}", hex::encode(hasher.finalize())))
}

/// The header form of a key: visible ASCII kept, and controls, space, `%` and non-ASCII
/// bytes percent-encoded (so any key is a valid header value, one-to-one). The usual keys
/// (`stream-sequence:ORDERS:42`) are sent unchanged, and borrowed rather than copied.
pub(crate) fn header_value(key: &str) -> Cow<'_, str> {
    Cow::from(utf8_percent_encode(key, HEADER_ESCAPES))
}

/// The inquiry URL for `key`: every `{key}` replaced by the key, URL-encoded as one path or
/// query component.
pub(crate) fn inquiry_url(template: &str, key: &str) -> String {
    template.replace(KEY_PLACEHOLDER, &utf8_percent_encode(key, NON_ALPHANUMERIC).to_string())
}

/// The configured meaning of each status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatusSets {
    /// Committed.
    pub(crate) success: Vec<u16>,
    /// Temporary.
    pub(crate) retry: Vec<u16>,
    /// Already committed (needs a key on the request).
    pub(crate) duplicate: Vec<u16>,
    /// Committed with different content (needs a key on the request).
    pub(crate) conflict: Vec<u16>,
}

impl StatusSets {
    /// The sets of `config`.
    pub(crate) fn of(config: &HttpSinkConfig) -> Self {
        Self {
            success: config.success_statuses.clone(),
            retry: config.retry_statuses.clone(),
            duplicate: config.duplicate_statuses.clone(),
            conflict: config.conflict_statuses.clone(),
        }
    }
}

/// What a response status means for the message(s) of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusClass {
    /// In `success_statuses`: committed.
    Success,
    /// In `duplicate_statuses` and the request carried a key: committed earlier.
    Duplicate,
    /// In `conflict_statuses` and the request carried a key: the key holds other content.
    Conflict,
    /// In `retry_statuses`: temporary.
    Retry,
    /// A 3xx outside the lists: redirects are never followed; permanent.
    Redirect,
    /// Anything else: the endpoint refuses this message; permanent.
    Rejected,
}

/// Classifies `status` (see the table in `error.rs`).
pub(crate) fn classify_status(status: u16, sets: &StatusSets, carried_key: bool) -> StatusClass {
    if sets.success.contains(&status) {
        StatusClass::Success
    } else if sets.retry.contains(&status) {
        StatusClass::Retry
    } else if carried_key && sets.duplicate.contains(&status) {
        StatusClass::Duplicate
    } else if carried_key && sets.conflict.contains(&status) {
        StatusClass::Conflict
    } else if (300..400).contains(&status) {
        StatusClass::Redirect
    } else {
        StatusClass::Rejected
    }
}

/// The delay a `Retry-After` value asks for: delta-seconds or an HTTP-date (IMF-fixdate,
/// RFC 850 or asctime), relative to `now`; capped at [`MAX_RETRY_AFTER`]. A date in the past
/// means zero; an unparsable value means none.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: an overflowing number is simply "very long".
        Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

/// Lowercase hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Whether the stored document an inquiry returned holds the payload whose SHA-256 is
/// `expected`. An envelope body (`nats_sinks.http.message.v1`) must record that fingerprint
/// in `payload_info.sha256` **and** carry a payload that hashes to it; any other body is
/// taken as the payload alone (`body_format = "payload"`), decoded when it is a payload
/// envelope, and hashed.
pub(crate) fn stored_presence(body: &[u8], expected: &str) -> Presence {
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        schema: Option<String>,
        #[serde(borrow)]
        payload: Option<&'a RawValue>,
        payload_info: Option<Info>,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        sha256: Option<String>,
    }
    let same =
        |hash: Option<String>| if hash.as_deref() == Some(expected) { Presence::Equal } else { Presence::Different };
    if let Ok(doc) = serde_json::from_slice::<Doc<'_>>(body)
        && doc.schema.as_deref() == Some(SCHEMA)
    {
        let recorded = doc.payload_info.and_then(|i| i.sha256);
        let held = doc.payload.map(|p| sha256_hex(&payload::decode_stored(p.get())));
        return if recorded.is_some() && recorded == held { same(held) } else { Presence::Different };
    }
    match std::str::from_utf8(body) {
        Ok(text) => same(Some(sha256_hex(&payload::decode_stored(text.trim())))),
        Err(_) => same(Some(sha256_hex(body))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HttpSinkConfig;
    use sinks_contract::envelope::AppMetadata;
    use sinks_contract::testing::{envelope, envelope_with};
    use sinks_contract::{Headers, PayloadMode};

    fn config() -> HttpSinkConfig {
        HttpSinkConfig::new("https://h.example/x")
    }

    /// The reference's body (`metadata_scope: delivery`).
    fn reference() -> HttpSinkConfig {
        HttpSinkConfig { metadata_scope: sinks_toolkit::metadata::MetadataScope::Delivery, ..config() }
    }

    #[test]
    fn every_delivery_of_an_event_sends_the_same_body_and_its_own_attempt_headers() {
        let first =
            envelope_with("ORDERS", 42, "orders.created", r#"{"n": 1}"#, Headers::new().with("Nats-Msg-Id", "m-1"), 1);
        let again = sinks_contract::testing::redelivery(&first, time::Duration::seconds(30));
        let key = idempotency_key(&first, &IdempotencyConfig::default()).unwrap();
        let later = OffsetDateTime::now_utc() + time::Duration::seconds(31);
        for include_metadata in [true, false] {
            let c = HttpSinkConfig { include_metadata, ..config() };
            let one = message_body(&first, &c, key.as_ref(), OffsetDateTime::now_utc()).unwrap();
            let two = message_body(&again, &c, key.as_ref(), later).unwrap();
            assert_eq!(String::from_utf8(one.clone()).unwrap(), String::from_utf8(two).unwrap());
            let v = doc(&one);
            assert!(v.get("consumer").is_none() && v.get("consumer_sequence").is_none(), "{v}");
        }
        let r = reference();
        assert_ne!(
            message_body(&first, &r, key.as_ref(), OffsetDateTime::now_utc()).unwrap(),
            message_body(&again, &r, key.as_ref(), later).unwrap(),
            "the reference's body holds the delivery"
        );
        let values = attempt_header_values(&again, later).map(|v| v.expect("every value is a header value"));
        assert_eq!(values[1], "2");
        assert_eq!(values[2], "test-consumer-again");
        assert_eq!(values[3], (42 + 7).to_string().as_str());
        assert_eq!(values[0], metadata::rfc3339(again.received_at()).as_str());
        assert_eq!(values[4], metadata::rfc3339(later).as_str());
    }

    #[test]
    fn an_options_answer_of_a_live_server_is_healthy() {
        for (status, live) in
            [(200, true), (204, true), (404, true), (405, true), (499, true), (501, true), (505, true)]
                .into_iter()
                .chain([(500, false), (502, false), (503, false), (504, false), (507, false), (599, false)])
        {
            assert_eq!(options_answer_is_live(status), live, "{status}");
        }
    }

    fn doc(body: &[u8]) -> Value {
        serde_json::from_slice(body).expect("body is JSON")
    }

    #[test]
    fn envelope_has_the_reference_fields_sorted() {
        let app = AppMetadata {
            priority: Some("flash".into()),
            classification: None,
            labels: vec!["a".into(), "b,c".into()],
        };
        let e =
            envelope_with("ORDERS", 42, "orders.created", r#"{"n": 1}"#, Headers::new().with("Nats-Msg-Id", "m-1"), 1)
                .with_app_metadata(app);
        let key = idempotency_key(&e, &IdempotencyConfig::default()).unwrap();
        let body = message_body(&e, &reference(), key.as_ref(), OffsetDateTime::now_utc()).unwrap();
        let text = std::str::from_utf8(&body).unwrap();
        assert!(text.contains(r#""payload":{"n": 1}"#), "published JSON embedded verbatim: {text}");
        let v = doc(&body);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        let expected = [
            "classification",
            "consumer",
            "consumer_sequence",
            "custody",
            "idempotency_key",
            "labels",
            "labels_list",
            "message_id",
            "metadata",
            "mission_metadata",
            "payload",
            "payload_info",
            "priority",
            "schema",
            "schema_version",
            "security_labels",
            "stream",
            "stream_sequence",
            "subject",
        ];
        assert_eq!(keys, expected);
        // Top-level key order, checked on a body without the nested metadata document.
        let flat = HttpSinkConfig { include_metadata: false, ..reference() };
        let flat =
            String::from_utf8(message_body(&e, &flat, key.as_ref(), OffsetDateTime::now_utc()).unwrap()).unwrap();
        let order: Vec<usize> =
            expected.iter().filter(|k| **k != "metadata").map(|k| flat.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "keys are written sorted: {flat}");
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["idempotency_key"], "stream-sequence:ORDERS:42");
        assert_eq!(v["stream_sequence"], 42);
        assert_eq!(v["message_id"], "m-1");
        assert_eq!(v["priority"], "flash");
        assert_eq!(v["classification"], Value::Null);
        assert_eq!(v["labels"], "a;b,c");
        assert_eq!(v["labels_list"], serde_json::json!(["a", "b,c"]));
        assert_eq!(v["payload_info"]["original_format"], "json");
        assert_eq!(v["payload_info"]["wrapped"], false);
        assert_eq!(v["metadata"]["jetstream"]["stream_sequence"], 42);
        for null in ["custody", "mission_metadata", "security_labels"] {
            assert_eq!(v[null], Value::Null, "{null}");
        }
    }

    #[test]
    fn payload_info_is_written_as_the_contract_writes_it() {
        for (mode, data) in [
            (PayloadMode::JsonOrEnvelope, &b"{\"n\": 1}"[..]),
            (PayloadMode::JsonOrEnvelope, b"plain text"),
            (PayloadMode::JsonOrEnvelope, &[0xff, 0x00][..]),
            (PayloadMode::BytesEnvelope, b"{}"),
            (PayloadMode::TextEnvelope, b""),
        ] {
            let normalized = payload::normalize(data, mode).unwrap();
            let ours = serde_json::to_string(&PayloadInfo::of(&normalized)).unwrap();
            assert_eq!(ours, serde_json::to_string(&normalized.info_json()).unwrap(), "{data:?}");
        }
        // The bytes as sent before and after, literally: a difference in order or spelling fails.
        let normalized = payload::normalize(b"{}", PayloadMode::JsonOrEnvelope).unwrap();
        assert_eq!(
            serde_json::to_string(&PayloadInfo::of(&normalized)).unwrap(),
            format!(r#"{{"original_format":"json","sha256":"{}","size_bytes":2,"wrapped":false}}"#, sha256_hex(b"{}"))
        );
    }

    #[test]
    fn the_body_does_not_depend_on_the_size_guessed() {
        let e = envelope_with("ORDERS", 9, "orders.created", r#"{"n": [1, 2]}"#, Headers::new(), 1);
        let at = OffsetDateTime::now_utc();
        for c in [config(), reference(), HttpSinkConfig { body_format: BodyFormat::Payload, ..config() }] {
            let key = idempotency_key(&e, &c.idempotency).unwrap();
            let unsized_body = message_body(&e, &c, key.as_ref(), at).unwrap();
            for capacity in [1, 64, unsized_body.len(), 100_000] {
                assert_eq!(message_body_sized(&e, &c, key.as_ref(), at, capacity).unwrap(), unsized_body, "{capacity}");
            }
        }
    }

    #[test]
    fn policy_documents_travel_in_the_envelope_body() {
        let mission = serde_json::json!({"phase": "fix"});
        let labels = serde_json::json!({"profile": "nats-sinks.security-label.v1"});
        let custody = serde_json::json!({"schema": "nats_sinks.custody.v1"});
        let e = envelope("S", 1, "s", "{}")
            .with_mission_metadata(Some(mission.clone()))
            .with_security_labels(Some(labels.clone()))
            .with_custody(Some(custody.clone()));
        let v = doc(&message_body(&e, &config(), None, OffsetDateTime::now_utc()).unwrap());
        assert_eq!((&v["mission_metadata"], &v["security_labels"], &v["custody"]), (&mission, &labels, &custody));
        assert_eq!(v["metadata"]["mission_metadata"], mission);
    }

    #[test]
    fn include_switches_drop_their_keys() {
        let mut c = config();
        c.include_metadata = false;
        c.include_mission_metadata = false;
        c.include_security_labels = false;
        c.include_custody = false;
        let e = envelope("S", 1, "s", "x");
        let v = doc(&message_body(&e, &c, None, OffsetDateTime::now_utc()).unwrap());
        for gone in ["metadata", "mission_metadata", "security_labels", "custody"] {
            assert!(v.get(gone).is_none(), "{gone}");
        }
        assert_eq!(v["labels"], Value::Null, "no labels is null, never \"null\"");
        assert_eq!(v["labels_list"], serde_json::json!([]));
        assert_eq!(v["idempotency_key"], Value::Null);
        assert_eq!(v["payload_info"]["wrapped"], true, "text is wrapped under json_or_envelope");
    }

    #[test]
    fn payload_format_sends_the_normalized_payload_only() {
        let mut c = config();
        c.body_format = BodyFormat::Payload;
        let e = envelope("S", 1, "s", " {\"a\": [1, 2.50]}\n");
        assert_eq!(message_body(&e, &c, None, OffsetDateTime::now_utc()).unwrap(), b"{\"a\": [1, 2.50]}");
        let text = envelope("S", 2, "s", "plain");
        let v = doc(&message_body(&text, &c, None, OffsetDateTime::now_utc()).unwrap());
        assert_eq!(v["payload"], "plain");
        assert_eq!(v["_nats_sinks"]["payload_format"], "text");
    }

    #[test]
    fn payload_mode_and_size_limits_are_permanent_errors() {
        let mut c = config();
        c.payload_mode = sinks_contract::PayloadMode::JsonOnly;
        let e = envelope("S", 1, "s", "not json");
        assert!(matches!(message_body(&e, &c, None, OffsetDateTime::now_utc()), Err(RequestError::Payload(_))));
        let mut c = config();
        c.max_request_bytes = 128;
        c.include_metadata = false;
        let big = envelope("S", 1, "s", "x".repeat(200));
        match message_body(&big, &c, None, OffsetDateTime::now_utc()) {
            Err(e @ RequestError::TooLarge { .. }) => assert!(!e.to_string().contains("xxxx"), "no payload in errors"),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn ndjson_items_are_single_lines() {
        let mut c = config();
        c.batch_mode = BatchMode::Ndjson;
        let e = envelope("S", 1, "s", "{\n  \"a\": \"x\\ny\"\r\n}");
        let body = message_body(&e, &c, None, OffsetDateTime::now_utc()).unwrap();
        assert!(!body.contains(&b'\n') && !body.contains(&b'\r'));
        assert_eq!(doc(&body)["payload"], serde_json::json!({"a": "x\ny"}), "the JSON value is unchanged");
        let joined = batch_body([b"{}".as_slice(), b"[]".as_slice()], BatchMode::Ndjson);
        assert_eq!(joined, b"{}\n[]\n");
        let array = batch_body([b"{}".as_slice(), b"[]".as_slice()], BatchMode::JsonArray);
        assert_eq!(array, b"[{},[]]");
        assert_eq!(batch_body(Vec::<&[u8]>::new(), BatchMode::JsonArray), b"[]");
        assert_eq!(batch_overhead(BatchMode::JsonArray), 2);
    }

    #[test]
    fn key_strategies_follow_the_reference() {
        let id = Headers::new().with("Nats-Msg-Id", "abc");
        let e = envelope_with("ORDERS", 7, "orders.created", "hi", id.clone(), 1);
        let bare = envelope_with("", 0, "orders.created", "hi", Headers::new(), 1);
        let omitted = envelope_with("", 0, "orders.created", "", Headers::new().with("Nats-Msg-Size", "5"), 1);
        let cfg = |strategy, required| IdempotencyConfig { strategy, required, ..IdempotencyConfig::default() };
        let key = |e: &Envelope, c: &IdempotencyConfig| idempotency_key(e, c).map(|k| k.map(|k| k.to_string()));
        use crate::config::KeyStrategy::*;
        assert_eq!(key(&e, &cfg(IdempotencyKey, true)).unwrap().unwrap(), "stream-sequence:ORDERS:7");
        assert_eq!(key(&e, &cfg(StreamSequence, true)).unwrap().unwrap(), "stream-sequence:ORDERS:7");
        assert_eq!(key(&e, &cfg(MessageId, true)).unwrap().unwrap(), "message-id:abc");
        assert_eq!(
            key(&e, &cfg(PayloadSha256, true)).unwrap().unwrap(),
            "payload-sha256:orders.created:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"
        );
        assert_eq!(
            key(&bare, &cfg(IdempotencyKey, true)).unwrap().unwrap(),
            key(&e, &cfg(PayloadSha256, true)).unwrap().unwrap()
        );
        assert_eq!(key(&bare, &cfg(StreamSequence, true)), Err(IdempotencyError::MissingStreamSequence));
        assert_eq!(key(&bare, &cfg(MessageId, true)), Err(IdempotencyError::MissingMessageId));
        assert_eq!(key(&bare, &cfg(MessageId, false)), Ok(None), "not required: sent without a key");
        assert_eq!(key(&omitted, &cfg(IdempotencyKey, true)), Err(IdempotencyError::PayloadOmitted));
        assert_eq!(key(&omitted, &cfg(PayloadSha256, true)), Err(IdempotencyError::PayloadOmitted));
        let off = IdempotencyConfig { enabled: false, required: false, ..IdempotencyConfig::default() };
        assert_eq!(key(&e, &off), Ok(None));
        // Redelivery: same key, whatever the delivery count.
        let again = envelope_with("ORDERS", 7, "orders.created", "hi", id, 5);
        assert_eq!(key(&again, &cfg(IdempotencyKey, true)), key(&e, &cfg(IdempotencyKey, true)));
    }

    #[test]
    fn attempt_header_names_are_the_documented_names() {
        for (name, documented) in ATTEMPT_HEADER_NAMES.iter().zip(ATTEMPT_HEADERS) {
            assert_eq!(*name, HeaderName::from_bytes(documented.as_bytes()).unwrap(), "{documented}");
        }
    }

    #[test]
    fn a_consumer_name_that_is_no_header_value_is_left_out() {
        let first = envelope("S", 1, "s", "{}");
        for (consumer, sent) in
            [("plain", true), ("caf\u{e9}", true), ("tab\there", true), ("nul\u{0}", false), ("line\nbreak", false)]
        {
            let js = sinks_contract::JetStreamInfo { consumer: consumer.to_owned(), ..first.jetstream().clone() };
            let e = Envelope::new("s", "{}", sinks_contract::Headers::new(), js);
            let values = attempt_header_values(&e, OffsetDateTime::now_utc());
            assert_eq!(values[2].is_some(), sent, "{consumer:?}");
            assert_eq!(values[2].is_some(), HeaderValue::from_str(consumer).is_ok(), "{consumer:?}");
        }
    }

    #[test]
    fn header_form_is_one_to_one_and_keeps_usual_keys() {
        assert_eq!(header_value("stream-sequence:ORDERS:42"), "stream-sequence:ORDERS:42");
        assert!(matches!(header_value("stream-sequence:ORDERS:42"), Cow::Borrowed(_)), "a usual key is not copied");
        assert_eq!(header_value("message-id:a b"), "message-id:a%20b");
        assert_eq!(header_value("message-id:ид"), "message-id:%D0%B8%D0%B4");
        assert_eq!(header_value("message-id:%D0"), "message-id:%25D0", "a literal % is escaped too");
        assert_eq!(header_value("message-id:x\ty"), "message-id:x%09y");
        assert!(reqwest::header::HeaderValue::from_str(&header_value("m:😀\u{7f}")).is_ok());
    }

    #[test]
    fn inquiry_url_encodes_the_key() {
        assert_eq!(
            inquiry_url("https://h/records/{key}?v=1", "stream-sequence:S:1"),
            "https://h/records/stream%2Dsequence%3AS%3A1?v=1"
        );
        assert_eq!(inquiry_url("https://h/r?k={key}", "a/b c"), "https://h/r?k=a%2Fb%20c");
    }

    #[test]
    fn batch_keys_are_stable() {
        let a = batch_key(["k1", "k2"]);
        assert_eq!(a, batch_key(["k1", "k2"]));
        assert_ne!(a, batch_key(["k2", "k1"]));
        assert_ne!(batch_key(["k1k2"]), batch_key(["k1", "k2"]));
        assert!(a.as_str().starts_with("batch-sha256:"));
    }

    #[test]
    fn status_table() {
        let sets = StatusSets::of(&config());
        use StatusClass::*;
        for (status, keyed, class) in [
            (200, true, Success),
            (201, false, Success),
            (202, true, Success),
            (204, true, Success),
            (408, true, Retry),
            (425, true, Retry),
            (429, true, Retry),
            (500, true, Retry),
            (502, true, Retry),
            (503, false, Retry),
            (504, true, Retry),
            (409, true, Duplicate),
            (412, true, Duplicate),
            (409, false, Rejected),
            (301, true, Redirect),
            (307, true, Redirect),
            (308, true, Redirect),
            (400, true, Rejected),
            (401, true, Rejected),
            (404, true, Rejected),
            (413, true, Rejected),
            (422, true, Rejected),
            (501, true, Rejected),
        ] {
            assert_eq!(classify_status(status, &sets, keyed), class, "{status} keyed={keyed}");
        }
        let conflict = StatusSets { conflict: vec![422], ..sets };
        assert_eq!(classify_status(422, &conflict, true), Conflict);
        assert_eq!(classify_status(422, &conflict, false), Rejected);
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let s = |v| parse_retry_after(v, now);
        assert_eq!(s("120"), Some(Duration::from_secs(120)));
        assert_eq!(s(" 0 "), Some(Duration::ZERO));
        assert_eq!(s("99999999999999999999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(s("7200"), Some(MAX_RETRY_AFTER), "capped at an hour");
        assert_eq!(s("Sun, 06 Nov 1994 08:50:07 GMT"), Some(Duration::from_secs(30)));
        assert_eq!(s("Sunday, 06-Nov-94 08:50:37 GMT"), Some(Duration::from_secs(60)));
        assert_eq!(s("Sun Nov  6 08:49:47 1994"), Some(Duration::from_secs(10)));
        assert_eq!(s("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO), "past dates mean now");
        assert_eq!(s("-5"), None);
        assert_eq!(s("1.5"), None);
        assert_eq!(s("soon"), None);
        assert_eq!(s(""), None);
    }

    #[test]
    fn inquiry_documents_are_compared_by_payload_fingerprint() {
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time");
        let e = envelope("S", 3, "a.b", r#"{"order":3}"#);
        let key = IdempotencyKey::from_raw("stream-sequence:S:3");
        let expected = sha256_hex(e.payload());
        let mut c = config();
        let body = message_body(&e, &c, Some(&key), at).expect("body");
        assert_eq!(stored_presence(&body, &expected), Presence::Equal, "the envelope as sent");
        let edited = String::from_utf8(body.clone()).expect("utf-8").replace(r#""order":3"#, r#""order":4"#);
        assert_eq!(stored_presence(edited.as_bytes(), &expected), Presence::Different, "payload edited");
        assert_eq!(stored_presence(&body, &sha256_hex(b"{}")), Presence::Different, "another payload");
        assert_eq!(stored_presence(b"<html>gone</html>", &expected), Presence::Different);
        c.body_format = BodyFormat::Payload;
        let bare = message_body(&e, &c, Some(&key), at).expect("body");
        assert_eq!(stored_presence(&bare, &expected), Presence::Equal, "a bare payload");
        let binary = envelope("S", 4, "a.b", vec![0xff, 0x00]);
        let wrapped = message_body(&binary, &c, None, at).expect("body");
        assert_eq!(stored_presence(&wrapped, &sha256_hex(&[0xff, 0x00])), Presence::Equal, "a wrapped payload");
    }
}
