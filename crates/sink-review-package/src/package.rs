//! Pure: what one package holds. The package id, every file's bytes, the manifest
//! (`nats_sinks.review_package.v1`) and the hash list (`nats_sinks.review_package.hashes.v1`),
//! exactly as the reference builds them, and the payload fingerprint read back from a stored
//! manifest.
//!
//! | file | when | content |
//! |---|---|---|
//! | `metadata.json` | always | the standard metadata document (`sinks_toolkit::metadata`), without `custody` (it has a file of its own), as the reference's |
//! | `mission_metadata.json` | the message has mission metadata | the mission metadata object |
//! | `data_quality.json` | the mission metadata is a `nats-sinks.data-quality.v1` profile, or has a `data_quality` object | that profile, or that object |
//! | `artifact_references.json` | the mission metadata is a `nats-sinks.artifact-reference.v1` profile, or has an `artifact_references` array or object | that profile, or that value |
//! | `security_labels.json` | the message has a security label profile | the profile |
//! | `custody.json` | custody is on | the custody object |
//! | `payload.bin` | `include_payload` (default) | the message's bytes as delivered (ciphertext when the subject is encrypted) |
//! | `manifest.json` | always | schema, package id, subject, stream, stream sequence, message id, `created_at`, `review_boundary`, and `files`: SHA-256 and size of every file above |
//! | `hashes.json` | always | schema and `files`: the same list plus `manifest.json` |
//!
//! JSON files are the reference's `json.dumps(sort_keys=True, ensure_ascii=False)`, indented
//! (`pretty`, the default) or compact, with a trailing newline (the module `json_text`). Two
//! members only this sink writes, each only where the reference's manifest cannot tell what
//! this sink must know: `stream_epoch` in a later epoch of the stream (the package id then
//! comes from `{stream}.{epoch}`), and `payload_sha256` when `include_payload` is off (the
//! fingerprint a redelivery is compared with).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sinks_contract::Envelope;
use sinks_contract::idempotency::IdempotencyError;
use sinks_toolkit::metadata::{LeftOut, MetadataDoc};
use time::OffsetDateTime;

use crate::json_text::{self, Compact};

/// `schema` of `manifest.json`.
pub const SCHEMA: &str = "nats_sinks.review_package.v1";
/// `schema` of `hashes.json`.
pub const HASHES_SCHEMA: &str = "nats_sinks.review_package.hashes.v1";
/// `review_boundary` of every manifest: a package is evidence, never an authority.
pub const REVIEW_BOUNDARY: &str = "evidence_only_not_a_guard_or_release_authority";
/// The mission metadata profile stored whole as `data_quality.json`.
pub const DATA_QUALITY_PROFILE: &str = "nats-sinks.data-quality.v1";
/// The mission metadata profile stored whole as `artifact_references.json`.
pub const ARTIFACT_REFERENCE_PROFILE: &str = "nats-sinks.artifact-reference.v1";
/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";
/// The hash list's file name.
pub const HASHES: &str = "hashes.json";
/// The payload's file name.
pub const PAYLOAD: &str = "payload.bin";
/// Prefix of every package id (and so of every package directory).
pub const ID_PREFIX: &str = "pkg-";
/// Every name a package file can have, `manifest.json` and `hashes.json` included.
pub const FILE_NAMES: [&str; 9] = [
    "metadata.json",
    "mission_metadata.json",
    "data_quality.json",
    "artifact_references.json",
    "security_labels.json",
    "custody.json",
    PAYLOAD,
    MANIFEST,
    HASHES,
];

/// The package id of `envelope`: `pkg-` and the first 32 hex digits of the SHA-256 of its
/// default idempotency key (`stream-sequence:{stream}:{seq}`, with `{stream}.{epoch}` in a
/// later epoch of the stream), as the reference derives it.
pub fn package_id(envelope: &Envelope) -> Result<String, IdempotencyError> {
    let key = envelope.idempotency_key()?;
    let digest = key.sha256_hex();
    Ok(format!("{ID_PREFIX}{}", &digest[..32]))
}

/// True when `name` has the shape of a package id (`pkg-` and 32 lowercase hex digits).
pub fn is_package_id(name: &str) -> bool {
    name.strip_prefix(ID_PREFIX)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// How packages are written: the settings of the sink section that shape their content.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) pretty: bool,
    pub(crate) include_payload: bool,
    pub(crate) max_payload_bytes: u64,
}

/// One file of a package: its name and bytes.
#[derive(Debug, Clone)]
pub(crate) struct PackageFile {
    pub(crate) name: &'static str,
    pub(crate) bytes: Bytes,
}

/// Everything one package holds, ready to be written in this order (the manifest and the
/// hash list last).
#[derive(Debug, Clone)]
pub(crate) struct Package {
    pub(crate) id: String,
    pub(crate) files: Vec<PackageFile>,
    /// SHA-256 of the message's bytes: what a stored package is compared with.
    pub(crate) payload_sha256: String,
}

/// Why no package can be made for a message (permanent for that message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BuildError {
    /// The message has no identity to name a package by.
    #[error("cannot derive a package id: {0}")]
    Id(String),
    /// `include_payload` and the payload is larger than `max_payload_bytes`.
    #[error("review package payload exceeds max_payload_bytes")]
    TooLarge,
}

/// SHA-256 of `bytes` in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The package of `envelope`, stored at `stored_at` (`metadata.json`'s `stored_at`) and
/// created at `created_at` (the manifest's `created_at`).
pub(crate) fn build(
    envelope: &Envelope,
    shape: Shape,
    stored_at: OffsetDateTime,
    created_at: OffsetDateTime,
) -> Result<Package, BuildError> {
    let id = package_id(envelope).map_err(|e| BuildError::Id(e.to_string()))?;
    let json = |compact: Vec<u8>| Bytes::from(json_text::file_bytes(compact, shape.pretty));
    let mut files = Vec::with_capacity(FILE_NAMES.len());
    let mut metadata = Compact::default();
    let left_out = LeftOut { custody: true, ..LeftOut::default() };
    let Ok(()) = MetadataDoc::new(envelope, stored_at).write_in_key_order(&mut metadata, left_out);
    files.push(PackageFile { name: "metadata.json", bytes: json(metadata.0) });
    if let Some(mission) = envelope.mission_metadata_doc() {
        let text = Compact::of_doc(mission);
        let (quality, artifacts) = profiles(&text);
        files.push(PackageFile { name: "mission_metadata.json", bytes: json(text.clone()) });
        if let Some(quality) = quality {
            files.push(PackageFile { name: "data_quality.json", bytes: json(quality) });
        }
        if let Some(artifacts) = artifacts {
            files.push(PackageFile { name: "artifact_references.json", bytes: json(artifacts) });
        }
    }
    if let Some(labels) = envelope.security_labels_doc() {
        files.push(PackageFile { name: "security_labels.json", bytes: json(Compact::of_doc(labels)) });
    }
    if let Some(custody) = envelope.custody_doc() {
        files.push(PackageFile { name: "custody.json", bytes: json(Compact::of_doc(custody)) });
    }
    let payload = envelope.payload();
    let payload_sha256 = sha256_hex(payload);
    if shape.include_payload {
        if payload.len() as u64 > shape.max_payload_bytes {
            return Err(BuildError::TooLarge);
        }
        files.push(PackageFile { name: PAYLOAD, bytes: payload.clone() });
    }
    let mut listed = serde_json::Map::new();
    for file in &files {
        listed.insert(file.name.into(), entry(&file.bytes));
    }
    let manifest = manifest(envelope, &id, created_at, &listed, (!shape.include_payload).then_some(&payload_sha256));
    let manifest = json(Compact::of_value(&manifest));
    listed.insert(MANIFEST.into(), entry(&manifest));
    files.push(PackageFile { name: MANIFEST, bytes: manifest });
    let hashes = serde_json::json!({"schema": HASHES_SCHEMA, "files": Value::Object(listed)});
    files.push(PackageFile { name: HASHES, bytes: json(Compact::of_value(&hashes)) });
    Ok(Package { id, files, payload_sha256 })
}

/// A file's entry in the manifest and the hash list.
fn entry(bytes: &[u8]) -> Value {
    serde_json::json!({"sha256": sha256_hex(bytes), "size_bytes": bytes.len()})
}

/// The manifest document.
fn manifest(
    envelope: &Envelope,
    id: &str,
    created_at: OffsetDateTime,
    files: &serde_json::Map<String, Value>,
    payload_sha256: Option<&String>,
) -> Value {
    let js = envelope.jetstream();
    let mut manifest = serde_json::json!({
        "schema": SCHEMA,
        "package_id": id,
        "subject": envelope.subject(),
        "stream": js.stream,
        "stream_sequence": js.stream_sequence,
        "message_id": envelope.message_id(),
        "created_at": python_utc_time(created_at),
        "review_boundary": REVIEW_BOUNDARY,
        "files": Value::Object(files.clone()),
    });
    if let Some(map) = manifest.as_object_mut() {
        if let Some(epoch) = envelope.stream_epoch() {
            map.insert("stream_epoch".into(), epoch.into());
        }
        if let Some(sha) = payload_sha256 {
            map.insert("payload_sha256".into(), sha.as_str().into());
        }
    }
    manifest
}

/// `datetime.isoformat()` of a UTC time with `Z` for `+00:00`, as the reference writes
/// `created_at`: microseconds, left out when they are zero.
pub(crate) fn python_utc_time(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    let micros = at.microsecond();
    let base = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    );
    if micros == 0 { format!("{base}Z") } else { format!("{base}.{micros:06}Z") }
}

/// The data-quality and artifact-reference parts of mission metadata `text` (compact,
/// canonical), as the reference picks them: the whole document when its `profile` names that
/// profile, else its `data_quality` member when that is an object, and its
/// `artifact_references` member when that is an array or an object.
fn profiles(text: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let Ok(members) = serde_json::from_slice::<BTreeMap<String, &RawValue>>(text) else {
        return (None, None);
    };
    let profile = members.get("profile").and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    let starts = |key: &str, opens: &[u8]| {
        members.get(key).filter(|raw| raw.get().as_bytes().first().is_some_and(|b| opens.contains(b)))
    };
    let quality = if profile.as_deref() == Some(DATA_QUALITY_PROFILE) {
        Some(text.to_vec())
    } else {
        starts("data_quality", b"{").map(|raw| raw.get().as_bytes().to_vec())
    };
    let artifacts = if profile.as_deref() == Some(ARTIFACT_REFERENCE_PROFILE) {
        Some(text.to_vec())
    } else {
        starts("artifact_references", b"{[").map(|raw| raw.get().as_bytes().to_vec())
    };
    (quality, artifacts)
}

/// What a stored manifest says the message's payload was: `files."payload.bin".sha256`, or
/// `payload_sha256` in a package written without its payload. `None` when the text is not
/// a manifest of this schema or names no fingerprint.
pub(crate) fn stored_payload_sha256(manifest: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Entry {
        sha256: String,
    }
    #[derive(serde::Deserialize)]
    struct Stored {
        schema: String,
        #[serde(default)]
        files: BTreeMap<String, Entry>,
        #[serde(default)]
        payload_sha256: Option<String>,
    }
    let stored: Stored = serde_json::from_slice(manifest).ok()?;
    if stored.schema != SCHEMA {
        return None;
    }
    stored.files.get(PAYLOAD).map(|e| e.sha256.clone()).or(stored.payload_sha256)
}

/// The JSON of an attached document as a package file would hold it (compact), for tests.
#[cfg(test)]
pub(crate) fn doc_text(doc: &sinks_contract::json::JsonDoc) -> String {
    String::from_utf8(Compact::of_doc(doc)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sinks_contract::json::JsonDoc;
    use sinks_contract::testing::envelope;

    use super::*;

    const SHAPE: Shape = Shape { pretty: true, include_payload: true, max_payload_bytes: 1024 };

    fn at() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(1_765_000_000_123_456_789).unwrap()
    }

    fn names(package: &Package) -> Vec<&str> {
        package.files.iter().map(|f| f.name).collect()
    }

    fn file<'p>(package: &'p Package, name: &str) -> &'p [u8] {
        &package.files.iter().find(|f| f.name == name).unwrap().bytes
    }

    fn json(package: &Package, name: &str) -> Value {
        serde_json::from_slice(file(package, name)).unwrap()
    }

    #[test]
    fn the_package_id_is_the_references() {
        // hashlib.sha256(b"stream-sequence:ORDERS:7").hexdigest()[:32]
        let id = package_id(&envelope("ORDERS", 7, "orders.created", "{}")).unwrap();
        assert_eq!(id, format!("pkg-{}", &sha256_hex(b"stream-sequence:ORDERS:7")[..32]));
        assert!(is_package_id(&id));
        let later = envelope("ORDERS", 7, "orders.created", "{}").with_stream_epoch(Some(Arc::from("e2")));
        assert_eq!(package_id(&later).unwrap(), format!("pkg-{}", &sha256_hex(b"stream-sequence:ORDERS.e2:7")[..32]));
        assert!(!is_package_id("pkg-XYZ") && !is_package_id(".pkg-0.tmp"));
    }

    #[test]
    fn a_plain_message_has_metadata_payload_manifest_and_hashes() {
        let package = build(&envelope("S", 3, "a.b", "hello"), SHAPE, at(), at()).unwrap();
        assert_eq!(names(&package), ["metadata.json", "payload.bin", "manifest.json", "hashes.json"]);
        assert_eq!(file(&package, "payload.bin"), b"hello");
        let manifest = json(&package, "manifest.json");
        assert_eq!(manifest["schema"], SCHEMA);
        assert_eq!(manifest["package_id"], package.id);
        assert_eq!(manifest["stream"], "S");
        assert_eq!(manifest["stream_sequence"], 3);
        assert_eq!(manifest["subject"], "a.b");
        assert_eq!(manifest["message_id"], Value::Null);
        assert_eq!(manifest["created_at"], "2025-12-06T05:46:40.123456Z");
        assert_eq!(manifest["review_boundary"], REVIEW_BOUNDARY);
        assert_eq!(manifest["files"]["payload.bin"]["sha256"], sha256_hex(b"hello"));
        assert_eq!(manifest["files"]["payload.bin"]["size_bytes"], 5);
        assert!(manifest.get("stream_epoch").is_none() && manifest.get("payload_sha256").is_none());
        let hashes = json(&package, "hashes.json");
        assert_eq!(hashes["schema"], HASHES_SCHEMA);
        assert_eq!(hashes["files"]["manifest.json"]["sha256"], sha256_hex(file(&package, "manifest.json")));
        assert_eq!(hashes["files"]["metadata.json"], manifest["files"]["metadata.json"]);
        let metadata = json(&package, "metadata.json");
        assert!(metadata.get("custody").is_none(), "custody has its own file");
        assert_eq!(metadata["timestamps"]["stored_at_epoch_ns"], 1_765_000_000_123_456_789_i64);
        let text = std::str::from_utf8(file(&package, "manifest.json")).unwrap();
        assert!(text.starts_with("{\n  \"created_at\": ") && text.ends_with("}\n"), "{text}");
        assert_eq!(stored_payload_sha256(file(&package, "manifest.json")), Some(sha256_hex(b"hello")));
    }

    #[test]
    fn mission_metadata_profiles_get_files_of_their_own() {
        let quality = r#"{"accuracy":0.93,"profile":"nats-sinks.data-quality.v1"}"#;
        let e = envelope("S", 1, "a", "{}")
            .with_mission_metadata_doc(Some(Arc::new(JsonDoc::from_canonical(quality.into()))));
        let package = build(&e, Shape { pretty: false, ..SHAPE }, at(), at()).unwrap();
        assert_eq!(file(&package, "data_quality.json"), format!("{quality}\n").as_bytes());
        assert_eq!(file(&package, "mission_metadata.json"), format!("{quality}\n").as_bytes());
        assert!(!names(&package).contains(&"artifact_references.json"));

        let nested = r#"{"artifact_references":[{"uri":"s3://b/k"}],"data_quality":{"completeness":1.0},"data_quality_x":1,"mission_id":"m"}"#;
        let e = envelope("S", 2, "a", "{}")
            .with_mission_metadata_doc(Some(Arc::new(JsonDoc::from_canonical(nested.into()))));
        let package = build(&e, Shape { pretty: false, ..SHAPE }, at(), at()).unwrap();
        assert_eq!(file(&package, "data_quality.json"), b"{\"completeness\":1.0}\n");
        assert_eq!(file(&package, "artifact_references.json"), b"[{\"uri\":\"s3://b/k\"}]\n");

        let neither = r#"{"artifact_references":"s3://b/k","data_quality":[1],"profile":"other"}"#;
        let e = envelope("S", 3, "a", "{}")
            .with_mission_metadata_doc(Some(Arc::new(JsonDoc::from_canonical(neither.into()))));
        let package = build(&e, SHAPE, at(), at()).unwrap();
        assert_eq!(
            names(&package),
            ["metadata.json", "mission_metadata.json", "payload.bin", "manifest.json", "hashes.json"]
        );
    }

    #[test]
    fn labels_and_custody_are_their_documents() {
        let e = envelope("S", 1, "a", "{}")
            .with_security_labels(Some(serde_json::json!({"classification": "SECRET", "score": 1.5e-7})))
            .with_custody(Some(serde_json::json!({"record_hash": "ab"})));
        let package = build(&e, SHAPE, at(), at()).unwrap();
        assert_eq!(
            file(&package, "security_labels.json"),
            b"{\n  \"classification\": \"SECRET\",\n  \"score\": 1.5e-07\n}\n"
        );
        assert_eq!(file(&package, "custody.json"), b"{\n  \"record_hash\": \"ab\"\n}\n");
        assert_eq!(doc_text(e.custody_doc().unwrap()), r#"{"record_hash":"ab"}"#);
    }

    #[test]
    fn an_oversized_payload_is_refused_unless_it_is_left_out() {
        let e = envelope("S", 1, "a", vec![b'x'; 1025]);
        assert_eq!(build(&e, SHAPE, at(), at()).unwrap_err(), BuildError::TooLarge);
        let without = build(&e, Shape { include_payload: false, ..SHAPE }, at(), at()).unwrap();
        assert!(!names(&without).contains(&PAYLOAD));
        let manifest = json(&without, "manifest.json");
        assert_eq!(manifest["payload_sha256"], sha256_hex(&[b'x'; 1025]));
        assert_eq!(stored_payload_sha256(file(&without, "manifest.json")), Some(sha256_hex(&[b'x'; 1025])));
        assert_eq!(stored_payload_sha256(br#"{"schema":"other","payload_sha256":"x"}"#), None);
    }

    #[test]
    fn a_later_epoch_is_named_in_the_manifest() {
        let e = envelope("S", 1, "a", "{}").with_stream_epoch(Some(Arc::from("e2")));
        let package = build(&e, SHAPE, at(), at()).unwrap();
        let manifest = json(&package, "manifest.json");
        assert_eq!((manifest["stream"].as_str(), manifest["stream_epoch"].as_str()), (Some("S"), Some("e2")));
    }

    #[test]
    fn python_time_leaves_out_zero_microseconds() {
        let whole = OffsetDateTime::from_unix_timestamp(1_765_000_000).unwrap();
        assert_eq!(python_utc_time(whole), "2025-12-06T05:46:40Z");
        assert_eq!(python_utc_time(at()), "2025-12-06T05:46:40.123456Z");
    }
}
