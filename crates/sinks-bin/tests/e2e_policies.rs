//! Message policies end to end through the binary: a mixed batch is split per message
//! (valid ones written, each bad one dead-lettered alone with the reference's reason code),
//! custody objects stored with the records verify with the reference's own hashing, refused
//! messages never leave plaintext behind when encryption is on, and the start-up checks.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use async_nats::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use serde_json::{Value, json};
use sinks_contract::envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
use sinks_policy::authenticity::{SignedField, hmac_signature_b64};
use sinks_testkit::{js_publish_all, read_stream, reference_python, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, env, records};

const AUTH_ENV: &str = "E2E_AUTH_KEY_B64";
const PAYLOAD_KEY_ENV: &str = "E2E_POLICY_PAYLOAD_KEY_B64";
const KEY: [u8; 32] = [0x31; 32];
const WRONG_KEY: [u8; 32] = [0x32; 32];
const FIELDS: [SignedField; 3] = [SignedField::Subject, SignedField::MessageId, SignedField::Labels];

fn keys() -> Vec<(&'static str, String)> {
    vec![(AUTH_ENV, B64.encode(KEY)), (PAYLOAD_KEY_ENV, B64.encode([0x33u8; 32]))]
}

/// What message `i` of the mixed batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Valid,
    BadSignature,
    Oversize,
    MissingLabel,
    BadMissionMetadata,
}

fn kind(i: usize) -> Kind {
    match i % 5 {
        0 => Kind::Valid,
        1 => Kind::BadSignature,
        2 => Kind::Oversize,
        3 => Kind::MissingLabel,
        _ => Kind::BadMissionMetadata,
    }
}

/// The signature a producer holding `key` puts on a message (what the sink recomputes).
fn sign(subject: &str, id: &str, payload: &[u8], labels: &[&str], key: &[u8]) -> String {
    let js = JetStreamInfo {
        stream: String::new(),
        consumer: String::new(),
        stream_sequence: 0,
        consumer_sequence: 0,
        delivered: 1,
        pending: 0,
        timestamp: None,
        domain: None,
    };
    let e = Envelope::new(subject, payload.to_vec(), Headers::new().with("Nats-Msg-Id", id), js).with_app_metadata(
        AppMetadata { labels: labels.iter().map(|l| (*l).to_owned()).collect(), ..AppMetadata::default() },
    );
    hmac_signature_b64(&e, key, "producer-1", &FIELDS)
}

/// Publishes `n` messages of the mixed batch on four subjects.
async fn publish_mixed(e: &Env, n: usize) {
    let msgs = (0..n)
        .map(|i| {
            let subject = format!("{}.sensor.k{}", e.subject_root, i % 3);
            let id = format!("msg-{i}");
            let payload = match kind(i) {
                Kind::Oversize => format!(r#"{{"reading":{i},"pad":"{}"}}"#, "x".repeat(600)),
                _ => format!(r#"{{"reading":{i}}}"#),
            };
            let labels: &[&str] = if kind(i) == Kind::MissingLabel { &["draft"] } else { &["released", "sensor"] };
            let key = if kind(i) == Kind::BadSignature { &WRONG_KEY } else { &KEY };
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", id.as_str());
            h.insert("Nats-Sinks-Labels", labels.join(";").as_str());
            h.insert("Nats-Sinks-Authenticity-Algorithm", "hmac-sha256");
            h.insert("Nats-Sinks-Authenticity-Key-Id", "producer-1");
            h.insert(
                "Nats-Sinks-Authenticity-Signature",
                sign(&subject, &id, payload.as_bytes(), labels, key).as_str(),
            );
            let mission = if kind(i) == Kind::BadMissionMetadata {
                r#"{"phase": "find", "phase": "fix"}"#.to_owned()
            } else {
                format!(r#"{{"phase":"find","track":{{"id":{i},"speed":12.5}}}}"#)
            };
            h.insert("Nats-Sinks-Mission-Metadata", mission.as_str());
            h.insert("Nats-Sinks-Security-Labels", r#"{"classification":"NATO SECRET","releasability":["NATO"]}"#);
            (subject, h, Bytes::from(payload))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
}

fn policies(e: &Env) -> Value {
    json!({
        "message_authenticity": {"enabled": true, "rules": [{
            "subject": format!("{}.>", e.subject_root), "algorithm": "hmac-sha256", "key_id": "producer-1",
            "key_b64_env": AUTH_ENV, "signed_fields": ["subject", "message_id", "labels"]}]},
        "size_policy": {"enabled": true, "max_payload_bytes": 512, "max_normalized_record_bytes": 1_048_576},
        "pre_sink_policy": {"enabled": true, "rules": [{"subject": ">", "required_labels": ["released"]}]},
        "custody": {"enabled": true, "key_id": "custody-v1"},
        "mission_metadata": {"enabled": true},
        "security_labels": {"enabled": true, "allowed_releasability": ["NATO", "FVEY"]},
        "delivery": {"batch_size": 100, "batch_timeout_ms": 200},
    })
}

fn with_dlq(mut extra: Value) -> (Value, String, String) {
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    extra["dead_letter"] = json!({"enabled": true, "subject": dlq_subject});
    (extra, dlq_stream, dlq_subject)
}

async fn drain(e: &Env, config: &Path) -> String {
    let run = Sink::start(config, e.dir.path(), &keys());
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "not drained:\n{}", run.logs());
    let logs = run.logs();
    assert_eq!(run.terminate(), Some(0), "{logs}");
    logs
}

async fn dead_letters(e: &Env, stream: &str) -> Vec<Value> {
    read_stream(&e.js, stream).await.into_iter().map(|(_, _, _, body)| serde_json::from_slice(&body).unwrap()).collect()
}

#[tokio::test]
async fn a_mixed_batch_writes_the_valid_and_dead_letters_exactly_the_others() {
    let e = env().await;
    let (extra, dlq_stream, dlq_subject) = with_dlq(policies(&e));
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    let total = 80;
    publish_mixed(&e, total).await;
    let config = e.write_config_json(json!({"type": "file", "directory": e.out()}), extra);
    let logs = drain(&e, &config).await;

    // Written: exactly the valid ones, each once, each with a custody object.
    let written: BTreeMap<String, Value> =
        records(&e.out()).into_iter().map(|r| (r["message_id"].as_str().unwrap().to_owned(), r)).collect();
    let valid: Vec<String> = (0..total).filter(|i| kind(*i) == Kind::Valid).map(|i| format!("msg-{i}")).collect();
    assert_eq!(written.len(), valid.len());
    for id in &valid {
        let record = written.get(id).unwrap_or_else(|| panic!("{id} not written"));
        assert_eq!(record["custody"]["schema"], "nats_sinks.custody.v1");
        assert_eq!(record["custody"]["key_id"], "custody-v1");
        assert_eq!(record["custody"]["metadata_hash_scope"], "message");
        assert_eq!(record["labels_list"], json!(["released", "sensor"]));
        let i: usize = id.trim_start_matches("msg-").parse().unwrap();
        assert_eq!(record["mission_metadata"], json!({"phase": "find", "track": {"id": i, "speed": 12.5}}));
        assert_eq!(record["security_labels"]["profile"], "nats-sinks.security-label.v1");
        assert_eq!(record["security_labels"]["releasability"], json!(["NATO"]));
        assert_eq!(record["security_labels"]["labels"], json!(["released", "sensor"]), "filled from the message");
    }
    // Dead-lettered: exactly the others, one record each, with the reference's reason codes.
    let dlq = dead_letters(&e, &dlq_stream).await;
    let mut by_id: BTreeMap<String, Value> = BTreeMap::new();
    for record in dlq {
        let id = record["message_id"].as_str().unwrap().to_owned();
        assert!(by_id.insert(id.clone(), record).is_none(), "{id} dead-lettered twice");
    }
    assert_eq!(by_id.len(), total - valid.len());
    for i in (0..total).filter(|i| kind(*i) != Kind::Valid) {
        let record = &by_id[&format!("msg-{i}")];
        let (reason, error_type) = match kind(i) {
            Kind::BadSignature => ("signature_invalid", "PolicyViolationError"),
            Kind::Oversize => ("payload_too_large", "SizePolicyViolationError"),
            Kind::MissingLabel => ("required_label_missing", "PolicyViolationError"),
            Kind::BadMissionMetadata => ("mission_metadata_ambiguous_json", "ValidationError"),
            Kind::Valid => unreachable!(),
        };
        assert_eq!(record["reason"], reason, "msg-{i}: {record}");
        assert_eq!(record["error_type"], error_type, "msg-{i}");
        assert!(record["error"].as_str().unwrap().contains(&format!("reason={reason}")), "{record}");
    }
    assert!(logs.contains("message refused by policy"), "{logs}");
    assert!(!logs.contains("write failed"), "refusals are not reported as write failures:\n{logs}");
}

#[tokio::test]
async fn stored_custody_objects_verify_with_the_reference_hashing() {
    let py = reference_python().unwrap_or_else(|reason| {
        sinks_testkit::cannot_run("stored_custody_objects_verify_with_the_reference_hashing", reason)
    });
    let e = env().await;
    let payloads = [r#"{"b":[1.5,2e-7,100.0],"a":"ünïcode"}"#, "plain text", "{\"n\":-0.0}"];
    let msgs = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("c-{i}").as_str());
            h.insert("Nats-Sinks-Previous-Custody-Hash", "ab".repeat(32).as_str());
            (format!("{}.custody.{i}", e.subject_root), h, Bytes::from(*p))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
    let extra = json!({"custody": {"enabled": true, "algorithm": "sha512", "include_previous_hash": true}});
    let config = e.write_config_json(json!({"type": "file", "directory": e.out(), "include_metadata": true}), extra);
    drain(&e, &config).await;
    let stored = records(&e.out());
    assert_eq!(stored.len(), payloads.len());
    // The reference recomputes every hash of every stored record from the record alone,
    // leaving out the fields docs/custody.md lists for `metadata_hash_scope: "message"`.
    let script = r#"
import hashlib, json, sys
from nats_sinks import canonical_json_bytes
H = lambda v: hashlib.sha512(canonical_json_bytes(v, max_bytes=1 << 30)).hexdigest()
bad = []
for r in json.load(sys.stdin):
    c = r["custody"]
    meta = json.loads(json.dumps(r["metadata"]))
    meta.pop("custody", None); meta.pop("freshness", None)
    for f in ("stored_at", "stored_at_epoch_ns", "received_at", "received_at_epoch_ns"):
        meta["timestamps"].pop(f, None)
    for f in ("consumer", "consumer_sequence", "delivered", "redelivered", "pending"):
        meta["jetstream"].pop(f, None)
    material = {"schema": c["schema"], "schema_version": c["schema_version"], "algorithm": c["algorithm"],
        "key_id": c["key_id"], "payload_hash": c["payload_hash"], "metadata_hash": c["metadata_hash"],
        "previous_record_hash": c["previous_record_hash"], "subject": r["subject"], "stream": r["stream"],
        "stream_sequence": r["stream_sequence"], "message_id": r["message_id"]}
    checks = {"payload": H(r["payload"]) == c["payload_hash"], "metadata": H(meta) == c["metadata_hash"],
              "record": H(material) == c["record_hash"]}
    if not all(checks.values()):
        bad.append([r["message_id"], checks])
print(json.dumps(bad))
"#;
    let mut child = Command::new(&py)
        .arg("-c")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(&serde_json::to_vec(&stored).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]", "records whose hashes do not verify");
    for r in &stored {
        assert_eq!(r["custody"]["previous_record_hash"], "ab".repeat(32));
        assert_eq!(r["custody"]["algorithm"], "sha512");
    }
}

#[tokio::test]
async fn a_refused_message_leaves_no_plaintext_when_encryption_is_on() {
    let e = env().await;
    let mut extra = policies(&e);
    extra["encryption"] = json!({"enabled": true, "key_id": "payload-1", "key_b64_env": PAYLOAD_KEY_ENV});
    // Measured after encryption, as the reference does: every envelope is above 100 bytes.
    extra["size_policy"] = json!({"enabled": false});
    let (extra, dlq_stream, dlq_subject) = with_dlq(extra);
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    publish_mixed(&e, 10).await;
    let config = e.write_config_json(json!({"type": "file", "directory": e.out()}), extra);
    drain(&e, &config).await;
    let dlq = dead_letters(&e, &dlq_stream).await;
    // Of 10 messages, bad signatures and bad mission metadata (refused before encryption)
    // and missing labels (after): 2 each.
    assert_eq!(dlq.len(), 6);
    for record in &dlq {
        let body = B64.decode(record["payload_base64"].as_str().unwrap()).unwrap();
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert!(doc.get("_nats_sinks_encryption").is_some(), "{} is not ciphertext", record["reason"]);
        assert!(!String::from_utf8_lossy(&body).contains("reading"), "plaintext leaked");
    }
    for r in records(&e.out()) {
        assert!(r["payload"].get("_nats_sinks_encryption").is_some(), "written encrypted");
    }
}

#[test]
fn validate_explains_the_policies_and_refuses_a_batch_size_the_size_policy_would_reject() {
    let dir = tempfile::tempdir().unwrap();
    let base = json!({"nats": {"stream": "S", "consumer": "c", "subject": "s.>"},
                      "sink": {"type": "file", "directory": dir.path().join("out")}});
    let write = |extra: Value| {
        let mut config = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        let path = dir.path().join("c.json");
        std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
        // `validate` checks that the variables a config names are set.
        Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .arg("validate")
            .arg(&path)
            .env("AUTH_KEY", "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=")
            .output()
            .unwrap()
    };
    let out = write(json!({
        "message_authenticity": {"enabled": true, "rules": [
            {"subject": "s.secure.>", "key_id": "k1", "key_b64_env": "AUTH_KEY"},
            {"subject": "s.>", "enabled": false}]},
        "pre_sink_policy": {"enabled": true, "rules": [{"subject": "s.secure.>", "require_classification": true}]},
        "custody": {"enabled": true},
        "delivery": {"priority_lanes": {"enabled": true, "default_lane": "routine", "lanes": [
            {"name": "flash", "priorities": ["flash"], "weight": 4}, {"name": "routine", "priorities": ["routine"]}]}}
    }));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = [
        "message policies, in the order they run:",
        "rule 1 (first match wins) `s.secure.>`: verify hmac-sha256 with key id k1",
        "rule 2 (first match wins) `s.>`: exempt",
        "pre-sink policy: every matching rule applies",
        "rule 1 `s.secure.>`: classification required",
        "custody: sha256 of payload and metadata (stable across redeliveries)",
        "lane `flash` weight 4: [flash]",
    ];
    for line in expected {
        assert!(stdout.contains(line), "missing `{line}` in:\n{stdout}");
    }
    let authenticity = stdout.find("message authenticity").unwrap();
    assert!(authenticity < stdout.find("pre-sink policy").unwrap() && stdout.find("custody").unwrap() > authenticity);

    let out =
        write(json!({"delivery": {"batch_size": 500}, "size_policy": {"enabled": true, "max_batch_messages": 200}}));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("size_policy.max_batch_messages") && stderr.contains("delivery.batch_size"),
        "both fields are named: {stderr}"
    );
    // Inline keys are refused without echoing them.
    let out = write(json!({"message_authenticity": {"enabled": true, "rules": [
        {"subject": ">", "key_id": "k", "key_b64": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="}]}}));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("message_authenticity.rules[0].key_b64") && !stderr.contains("c2VjcmV0"), "{stderr}");
}

#[tokio::test]
async fn a_missing_authenticity_key_stops_start_up_naming_the_field() {
    let e = env().await;
    let config = e.write_config_json(json!({"type": "file", "directory": e.out()}), policies(&e));
    let out = Command::new(env!("CARGO_BIN_EXE_nats-sink")).arg("run").arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("message_authenticity.rules[0].key_b64_env") && stderr.contains(AUTH_ENV), "{stderr}");
}
