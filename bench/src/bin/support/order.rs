//! The benchmark's message payload, shared by every suite so every contender measures the same
//! bytes: `oracle_scripted` and the policy messages (`policed.rs`) include this file with
//! `#[path]`, and `bench.rs` reaches it through `policed.rs`.

/// Order `i`: 256 bytes of JSON with a stable shape (`order_id`, `customer`, `amount`,
/// `currency`, and a `note` padded to the size).
pub(crate) fn payload(i: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"order_id":{i},"customer":"c-{:06}","amount":{}.{:02},"currency":"EUR","note":""#,
        i % 997,
        i % 5000,
        i % 100
    );
    let tail = r#""}"#;
    let pad = 256usize.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad)).into_bytes()
}
