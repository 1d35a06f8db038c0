//! The dead-letter records `nats-sink redrive` works from: read from the DLQ stream (those of
//! this config's stream and consumer), selected by the operator's filters, and each one's
//! original found: in the source stream by sequence while the stream still holds that very
//! message (same subject, same stored time; without a time in the record, the same plain
//! payload), else the record's own payload, else `gone`. An original from the record keeps
//! its payload as the record has it: an encryption envelope is passed on sealed, never
//! decrypted, and skips the policy steps it went through before.

use std::sync::Arc;

use async_nats::jetstream::{self, stream::LastRawMessageErrorKind};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;
use sinks_contract::envelope::{Headers, JetStreamInfo};
use sinks_policy::intake::{Arrival, Intake};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::Config;
use crate::runner::RedriveItem;

/// One dead-letter record of this config's stream and consumer.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its sequence in the DLQ stream (its ticket and marker key).
    pub dlq_seq: u64,
    /// When it was stored in the DLQ stream (`--since` / `--until` select on it).
    pub dead_lettered_at: Option<OffsetDateTime>,
    /// The original's subject.
    pub subject: String,
    /// The original's stream sequence.
    pub stream_sequence: u64,
    /// The original's stored time as the record says it (RFC 3339).
    pub timestamp: Option<String>,
    /// `error_type` (empty when the record has none).
    pub error_type: String,
    /// The error text.
    pub error: Option<String>,
    /// The reason code (`sequence_reused`, …), when the record has one.
    pub reason: Option<String>,
    /// The fan-out target that failed.
    pub target: Option<String>,
    /// How many times the message was redriven before this record was made.
    pub redrive_count: u32,
    /// The stream epoch of the original's key, when there is one.
    pub stream_epoch: Option<String>,
    /// The idempotency key the original was dead-lettered under.
    pub idempotency_key: Option<String>,
    /// The original's message id.
    pub message_id: Option<String>,
    /// The payload the record carries.
    pub payload: Option<Bytes>,
    /// The headers the record carries.
    pub headers: Option<Headers>,
}

impl Record {
    /// The record in `body` (stored at DLQ sequence `dlq_seq`), when it is one of `stream`
    /// and `consumer`. `header_count` is the `Nats-Sinks-Redrive-Count` header.
    pub(crate) fn parse(
        body: &[u8],
        dlq_seq: u64,
        at: Option<OffsetDateTime>,
        header_count: Option<u32>,
        stream: &str,
        consumer: &str,
    ) -> Option<Self> {
        let v: Value = serde_json::from_slice(body).ok()?;
        if v["stream"].as_str() != Some(stream) || v["consumer"].as_str() != Some(consumer) {
            return None;
        }
        let text = |k: &str| v[k].as_str().map(str::to_owned);
        let payload = v["payload_base64"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map(Bytes::from);
        let headers = v["headers"].as_object().map(|map| {
            let mut headers = Headers::new();
            for (name, value) in map {
                match value {
                    Value::String(one) => headers.append(name, one.clone()),
                    Value::Array(many) => many.iter().filter_map(Value::as_str).for_each(|s| headers.append(name, s)),
                    _ => {}
                }
            }
            headers
        });
        let counted = v["redrive_count"].as_u64().and_then(|c| u32::try_from(c).ok());
        Some(Self {
            dlq_seq,
            dead_lettered_at: at,
            subject: text("subject")?,
            stream_sequence: v["stream_sequence"].as_u64()?,
            timestamp: text("timestamp"),
            error_type: text("error_type").unwrap_or_default(),
            error: text("error"),
            reason: text("reason"),
            target: text("target"),
            redrive_count: counted.or(header_count).unwrap_or(0),
            stream_epoch: text("stream_epoch"),
            idempotency_key: text("idempotency_key"),
            message_id: text("message_id"),
            payload,
            headers,
        })
    }
}

/// Which records to redrive (every given filter must match).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// `error_type` is one of these.
    pub error_types: Vec<String>,
    /// The original's subject matches one of these NATS patterns.
    pub subjects: Vec<String>,
    /// Dead-lettered at or after.
    pub since: Option<OffsetDateTime>,
    /// Dead-lettered at or before.
    pub until: Option<OffsetDateTime>,
    /// The original's stream sequence is in one of these inclusive ranges.
    pub seqs: Vec<(u64, u64)>,
}

impl Filters {
    /// True when `record` passes every filter given.
    pub fn matches(&self, record: &Record) -> bool {
        let at = record.dead_lettered_at;
        (self.error_types.is_empty() || self.error_types.contains(&record.error_type))
            && (self.subjects.is_empty()
                || self.subjects.iter().any(|p| sinks_toolkit::subject::matches(p, &record.subject)))
            && self.since.is_none_or(|since| at.is_some_and(|at| at >= since))
            && self.until.is_none_or(|until| at.is_some_and(|at| at <= until))
            && (self.seqs.is_empty() || self.seqs.iter().any(|(a, b)| (*a..=*b).contains(&record.stream_sequence)))
    }
}

/// The DLQ stream of `config` and its records of this config's stream and consumer, in DLQ
/// order. `None` when no stream captures the subject or it is empty.
pub(crate) async fn read(
    js: &jetstream::Context,
    config: &Config,
) -> Result<Option<(jetstream::stream::Stream, Vec<Record>)>, String> {
    let Some(subject) = config.dead_letter.subject.as_deref().filter(|_| config.dead_letter.enabled) else {
        return Err("dead_letter is not enabled in this config: there are no dead letters to redrive".into());
    };
    let Some(stream) = crate::reconcile::stream_for(js, subject).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let mut records = Vec::new();
    let (name, consumer) = (config.nats.stream.as_str(), config.nats.consumer.as_str());
    crate::reconcile::scan(&stream, jetstream::consumer::DeliverPolicy::All, subject, |m, seq| {
        let at = m.info().ok().map(|i| i.published);
        let count = m
            .headers
            .as_ref()
            .and_then(|h| h.get(crate::dlq::REDRIVE_COUNT_HEADER))
            .and_then(|v| v.as_str().parse().ok());
        records.extend(Record::parse(&m.payload, seq, at, count, name, consumer));
        true
    })
    .await
    .map_err(|e| e.to_string())?;
    Ok(Some((stream, records)))
}

/// Where a record's original comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// The source stream still holds it.
    Stream,
    /// The stream does not (or holds another message under its sequence): the record's
    /// payload.
    Record,
    /// Neither.
    Gone,
}

impl Origin {
    /// How the report says it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Stream => "in stream",
            Self::Record => "from record",
            Self::Gone => "gone",
        }
    }
}

/// A record's original, found.
#[derive(Debug)]
pub(crate) struct Found {
    /// Where it came from.
    pub(crate) origin: Origin,
    /// The message to write (none when gone).
    pub(crate) item: Option<RedriveItem>,
    /// Why it cannot be redriven safely, when so (left for a person).
    pub(crate) refused: Option<String>,
}

/// Finds the original of `record` (see the module documentation).
pub(crate) async fn original(
    source: &jetstream::stream::Stream,
    config: &Config,
    record: &Record,
    new_epoch: Option<&str>,
) -> Result<Found, String> {
    let in_stream = match source.get_raw_message(record.stream_sequence).await {
        Ok(raw) => {
            let same_time = record.timestamp.as_deref().map(|t| sinks_toolkit::metadata::rfc3339(raw.time) == t);
            let plain = record.payload.as_ref().filter(|p| !sinks_toolkit::encryption::is_encrypted(p));
            let same = raw.subject.as_str() == record.subject
                && match (same_time, plain) {
                    (Some(same), _) => same,
                    (None, Some(payload)) => *payload == raw.payload,
                    (None, None) => true,
                };
            same.then(|| {
                let mut headers = Headers::new();
                for (name, values) in raw.headers.iter() {
                    for value in values {
                        headers.append(name.as_ref(), value.as_str());
                    }
                }
                (raw.payload, headers, Some(raw.time))
            })
        }
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
        Err(e) => return Err(format!("cannot read stream sequence {} back: {e}", record.stream_sequence)),
    };
    let (origin, payload, headers, time) = match in_stream {
        Some((payload, headers, time)) => (Origin::Stream, payload, headers, time),
        None => match &record.payload {
            Some(payload) => {
                let time = record.timestamp.as_deref().and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok());
                let mut headers = record.headers.clone().unwrap_or_default();
                if headers.get("Nats-Msg-Id").is_none()
                    && let Some(id) = &record.message_id
                {
                    headers.append("Nats-Msg-Id", id.clone());
                }
                (Origin::Record, payload.clone(), headers, time)
            }
            None => return Ok(Found { origin: Origin::Gone, item: None, refused: None }),
        },
    };
    let sealed = origin == Origin::Record && sinks_toolkit::encryption::is_encrypted(&payload);
    let jetstream = JetStreamInfo {
        stream: config.nats.stream.clone(),
        consumer: config.nats.consumer.clone(),
        stream_sequence: record.stream_sequence,
        consumer_sequence: 0,
        delivered: 1,
        pending: 0,
        timestamp: time.filter(|t| *t != OffsetDateTime::UNIX_EPOCH),
        domain: None,
    };
    let epoch = record.stream_epoch.as_deref().map(Arc::from);
    let arrival = Arrival { subject: record.subject.as_str(), payload: payload.clone(), headers, jetstream, epoch };
    let envelope = Intake::new(&config.message_metadata).envelope(arrival);
    let envelope = if sealed { envelope.with_sealed_payload(payload) } else { envelope };
    // The original's idempotency key, or nothing: a key that changed (another key strategy
    // since) would store the message a second time under a new name.
    let key = envelope.idempotency_key().ok().map(|k| k.to_string());
    if let (Some(want), Some(got)) = (&record.idempotency_key, &key)
        && want != got
    {
        let refused = format!(
            "its idempotency key would be `{got}`, not `{want}` as when it was dead-lettered (the key settings \
             changed?): redriving it could store it twice"
        );
        return Ok(Found { origin, item: None, refused: Some(refused) });
    }
    // `--new-epoch`: the same message under the key of the stream's own epoch, which no
    // earlier stream's record can hold.
    let envelope = match new_epoch {
        Some(epoch) if record.stream_epoch.as_deref() == Some(epoch) => {
            let refused = format!("it was dead-lettered in epoch {epoch} already: a new epoch changes nothing");
            return Ok(Found { origin, item: None, refused: Some(refused) });
        }
        Some(epoch) => envelope.with_stream_epoch(Some(Arc::from(epoch))),
        None => envelope,
    };
    let item = RedriveItem {
        envelope,
        ticket: record.dlq_seq,
        redrives: record.redrive_count,
        target: record.target.clone(),
        policies: !sealed,
    };
    Ok(Found { origin, item: Some(item), refused: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_this_consumer_are_read_with_their_redrive_count() {
        let body = br#"{"stream":"S","consumer":"c","subject":"s.a","stream_sequence":7,"error_type":"E","headers":{"Nats-Msg-Id":"m-7","X":["a","b"]},"payload_base64":"aGk=","redrive_count":2,"target":"db","timestamp":"2026-01-02T03:04:05Z"}"#;
        let r = Record::parse(body, 3, None, None, "S", "c").unwrap();
        assert_eq!((r.dlq_seq, r.stream_sequence, r.redrive_count), (3, 7, 2));
        assert_eq!(r.payload.as_deref(), Some(&b"hi"[..]));
        assert_eq!(r.headers.as_ref().unwrap().get_all("X").unwrap(), ["a", "b"]);
        assert_eq!(r.target.as_deref(), Some("db"));
        assert!(Record::parse(body, 3, None, None, "S", "other").is_none(), "another consumer's");
        assert!(Record::parse(body, 3, None, None, "T", "c").is_none(), "another stream's");
        let first = br#"{"stream":"S","consumer":"c","subject":"s.a","stream_sequence":7}"#;
        assert_eq!(Record::parse(first, 1, None, None, "S", "c").unwrap().redrive_count, 0);
        assert_eq!(Record::parse(first, 1, None, Some(4), "S", "c").unwrap().redrive_count, 4, "the header");
    }

    #[test]
    fn filters_select() {
        let body = br#"{"stream":"S","consumer":"c","subject":"orders.eu.1","stream_sequence":7,"error_type":"SerializationError"}"#;
        let at = OffsetDateTime::parse("2026-01-02T03:04:05Z", &Rfc3339).unwrap();
        let r = Record::parse(body, 3, Some(at), None, "S", "c").unwrap();
        let f = |f: Filters| f.matches(&r);
        assert!(f(Filters::default()));
        assert!(f(Filters { error_types: vec!["SerializationError".into()], ..Default::default() }));
        assert!(!f(Filters { error_types: vec!["Other".into()], ..Default::default() }));
        assert!(f(Filters { subjects: vec!["orders.*.1".into()], ..Default::default() }));
        assert!(!f(Filters { subjects: vec!["orders.us.>".into()], ..Default::default() }));
        assert!(f(Filters { since: Some(at), until: Some(at), ..Default::default() }));
        assert!(!f(Filters { since: Some(at + time::Duration::SECOND), ..Default::default() }));
        assert!(f(Filters { seqs: vec![(1, 7)], ..Default::default() }));
        assert!(!f(Filters { seqs: vec![(8, 9)], ..Default::default() }));
    }
}
