//! The [`Envelope`]: one JetStream message as a sink sees it, with no way to settle it.
//!
//! An envelope is built by the core from a fetched message and handed to sinks by shared
//! reference. It carries the subject, the payload bytes, the (multi-valued) headers, the
//! JetStream delivery metadata and a few values derived from them (message id, headers-only
//! detection, application metadata). It deliberately holds no ack handle and no reply subject:
//! a sink can only report outcomes, never acknowledge (see `ARCHITECTURE.md`).

use std::sync::Arc;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::json::JsonDoc;
use crate::key::{IdempotencyError, IdempotencyKey};
use crate::ordering::OrderKey;

/// Header names that carry a publisher message id, in lookup order (case-insensitive).
pub const MESSAGE_ID_HEADERS: [&str; 3] = ["Nats-Msg-Id", "Nats-Message-Id", "message-id"];

/// The header a producer may set to the time it created the message (RFC 3339); read for
/// the metadata document's creation time and for freshness.
pub const CREATED_AT_HEADER: &str = "Nats-Time-Stamp";

/// Header a sourcing stream adds to each message it stores: where the message came from
/// (`Envelope::origin` is read from it). It differs by path, so content made of the event
/// at its origin ([`Envelope::at_origin`]) leaves it out.
pub const STREAM_SOURCE_HEADER: &str = "Nats-Stream-Source";

/// Header that JetStream sets on headers-only deliveries: the size of the omitted body.
pub const MSG_SIZE_HEADER: &str = "Nats-Msg-Size";

/// Multi-valued message headers, in the order they arrived.
///
/// Names keep the publisher's spelling; lookups are case-insensitive. Names that are empty
/// or contain ASCII control characters are dropped on insert, as the reference does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Vec<(String, Vec<String>)>,
}

impl Headers {
    /// An empty header set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `value` to header `name` (merging with an existing name case-insensitively).
    /// Names are trimmed; an empty name or one with control characters is ignored.
    pub fn append(&mut self, name: &str, value: impl Into<String>) {
        let name = name.trim();
        if name.is_empty() || name.chars().any(|c| c.is_ascii_control()) {
            return;
        }
        let value = value.into();
        match self.entries.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some((_, values)) => values.push(value),
            None => self.entries.push((name.to_owned(), vec![value])),
        }
    }

    /// Builder form of [`Headers::append`].
    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<String>) -> Self {
        self.append(name, value);
        self
    }

    /// First value of header `name`, looked up case-insensitively.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.get_all(name).and_then(|v| v.first()).map(String::as_str)
    }

    /// Every value of header `name`, looked up case-insensitively.
    pub fn get_all(&self, name: &str) -> Option<&[String]> {
        self.entries.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }

    /// `(name, values)` pairs in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// Number of distinct header names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no header is present.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// JSON form used in stored records: a single value as a string, several values as an
    /// array of strings (lossless, unlike the reference's comma join); names sorted.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl serde::Serialize for Headers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut sorted: Vec<&(String, Vec<String>)> = self.entries.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut map = serializer.serialize_map(Some(sorted.len()))?;
        for (name, values) in sorted {
            match values.as_slice() {
                [one] => map.serialize_entry(name, one)?,
                many => map.serialize_entry(name, many)?,
            }
        }
        map.end()
    }
}

/// JetStream delivery metadata of one message (from the ack reply subject).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetStreamInfo {
    /// Stream the message was stored in.
    pub stream: String,
    /// Consumer that delivered it.
    pub consumer: String,
    /// Sequence of the message in the stream (stable across redeliveries).
    pub stream_sequence: u64,
    /// Sequence of this delivery in the consumer.
    pub consumer_sequence: u64,
    /// How many times JetStream has delivered this message, including this time (1-based).
    pub delivered: u64,
    /// Messages still pending for the consumer after this one.
    pub pending: u64,
    /// Time the stream stored the message.
    pub timestamp: Option<OffsetDateTime>,
    /// JetStream domain, when the server reports one.
    pub domain: Option<String>,
}

/// What the envelope knows about its body, derived from the `Nats-Msg-Size` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadPresence {
    /// True when the body was omitted by a headers-only consumer (`Nats-Msg-Size` present,
    /// body empty).
    pub omitted: bool,
    /// Original body size: the header's value for omitted bodies, else the delivered length.
    pub original_size_bytes: Option<u64>,
    /// Raw `Nats-Msg-Size` header value, when present.
    pub size_header: Option<String>,
    /// True when `Nats-Msg-Size` is present but not a non-negative integer.
    pub size_header_malformed: bool,
}

impl PayloadPresence {
    fn detect(headers: &Headers, body_len: usize) -> Self {
        let size_header = headers.get(MSG_SIZE_HEADER).map(str::to_owned);
        let parsed = size_header.as_deref().map(|v| v.trim().parse::<u64>());
        let size_header_malformed = matches!(parsed, Some(Err(_)));
        let header_size = parsed.and_then(Result::ok);
        let omitted = header_size.is_some() && body_len == 0;
        let original_size_bytes = if omitted {
            header_size
        } else if size_header_malformed {
            None
        } else {
            Some(body_len as u64)
        };
        Self { omitted, original_size_bytes, size_header, size_header_malformed }
    }

    /// True when a body was delivered (possibly empty because the producer sent nothing).
    pub fn present(&self) -> bool {
        !self.omitted
    }
}

/// Application metadata resolved by the core from headers, subject rules and defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppMetadata {
    /// Priority, e.g. `routine` or `immediate`; `None` when unknown.
    pub priority: Option<String>,
    /// Classification, e.g. `NATO UNCLASSIFIED`; `None` when unknown.
    pub classification: Option<String>,
    /// Labels, trimmed, de-duplicated, in first-seen order.
    pub labels: Vec<String>,
}

impl AppMetadata {
    /// Labels joined with `;`, or `None` when there are none (never the string `"null"`).
    pub fn labels_string(&self) -> Option<String> {
        (!self.labels.is_empty()).then(|| self.labels.join(";"))
    }
}

/// Where an event was first stored, for a message that reached the consumed stream through
/// a mirror or a source (set by the runtime, [`Envelope::with_origin`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The origin stream (`{stream}@{domain}` when it lives in a JetStream domain) and the
    /// event's sequence there.
    Stored {
        /// The origin stream's name, qualified by its domain when it has one.
        stream: Arc<str>,
        /// The event's sequence in it.
        sequence: u64,
        /// The subject it was stored under there, when a subject transform changed it on the
        /// way (`None`: the same subject).
        subject: Option<Arc<str>>,
    },
    /// The origin cannot be told, and why (a key made of it is refused for that message).
    Unresolved(Arc<str>),
}

/// One JetStream message as a sink sees it. Immutable; holds no ack handle.
#[derive(Debug, Clone)]
pub struct Envelope {
    subject: String,
    payload: Bytes,
    headers: Headers,
    pub(crate) jetstream: JetStreamInfo,
    message_id: Option<String>,
    presence: PayloadPresence,
    app: AppMetadata,
    received_at: OffsetDateTime,
    order_key: Option<OrderKey>,
    mission_metadata: Option<Arc<JsonDoc>>,
    security_labels: Option<Arc<JsonDoc>>,
    custody: Option<Arc<JsonDoc>>,
    epoch: Option<Arc<str>>,
    origin: Option<Origin>,
    sealed: bool,
}

impl Envelope {
    /// Builds an envelope and derives the message id and payload presence from the headers.
    /// `received_at` is set to now; application metadata starts empty.
    pub fn new(
        subject: impl Into<String>,
        payload: impl Into<Bytes>,
        headers: Headers,
        jetstream: JetStreamInfo,
    ) -> Self {
        let payload = payload.into();
        let message_id = MESSAGE_ID_HEADERS
            .iter()
            .find_map(|name| headers.get(name))
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_owned);
        let presence = PayloadPresence::detect(&headers, payload.len());
        let subject = subject.into();
        Self {
            order_key: Some(OrderKey::subject(&subject)),
            subject,
            payload,
            headers,
            jetstream,
            message_id,
            presence,
            app: AppMetadata::default(),
            received_at: OffsetDateTime::now_utc(),
            mission_metadata: None,
            security_labels: None,
            custody: None,
            epoch: None,
            origin: None,
            sealed: false,
        }
    }

    /// Keeps only the headers whose name `keep` accepts (case-insensitively as given to
    /// it); the message id and presence facts, derived at delivery, stay as they were. The
    /// runner's pending set keeps what settlement reads and no more.
    #[must_use]
    pub fn retaining_headers(mut self, keep: impl Fn(&str) -> bool) -> Self {
        self.headers.entries.retain(|(name, _)| keep(name));
        self.headers.entries.shrink_to_fit();
        self
    }

    /// Replaces the body (payload encryption does; presence facts, derived from the
    /// original delivery, stay as they were).
    #[must_use]
    pub fn with_payload(mut self, payload: Bytes) -> Self {
        self.payload = payload;
        self
    }

    /// Replaces the body with its encryption envelope (payload encryption does). A sealed
    /// body differs on every delivery of the same message (a fresh nonce each time), so sinks
    /// cannot compare it with a stored one (`sinks_contract::existing::decide`).
    #[must_use]
    pub fn with_sealed_payload(mut self, payload: Bytes) -> Self {
        self.payload = payload;
        self.sealed = true;
        self
    }

    /// True when the body is an encryption envelope made for this delivery.
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    /// Replaces the ordering key (the runner sets it from `delivery.ordering_key`; `None`
    /// means the message may be written concurrently with any other).
    #[must_use]
    pub fn with_order_key(mut self, key: Option<OrderKey>) -> Self {
        self.order_key = key;
        self
    }

    /// What orders this message's write: messages with the same key are written one after
    /// another in stream order, and a message whose predecessor failed temporarily is held
    /// back ([`crate::MessageOutcome::HeldBack`]). `None`: no order to keep. Defaults to the
    /// subject, the default `delivery.ordering_key`; the runner sets the configured one.
    pub fn order_key(&self) -> Option<OrderKey> {
        self.order_key
    }

    /// Replaces the receive time (used when rebuilding an envelope, and in tests).
    #[must_use]
    pub fn with_received_at(mut self, at: OffsetDateTime) -> Self {
        self.received_at = at;
        self
    }

    /// Attaches resolved application metadata.
    #[must_use]
    pub fn with_app_metadata(mut self, app: AppMetadata) -> Self {
        self.app = app;
        self
    }

    /// Attaches the resolved mission metadata document (`None`: the message has none).
    #[must_use]
    pub fn with_mission_metadata(self, doc: Option<serde_json::Value>) -> Self {
        self.with_mission_metadata_doc(doc.map(|v| Arc::new(JsonDoc::from_value(v))))
    }

    /// Attaches the resolved security label profile (`None`: the message has none).
    #[must_use]
    pub fn with_security_labels(self, doc: Option<serde_json::Value>) -> Self {
        self.with_security_labels_doc(doc.map(|v| Arc::new(JsonDoc::from_value(v))))
    }

    /// Attaches the custody object computed by the core.
    #[must_use]
    pub fn with_custody(self, object: Option<serde_json::Value>) -> Self {
        self.with_custody_doc(object.map(|v| Arc::new(JsonDoc::from_value(v))))
    }

    /// Attaches the mission metadata document as the policy step kept it (its canonical
    /// text; shared when every message gets the same one).
    #[must_use]
    pub fn with_mission_metadata_doc(mut self, doc: Option<Arc<JsonDoc>>) -> Self {
        self.mission_metadata = doc;
        self
    }

    /// Attaches the security label profile as the policy step kept it.
    #[must_use]
    pub fn with_security_labels_doc(mut self, doc: Option<Arc<JsonDoc>>) -> Self {
        self.security_labels = doc;
        self
    }

    /// Attaches the custody object as the policy step kept it.
    #[must_use]
    pub fn with_custody_doc(mut self, object: Option<Arc<JsonDoc>>) -> Self {
        self.custody = object;
        self
    }

    /// Sets the epoch of the message's stream (`None`: the stream's first identity). The
    /// runner sets it when the stream was deleted and re-created, or moved back, under the
    /// consumer and the operator chose epoch-scoped keys, so that a reused stream sequence
    /// never names an earlier event's record (see [`Envelope::keyed_stream`]).
    #[must_use]
    pub fn with_stream_epoch(mut self, epoch: Option<Arc<str>>) -> Self {
        self.epoch = epoch;
        self
    }

    /// The epoch of the message's stream, when it is not the stream's first identity.
    pub fn stream_epoch(&self) -> Option<&str> {
        self.epoch.as_deref()
    }

    /// Sets where the event was first stored (the runtime does, for mirrors and sources).
    #[must_use]
    pub fn with_origin(mut self, origin: Option<Origin>) -> Self {
        self.origin = origin;
        self
    }

    /// Where the event was first stored: `None` for a message stored directly in the
    /// consumed stream (or before the runtime looked).
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// The stream the event was first stored in and its sequence there: the origin, or the
    /// keyed stream ([`Envelope::keyed_stream`]) and sequence of a message stored directly.
    pub fn origin_sequence(&self) -> Result<(std::borrow::Cow<'_, str>, u64), IdempotencyError> {
        match &self.origin {
            Some(Origin::Stored { stream, sequence, .. }) => Ok((std::borrow::Cow::Borrowed(stream), *sequence)),
            Some(Origin::Unresolved(why)) => Err(IdempotencyError::OriginUnresolved(why.to_string())),
            None if self.jetstream.stream.is_empty() || self.jetstream.stream_sequence == 0 => {
                Err(IdempotencyError::MissingStreamSequence)
            }
            None => Ok((self.keyed_stream(), self.jetstream.stream_sequence)),
        }
    }

    /// The event as its origin stored it, for content that must be the same whatever path
    /// delivered it (a sink keyed by `origin_sequence` writes it): the origin's stream (no
    /// epoch, no domain: a domain is part of the origin's name), sequence and subject, the
    /// headers without [`STREAM_SOURCE_HEADER`], and no JetStream timestamp (a sourcing
    /// stream stamps its own time on its copy; the publisher's `Nats-Time-Stamp` header
    /// stays). A message stored directly keeps its stream, epoch, sequence and subject. The
    /// delivery's facts (consumer, sequences, delivery count, receive time) are kept, so a
    /// document of the delivery still tells them. Refused when the origin cannot be told.
    pub fn at_origin(&self) -> Result<Self, IdempotencyError> {
        let mut event = self.clone();
        match &self.origin {
            Some(Origin::Stored { stream, sequence, subject }) => {
                event.jetstream.stream = stream.to_string();
                event.jetstream.stream_sequence = *sequence;
                event.epoch = None;
                if let Some(subject) = subject {
                    event.subject = subject.to_string();
                }
            }
            Some(Origin::Unresolved(why)) => {
                return Err(IdempotencyError::OriginUnresolved(why.to_string()));
            }
            None => {}
        }
        event.origin = None;
        event.jetstream.domain = None;
        event.jetstream.timestamp = None;
        event.headers.entries.retain(|(name, _)| !name.eq_ignore_ascii_case(STREAM_SOURCE_HEADER));
        Ok(event)
    }

    /// The subject the event was first stored under: its origin's when a subject transform
    /// changed it on the way, else the subject.
    pub fn origin_subject(&self) -> &str {
        match &self.origin {
            Some(Origin::Stored { subject: Some(subject), .. }) => subject,
            _ => &self.subject,
        }
    }

    /// The stream name that keys and names derived from the stream sequence use: the stream's
    /// name, or `{stream}.{epoch}` in a later epoch. A stream name cannot contain `.`, so an
    /// epoch-scoped name never equals another stream's name, and a stream that never changed
    /// keeps exactly the names and keys it always had.
    pub fn keyed_stream(&self) -> std::borrow::Cow<'_, str> {
        match &self.epoch {
            None => std::borrow::Cow::Borrowed(&self.jetstream.stream),
            Some(epoch) => std::borrow::Cow::Owned(format!("{}.{epoch}", self.jetstream.stream)),
        }
    }

    /// Mission metadata resolved by the core (`mission_metadata` section), if any (parsed
    /// from its canonical text the first time it is asked for, see [`JsonDoc`]).
    pub fn mission_metadata(&self) -> Option<&serde_json::Value> {
        self.mission_metadata.as_deref().map(JsonDoc::value)
    }

    /// Security label profile resolved by the core (`security_labels` section), if any.
    pub fn security_labels(&self) -> Option<&serde_json::Value> {
        self.security_labels.as_deref().map(JsonDoc::value)
    }

    /// Custody object computed by the core (`custody` section), if any.
    pub fn custody(&self) -> Option<&serde_json::Value> {
        self.custody.as_deref().map(JsonDoc::value)
    }

    /// The mission metadata document as attached: its canonical text when the policy step
    /// kept one, its value on demand.
    pub fn mission_metadata_doc(&self) -> Option<&JsonDoc> {
        self.mission_metadata.as_deref()
    }

    /// The security label profile as attached.
    pub fn security_labels_doc(&self) -> Option<&JsonDoc> {
        self.security_labels.as_deref()
    }

    /// The custody object as attached.
    pub fn custody_doc(&self) -> Option<&JsonDoc> {
        self.custody.as_deref()
    }

    /// Subject the message was published on.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Body bytes as delivered (empty for headers-only deliveries).
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Message headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// JetStream delivery metadata.
    pub fn jetstream(&self) -> &JetStreamInfo {
        &self.jetstream
    }

    /// Publisher message id from `Nats-Msg-Id`, `Nats-Message-Id` or `message-id`.
    pub fn message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    /// True when JetStream has delivered this message before.
    pub fn redelivered(&self) -> bool {
        self.jetstream.delivered > 1
    }

    /// Body presence derived from `Nats-Msg-Size`.
    pub fn presence(&self) -> &PayloadPresence {
        &self.presence
    }

    /// Resolved application metadata (priority, classification, labels).
    pub fn app(&self) -> &AppMetadata {
        &self.app
    }

    /// When the core received the message.
    pub fn received_at(&self) -> OffsetDateTime {
        self.received_at
    }

    /// The default idempotency key: stream sequence, else message id, else payload hash.
    ///
    /// A headers-only message (body omitted) without stream sequence or message id has no
    /// safe key: every omitted body is empty, so a hash would collide.
    pub fn idempotency_key(&self) -> Result<IdempotencyKey, IdempotencyError> {
        let js = &self.jetstream;
        if !js.stream.is_empty() && js.stream_sequence > 0 {
            return Ok(IdempotencyKey::stream_sequence(&self.keyed_stream(), js.stream_sequence));
        }
        if let Some(id) = self.message_id() {
            return Ok(IdempotencyKey::message_id(id));
        }
        if self.presence().omitted {
            return Err(IdempotencyError::PayloadOmitted);
        }
        Ok(IdempotencyKey::payload_sha256(self.subject(), self.payload()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retaining_headers_keeps_the_named_ones_and_the_facts_derived_at_delivery() {
        let headers = Headers::new()
            .with("Nats-Msg-Id", "m-7")
            .with("Nats-Time-Stamp", "2026-12-01T00:00:00Z")
            .with("X-Trace", "abc")
            .with("X-Trace", "def");
        let envelope = crate::testing::envelope_with("S", 7, "a.b", Bytes::from_static(b"{}"), headers, 1);
        let slim = envelope.retaining_headers(|name| name.eq_ignore_ascii_case("nats-time-stamp"));
        assert_eq!(slim.headers().len(), 1);
        assert_eq!(slim.headers().get("Nats-Time-Stamp"), Some("2026-12-01T00:00:00Z"));
        assert_eq!(slim.headers().get("X-Trace"), None);
        assert_eq!(slim.headers().get("Nats-Msg-Id"), None);
        // Derived when the message was delivered, not from the headers kept.
        assert_eq!(slim.message_id(), Some("m-7"));
        assert_eq!(slim.payload().as_ref(), b"{}");
    }

    #[test]
    fn every_path_of_one_event_has_one_content_at_its_origin() {
        let at = |e: &Envelope| {
            let o = e.at_origin().unwrap();
            (o.jetstream().stream.clone(), o.jetstream().stream_sequence, o.subject().to_owned(), o.headers().clone())
        };
        let payload = Bytes::from_static(b"{}");
        let published = Headers::new().with("Nats-Msg-Id", "m-7");
        let direct = crate::testing::envelope_with("ORDERS", 7, "o.eu", payload.clone(), published.clone(), 1);
        let origin = || Some(Origin::Stored { stream: "ORDERS".into(), sequence: 7, subject: Some("o.eu".into()) });
        let mirrored = crate::testing::envelope_with("DR", 7, "o.eu", payload.clone(), published.clone(), 1)
            .with_origin(origin())
            .with_stream_epoch(Some("e2".into()));
        let sourced_headers = published.clone().with(STREAM_SOURCE_HEADER, "ORDERS 7 > o.> hub.o.eu x");
        let sourced =
            crate::testing::envelope_with("HUB", 3, "hub.o.eu", payload, sourced_headers, 2).with_origin(origin());
        let want = at(&direct);
        assert_eq!(want, ("ORDERS".to_owned(), 7, "o.eu".to_owned(), published));
        assert_eq!(at(&mirrored), want);
        assert_eq!(at(&sourced), want);
        let hubbed = sourced.at_origin().unwrap();
        assert_eq!((hubbed.origin(), hubbed.stream_epoch(), hubbed.jetstream().timestamp), (None, None, None));
        assert_eq!(hubbed.jetstream().delivered, 2, "the delivery's facts stay");
        let lost = direct.with_origin(Some(Origin::Unresolved("no such source".into())));
        assert!(lost.at_origin().is_err());
    }
}
