//! The messages and policy sections of the policy benchmarks: the blackhole's feature costs
//! side by side (`bench/features.rs`, which publishes these messages to a stream) and the
//! steps one at a time in one process (`policy_steps`). Both include this file (`#[path]`),
//! so they measure the same messages under the same policies.
//!
//! Each message is a 256-byte JSON order carrying everything the policies read: labels, a
//! priority, mission metadata, security labels and an HMAC-SHA256 signature over subject,
//! message id and labels, so with every policy on each message passes every step.

use serde_json::{Value, json};
use sinks_contract::envelope::{AppMetadata, Envelope, Headers, JetStreamInfo};
use sinks_policy::authenticity::{SignedField, hmac_signature_b64};

/// The producer's key id and signed fields (the HMAC secret is the benchmark's fixed,
/// non-secret 32-byte payload key).
pub(crate) const KEY_ID: &str = "bench-producer";
const SIGNED: [SignedField; 3] = [SignedField::Subject, SignedField::MessageId, SignedField::Labels];
/// Every message's labels.
pub(crate) const LABELS: [&str; 2] = ["released", "orders"];

#[path = "order.rs"]
mod order;
pub(crate) use order::payload;

/// Message `i` under `subject_root`: its subject, headers (in publishing order) and payload,
/// signed with `key`.
pub(crate) fn message(
    i: usize,
    subject_root: &str,
    subjects: usize,
    key: &[u8],
) -> (String, Vec<(String, String)>, Vec<u8>) {
    let subject = format!("{subject_root}.orders.k{}", i % subjects);
    let id = format!("feat-{i}");
    let payload = payload(i);
    let signature = hmac_signature_b64(&unsigned(&subject, &id, &payload, 0), key, KEY_ID, &SIGNED);
    let headers = [
        ("Nats-Msg-Id", id),
        ("Nats-Sinks-Labels", LABELS.join(";")),
        ("Nats-Sinks-Priority", (if i.is_multiple_of(4) { "flash" } else { "routine" }).to_owned()),
        ("Nats-Sinks-Mission-Metadata", format!(r#"{{"phase":"find","track":{{"id":{i}}}}}"#)),
        ("Nats-Sinks-Security-Labels", r#"{"classification":"NATO SECRET","releasability":["NATO"]}"#.to_owned()),
        ("Nats-Sinks-Authenticity-Algorithm", "hmac-sha256".to_owned()),
        ("Nats-Sinks-Authenticity-Key-Id", KEY_ID.to_owned()),
        ("Nats-Sinks-Authenticity-Signature", signature),
    ];
    (subject, headers.into_iter().map(|(n, v)| (n.to_owned(), v)).collect(), payload)
}

/// Message `i` as the runner hands it to the policies: headers, labels and priority
/// resolved (what `message_metadata` resolves from the headers), stream sequence `i + 1`.
#[allow(dead_code, reason = "policy_steps only; the features bench publishes messages")]
pub(crate) fn envelope(i: usize, subject_root: &str, subjects: usize, key: &[u8]) -> Envelope {
    let (subject, headers, payload) = message(i, subject_root, subjects, key);
    let priority = headers.iter().find(|(n, _)| n == "Nats-Sinks-Priority").map(|(_, v)| v.clone());
    let headers = headers.iter().fold(Headers::new(), |h, (n, v)| h.with(n, v));
    Envelope::new(subject, payload, headers, info(i as u64 + 1)).with_app_metadata(AppMetadata {
        labels: LABELS.iter().map(|l| (*l).to_owned()).collect(),
        priority,
        ..AppMetadata::default()
    })
}

fn info(sequence: u64) -> JetStreamInfo {
    JetStreamInfo {
        stream: "BENCHFEAT".into(),
        consumer: "bench".into(),
        stream_sequence: sequence,
        consumer_sequence: sequence,
        delivered: 1,
        pending: 0,
        timestamp: None,
        domain: None,
    }
}

/// The envelope a producer signs (only subject, message id, labels and payload count).
fn unsigned(subject: &str, id: &str, payload: &[u8], sequence: u64) -> Envelope {
    Envelope::new(subject, payload.to_vec(), Headers::new().with("Nats-Msg-Id", id), info(sequence)).with_app_metadata(
        AppMetadata { labels: LABELS.iter().map(|l| (*l).to_owned()).collect(), ..AppMetadata::default() },
    )
}

/// The names of the policy steps, in the order they run.
#[allow(dead_code, reason = "policy_steps only")]
pub(crate) const STEPS: [&str; 7] = [
    "mission_metadata",
    "security_labels",
    "message_authenticity",
    "size_policy",
    "pre_sink_policy",
    "custody",
    "priority_lanes",
];

/// The section of each policy step, `enabled` as given, every other field as an operator
/// would set them with the step on; the key of authenticity is read from `key_env`.
/// `priority_lanes` goes under `delivery` in a config.
pub(crate) fn sections(enabled: bool, subject_root: &str, key_env: &str) -> Value {
    json!({
        "mission_metadata": {"enabled": enabled},
        "security_labels": {"enabled": enabled, "allowed_releasability": ["NATO", "FVEY"]},
        "message_authenticity": {"enabled": enabled, "rules": [{
            "subject": format!("{subject_root}.>"), "algorithm": "hmac-sha256", "key_id": KEY_ID,
            "key_b64_env": key_env, "signed_fields": ["subject", "message_id", "labels"]}]},
        "size_policy": {"enabled": enabled},
        "pre_sink_policy": {"enabled": enabled, "rules": [{"subject": ">", "required_labels": ["released"], "max_payload_bytes": 65536}]},
        "custody": {"enabled": enabled, "key_id": "bench-custody"},
        "priority_lanes": {"enabled": enabled, "default_lane": "routine", "lanes": [
            {"name": "flash", "priorities": ["flash"], "weight": 4}, {"name": "routine", "priorities": ["routine"]}]},
    })
}
