//! The spool's file format, pure: file names, the plain record (`nats_sinks.spool.record.v1`),
//! the on-disk wrapper (`nats_sinks.spool.wrapper.v1`) and the way back from a file to an
//! [`Envelope`] for replay. The shapes are the reference's, so a spool written by the
//! reference replays here and the other way round.
//!
//! - File name: `sha256(idempotency key).spool.json`: deterministic (a redelivery finds its
//!   file), bounded, and no subject or message id in a directory listing.
//! - Wrapper, in clear: `schema`, `schema_version`, `encrypted`, `idempotency_key_sha256`,
//!   `priority_rank` (a coarse number, so replay can order without decrypting),
//!   `spooled_at_epoch_ns`, and either `encrypted_record` (an encryption envelope of the
//!   whole plain record) or `record`.
//! - Plain record: the envelope (subject, base64 body, headers, JetStream facts, message id,
//!   priority, classification, labels, timestamps), a `payload_preview` normalized per
//!   `payload_mode`, and the standard metadata document. Headers with several values are
//!   joined with `,` in `headers` (the reference's single-valued map) and kept exactly in
//!   `headers_values` (nats-sinks extension, ignored by the reference). In a later epoch of
//!   the stream the envelope also has `stream_epoch` (nats-sinks extension): the idempotency
//!   key, and so the file name, is `{stream}.{epoch}`'s, and replay restores the epoch. A
//!   message that came through a mirror or a source also has `origin` (nats-sinks
//!   extension, `Origin::to_json`): replay restores it, for a target keyed by
//!   `origin_sequence`.
//!
//! Documents are written with sorted keys and a trailing newline, compact unless `pretty`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sinks_contract::envelope::Origin;
use sinks_contract::{AppMetadata, Envelope, Headers, JetStreamInfo, payload};
use sinks_toolkit::encryption::{Binding, Cipher, DecryptError, Keyring};
use sinks_toolkit::metadata::MetadataDoc;
use time::OffsetDateTime;

use crate::config::SpoolSinkConfig;

/// Schema of the plain record.
pub const RECORD_SCHEMA: &str = "nats_sinks.spool.record.v1";
/// Schema of the on-disk wrapper.
pub const WRAPPER_SCHEMA: &str = "nats_sinks.spool.wrapper.v1";
/// Suffix of every spool file.
pub const FILE_SUFFIX: &str = ".spool.json";

/// Why a record cannot be built or read. Messages never contain payload bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The message has no idempotency key (a headers-only message without sequence or id).
    #[error("message has no idempotency key: {0}")]
    NoKey(String),
    /// The payload mode refuses the payload.
    #[error("payload cannot be stored: {0}")]
    Payload(String),
    /// The file is not a spool document this version reads.
    #[error("spool file is not a readable spool record: {0}")]
    Format(String),
    /// The encrypted record could not be decrypted.
    #[error("spool record cannot be decrypted: {0}")]
    Decrypt(#[from] DecryptError),
}

/// The file name of `envelope`'s record.
pub fn file_name(envelope: &Envelope) -> Result<String, RecordError> {
    let key = envelope.idempotency_key().map_err(|e| RecordError::NoKey(e.to_string()))?;
    Ok(format!("{}{FILE_SUFFIX}", key.sha256_hex()))
}

/// The replay rank of a priority, as the reference ranks them (lower first; unknown 6).
pub fn priority_rank(priority: Option<&str>) -> u8 {
    match priority.map(|p| p.trim().to_lowercase()).as_deref() {
        Some("flash") => 0,
        Some("immediate") => 1,
        Some("urgent") => 2,
        Some("high") => 3,
        Some("routine" | "normal" | "medium") => 5,
        Some("low") => 7,
        Some("deferred") => 9,
        _ => 6,
    }
}

fn epoch_ns(t: OffsetDateTime) -> i128 {
    sinks_toolkit::metadata::epoch_ns(t)
}

/// The plain record of `envelope`, spooled at `spooled_at`.
pub fn plain_record(
    envelope: &Envelope,
    config: &SpoolSinkConfig,
    spooled_at: OffsetDateTime,
) -> Result<Value, RecordError> {
    let key = envelope.idempotency_key().map_err(|e| RecordError::NoKey(e.to_string()))?;
    let normalized =
        payload::normalize(envelope.payload(), config.payload_mode).map_err(|e| RecordError::Payload(e.to_string()))?;
    let js = envelope.jetstream();
    let app = envelope.app();
    let mut headers = Map::new();
    let mut multi = Map::new();
    for (name, values) in envelope.headers().iter() {
        headers.insert(name.to_owned(), values.join(",").into());
        if values.len() > 1 {
            multi.insert(name.to_owned(), values.iter().map(|v| Value::from(v.as_str())).collect());
        }
    }
    let mut env = serde_json::json!({
        "subject": envelope.subject(),
        "data_b64": B64.encode(envelope.payload()),
        "headers": headers,
        "stream": js.stream,
        "consumer": js.consumer,
        "stream_sequence": js.stream_sequence,
        "consumer_sequence": js.consumer_sequence,
        "timestamp_epoch_ns": js.timestamp.map(epoch_ns).map(|n| n as i64),
        "message_id": envelope.message_id(),
        "redelivered": envelope.redelivered(),
        "pending": js.pending,
        "priority": app.priority,
        "classification": app.classification,
        "labels": app.labels,
        "labels_string": app.labels_string(),
        "mission_metadata": null,
        "security_labels": null,
        "custody": null,
        "reply": null,
        "domain": js.domain,
        "received_at_epoch_ns": epoch_ns(envelope.received_at()) as i64,
    });
    if let Some(map) = env.as_object_mut() {
        if !multi.is_empty() {
            map.insert("headers_values".into(), Value::Object(multi));
        }
        // Only in a later epoch of the stream: replay restores it, so the target keys the
        // message as the spool did (`{stream}.{epoch}`), never under an earlier event's key.
        if let Some(epoch) = envelope.stream_epoch() {
            map.insert("stream_epoch".into(), epoch.into());
        }
        // Only for a message that came through a mirror or a source: replay restores it, so
        // a target keyed by `origin_sequence` keys the event as it would have unspooled.
        if let Some(origin) = envelope.origin() {
            map.insert("origin".into(), origin_json(origin));
        }
    }
    let preview_value: Value = serde_json::from_str(normalized.value.get()).unwrap_or(Value::Null);
    let metadata = if config.include_metadata {
        serde_json::to_value(MetadataDoc::new(envelope, spooled_at)).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    Ok(serde_json::json!({
        "schema": RECORD_SCHEMA,
        "schema_version": 1,
        "spooled_at_epoch_ns": epoch_ns(spooled_at) as i64,
        "idempotency_key": key.as_str(),
        "envelope": env,
        "payload_preview": {
            "value": preview_value,
            "original_format": normalized.original_format,
            "wrapped": normalized.wrapped,
            "sha256": normalized.sha256,
            "size_bytes": normalized.size_bytes,
        },
        "metadata": metadata,
    }))
}

/// The on-disk wrapper of `plain`: encrypted whole with `cipher`, or kept in clear.
pub fn wrapper(plain: &Value, cipher: Option<&Cipher>) -> Value {
    let key = plain["idempotency_key"].as_str().unwrap_or_default();
    let key_sha = hex::encode(Sha256::digest(key.as_bytes()));
    let rank = priority_rank(plain["envelope"]["priority"].as_str());
    let mut wrapper = serde_json::json!({
        "schema": WRAPPER_SCHEMA,
        "schema_version": 1,
        "encrypted": cipher.is_some(),
        "idempotency_key_sha256": key_sha,
        "priority_rank": rank,
        "spooled_at_epoch_ns": plain["spooled_at_epoch_ns"],
    });
    let Some(map) = wrapper.as_object_mut() else { return wrapper };
    match cipher {
        Some(cipher) => {
            let sealed = cipher.encrypt(&encode(plain, false), Binding::Record(&key_sha));
            map.insert("encrypted_record".into(), serde_json::from_slice::<Value>(&sealed).unwrap_or(Value::Null));
        }
        None => {
            map.insert("record".into(), plain.clone());
        }
    }
    wrapper
}

/// `value` as sorted-key JSON with a trailing newline (indented when `pretty`).
pub fn encode(value: &Value, pretty: bool) -> Vec<u8> {
    let sorted = sorted(value);
    let mut out =
        if pretty { serde_json::to_vec_pretty(&sorted) } else { serde_json::to_vec(&sorted) }.unwrap_or_default();
    out.push(b'\n');
    out
}

/// A copy of `value` whose objects list their keys in sorted order.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// What the clear part of a wrapper says (all replay needs to order records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Priority rank (lower first).
    pub priority_rank: i64,
    /// When the record was spooled.
    pub spooled_at_epoch_ns: i64,
    /// Whether the record is encrypted.
    pub encrypted: bool,
}

fn parse(bytes: &[u8]) -> Result<Value, RecordError> {
    let text = std::str::from_utf8(bytes).map_err(|_| RecordError::Format("not UTF-8".into()))?;
    sinks_contract::json::parse_strict(text.trim_end()).map_err(|e| RecordError::Format(e.to_string()))
}

fn check_wrapper(wrapper: &Value) -> Result<(), RecordError> {
    if wrapper["schema"] != WRAPPER_SCHEMA || wrapper["schema_version"] != 1 {
        return Err(RecordError::Format("unknown wrapper schema or version".into()));
    }
    Ok(())
}

/// The clear head of a spool file.
pub fn head(bytes: &[u8]) -> Result<Head, RecordError> {
    let wrapper = parse(bytes)?;
    check_wrapper(&wrapper)?;
    Ok(Head {
        priority_rank: wrapper["priority_rank"].as_i64().unwrap_or(6),
        spooled_at_epoch_ns: wrapper["spooled_at_epoch_ns"].as_i64().unwrap_or(0),
        encrypted: wrapper["encrypted"] == true,
    })
}

/// The plain record of a spool file, decrypted with `keyring` when encrypted.
pub fn unwrap(bytes: &[u8], keyring: &Keyring) -> Result<Value, RecordError> {
    let wrapper = parse(bytes)?;
    check_wrapper(&wrapper)?;
    let record = match &wrapper["encrypted"] {
        Value::Bool(true) => {
            let key_sha = wrapper["idempotency_key_sha256"].as_str().unwrap_or_default();
            // `encrypted_record` is the whole encryption document, `{"_nats_sinks_encryption": …}`.
            let plaintext = keyring.decrypt_value(&wrapper["encrypted_record"], Binding::Record(key_sha))?;
            parse(&plaintext)?
        }
        Value::Bool(false) => wrapper["record"].clone(),
        _ => return Err(RecordError::Format("wrapper `encrypted` must be true or false".into())),
    };
    if record["schema"] != RECORD_SCHEMA || record["schema_version"] != 1 {
        return Err(RecordError::Format("unknown record schema or version".into()));
    }
    Ok(record)
}

/// The original payload bytes of a plain record.
pub fn payload_bytes(record: &Value) -> Result<Vec<u8>, RecordError> {
    record["envelope"]["data_b64"]
        .as_str()
        .and_then(|s| B64.decode(s).ok())
        .ok_or_else(|| RecordError::Format("envelope.data_b64 is missing or not base64".into()))
}

fn opt_str(v: &Value, field: &str) -> Result<Option<String>, RecordError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(RecordError::Format(format!("envelope.{field} must be a string or null"))),
    }
}

fn opt_u64(v: &Value, field: &str) -> Result<Option<u64>, RecordError> {
    match v {
        Value::Null => Ok(None),
        v => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| RecordError::Format(format!("envelope.{field} must be an integer or null"))),
    }
}

fn time_of(v: &Value, field: &str) -> Result<Option<OffsetDateTime>, RecordError> {
    match v {
        Value::Null => Ok(None),
        v => {
            let ns = v
                .as_i64()
                .ok_or_else(|| RecordError::Format(format!("envelope.{field} must be an integer or null")))?;
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
                .map(Some)
                .map_err(|_| RecordError::Format(format!("envelope.{field} is out of range")))
        }
    }
}

/// The record's `origin` object (`origin_of` reads it back exactly): `{"stream", "sequence",
/// "subject"}` (`subject` null when unchanged) or `{"unresolved": why}`.
fn origin_json(origin: &Origin) -> Value {
    match origin {
        Origin::Stored { stream, sequence, subject } => {
            serde_json::json!({"stream": &**stream, "sequence": sequence, "subject": subject.as_deref()})
        }
        Origin::Unresolved(why) => serde_json::json!({ "unresolved": &**why }),
        _ => Value::Null,
    }
}

/// Reads [`origin_json`]'s object; an error names the member that is wrong.
fn origin_of(value: &Value) -> Result<Origin, String> {
    if let Some(why) = value.get("unresolved") {
        return why
            .as_str()
            .map(|w| Origin::Unresolved(w.into()))
            .ok_or_else(|| "origin.unresolved must be a string".into());
    }
    let stream = value["stream"].as_str().filter(|s| !s.is_empty()).ok_or("origin.stream must be a stream name")?;
    let sequence = value["sequence"].as_u64().filter(|s| *s > 0).ok_or("origin.sequence must be a positive integer")?;
    let subject = match &value["subject"] {
        Value::Null => None,
        Value::String(s) => Some(s.as_str().into()),
        _ => return Err("origin.subject must be a string or null".into()),
    };
    Ok(Origin::Stored { stream: stream.into(), sequence, subject })
}

/// The envelope a plain record was made from, for replay into another sink.
pub fn envelope_of(record: &Value) -> Result<Envelope, RecordError> {
    let e = &record["envelope"];
    let subject = e["subject"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RecordError::Format("envelope.subject".into()))?;
    let mut headers = Headers::new();
    let multi = e["headers_values"].as_object();
    let single =
        e["headers"].as_object().ok_or_else(|| RecordError::Format("envelope.headers must be an object".into()))?;
    for (name, value) in single {
        match multi.and_then(|m| m.get(name)).and_then(Value::as_array) {
            Some(values) => values.iter().filter_map(Value::as_str).for_each(|v| headers.append(name, v)),
            None => headers.append(
                name,
                value.as_str().ok_or_else(|| RecordError::Format("envelope.headers values must be strings".into()))?,
            ),
        }
    }
    let jetstream = JetStreamInfo {
        stream: opt_str(&e["stream"], "stream")?.unwrap_or_default(),
        consumer: opt_str(&e["consumer"], "consumer")?.unwrap_or_default(),
        stream_sequence: opt_u64(&e["stream_sequence"], "stream_sequence")?.unwrap_or(0),
        consumer_sequence: opt_u64(&e["consumer_sequence"], "consumer_sequence")?.unwrap_or(0),
        delivered: if e["redelivered"] == true { 2 } else { 1 },
        pending: opt_u64(&e["pending"], "pending")?.unwrap_or(0),
        timestamp: time_of(&e["timestamp_epoch_ns"], "timestamp_epoch_ns")?,
        domain: opt_str(&e["domain"], "domain")?,
    };
    let labels = match &e["labels"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => return Err(RecordError::Format("envelope.labels must be a list".into())),
    };
    let app = AppMetadata {
        priority: opt_str(&e["priority"], "priority")?,
        classification: opt_str(&e["classification"], "classification")?,
        labels,
    };
    let received = time_of(&e["received_at_epoch_ns"], "received_at_epoch_ns")?.unwrap_or_else(OffsetDateTime::now_utc);
    let epoch = opt_str(&e["stream_epoch"], "stream_epoch")?;
    let origin = match &e["origin"] {
        Value::Null => None,
        value => Some(origin_of(value).map_err(|m| RecordError::Format(format!("envelope.{m}")))?),
    };
    Ok(Envelope::new(subject, Bytes::from(payload_bytes(record)?), headers, jetstream)
        .with_app_metadata(app)
        .with_received_at(received)
        .with_stream_epoch(epoch.map(Into::into))
        .with_origin(origin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_toolkit::encryption::Key;
    use sinks_toolkit::encryption::config::{Algorithm, NonceMode, Policy};

    fn envelope() -> Envelope {
        let headers = Headers::new().with("Nats-Msg-Id", "m-1").with("X-Multi", "a").with("X-Multi", "b");
        sinks_contract::testing::envelope_with("S", 42, "orders.eu", "{\"id\":1}", headers, 3).with_app_metadata(
            AppMetadata {
                priority: Some("Flash".into()),
                classification: Some("NATO SECRET".into()),
                labels: vec!["a".into(), "b".into()],
            },
        )
    }

    fn cipher(version: u8) -> (Cipher, Keyring) {
        let key = Key::from_b64(&B64.encode([9u8; 32])).unwrap();
        let policy = Policy {
            algorithm: Algorithm::Aes256Gcm,
            key_id: "spool".into(),
            key_b64_env: "K".into(),
            nonce_size_bytes: 12,
            tag_length: 16,
            nonce: NonceMode::default(),
        };
        let mut ring = Keyring::new();
        ring.insert("spool", key.clone());
        (Cipher::new(&policy, key, version), ring)
    }

    #[test]
    fn a_record_goes_to_disk_and_back_to_the_same_envelope() {
        let config = SpoolSinkConfig::plaintext("/x");
        let e = envelope();
        let plain = plain_record(&e, &config, OffsetDateTime::now_utc()).unwrap();
        for version in [1, 2] {
            let (c, ring) = cipher(version);
            let bytes = encode(&wrapper(&plain, Some(&c)), false);
            assert!(bytes.ends_with(b"\n"));
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert!(!text.contains("orders.eu") && !text.contains("NATO"), "nothing of the message in clear");
            let h = head(&bytes).unwrap();
            assert_eq!((h.priority_rank, h.encrypted), (0, true));
            let back = envelope_of(&unwrap(&bytes, &ring).unwrap()).unwrap();
            assert_eq!(back.subject(), "orders.eu");
            assert_eq!(back.payload(), e.payload());
            assert_eq!(back.idempotency_key().unwrap(), e.idempotency_key().unwrap());
            assert_eq!(back.headers().get_all("X-Multi").unwrap(), ["a", "b"]);
            assert_eq!(back.message_id(), Some("m-1"));
            assert_eq!(back.app(), e.app());
            assert_eq!(back.jetstream().stream_sequence, 42);
        }
        let plain_bytes = encode(&wrapper(&plain, None), true);
        assert!(envelope_of(&unwrap(&plain_bytes, &Keyring::new()).unwrap()).is_ok());
    }

    #[test]
    fn file_names_hide_the_message_and_are_stable() {
        let name = file_name(&envelope()).unwrap();
        assert_eq!(name, format!("{}.spool.json", hex::encode(Sha256::digest(b"stream-sequence:S:42"))));
        let later = envelope().with_stream_epoch(Some("e17".into()));
        let name = file_name(&later).unwrap();
        assert_eq!(name, format!("{}.spool.json", hex::encode(Sha256::digest(b"stream-sequence:S.e17:42"))));
    }

    #[test]
    fn a_later_epoch_is_kept_and_restored_and_absent_otherwise() {
        let config = SpoolSinkConfig::plaintext("/x");
        let first = plain_record(&envelope(), &config, OffsetDateTime::now_utc()).unwrap();
        assert!(
            first["envelope"].get("stream_epoch").is_none(),
            "the reference's shape for a stream that never changed"
        );
        assert_eq!(envelope_of(&first).unwrap().stream_epoch(), None);
        let later = envelope().with_stream_epoch(Some("e17".into()));
        let plain = plain_record(&later, &config, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(plain["envelope"]["stream_epoch"], "e17");
        assert_eq!(plain["idempotency_key"], "stream-sequence:S.e17:42");
        let back = envelope_of(&unwrap(&encode(&wrapper(&plain, None), false), &Keyring::new()).unwrap()).unwrap();
        assert_eq!(back.stream_epoch(), Some("e17"));
        assert_eq!(back.idempotency_key().unwrap(), later.idempotency_key().unwrap());
        let mut wrong = plain;
        wrong["envelope"]["stream_epoch"] = 17.into();
        assert!(matches!(envelope_of(&wrong), Err(RecordError::Format(_))));
    }

    #[test]
    fn an_origin_is_kept_and_restored_for_a_target_keyed_by_it() {
        let config = SpoolSinkConfig::plaintext("/x");
        let first = plain_record(&envelope(), &config, OffsetDateTime::now_utc()).unwrap();
        assert!(first["envelope"].get("origin").is_none(), "the reference's shape for a plain stream");
        let origin = Origin::Stored { stream: "ORDERS@hub".into(), sequence: 9, subject: Some("o.eu".into()) };
        let hubbed = envelope().with_origin(Some(origin.clone()));
        let plain = plain_record(&hubbed, &config, OffsetDateTime::now_utc()).unwrap();
        let back = envelope_of(&unwrap(&encode(&wrapper(&plain, None), false), &Keyring::new()).unwrap()).unwrap();
        assert_eq!(back.origin(), Some(&origin));
        let key = sinks_contract::IdempotencyKey::origin_sequence(&back).unwrap();
        assert_eq!(key.to_string(), "stream-sequence:ORDERS@hub:9");
        let mut wrong = plain;
        wrong["envelope"]["origin"]["sequence"] = 0.into();
        assert!(matches!(envelope_of(&wrong), Err(RecordError::Format(m)) if m.contains("origin.sequence")));
        let lost = Origin::Unresolved("no source named X".into());
        assert_eq!(origin_of(&origin_json(&lost)), Ok(lost));
        let broken = [
            (serde_json::json!({"stream": "", "sequence": 1}), "origin.stream"),
            (serde_json::json!({"stream": "S", "sequence": 1, "subject": 3}), "origin.subject"),
            (serde_json::json!({"unresolved": 1}), "origin.unresolved"),
        ];
        for (value, names) in broken {
            let err = origin_of(&value).unwrap_err();
            assert!(err.starts_with(names), "{value}: {err}");
        }
    }

    #[test]
    fn an_encrypted_record_moved_to_another_file_fails_under_version_2() {
        let config = SpoolSinkConfig::plaintext("/x");
        let plain = plain_record(&envelope(), &config, OffsetDateTime::now_utc()).unwrap();
        let (c, ring) = cipher(2);
        let mut w = wrapper(&plain, Some(&c));
        w["idempotency_key_sha256"] = "0".repeat(64).into();
        assert!(matches!(unwrap(&encode(&w, false), &ring), Err(RecordError::Decrypt(DecryptError::Authentication))));
    }

    #[test]
    fn ranks_follow_the_reference() {
        let ranks: Vec<u8> = [
            Some("flash"),
            Some("IMMEDIATE"),
            Some("urgent"),
            Some("high"),
            Some("routine"),
            None,
            Some("low"),
            Some("deferred"),
        ]
        .into_iter()
        .map(priority_rank)
        .collect();
        assert_eq!(ranks, [0, 1, 2, 3, 5, 6, 7, 9]);
    }
}
