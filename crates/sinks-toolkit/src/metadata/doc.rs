//! The standard metadata document (`metadata_version: 1`): what it holds of an envelope
//! ([`MetadataDoc`], serialized by serde), how it writes itself in key order through a
//! [`DocWriter`] with members left out (the custody hash's input, the size step's count), what
//! it holds of one delivery ([`MetadataScope`]), and the `payload` presence object DLQ records
//! share.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{NATS_RESERVED_HEADERS, OTHER_STANDARD_HEADERS};
use sinks_contract::envelope::{Envelope, Headers, MSG_SIZE_HEADER, Origin};
use sinks_contract::json::JsonDoc;

/// Integer nanoseconds since the Unix epoch (exact, no float rounding).
pub fn epoch_ns(t: OffsetDateTime) -> i128 {
    t.unix_timestamp_nanos()
}

/// RFC 3339 text of a timestamp, in UTC.
pub fn rfc3339(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC).format(&Rfc3339).unwrap_or_default()
}

/// The `payload` object describing body presence (used in metadata and DLQ records).
#[derive(Debug, Serialize)]
pub struct PresenceDoc<'a> {
    delivered_size_bytes: usize,
    nats_msg_size_header: Option<&'a str>,
    nats_msg_size_header_malformed: bool,
    omitted: bool,
    omitted_reason: Option<&'static str>,
    original_size_bytes: Option<u64>,
    present: bool,
}

impl<'a> PresenceDoc<'a> {
    /// The presence facts of `envelope`.
    pub fn of(envelope: &'a Envelope) -> Self {
        let p = envelope.presence();
        Self {
            delivered_size_bytes: envelope.payload().len(),
            nats_msg_size_header: envelope.headers().get(MSG_SIZE_HEADER),
            nats_msg_size_header_malformed: p.size_header_malformed,
            omitted: p.omitted,
            omitted_reason: p.omitted.then_some("headers_only"),
            original_size_bytes: p.original_size_bytes,
            present: p.present(),
        }
    }
}

/// The `payload` object describing body presence, as a JSON value.
pub fn payload_presence_json(envelope: &Envelope) -> Value {
    serde_json::to_value(PresenceDoc::of(envelope)).unwrap_or(Value::Null)
}

/// The standard headers of `headers` (`metadata.nats.reserved_headers`), sorted by name: each
/// name of [`NATS_RESERVED_HEADERS`] and [`OTHER_STANDARD_HEADERS`] that is present, spelled
/// as there, and every other `Nats-` header under its own spelling, each with its first value.
/// One pass over the headers: a header set holds each name once, whatever its case.
fn standard_headers(headers: &Headers) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::with_capacity(headers.len());
    for (name, values) in headers.iter() {
        // Bytes, not a str slice: a name may start with a multi-byte character.
        let nats = name.as_bytes().get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"nats-"));
        match (standard_spelling(name), values.first()) {
            (Some(spelling), Some(value)) => out.push((spelling, value)),
            (_, first) if nats => out.push((name, first.map_or("", String::as_str))),
            _ => {}
        }
    }
    out.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out
}

/// Slots of [`STANDARD_SLOTS`] (a power of two, several times the 26 names).
const SLOTS: usize = 128;

/// The standard header names ([`NATS_RESERVED_HEADERS`], [`OTHER_STANDARD_HEADERS`]) in an open
/// addressing table: each at [`slot_of`] its name, or the next free slot after it.
static STANDARD_SLOTS: std::sync::LazyLock<[Option<&'static str>; SLOTS]> = std::sync::LazyLock::new(|| {
    let mut slots = [None; SLOTS];
    for name in NATS_RESERVED_HEADERS.iter().chain(OTHER_STANDARD_HEADERS.iter()) {
        let mut at = slot_of(name.as_bytes());
        while slots[at].is_some() {
            at = (at + 1) % SLOTS;
        }
        slots[at] = Some(*name);
    }
    slots
});

/// Where a header name starts its search in [`STANDARD_SLOTS`], the same in any case: from its
/// length and two of its bytes (the standard names share their `Nats-` and differ by length or
/// in their middle and last letters).
fn slot_of(name: &[u8]) -> usize {
    let len = name.len();
    let byte = |at: usize| usize::from(name.get(at).map_or(0, u8::to_ascii_lowercase));
    (len.wrapping_mul(31) ^ byte(len / 2).wrapping_mul(7) ^ byte(len.wrapping_sub(1))) % SLOTS
}

/// The spelling of the standard header `name` is (compared case-insensitively), found in
/// [`STANDARD_SLOTS`] in a probe or two (a linear search compared it with all 26 names; a
/// binary search by lowercase name made a `memcmp` call at each step, and was slower still).
fn standard_spelling(name: &str) -> Option<&'static str> {
    let slots = &*STANDARD_SLOTS;
    let mut at = slot_of(name.as_bytes());
    loop {
        match slots[at] {
            None => return None,
            Some(standard) if standard.eq_ignore_ascii_case(name) => return Some(standard),
            Some(_) => at = (at + 1) % SLOTS,
        }
    }
}

/// RFC 3339 text of a timestamp in UTC (as [`rfc3339`]), written when the document is
/// serialized: a member a writer leaves out is never formatted.
#[derive(Debug, Clone, Copy)]
struct Rfc3339Text(OffsetDateTime);

impl Rfc3339Text {
    /// The text, formatted into `buffer`.
    fn text(self, buffer: &mut [u8; 64]) -> &str {
        let mut cursor = std::io::Cursor::new(&mut buffer[..]);
        // The cursor's position, not the count format_into returns (which leaves out the
        // subsecond digits after the first, as the property test below found).
        let written = self.0.to_offset(time::UtcOffset::UTC).format_into(&mut cursor, &Rfc3339).ok();
        let end = usize::try_from(cursor.position()).unwrap_or(0);
        written.and_then(|_| std::str::from_utf8(&buffer[..end]).ok()).unwrap_or_default()
    }
}

impl Serialize for Rfc3339Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.text(&mut [0u8; 64]))
    }
}

/// Which facts the metadata document a sink stores holds (`sink.metadata_scope`).
///
/// A JetStream message is delivered again after a crash, a lost answer or an outage, and each
/// delivery has facts of its own: when it was received and stored, how old the event was then,
/// the delivery count, the consumer that delivered it and its sequence there. A destination
/// that fingerprints what it is sent under an idempotency key (the IETF `Idempotency-Key`
/// draft, payment-style APIs) refuses a second body for one key, so a document holding those
/// facts turns an ordinary redelivery into a conflict. Under [`MetadataScope::Message`] every
/// delivery of one event writes the same bytes; [`MetadataScope::Delivery`] is the Python
/// reference's document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataScope {
    /// The event's facts only (the default): the document leaves out `freshness`,
    /// `timestamps.received_at`, `timestamps.stored_at` (and their `_epoch_ns`), and
    /// `jetstream.consumer`, `consumer_sequence`, `delivered`, `redelivered` and `pending`, so
    /// every attempt and every delivery of one event (a replay and a redrive too) writes
    /// byte-identical content.
    #[default]
    Message,
    /// The reference's document: also this delivery's receive and store times, freshness,
    /// delivery count and consumer. Its bytes differ on every delivery: a destination that
    /// compares what one key is sent refuses the redelivery of a stored event.
    Delivery,
}

impl MetadataScope {
    /// The envelope a sink builds stored content from. Under keys of the event's origin
    /// (`origin_keyed`: `origin_sequence`) and this scope `Message`, the event as its origin
    /// stored it ([`Envelope::at_origin`]), so the same event read from its stream, a mirror
    /// or a hub that sources it writes the same bytes under its one key; else the envelope
    /// as delivered. An error when the origin cannot be told (the key is refused too).
    pub fn content_of(
        self,
        envelope: &Envelope,
        origin_keyed: bool,
    ) -> Result<std::borrow::Cow<'_, Envelope>, sinks_contract::idempotency::IdempotencyError> {
        if origin_keyed && self == Self::Message {
            envelope.at_origin().map(std::borrow::Cow::Owned)
        } else {
            Ok(std::borrow::Cow::Borrowed(envelope))
        }
    }

    /// The members [`MetadataDoc::write_in_key_order`] leaves out under this scope (with the
    /// custody object kept).
    pub fn left_out(self) -> LeftOut {
        match self {
            Self::Message => {
                LeftOut { custody: false, freshness: true, stored_at: true, delivery: true, consumer: true }
            }
            Self::Delivery => LeftOut::default(),
        }
    }

    /// `message` or `delivery`, as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Delivery => "delivery",
        }
    }
}

/// The facts of one delivery that a sink's own event document repeats at its top level
/// (`consumer`, `consumer_sequence`, `received_at_epoch_ns`, `stored_at_epoch_ns`): all `None`
/// under [`MetadataScope::Message`], so a document that skips `None` members is the same for
/// every delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryFields<'a> {
    /// The consumer that delivered the message.
    pub consumer: Option<&'a str>,
    /// Its sequence on that consumer.
    pub consumer_sequence: Option<u64>,
    /// When it was received, ns since the epoch.
    pub received_at_epoch_ns: Option<i64>,
    /// When it was stored, ns since the epoch.
    pub stored_at_epoch_ns: Option<i64>,
}

impl<'a> DeliveryFields<'a> {
    /// The fields of `envelope` stored at `stored_at` under `scope` (all `None` under
    /// [`MetadataScope::Message`]).
    pub fn of(envelope: &'a Envelope, stored_at: OffsetDateTime, scope: MetadataScope) -> Self {
        if scope == MetadataScope::Message {
            return Self {
                consumer: None,
                consumer_sequence: None,
                received_at_epoch_ns: None,
                stored_at_epoch_ns: None,
            };
        }
        let js = envelope.jetstream();
        let ns = |t: OffsetDateTime| i64::try_from(t.unix_timestamp_nanos()).unwrap_or(i64::MAX);
        Self {
            consumer: Some(&js.consumer),
            consumer_sequence: Some(js.consumer_sequence),
            received_at_epoch_ns: Some(ns(envelope.received_at())),
            stored_at_epoch_ns: Some(ns(stored_at)),
        }
    }
}

/// The standard metadata document (`metadata_version: 1`) of one envelope stored at
/// `stored_at`, borrowed from the envelope and serialized directly (fields are declared in
/// alphabetical order, so the output has sorted keys like every record). Shape follows the
/// reference; `reply` is always null because the reply subject is an ack capability and
/// never leaves the core; `custody`, `mission_metadata` and `security_labels` are what the
/// core's policy steps attached (null when those steps are off).
#[derive(Debug, Serialize)]
pub struct MetadataDoc<'a> {
    custody: Option<&'a JsonDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    freshness: Option<Freshness>,
    headers: &'a Headers,
    jetstream: JetStreamDoc<'a>,
    message_id: Option<&'a str>,
    message_metadata: AppDoc<'a>,
    metadata_version: u32,
    mission_metadata: Option<&'a JsonDoc>,
    nats: NatsDoc<'a>,
    payload: PresenceDoc<'a>,
    reply: Option<()>,
    security_labels: Option<&'a JsonDoc>,
    subject: &'a str,
    timestamps: Timestamps<'a>,
    /// What the document holds (see [`MetadataScope`]); not a member.
    #[serde(skip)]
    scope: MetadataScope,
    /// The receive and store times, whatever the scope (for the columns and fields sinks
    /// keep beside the document); not members.
    #[serde(skip)]
    received_ns: i64,
    #[serde(skip)]
    stored_ns: i64,
}

#[derive(Debug, Serialize)]
struct Freshness {
    event_age_at_receive_seconds: Option<f64>,
    event_age_at_store_seconds: Option<f64>,
    message_created_at_header_malformed: bool,
    message_created_at_missing: bool,
    message_created_at_source: &'static str,
    source_clock_skew_seconds: Option<f64>,
}

#[derive(Debug, Serialize)]
struct JetStreamDoc<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_sequence: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivered: Option<u64>,
    domain: Option<&'a str>,
    /// Where the event was first stored, for a message that came through a mirror or a
    /// source (or in a JetStream domain): absent for a plain stream's own message.
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<OriginDoc<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redelivered: Option<bool>,
    stream: &'a str,
    /// Present only in a later epoch of the stream (see `Envelope::keyed_stream`), so the
    /// document of a stream that never changed is exactly as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_epoch: Option<&'a str>,
    stream_sequence: u64,
    timestamp: Option<Rfc3339Text>,
    timestamp_epoch_ns: Option<i64>,
}

/// `jetstream.origin`: the stream the event was first stored in, its sequence and subject
/// there (the key `origin_sequence` gives it).
#[derive(Debug, Serialize)]
struct OriginDoc<'a> {
    sequence: u64,
    stream: &'a str,
    subject: &'a str,
}

#[derive(Debug, Serialize)]
struct AppDoc<'a> {
    classification: Option<&'a str>,
    labels: &'a [String],
    priority: Option<&'a str>,
}

/// `nats`: the standard headers as a map and their names as a list, both from one sorted list.
#[derive(Debug)]
struct NatsDoc<'a> {
    reserved: Vec<(&'a str, &'a str)>,
}

impl Serialize for NatsDoc<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        struct Map<'r, 'a>(&'r [(&'a str, &'a str)]);
        impl Serialize for Map<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
            }
        }
        struct Names<'r, 'a>(&'r [(&'a str, &'a str)]);
        impl Serialize for Names<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter().map(|(name, _)| name))
            }
        }
        let mut doc = serializer.serialize_struct("NatsDoc", 2)?;
        doc.serialize_field("reserved_headers", &Map(&self.reserved))?;
        doc.serialize_field("reserved_headers_present", &Names(&self.reserved))?;
        doc.end()
    }
}

#[derive(Debug, Serialize)]
struct Timestamps<'a> {
    jetstream_timestamp_epoch_ns: Option<i64>,
    message_created_at_epoch_ns: Option<i64>,
    message_created_at_header_malformed: bool,
    message_created_at_source: &'static str,
    nats_time_stamp: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    received_at: Option<Rfc3339Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    received_at_epoch_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_at: Option<Rfc3339Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_at_epoch_ns: Option<i64>,
}

impl<'a> MetadataDoc<'a> {
    /// The reference's document of `envelope` stored at `stored_at` (every member, this
    /// delivery's facts included: [`MetadataScope::Delivery`]).
    pub fn new(envelope: &'a Envelope, stored_at: OffsetDateTime) -> Self {
        Self::scoped(envelope, stored_at, MetadataScope::Delivery)
    }

    /// The document of `envelope` stored at `stored_at`, holding what `scope` says.
    pub fn scoped(envelope: &'a Envelope, stored_at: OffsetDateTime, scope: MetadataScope) -> Self {
        let delivery = scope == MetadataScope::Delivery;
        let js = envelope.jetstream();
        let raw_created = envelope.headers().get(sinks_contract::envelope::CREATED_AT_HEADER);
        let parsed_created = raw_created.and_then(|v| OffsetDateTime::parse(v.trim(), &Rfc3339).ok());
        let js_ns = js.timestamp.map(epoch_ns);
        let (created_ns, created_source) = match (parsed_created, js_ns) {
            (Some(t), _) => (Some(epoch_ns(t)), "nats_time_stamp"),
            (None, Some(ns)) => (Some(ns), "jetstream_timestamp"),
            (None, None) => (None, "missing"),
        };
        let header_malformed = raw_created.is_some() && parsed_created.is_none();
        let received_ns = epoch_ns(envelope.received_at());
        let stored_ns = epoch_ns(stored_at);
        let age = |later: i128| created_ns.map(|c| ((later - c).max(0) as f64) / 1e9);
        let reserved = standard_headers(envelope.headers());
        let app = envelope.app();
        let as_i64 = |n: i128| i64::try_from(n).unwrap_or(i64::MAX);
        Self {
            custody: envelope.custody_doc(),
            freshness: delivery.then(|| Freshness {
                event_age_at_receive_seconds: age(received_ns),
                event_age_at_store_seconds: age(stored_ns),
                message_created_at_header_malformed: header_malformed,
                message_created_at_missing: created_ns.is_none(),
                message_created_at_source: created_source,
                source_clock_skew_seconds: created_ns.map(|c| ((c - received_ns).max(0) as f64) / 1e9),
            }),
            headers: envelope.headers(),
            jetstream: JetStreamDoc {
                consumer: delivery.then_some(js.consumer.as_str()),
                consumer_sequence: delivery.then_some(js.consumer_sequence),
                delivered: delivery.then_some(js.delivered),
                domain: js.domain.as_deref(),
                origin: match envelope.origin() {
                    Some(Origin::Stored { stream, sequence, .. }) => {
                        Some(OriginDoc { sequence: *sequence, stream, subject: envelope.origin_subject() })
                    }
                    _ => None,
                },
                pending: delivery.then_some(js.pending),
                redelivered: delivery.then(|| envelope.redelivered()),
                stream: &js.stream,
                stream_epoch: envelope.stream_epoch(),
                stream_sequence: js.stream_sequence,
                timestamp: js.timestamp.map(Rfc3339Text),
                timestamp_epoch_ns: js_ns.map(as_i64),
            },
            message_id: envelope.message_id(),
            message_metadata: AppDoc {
                classification: app.classification.as_deref(),
                labels: &app.labels,
                priority: app.priority.as_deref(),
            },
            metadata_version: 1,
            mission_metadata: envelope.mission_metadata_doc(),
            nats: NatsDoc { reserved },
            payload: PresenceDoc::of(envelope),
            reply: None,
            security_labels: envelope.security_labels_doc(),
            subject: envelope.subject(),
            timestamps: Timestamps {
                jetstream_timestamp_epoch_ns: js_ns.map(as_i64),
                message_created_at_epoch_ns: created_ns.map(as_i64),
                message_created_at_header_malformed: header_malformed,
                message_created_at_source: created_source,
                nats_time_stamp: raw_created,
                received_at: delivery.then(|| Rfc3339Text(envelope.received_at())),
                received_at_epoch_ns: delivery.then(|| as_i64(received_ns)),
                stored_at: delivery.then_some(Rfc3339Text(stored_at)),
                stored_at_epoch_ns: delivery.then(|| as_i64(stored_ns)),
            },
            scope,
            received_ns: as_i64(received_ns),
            stored_ns: as_i64(stored_ns),
        }
    }

    /// What the document holds.
    pub fn scope(&self) -> MetadataScope {
        self.scope
    }

    /// The delivery's facts a sink's own document repeats beside this one: `None` under
    /// [`MetadataScope::Message`].
    pub fn delivery_fields(&self) -> DeliveryFields<'a> {
        let delivery = self.scope == MetadataScope::Delivery;
        DeliveryFields {
            consumer: self.jetstream.consumer,
            consumer_sequence: self.jetstream.consumer_sequence,
            received_at_epoch_ns: delivery.then_some(self.received_ns),
            stored_at_epoch_ns: delivery.then_some(self.stored_ns),
        }
    }

    /// `message_created_at_epoch_ns`, when known.
    pub fn created_at_epoch_ns(&self) -> Option<i64> {
        self.timestamps.message_created_at_epoch_ns
    }

    /// `jetstream_timestamp_epoch_ns`, when known.
    pub fn jetstream_timestamp_epoch_ns(&self) -> Option<i64> {
        self.timestamps.jetstream_timestamp_epoch_ns
    }

    /// When the message was received, ns since the epoch (whatever the scope: a column or
    /// field a sink keeps beside the document).
    pub fn received_at_epoch_ns(&self) -> i64 {
        self.received_ns
    }

    /// When it was stored, ns since the epoch (whatever the scope).
    pub fn stored_at_epoch_ns(&self) -> i64 {
        self.stored_ns
    }
}

/// A JSON writer that [`MetadataDoc::write_in_key_order`] writes the document through: it
/// decides how strings, numbers and embedded values are spelled (the policy steps' canonical
/// JSON, say); the document decides the members and their order.
pub trait DocWriter {
    /// What [`DocWriter::value`] reports for a value it cannot write.
    type Error;
    /// Bytes that are JSON as they are: punctuation, `null`, `true`, `false`, a fixed key
    /// with its quotes and colon.
    fn raw(&mut self, bytes: &[u8]);
    /// A string, quoted and escaped.
    fn string(&mut self, text: &str);
    /// A signed integer.
    fn integer(&mut self, value: i64);
    /// An unsigned integer.
    fn unsigned(&mut self, value: u64);
    /// A finite float (a non-finite one is written as `null` without asking the writer, as
    /// `serde_json::to_value` makes it).
    fn float(&mut self, value: f64);
    /// A JSON value, every object's members in key order.
    fn value(&mut self, value: &Value) -> Result<(), Self::Error>;
    /// A document the core attached (custody, mission metadata, security labels): its value
    /// ([`DocWriter::value`]) unless the writer can use the document's canonical text as it is.
    fn doc(&mut self, doc: &JsonDoc) -> Result<(), Self::Error> {
        self.value(doc.value())
    }
}

/// Members of the document [`MetadataDoc::write_in_key_order`] leaves out (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// `custody`.
    pub custody: bool,
    /// `freshness`.
    pub freshness: bool,
    /// `timestamps.stored_at` and `timestamps.stored_at_epoch_ns`.
    pub stored_at: bool,
    /// The fields of one delivery: `timestamps.received_at`, `timestamps.received_at_epoch_ns`,
    /// `jetstream.consumer_sequence`, `jetstream.delivered`, `jetstream.redelivered` and
    /// `jetstream.pending`.
    pub delivery: bool,
    /// `jetstream.consumer`: the consumer a delivery came through (a replay's temporary
    /// consumer differs from the production one).
    pub consumer: bool,
}

/// An object being written: members after the first get their comma.
struct Members<'w, W: ?Sized> {
    writer: &'w mut W,
    empty: bool,
}

impl<'w, W: DocWriter + ?Sized> Members<'w, W> {
    fn open(writer: &'w mut W) -> Self {
        writer.raw(b"{");
        Self { writer, empty: true }
    }

    /// The writer, after the next member's comma and `key` (`"name":`).
    fn key(&mut self, key: &[u8]) -> &mut W {
        if !self.empty {
            self.writer.raw(b",");
        }
        self.empty = false;
        self.writer.raw(key);
        self.writer
    }

    fn close(self) {
        self.writer.raw(b"}");
    }
}

fn null_or_string<W: DocWriter + ?Sized>(writer: &mut W, text: Option<&str>) {
    match text {
        Some(text) => writer.string(text),
        None => writer.raw(b"null"),
    }
}

fn null_or_integer<W: DocWriter + ?Sized>(writer: &mut W, value: Option<i64>) {
    match value {
        Some(value) => writer.integer(value),
        None => writer.raw(b"null"),
    }
}

fn null_or_float<W: DocWriter + ?Sized>(writer: &mut W, value: Option<f64>) {
    match value {
        Some(value) if value.is_finite() => writer.float(value),
        _ => writer.raw(b"null"),
    }
}

fn null_or_doc<W: DocWriter + ?Sized>(writer: &mut W, doc: Option<&JsonDoc>) -> Result<(), W::Error> {
    match doc {
        Some(doc) => writer.doc(doc),
        None => {
            writer.raw(b"null");
            Ok(())
        }
    }
}

fn boolean<W: DocWriter + ?Sized>(writer: &mut W, value: bool) {
    writer.raw(if value { b"true" } else { b"false" });
}

fn strings<'s, W: DocWriter + ?Sized>(writer: &mut W, items: impl Iterator<Item = &'s str>) {
    writer.raw(b"[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            writer.raw(b",");
        }
        writer.string(item);
    }
    writer.raw(b"]");
}

impl MetadataDoc<'_> {
    /// Writes the document through `writer` with the `left_out` members left out, members in
    /// key order as they are declared (no sorting, no member tracking): the members the serde
    /// route writes, in its order (tests in this crate and in `sinks-policy` hold the two
    /// together).
    pub fn write_in_key_order<W: DocWriter + ?Sized>(&self, writer: &mut W, left_out: LeftOut) -> Result<(), W::Error> {
        let mut doc = Members::open(writer);
        if !left_out.custody {
            null_or_doc(doc.key(b"\"custody\":"), self.custody)?;
        }
        if let Some(freshness) = self.freshness.as_ref().filter(|_| !left_out.freshness) {
            freshness.write(doc.key(b"\"freshness\":"));
        }
        write_headers(doc.key(b"\"headers\":"), self.headers);
        self.jetstream.write(doc.key(b"\"jetstream\":"), left_out);
        null_or_string(doc.key(b"\"message_id\":"), self.message_id);
        self.message_metadata.write(doc.key(b"\"message_metadata\":"));
        doc.key(b"\"metadata_version\":").unsigned(u64::from(self.metadata_version));
        null_or_doc(doc.key(b"\"mission_metadata\":"), self.mission_metadata)?;
        self.nats.write(doc.key(b"\"nats\":"));
        self.payload.write(doc.key(b"\"payload\":"));
        doc.key(b"\"reply\":").raw(b"null");
        null_or_doc(doc.key(b"\"security_labels\":"), self.security_labels)?;
        doc.key(b"\"subject\":").string(self.subject);
        self.timestamps.write(doc.key(b"\"timestamps\":"), left_out);
        doc.close();
        Ok(())
    }
}

/// An object of `entries`, given in key order, each value written by `value`.
fn entries<'s, W: DocWriter + ?Sized, V>(
    writer: &mut W,
    entries: impl Iterator<Item = (&'s str, V)>,
    value: impl Fn(&mut W, V),
) {
    writer.raw(b"{");
    for (i, (name, item)) in entries.enumerate() {
        if i > 0 {
            writer.raw(b",");
        }
        writer.string(name);
        writer.raw(b":");
        value(writer, item);
    }
    writer.raw(b"}");
}

/// The headers as [`Headers`] serializes them: names sorted, one value as a string, several as
/// an array.
fn write_headers<W: DocWriter + ?Sized>(writer: &mut W, headers: &Headers) {
    let mut sorted: Vec<(&str, &[String])> = headers.iter().collect();
    // A header set holds each name once, so no two names are equal.
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries(writer, sorted.into_iter(), |writer, values| match values {
        [one] => writer.string(one),
        many => strings(writer, many.iter().map(String::as_str)),
    });
}

impl Freshness {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W) {
        let mut o = Members::open(writer);
        null_or_float(o.key(b"\"event_age_at_receive_seconds\":"), self.event_age_at_receive_seconds);
        null_or_float(o.key(b"\"event_age_at_store_seconds\":"), self.event_age_at_store_seconds);
        boolean(o.key(b"\"message_created_at_header_malformed\":"), self.message_created_at_header_malformed);
        boolean(o.key(b"\"message_created_at_missing\":"), self.message_created_at_missing);
        o.key(b"\"message_created_at_source\":").string(self.message_created_at_source);
        null_or_float(o.key(b"\"source_clock_skew_seconds\":"), self.source_clock_skew_seconds);
        o.close();
    }
}

impl JetStreamDoc<'_> {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W, left_out: LeftOut) {
        let mut o = Members::open(writer);
        let delivery = |value: Option<u64>| value.filter(|_| !left_out.delivery);
        if let Some(consumer) = self.consumer.filter(|_| !left_out.consumer) {
            o.key(b"\"consumer\":").string(consumer);
        }
        if let Some(sequence) = delivery(self.consumer_sequence) {
            o.key(b"\"consumer_sequence\":").unsigned(sequence);
        }
        if let Some(delivered) = delivery(self.delivered) {
            o.key(b"\"delivered\":").unsigned(delivered);
        }
        null_or_string(o.key(b"\"domain\":"), self.domain);
        if let Some(origin) = &self.origin {
            let mut inner = Members::open(o.key(b"\"origin\":"));
            inner.key(b"\"sequence\":").unsigned(origin.sequence);
            inner.key(b"\"stream\":").string(origin.stream);
            inner.key(b"\"subject\":").string(origin.subject);
            inner.close();
        }
        if let Some(pending) = delivery(self.pending) {
            o.key(b"\"pending\":").unsigned(pending);
        }
        if let Some(redelivered) = self.redelivered.filter(|_| !left_out.delivery) {
            boolean(o.key(b"\"redelivered\":"), redelivered);
        }
        o.key(b"\"stream\":").string(self.stream);
        if let Some(epoch) = self.stream_epoch {
            o.key(b"\"stream_epoch\":").string(epoch);
        }
        o.key(b"\"stream_sequence\":").unsigned(self.stream_sequence);
        let mut buffer = [0u8; 64];
        null_or_string(o.key(b"\"timestamp\":"), self.timestamp.map(|t| t.text(&mut buffer)));
        null_or_integer(o.key(b"\"timestamp_epoch_ns\":"), self.timestamp_epoch_ns);
        o.close();
    }
}

impl AppDoc<'_> {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W) {
        let mut o = Members::open(writer);
        null_or_string(o.key(b"\"classification\":"), self.classification);
        strings(o.key(b"\"labels\":"), self.labels.iter().map(String::as_str));
        null_or_string(o.key(b"\"priority\":"), self.priority);
        o.close();
    }
}

impl NatsDoc<'_> {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W) {
        let mut o = Members::open(writer);
        entries(o.key(b"\"reserved_headers\":"), self.reserved.iter().copied(), |w, value| w.string(value));
        strings(o.key(b"\"reserved_headers_present\":"), self.reserved.iter().map(|(name, _)| *name));
        o.close();
    }
}

impl PresenceDoc<'_> {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W) {
        let mut o = Members::open(writer);
        o.key(b"\"delivered_size_bytes\":").unsigned(self.delivered_size_bytes as u64);
        null_or_string(o.key(b"\"nats_msg_size_header\":"), self.nats_msg_size_header);
        boolean(o.key(b"\"nats_msg_size_header_malformed\":"), self.nats_msg_size_header_malformed);
        boolean(o.key(b"\"omitted\":"), self.omitted);
        null_or_string(o.key(b"\"omitted_reason\":"), self.omitted_reason);
        match self.original_size_bytes {
            Some(size) => o.key(b"\"original_size_bytes\":").unsigned(size),
            None => o.key(b"\"original_size_bytes\":").raw(b"null"),
        }
        boolean(o.key(b"\"present\":"), self.present);
        o.close();
    }
}

impl Timestamps<'_> {
    fn write<W: DocWriter + ?Sized>(&self, writer: &mut W, left_out: LeftOut) {
        let mut o = Members::open(writer);
        null_or_integer(o.key(b"\"jetstream_timestamp_epoch_ns\":"), self.jetstream_timestamp_epoch_ns);
        null_or_integer(o.key(b"\"message_created_at_epoch_ns\":"), self.message_created_at_epoch_ns);
        boolean(o.key(b"\"message_created_at_header_malformed\":"), self.message_created_at_header_malformed);
        o.key(b"\"message_created_at_source\":").string(self.message_created_at_source);
        null_or_string(o.key(b"\"nats_time_stamp\":"), self.nats_time_stamp);
        let mut buffer = [0u8; 64];
        if let (Some(at), Some(ns), false) = (self.received_at, self.received_at_epoch_ns, left_out.delivery) {
            o.key(b"\"received_at\":").string(at.text(&mut buffer));
            o.key(b"\"received_at_epoch_ns\":").integer(ns);
        }
        if let (Some(at), Some(ns), false) = (self.stored_at, self.stored_at_epoch_ns, left_out.stored_at) {
            o.key(b"\"stored_at\":").string(at.text(&mut buffer));
            o.key(b"\"stored_at_epoch_ns\":").integer(ns);
        }
        o.close();
    }
}

/// The standard metadata document as a JSON value (see [`MetadataDoc`]).
pub fn metadata_document(envelope: &Envelope, stored_at: OffsetDateTime) -> Value {
    serde_json::to_value(MetadataDoc::new(envelope, stored_at)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use sinks_contract::envelope::AppMetadata;
    use sinks_contract::testing::envelope_with;

    /// The standard headers as they were found before the one-pass search: each standard name
    /// looked up in turn into a sorted map, then every other `Nats-` header.
    fn standard_headers_by_lookup(headers: &Headers) -> Vec<(String, String)> {
        let mut out: BTreeMap<&str, &str> = BTreeMap::new();
        for name in NATS_RESERVED_HEADERS.iter().chain(OTHER_STANDARD_HEADERS.iter()) {
            if let Some(value) = headers.get(name) {
                out.insert(name, value);
            }
        }
        for (name, values) in headers.iter() {
            let known = out.keys().any(|k| k.eq_ignore_ascii_case(name));
            if name.as_bytes().get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"nats-")) && !known {
                out.insert(name, values.first().map_or("", String::as_str));
            }
        }
        out.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    /// Header names: standard ones in any case, other `Nats-` ones, others, multi-byte ones.
    fn header_name() -> impl Strategy<Value = String> {
        let known: Vec<&str> = NATS_RESERVED_HEADERS.iter().chain(OTHER_STANDARD_HEADERS.iter()).copied().collect();
        prop_oneof![
            (prop::sample::select(known), any::<u64>()).prop_map(|(name, bits)| name
                .chars()
                .enumerate()
                .map(|(i, c)| if (bits >> (i % 64)) & 1 == 1 { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
                .collect()),
            "(nats|NATS|Nats|naTs)-[A-Za-z-]{0,8}",
            "[A-Za-z\u{e9}-]{1,8}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn one_pass_finds_what_the_lookups_found(
            pairs in prop::collection::vec((header_name(), "[a-z0-9 ]{0,6}"), 0..12),
        ) {
            let headers = pairs.iter().fold(Headers::new(), |h, (n, v)| h.with(n, v.as_str()));
            let found: Vec<(String, String)> =
                standard_headers(&headers).into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            prop_assert_eq!(found, standard_headers_by_lookup(&headers));
        }

        #[test]
        fn timestamps_written_late_read_as_rfc3339(nanos in -10i128.pow(18)..10i128.pow(19), offset in -86_399i32..86_400) {
            let offset = time::UtcOffset::from_whole_seconds(offset).unwrap_or(time::UtcOffset::UTC);
            let at = OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH).to_offset(offset);
            prop_assert_eq!(serde_json::to_value(Rfc3339Text(at)).ok(), Some(Value::String(rfc3339(at))));
        }
    }

    /// Writes serde_json's spelling of each part, so the document's own writer can be held to
    /// `serde_json::to_vec` of the serde route.
    #[derive(Default)]
    struct SerdeJsonForm(Vec<u8>);

    impl DocWriter for SerdeJsonForm {
        type Error = serde_json::Error;
        fn raw(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
        fn string(&mut self, text: &str) {
            self.0.extend_from_slice(&serde_json::to_vec(text).unwrap());
        }
        fn integer(&mut self, value: i64) {
            self.0.extend_from_slice(value.to_string().as_bytes());
        }
        fn unsigned(&mut self, value: u64) {
            self.0.extend_from_slice(value.to_string().as_bytes());
        }
        fn float(&mut self, value: f64) {
            self.0.extend_from_slice(&serde_json::to_vec(&value).unwrap());
        }
        fn value(&mut self, value: &Value) -> Result<(), Self::Error> {
            serde_json::to_writer(&mut self.0, value)
        }
    }

    /// Envelopes that set every member of the document one way and the other.
    fn every_shape() -> Vec<Envelope> {
        use sinks_contract::envelope::{JetStreamInfo, MSG_SIZE_HEADER};
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_764_497_400_123_456_789).unwrap();
        let js = |timestamp, domain: Option<&str>| JetStreamInfo {
            stream: "ORDERS \"q\"".into(),
            consumer: "c\u{e9}".into(),
            stream_sequence: u64::MAX,
            consumer_sequence: 12,
            delivered: 3,
            pending: 40,
            timestamp,
            domain: domain.map(str::to_owned),
        };
        let headers = Headers::new()
            .with("X-Many", "1")
            .with("x-many", "2")
            .with("Nats-Time-Stamp", "2026-11-30T10:00:00.5+02:00")
            .with("nats-msg-id", "m\n1")
            .with(MSG_SIZE_HEADER, "77")
            .with("Nats-Custom", "{\"a\":1}")
            .with("traceparent", "00-ab");
        vec![
            envelope_with("S", 1, "a.b", &b"{}"[..], Headers::new(), 1),
            Envelope::new("orders.x", b"payload".to_vec(), headers, js(Some(at), Some("hub")))
                .with_app_metadata(AppMetadata {
                    priority: Some("flash".into()),
                    classification: Some("SECRET".into()),
                    labels: vec!["a".into(), "b\"".into()],
                })
                .with_mission_metadata(Some(serde_json::json!({"z": 1.5e-7, "a": [1, null, true]})))
                .with_security_labels(Some(serde_json::json!({"releasability": ["NATO"]})))
                .with_custody(Some(serde_json::json!({"record_hash": "x"})))
                .with_stream_epoch(Some("e2".into()))
                .with_origin(Some(Origin::Stored {
                    stream: "ORDERS@edge".into(),
                    sequence: 7,
                    subject: Some("orders.raw".into()),
                }))
                .with_received_at(at),
            Envelope::new("a", Vec::new(), Headers::new().with("Nats-Time-Stamp", "not a time"), js(None, None)),
        ]
    }

    #[test]
    fn the_documents_own_writer_writes_what_serde_writes() {
        let combinations = (0..32).map(|bits| LeftOut {
            custody: bits & 1 != 0,
            freshness: bits & 2 != 0,
            stored_at: bits & 4 != 0,
            delivery: bits & 8 != 0,
            consumer: bits & 16 != 0,
        });
        let stored_at = OffsetDateTime::from_unix_timestamp_nanos(1_764_497_401_000_000_001).unwrap();
        for (n, envelope) in every_shape().iter().enumerate() {
            let doc = MetadataDoc::new(envelope, stored_at);
            for left_out in combinations.clone() {
                let mut tree = serde_json::to_value(&doc).unwrap();
                let map = tree.as_object_mut().unwrap();
                let mut remove = |section: &str, field: &str| {
                    map.get_mut(section).and_then(Value::as_object_mut).unwrap().remove(field).unwrap();
                };
                if left_out.stored_at {
                    remove("timestamps", "stored_at");
                    remove("timestamps", "stored_at_epoch_ns");
                }
                if left_out.delivery {
                    remove("timestamps", "received_at");
                    remove("timestamps", "received_at_epoch_ns");
                    for field in ["consumer_sequence", "delivered", "redelivered", "pending"] {
                        remove("jetstream", field);
                    }
                }
                if left_out.consumer {
                    remove("jetstream", "consumer");
                }
                for (section, out) in [("custody", left_out.custody), ("freshness", left_out.freshness)] {
                    if out {
                        map.remove(section).unwrap();
                    }
                }
                let mut written = SerdeJsonForm::default();
                doc.write_in_key_order(&mut written, left_out).unwrap();
                let want = serde_json::to_string(&tree).unwrap();
                assert_eq!(String::from_utf8(written.0).unwrap(), want, "envelope {n}, {left_out:?}");
            }
        }
    }

    #[test]
    fn under_the_message_scope_every_delivery_of_an_event_has_the_same_document() {
        for (n, first) in every_shape().into_iter().enumerate() {
            // The same event delivered again 40 s later, through another consumer (a replay),
            // as its next delivery.
            let again = sinks_contract::testing::redelivery(&first, time::Duration::seconds(40));
            let at = |s: i64| OffsetDateTime::from_unix_timestamp(1_764_497_401 + s).unwrap();
            let render =
                |e: &Envelope, stored, scope| serde_json::to_vec(&MetadataDoc::scoped(e, stored, scope)).unwrap();
            assert_eq!(
                render(&first, at(0), MetadataScope::Message),
                render(&again, at(41), MetadataScope::Message),
                "envelope {n}: the message scope holds no fact of the delivery"
            );
            assert_ne!(
                render(&first, at(0), MetadataScope::Delivery),
                render(&again, at(41), MetadataScope::Delivery),
                "envelope {n}: the delivery scope does"
            );
            // The document's own writer agrees with serde under the scope's left-out set.
            let doc = MetadataDoc::scoped(&again, at(41), MetadataScope::Message);
            let mut written = SerdeJsonForm::default();
            doc.write_in_key_order(&mut written, MetadataScope::Message.left_out()).unwrap();
            assert_eq!(written.0, render(&again, at(41), MetadataScope::Message), "envelope {n}");
            let full = MetadataDoc::new(&again, at(41));
            let mut written = SerdeJsonForm::default();
            full.write_in_key_order(&mut written, MetadataScope::Message.left_out()).unwrap();
            assert_eq!(
                written.0,
                render(&again, at(41), MetadataScope::Message),
                "envelope {n}: left out of a full one"
            );
            assert_eq!(doc.delivery_fields().consumer, None);
            assert_eq!(full.delivery_fields().stored_at_epoch_ns, Some(full.stored_at_epoch_ns()));
        }
    }

    #[test]
    fn every_subsecond_digit_is_written() {
        // The count format_into returns stops after the first subsecond digit.
        let at = OffsetDateTime::from_unix_timestamp_nanos(1).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(serde_json::to_value(Rfc3339Text(at)).ok(), Some(Value::from("1970-01-01T00:00:00.000000001Z")));
    }

    #[test]
    fn every_standard_name_is_found_in_any_case_and_no_other() {
        for name in NATS_RESERVED_HEADERS.iter().chain(OTHER_STANDARD_HEADERS.iter()) {
            assert_eq!(standard_spelling(name), Some(*name));
            assert_eq!(standard_spelling(&name.to_ascii_uppercase()), Some(*name));
            assert_eq!(standard_spelling(&name.to_ascii_lowercase()), Some(*name));
            assert_eq!(standard_spelling(&format!("{name}x")), None);
            assert_eq!(standard_spelling(&name[1..]), None);
        }
        assert_eq!(standard_spelling(""), None);
        assert_eq!(standard_spelling(&"N".repeat(300)), None);
        let probes = |name: &str| {
            let mut at = slot_of(name.as_bytes());
            let mut n = 1;
            while STANDARD_SLOTS[at] != Some(name) {
                at = (at + 1) % SLOTS;
                n += 1;
            }
            n
        };
        let names = NATS_RESERVED_HEADERS.iter().chain(OTHER_STANDARD_HEADERS.iter());
        let most = names.map(|name| probes(name)).max();
        assert!(most <= Some(3), "a standard name takes {most:?} probes: the slots need another start");
        assert_eq!(standard_spelling("Nats-Sinks-Labels"), None);
    }

    #[test]
    fn a_header_name_that_starts_with_multi_byte_characters_is_kept_out() {
        // Its fifth byte is inside a character: cutting the name there as text would panic.
        let headers = Headers::new().with("\u{e9}\u{e9}\u{e9}", "x").with("Nats-A", "y");
        assert_eq!(standard_headers(&headers), [("Nats-A", "y")]);
    }

    #[test]
    fn document_has_sorted_keys_and_the_reference_fields() {
        let e = envelope_with(
            "ORDERS",
            5,
            "orders.x",
            &b"{}"[..],
            Headers::new()
                .with("Nats-Msg-Id", "m")
                .with("Nats-Time-Stamp", "2026-01-01T00:00:00Z")
                .with("nats-custom", "c"),
            2,
        );
        let bytes = sinks_contract::json::to_canonical_vec(&MetadataDoc::new(&e, OffsetDateTime::now_utc()));
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let text = String::from_utf8(bytes.clone()).unwrap();
        let positions: Vec<usize> = keys.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "top-level keys are written in sorted order");
        assert_eq!(v["metadata_version"], 1);
        assert_eq!(v["reply"], Value::Null);
        assert_eq!(v["jetstream"]["redelivered"], true);
        assert_eq!(v["timestamps"]["message_created_at_source"], "nats_time_stamp");
        assert_eq!(v["timestamps"]["message_created_at_epoch_ns"], 1_767_225_600_000_000_000_i64);
        assert_eq!(v["nats"]["reserved_headers"]["nats-custom"], "c");
        assert_eq!(
            v["nats"]["reserved_headers_present"],
            serde_json::json!(["Nats-Msg-Id", "Nats-Time-Stamp", "nats-custom"])
        );
        assert_eq!(v["payload"]["present"], true);
        assert_eq!(v["headers"]["Nats-Msg-Id"], "m");
    }
}
