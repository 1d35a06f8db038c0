//! Exactly-once verification shared by the clauses and the crash certification: what a
//! destination must hold for a set of published messages, and how a read-back compares.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::Serialize;

use super::Record;

/// The bytes a destination stores for `payload` under the default payload mode: a strict
/// JSON payload without its insignificant surrounding whitespace, anything else unchanged.
pub fn expected_stored(payload: &[u8]) -> Bytes {
    let trimmed = payload.trim_ascii();
    match std::str::from_utf8(trimmed) {
        Ok(text) if sinks_contract::json::validate_strict(text).is_ok() => Bytes::copy_from_slice(trimmed),
        _ => Bytes::copy_from_slice(payload),
    }
}

/// A payload for message `i` of a certification run: mostly JSON, some plain text, some
/// binary, some JSON with surrounding whitespace; 100–400 bytes.
pub fn mixed_payload(i: usize) -> Bytes {
    let filler = "x".repeat(64 + (i * 37) % 256);
    match i % 10 {
        0 => Bytes::from(format!("plain text message {i} {filler}")),
        1 => {
            let mut b: Vec<u8> = (0..(100 + i % 200)).map(|j| ((i * 31 + j * 7) % 256) as u8).collect();
            b[0] = 0xff; // never valid UTF-8
            Bytes::from(b)
        }
        2 => Bytes::from(format!("  {{\"i\":{i},\"pad\":\"{filler}\"}}\n")),
        _ => Bytes::from(format!(r#"{{"i":{i},"kind":"order","amount":{}.{:02},"pad":"{filler}"}}"#, i * 3, i % 100)),
    }
}

/// How a read-back compares with what was published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Messages published.
    pub expected: usize,
    /// Records read back.
    pub read_back: usize,
    /// Keys published but not found.
    pub missing: Vec<String>,
    /// Keys found more than once.
    pub duplicated: Vec<String>,
    /// Keys found but never published.
    pub extra: Vec<String>,
    /// Keys whose stored payload differs from the published one.
    pub mismatched: Vec<String>,
}

impl Verdict {
    /// True when every message is present exactly once with its payload, and nothing else.
    pub fn exactly_once(&self) -> bool {
        self.missing.is_empty() && self.duplicated.is_empty() && self.extra.is_empty() && self.mismatched.is_empty()
    }

    /// One line for reports: counts and the first few offending keys.
    pub fn summary(&self) -> String {
        let first = |v: &[String]| v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        format!(
            "expected {} read back {}; missing {} [{}]; duplicated {} [{}]; extra {} [{}]; mismatched {} [{}]",
            self.expected,
            self.read_back,
            self.missing.len(),
            first(&self.missing),
            self.duplicated.len(),
            first(&self.duplicated),
            self.extra.len(),
            first(&self.extra),
            self.mismatched.len(),
            first(&self.mismatched),
        )
    }
}

/// Compares `actual` with the published `expected` (key → published payload). A stored
/// payload matches when it is byte-equal to the published one, or to the published JSON
/// without its insignificant surrounding whitespace.
pub fn verify(expected: &BTreeMap<String, Bytes>, actual: &[Record]) -> Verdict {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut verdict = Verdict { expected: expected.len(), read_back: actual.len(), ..Verdict::default() };
    for (key, stored) in actual {
        let count = seen.entry(key.as_str()).or_insert(0);
        *count += 1;
        if *count == 2 {
            verdict.duplicated.push(key.clone());
        }
        match expected.get(key) {
            None if *count == 1 => verdict.extra.push(key.clone()),
            Some(published) if *count == 1 && *published != *stored && expected_stored(published) != *stored => {
                verdict.mismatched.push(key.clone());
            }
            _ => {}
        }
    }
    verdict.missing = expected.keys().filter(|k| !seen.contains_key(k.as_str())).cloned().collect();
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_finds_every_kind_of_defect() {
        let expected: BTreeMap<String, Bytes> = [("a", "1"), ("b", " {\"x\":2} "), ("c", "3"), ("d", "4")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Bytes::from(v)))
            .collect();
        let r = |k: &str, v: &str| (k.to_owned(), Bytes::copy_from_slice(v.as_bytes()));
        let good = [r("a", "1"), r("b", "{\"x\":2}"), r("c", "3"), r("d", "4")];
        assert!(verify(&expected, &good).exactly_once());
        let verbatim = [r("a", "1"), r("b", " {\"x\":2} "), r("c", "3"), r("d", "4")];
        assert!(verify(&expected, &verbatim).exactly_once(), "verbatim storage matches too");
        let bad = [r("a", "1"), r("a", "1"), r("b", "{\"x\": 2}"), r("c", "three"), r("z", "9")];
        let v = verify(&expected, &bad);
        assert_eq!(v.duplicated, ["a"]);
        assert_eq!(v.mismatched, ["b", "c"]);
        assert_eq!(v.extra, ["z"]);
        assert_eq!(v.missing, ["d"]);
        assert!(!v.exactly_once());
    }

    #[test]
    fn mixed_payloads_cover_json_text_binary_and_padded_json() {
        let kinds: Vec<_> = (0..10)
            .map(|i| {
                let p = mixed_payload(i);
                (std::str::from_utf8(&p).is_ok(), expected_stored(&p).len() < p.len())
            })
            .collect();
        assert!(kinds.contains(&(false, false)), "binary");
        assert!(kinds.contains(&(true, true)), "padded JSON is stored trimmed");
        assert!(kinds.contains(&(true, false)), "text and JSON");
    }
}
