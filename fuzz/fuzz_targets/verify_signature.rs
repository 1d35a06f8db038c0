//! Fuzzes message-signature verification with attacker-controlled headers and payloads:
//! `Authenticator::check` never panics, never accepts a signature it did not compute, and
//! always accepts the producer's correct HMAC over the same fuzzed message.
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use sinks_contract::envelope::Headers;
use sinks_policy::authenticity::{
    Algorithm, AuthenticityConfig, AuthenticityRule, Authenticator, DEFAULT_SIGNED_FIELDS, hmac_signature_b64,
};

const KEY: [u8; 32] = [0x42; 32];

fn authenticator() -> Authenticator {
    let config = AuthenticityConfig {
        enabled: true,
        rules: vec![AuthenticityRule {
            subject: ">".into(),
            enabled: true,
            algorithm: Algorithm::HmacSha256,
            key_id: Some("k".into()),
            key_b64: None,
            key_b64_env: Some("K".into()),
            signed_fields: DEFAULT_SIGNED_FIELDS.to_vec(),
        }],
        ..AuthenticityConfig::default()
    };
    let key = base64::engine::general_purpose::STANDARD.encode(KEY);
    Authenticator::from_config_with(&config, "m", move |_| Some(key.clone())).unwrap().unwrap()
}

fuzz_target!(|data: &[u8]| {
    // Layout: subject \0 message id \0 algorithm \0 key id \0 signature \0 payload.
    let mut parts = data.splitn(6, |b| *b == 0);
    let mut text = || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let (subject, id, algorithm, key_id, signature) = (text(), text(), text(), text(), text());
    let payload = parts.next().unwrap_or_default().to_vec();
    let subject = if subject.is_empty() { "s".to_owned() } else { subject };
    let headers = Headers::new()
        .with("Nats-Msg-Id", id.clone())
        .with("Nats-Sinks-Authenticity-Algorithm", algorithm)
        .with("Nats-Sinks-Authenticity-Key-Id", key_id)
        .with("Nats-Sinks-Authenticity-Signature", signature.clone());
    let auth = authenticator();
    let fuzzed = sinks_contract::testing::envelope_with("S", 1, &subject, payload.clone(), headers, 1);
    let expected = hmac_signature_b64(&fuzzed, &KEY, "k", &DEFAULT_SIGNED_FIELDS);
    if auth.check(&fuzzed).is_ok() {
        assert_eq!(signature.trim(), expected, "accepted a signature it did not compute");
    }
    let good = Headers::new()
        .with("Nats-Msg-Id", id)
        .with("Nats-Sinks-Authenticity-Algorithm", "hmac-sha256")
        .with("Nats-Sinks-Authenticity-Key-Id", "k")
        .with("Nats-Sinks-Authenticity-Signature", expected);
    let signed = sinks_contract::testing::envelope_with("S", 1, &subject, payload, good, 1);
    assert!(auth.check(&signed).is_ok(), "the correct signature was refused");
});
