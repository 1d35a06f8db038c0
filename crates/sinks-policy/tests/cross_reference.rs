//! Byte-for-byte agreement with the Python reference (PyPI `nats-sinks[crypto]==0.4.3`,
//! installed by `cargo xtask setup`): canonical JSON, message signatures both ways, and
//! custody payload hashes. Each test fails when the reference is missing (`cargo xtask setup` installs it).
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};
use sinks_contract::envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
use sinks_policy::authenticity::{
    Algorithm, Authenticator, AuthenticityConfig, AuthenticityRule, SignedField, hmac_signature_b64, signed_bytes,
};
use sinks_policy::custody::CustodyConfig;

const HMAC_KEY: [u8; 48] = [0x5a; 48];
const ED_SEED: [u8; 32] = [0x42; 32];

fn reference(test: &str) -> PathBuf {
    sinks_testkit::reference_python().unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

/// Runs `script` with the reference's Python, feeding `input` as JSON on stdin; returns the
/// JSON it prints.
fn python(py: &PathBuf, script: &str, input: &Value) -> Value {
    use std::io::Write as _;
    let mut child = Command::new(py)
        .arg("-c")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The messages both sides sign: unicode subjects and labels, a missing message id, an
/// empty (headers-only) body, binary bytes.
fn corpus() -> Vec<Value> {
    json!([
        {"subject": "mission.sensor.alpha", "message_id": "m-1", "data_b64": B64.encode(r#"{"x":1.5,"y":"ä"}"#),
         "labels": ["coalition", "Ünïcode label"], "priority": "flash", "classification": "NATO SECRET"},
        {"subject": "mission.sensor.ß", "message_id": null, "data_b64": B64.encode(b"plain text \x01"),
         "labels": [], "priority": null, "classification": null},
        {"subject": "mission.sensor.bin", "message_id": "m-3", "data_b64": B64.encode([0u8, 255, 7, 128]),
         "labels": ["a\"quote", "back\\slash", "tab\there"], "priority": "routine", "classification": "ÜBER\u{2028}GEHEIM"},
        {"subject": "mission.sensor.empty", "message_id": "m-4", "data_b64": "", "labels": ["x"],
         "priority": "low", "classification": null}
    ])
    .as_array()
    .unwrap()
    .clone()
}

fn envelope_of(m: &Value) -> Envelope {
    let mut headers = Headers::new();
    if let Some(id) = m["message_id"].as_str() {
        headers.append("Nats-Msg-Id", id);
    }
    let js = JetStreamInfo {
        stream: "CROSS".into(),
        consumer: "c".into(),
        stream_sequence: 7,
        consumer_sequence: 7,
        delivered: 1,
        pending: 0,
        timestamp: None,
        domain: None,
    };
    let data = B64.decode(m["data_b64"].as_str().unwrap()).unwrap();
    Envelope::new(m["subject"].as_str().unwrap(), data, headers, js).with_app_metadata(AppMetadata {
        priority: m["priority"].as_str().map(str::to_owned),
        classification: m["classification"].as_str().map(str::to_owned),
        labels: m["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_owned()).collect(),
    })
}

const FIELDS: [SignedField; 5] = [
    SignedField::Subject,
    SignedField::MessageId,
    SignedField::Labels,
    SignedField::Priority,
    SignedField::Classification,
];
const FIELD_NAMES: &str = r#"["subject","message_id","labels","priority","classification"]"#;

/// Python that builds the reference's envelope for each corpus entry.
const PY_ENVELOPES: &str = r#"
import base64, json, sys
from nats_sinks.core.envelope import NatsEnvelope
def envelope(m):
    headers = {"Nats-Msg-Id": m["message_id"]} if m["message_id"] else {}
    return NatsEnvelope(subject=m["subject"], data=base64.b64decode(m["data_b64"]), headers=headers,
        stream="CROSS", consumer="c", stream_sequence=7, consumer_sequence=7, timestamp=None,
        message_id=m["message_id"], redelivered=False, pending=0, priority=m["priority"],
        classification=m["classification"], labels=tuple(m["labels"]))
"#;

fn authenticator(algorithm: Algorithm, key: String) -> Authenticator {
    let config = AuthenticityConfig {
        enabled: true,
        rules: vec![AuthenticityRule {
            subject: ">".into(),
            enabled: true,
            algorithm,
            key_id: Some("cross-key".into()),
            key_b64: None,
            key_b64_env: Some("KEY".into()),
            signed_fields: FIELDS.to_vec(),
        }],
        ..AuthenticityConfig::default()
    };
    Authenticator::from_config_with(&config, "message_authenticity", move |_| Some(key.clone())).unwrap().unwrap()
}

fn with_signature(e: &Envelope, algorithm: &str, signature: &str) -> Envelope {
    let mut headers = e.headers().clone();
    headers.append("Nats-Sinks-Authenticity-Algorithm", algorithm);
    headers.append("Nats-Sinks-Authenticity-Key-Id", "cross-key");
    headers.append("Nats-Sinks-Authenticity-Signature", signature);
    Envelope::new(e.subject(), e.payload().clone(), headers, e.jetstream().clone()).with_app_metadata(e.app().clone())
}

#[test]
fn canonical_json_matches_python_json_dumps() {
    let py = reference("canonical_json_matches_python_json_dumps");
    let docs = json!([
        {"b": 1, "a": [1.0, 0.1, 1e16, 1.5e-7, -0.0, 123456789.125, 5e-324, 1.7976931348623157e308]},
        {"ä": "é\u{0}\u{1f}\u{7f}\u{2028}\u{1F600}", "A": "\"\\/\n\r\t\u{8}\u{c}", "z": null, "y": true},
        {"nested": {"k": [{"b": 2, "a": 1}], "n": -9007199254740991_i64, "u": 18446744073709551615_u64}},
        [], {}, "text", 42, 2.5e-5
    ]);
    let script = r#"
import json, sys
docs = json.load(sys.stdin)
print(json.dumps([json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False) for d in docs]))
"#;
    let theirs = python(&py, script, &docs);
    for (doc, want) in docs.as_array().unwrap().iter().zip(theirs.as_array().unwrap()) {
        let ours = String::from_utf8(sinks_policy::canonical::to_vec(doc).unwrap()).unwrap();
        assert_eq!(ours, want.as_str().unwrap(), "{doc}");
    }
}

#[test]
fn signatures_made_by_the_reference_verify_here() {
    let py = reference("signatures_made_by_the_reference_verify_here");
    let script = format!(
        r#"{PY_ENVELOPES}
import hashlib, hmac
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats_sinks import canonical_message_authenticity_bytes
from nats_sinks.core.authenticity import hmac_sha256_signature_b64 as hmac_signature_b64
inp = json.load(sys.stdin)
key = base64.b64decode(inp["hmac_key"])
signer = Ed25519PrivateKey.from_private_bytes(base64.b64decode(inp["ed_seed"]))
fields = {FIELD_NAMES}
out = []
for m in inp["messages"]:
    e = envelope(m)
    material = canonical_message_authenticity_bytes(e, algorithm="ed25519", key_id="cross-key", signed_fields=fields)
    out.append({{
        "hmac": hmac_signature_b64(e, key=key, key_id="cross-key", signed_fields=fields),
        "ed25519": base64.b64encode(signer.sign(material)).decode(),
    }})
print(json.dumps(out))
"#
    );
    let input = json!({"hmac_key": B64.encode(HMAC_KEY), "ed_seed": B64.encode(ED_SEED), "messages": corpus()});
    let signatures = python(&py, &script, &input);
    let hmac = authenticator(Algorithm::HmacSha256, B64.encode(HMAC_KEY));
    let public = SigningKey::from_bytes(&ED_SEED).verifying_key();
    let ed = authenticator(Algorithm::Ed25519, B64.encode(public.as_bytes()));
    for (m, sig) in corpus().iter().zip(signatures.as_array().unwrap()) {
        let e = envelope_of(m);
        assert_eq!(hmac.check(&with_signature(&e, "hmac-sha256", sig["hmac"].as_str().unwrap())), Ok(()), "{m}");
        assert_eq!(ed.check(&with_signature(&e, "ed25519", sig["ed25519"].as_str().unwrap())), Ok(()), "{m}");
        // And a signature for another message does not.
        let other = envelope_of(&corpus()[(corpus().iter().position(|x| x == m).unwrap() + 1) % corpus().len()]);
        let wrong = with_signature(&other, "hmac-sha256", sig["hmac"].as_str().unwrap());
        assert_eq!(hmac.check(&wrong).unwrap_err().reason, "signature_invalid");
    }
}

#[test]
fn signatures_made_here_verify_in_the_reference() {
    let py = reference("signatures_made_here_verify_in_the_reference");
    let signer = SigningKey::from_bytes(&ED_SEED);
    let mut messages = Vec::new();
    for m in corpus() {
        let e = envelope_of(&m);
        let ed_bytes = signed_bytes(&e, Algorithm::Ed25519, "cross-key", &FIELDS).unwrap();
        let mut m = m.clone();
        m["hmac"] = hmac_signature_b64(&e, &HMAC_KEY, "cross-key", &FIELDS).into();
        m["ed25519"] = B64.encode(signer.sign(&ed_bytes).to_bytes()).into();
        messages.push(m);
    }
    let script = format!(
        r#"{PY_ENVELOPES}
import os
from dataclasses import replace
from nats_sinks.core.config import MessageAuthenticityConfig
from nats_sinks.core.authenticity import MessageAuthenticator
inp = json.load(sys.stdin)
os.environ["CROSS_HMAC"] = inp["hmac_key"]
os.environ["CROSS_ED"] = inp["ed_public"]
fields = {FIELD_NAMES}
def verifier(algorithm, env):
    return MessageAuthenticator(MessageAuthenticityConfig(enabled=True, rules=[{{"subject": ">", "algorithm": algorithm,
        "key_id": "cross-key", "key_b64_env": env, "signed_fields": fields}}]))
results = []
for algorithm, env in (("hmac-sha256", "CROSS_HMAC"), ("ed25519", "CROSS_ED")):
    batch = []
    for m in inp["messages"]:
        e = envelope(m)
        headers = dict(e.headers)
        headers.update({{"Nats-Sinks-Authenticity-Algorithm": algorithm, "Nats-Sinks-Authenticity-Key-Id": "cross-key",
                        "Nats-Sinks-Authenticity-Signature": m[algorithm.split("-")[0]]}})
        batch.append(replace(e, headers=headers))
    ev = verifier(algorithm, env).evaluate(batch)
    results.append({{"accepted": len(ev.accepted_indexes), "reasons": [[v.index, v.reason] for v in ev.violations]}})
print(json.dumps(results))
"#
    );
    let input = json!({"hmac_key": B64.encode(HMAC_KEY), "ed_public": B64.encode(signer.verifying_key().as_bytes()),
                       "messages": messages});
    let results = python(&py, &script, &input);
    for r in results.as_array().unwrap() {
        assert_eq!(r["accepted"], corpus().len(), "{results}");
        assert_eq!(r["reasons"], json!([]), "{results}");
    }
}

#[test]
fn custody_payload_hashes_match_the_reference() {
    let py = reference("custody_payload_hashes_match_the_reference");
    let mut messages = corpus();
    for (i, data) in [
        &br#" {"z": [1, 2.50, 1e3, -0.0], "a": {"nested": "\u00e9"}} "#[..],
        br#"[1, "two", null, true, 3.14159]"#,
        b"not json {",
        "ünïcode text".as_bytes(),
    ]
    .iter()
    .enumerate()
    {
        messages.push(json!({"subject": format!("extra.{i}"), "message_id": format!("x-{i}"),
            "data_b64": B64.encode(data), "labels": [], "priority": null, "classification": null}));
    }
    let script = format!(
        r#"{PY_ENVELOPES}
from nats_sinks import CustodyConfig, compute_custody_metadata
inp = json.load(sys.stdin)
for algorithm in ("sha256", "sha512"):
    config = CustodyConfig(enabled=True, algorithm=algorithm, hash_metadata=False, key_id="k")
    inp[algorithm] = [compute_custody_metadata(envelope(m), config=config) for m in inp["messages"]]
print(json.dumps(inp))
"#
    );
    let theirs = python(&py, &script, &json!({"messages": messages}));
    for algorithm in ["sha256", "sha512"] {
        let config: CustodyConfig = serde_json::from_value(
            json!({"enabled": true, "algorithm": algorithm, "hash_metadata": false, "key_id": "k",
                                          "metadata_hash_scope": "delivery"}),
        )
        .unwrap();
        for (m, want) in messages.iter().zip(theirs[algorithm].as_array().unwrap()) {
            let ours = config.compute(&envelope_of(m)).unwrap();
            // Without a metadata hash, every field of the object is computable from the
            // message alone: the whole object must match, record hash included.
            assert_eq!(ours.value(), want, "{algorithm} {m}");
        }
    }
}
