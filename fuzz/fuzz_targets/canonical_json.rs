//! Fuzzes `sinks_policy::canonical::to_vec` on any JSON text: it never panics, its output is
//! JSON that parses back to the same value, and rendering that again gives the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(first) = sinks_policy::canonical::to_vec(&value) else { return };
    let back: serde_json::Value = serde_json::from_slice(&first).expect("canonical output is JSON");
    assert_eq!(back, value, "canonical JSON changed the value");
    let second = sinks_policy::canonical::to_vec(&back).expect("a rendered value renders again");
    assert_eq!(first, second, "canonical JSON is not stable");
});
