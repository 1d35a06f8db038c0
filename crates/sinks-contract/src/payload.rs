//! Payload normalization: turning message bytes into a JSON value a sink can store.
//!
//! | mode | strict JSON | UTF-8, not JSON | not UTF-8 |
//! |---|---|---|---|
//! | `json_or_envelope` (default) | as published | text envelope | bytes envelope |
//! | `json_only` | as published | permanent error | permanent error |
//! | `text_envelope` | text envelope | text envelope | permanent error |
//! | `bytes_envelope` | bytes envelope | bytes envelope | bytes envelope |
//!
//! JSON payloads are kept exactly as published (as raw JSON text, trimmed of surrounding
//! whitespace), so large integers and decimal spellings survive. Envelopes have the
//! reference's shape: `{"_nats_sinks":{payload_envelope_version, payload_format,
//! payload_encoding, sha256, size_bytes}, "payload": "<text or base64>"}`.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::json;

/// How message bytes become a stored JSON value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadMode {
    /// Strict JSON as published; other UTF-8 text and binary wrapped in an envelope.
    #[default]
    JsonOrEnvelope,
    /// Only strict JSON; anything else is a permanent (poison) failure.
    JsonOnly,
    /// Every UTF-8 payload wrapped as text; non-UTF-8 is a permanent failure.
    TextEnvelope,
    /// Every payload wrapped as base64 bytes.
    BytesEnvelope,
}

/// The original format of a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OriginalFormat {
    /// Strict JSON.
    Json,
    /// UTF-8 text that is not (or was not treated as) JSON.
    Text,
    /// Arbitrary bytes.
    Bytes,
}

/// A payload ready to be embedded in a JSON record.
#[derive(Debug, Clone)]
pub struct NormalizedPayload {
    /// The JSON to store: the published JSON text, or an envelope.
    pub value: Box<RawValue>,
    /// What the payload was.
    pub original_format: OriginalFormat,
    /// True when `value` is an envelope rather than the payload itself.
    pub wrapped: bool,
    /// Lowercase hex SHA-256 of the original bytes.
    pub sha256: String,
    /// Length of the original bytes.
    pub size_bytes: u64,
}

impl NormalizedPayload {
    /// The stored value parsed as a `serde_json::Value` (for payload-field lookups).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.value.get()).unwrap_or(serde_json::Value::Null)
    }

    /// The `payload_info` object stored next to the payload in records.
    pub fn info_json(&self) -> serde_json::Value {
        serde_json::json!({
            "original_format": self.original_format,
            "wrapped": self.wrapped,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
        })
    }
}

/// Why a payload cannot be stored under the configured mode. Permanent for that message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// `json_only` and the payload is not strict JSON.
    #[error("payload is not valid JSON ({reason})")]
    NotJson {
        /// Parser message (never contains payload bytes beyond a position).
        reason: String,
    },
    /// The mode needs UTF-8 text and the payload is not UTF-8.
    #[error("payload is not valid UTF-8")]
    NotUtf8,
}

/// Normalizes `data` under `mode`. Errors never contain payload content.
pub fn normalize(data: &[u8], mode: PayloadMode) -> Result<NormalizedPayload, PayloadError> {
    let sha256 = format!("{:x}", Sha256::digest(data));
    let size_bytes = data.len() as u64;
    let wrap = |format: OriginalFormat, encoding: &str, text: String| NormalizedPayload {
        value: envelope_raw(format, encoding, &sha256, size_bytes, text),
        original_format: format,
        wrapped: true,
        sha256: sha256.clone(),
        size_bytes,
    };
    let as_bytes = || {
        let b64 = base64::engine::general_purpose::STANDARD.encode(data);
        wrap(OriginalFormat::Bytes, "base64", b64)
    };
    if mode == PayloadMode::BytesEnvelope {
        return Ok(as_bytes());
    }
    let text = match std::str::from_utf8(data) {
        Ok(text) => text,
        Err(_) if mode == PayloadMode::JsonOrEnvelope => return Ok(as_bytes()),
        Err(_) => return Err(PayloadError::NotUtf8),
    };
    if mode == PayloadMode::TextEnvelope {
        return Ok(wrap(OriginalFormat::Text, "utf-8", text.to_owned()));
    }
    let trimmed = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    match json::validate_strict(trimmed) {
        Ok(()) => {
            // validate_strict accepted it, so RawValue accepts it too.
            let value = RawValue::from_string(trimmed.to_owned())
                .map_err(|e| PayloadError::NotJson { reason: e.to_string() })?;
            Ok(NormalizedPayload { value, original_format: OriginalFormat::Json, wrapped: false, sha256, size_bytes })
        }
        Err(e) if mode == PayloadMode::JsonOnly => Err(PayloadError::NotJson { reason: e.to_string() }),
        Err(_) => Ok(wrap(OriginalFormat::Text, "utf-8", text.to_owned())),
    }
}

/// `payload_info.sha256` of a stored JSON record (file, S3 object), or `None` when `record`
/// is not such a document.
pub fn stored_payload_sha256(record: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Record {
        payload_info: Option<Info>,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        sha256: Option<String>,
    }
    serde_json::from_slice::<Record>(record).ok()?.payload_info?.sha256
}

/// The original bytes of a stored payload value: an envelope is decoded (text, or base64
/// bytes); anything else is the stored JSON text itself.
pub fn decode_stored(stored: &str) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Envelope {
        #[serde(rename = "_nats_sinks")]
        info: Info,
        payload: String,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        payload_envelope_version: u32,
        payload_encoding: String,
    }
    match serde_json::from_str::<Envelope>(stored) {
        Ok(e) if e.info.payload_envelope_version == 1 && e.info.payload_encoding == "base64" => {
            base64::engine::general_purpose::STANDARD.decode(&e.payload).unwrap_or_else(|_| stored.as_bytes().to_vec())
        }
        Ok(e) if e.info.payload_envelope_version == 1 => e.payload.into_bytes(),
        _ => stored.as_bytes().to_vec(),
    }
}

fn envelope_raw(
    format: OriginalFormat,
    encoding: &str,
    sha256: &str,
    size_bytes: u64,
    payload: String,
) -> Box<RawValue> {
    let value = serde_json::json!({
        "_nats_sinks": {
            "payload_envelope_version": 1,
            "payload_format": format,
            "payload_encoding": encoding,
            "sha256": sha256,
            "size_bytes": size_bytes,
        },
        "payload": payload,
    });
    let text = String::from_utf8(json::to_canonical_vec(&value)).unwrap_or_default();
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(data: &[u8], mode: PayloadMode) -> Result<(OriginalFormat, bool), PayloadError> {
        normalize(data, mode).map(|p| (p.original_format, p.wrapped))
    }

    #[test]
    fn mode_table() {
        use OriginalFormat::*;
        use PayloadMode::*;
        let json = br#"{"a":1}"#.as_slice();
        let text = b"hello".as_slice();
        let nan = br#"{"a":NaN}"#.as_slice();
        let dup = br#"{"a":1,"a":2}"#.as_slice();
        let bin = [0xff, 0xfe, 0x00].as_slice();
        type Row<'a> = (&'a [u8], PayloadMode, Result<(OriginalFormat, bool), PayloadError>);
        let table: [Row<'_>; 14] = [
            (json, JsonOrEnvelope, Ok((Json, false))),
            (text, JsonOrEnvelope, Ok((Text, true))),
            (nan, JsonOrEnvelope, Ok((Text, true))),
            (dup, JsonOrEnvelope, Ok((Text, true))),
            (bin, JsonOrEnvelope, Ok((Bytes, true))),
            (b"", JsonOrEnvelope, Ok((Text, true))),
            (json, JsonOnly, Ok((Json, false))),
            (text, JsonOnly, Err(PayloadError::NotJson { reason: String::new() })),
            (bin, JsonOnly, Err(PayloadError::NotUtf8)),
            (json, TextEnvelope, Ok((Text, true))),
            (bin, TextEnvelope, Err(PayloadError::NotUtf8)),
            (json, BytesEnvelope, Ok((Bytes, true))),
            (text, BytesEnvelope, Ok((Bytes, true))),
            (bin, BytesEnvelope, Ok((Bytes, true))),
        ];
        for (data, mode, expected) in table {
            let got = kind(data, mode);
            match (&got, &expected) {
                (Err(PayloadError::NotJson { .. }), Err(PayloadError::NotJson { .. })) => {}
                _ => assert_eq!(got, expected, "{mode:?} {data:?}"),
            }
        }
    }

    #[test]
    fn json_is_kept_verbatim_including_big_numbers() {
        let p =
            normalize(b" {\"n\": 123456789012345678901234567890, \"d\": 1.50}\n", PayloadMode::JsonOrEnvelope).unwrap();
        assert_eq!(p.value.get(), "{\"n\": 123456789012345678901234567890, \"d\": 1.50}");
        assert_eq!(p.size_bytes, 50, "size counts the published bytes, whitespace included");
    }

    #[test]
    fn stored_values_decode_to_the_original_bytes() {
        for data in [&b"hi there"[..], &[0xff, 0x00, 0x10][..], &br#"{"a":1}"#[..], &b""[..]] {
            let p = normalize(data, PayloadMode::JsonOrEnvelope).unwrap();
            assert_eq!(decode_stored(p.value.get()), data);
        }
    }

    #[test]
    fn envelope_shape_matches_the_reference() {
        let p = normalize(b"hi", PayloadMode::JsonOrEnvelope).unwrap();
        assert_eq!(
            p.value.get(),
            concat!(
                r#"{"_nats_sinks":{"payload_encoding":"utf-8","payload_envelope_version":1,"#,
                r#""payload_format":"text","sha256":"8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4","#,
                r#""size_bytes":2},"payload":"hi"}"#
            )
        );
        let b = normalize(&[0xff], PayloadMode::JsonOrEnvelope).unwrap();
        assert!(b.value.get().contains(r#""payload":"/w==""#));
        assert!(b.value.get().contains(r#""payload_encoding":"base64""#));
    }
}
