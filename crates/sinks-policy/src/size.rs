//! Size policy: per-message limits on the sink-bound payload (ciphertext when encryption is
//! on), headers, labels, mission metadata and the standard metadata document (the
//! reference's `size_policy` section and reason codes).
//!
//! Reason codes: `payload_too_large`, `header_count_too_large`, `header_name_too_large`,
//! `header_value_too_large`, `headers_too_large`, `label_count_too_large`,
//! `label_too_large`, `labels_too_large`, `mission_metadata_too_large`,
//! `standard_metadata_too_large`, `normalized_record_too_large`,
//! `batch_message_count_too_large`.
//!
//! Unlike the reference, a batch over `max_batch_messages` rejects only the messages past
//! the limit, and `max_batch_messages` below `delivery.batch_size` is refused at start-up,
//! so with a valid config that reason never occurs.

use serde::{Deserialize, Serialize};

use super::{Rejection, Step};
use sinks_contract::config::Issues;
use sinks_contract::envelope::Envelope;
use sinks_contract::json::JsonDoc;
use sinks_toolkit::metadata::MetadataDoc;

const MIB: u64 = 1024 * 1024;
const MAX_BYTES: u64 = 1 << 30;
const MAX_COUNT: u64 = 1_000_000;

/// `size_policy` config section (all sizes in bytes of UTF-8 / compact JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SizePolicyConfig {
    /// Enforce the limits (default false).
    pub enabled: bool,
    /// Largest sink-bound payload (default 16 MiB; measured after encryption).
    pub max_payload_bytes: u64,
    /// Most headers (default 128).
    pub max_header_count: u64,
    /// Longest header name (default 256).
    pub max_header_name_bytes: u64,
    /// Longest header value (default 8192).
    pub max_header_value_bytes: u64,
    /// All header names and values together (default 64 KiB).
    pub max_headers_bytes: u64,
    /// Most labels (default 64).
    pub max_label_count: u64,
    /// Longest label (default 128).
    pub max_label_bytes: u64,
    /// All labels together (default 4096).
    pub max_labels_bytes: u64,
    /// Mission metadata as compact JSON (default 8192).
    pub max_mission_metadata_bytes: u64,
    /// The standard metadata document as compact JSON (default 256 KiB).
    pub max_standard_metadata_bytes: u64,
    /// Payload plus standard metadata (default 20 MiB).
    pub max_normalized_record_bytes: u64,
    /// Most messages in one batch (default 10,000); must be at least `delivery.batch_size`.
    pub max_batch_messages: u64,
}

impl Default for SizePolicyConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_payload_bytes: 16 * MIB,
            max_header_count: 128,
            max_header_name_bytes: 256,
            max_header_value_bytes: 8192,
            max_headers_bytes: 64 * 1024,
            max_label_count: 64,
            max_label_bytes: 128,
            max_labels_bytes: 4096,
            max_mission_metadata_bytes: 8192,
            max_standard_metadata_bytes: 256 * 1024,
            max_normalized_record_bytes: 20 * MIB,
            max_batch_messages: 10_000,
        }
    }
}

impl SizePolicyConfig {
    /// Checks the section (`path` is `size_policy`) and its agreement with
    /// `delivery.batch_size`.
    pub fn validate_at(&self, path: &str, batch_size: usize, issues: &mut Issues) {
        let f = |name: &str| format!("{path}.{name}");
        issues.range(&f("max_payload_bytes"), self.max_payload_bytes, 0, MAX_BYTES);
        issues.range(&f("max_header_count"), self.max_header_count, 0, MAX_COUNT);
        issues.range(&f("max_header_name_bytes"), self.max_header_name_bytes, 1, 65_536);
        issues.range(&f("max_header_value_bytes"), self.max_header_value_bytes, 0, MAX_BYTES);
        issues.range(&f("max_headers_bytes"), self.max_headers_bytes, 0, MAX_BYTES);
        issues.range(&f("max_label_count"), self.max_label_count, 0, MAX_COUNT);
        issues.range(&f("max_label_bytes"), self.max_label_bytes, 1, 65_536);
        issues.range(&f("max_labels_bytes"), self.max_labels_bytes, 0, MAX_BYTES);
        issues.range(&f("max_mission_metadata_bytes"), self.max_mission_metadata_bytes, 0, MAX_BYTES);
        issues.range(&f("max_standard_metadata_bytes"), self.max_standard_metadata_bytes, 0, MAX_BYTES);
        issues.range(&f("max_normalized_record_bytes"), self.max_normalized_record_bytes, 0, MAX_BYTES);
        issues.range(&f("max_batch_messages"), self.max_batch_messages, 1, MAX_COUNT);
        for (aggregate, total, component, part) in [
            ("max_headers_bytes", self.max_headers_bytes, "max_header_name_bytes", self.max_header_name_bytes),
            ("max_headers_bytes", self.max_headers_bytes, "max_header_value_bytes", self.max_header_value_bytes),
            ("max_labels_bytes", self.max_labels_bytes, "max_label_bytes", self.max_label_bytes),
            (
                "max_normalized_record_bytes",
                self.max_normalized_record_bytes,
                "max_payload_bytes",
                self.max_payload_bytes,
            ),
        ] {
            if total < part {
                issues.push(&f(aggregate), format!("must be at least {path}.{component} ({part}), got {total}"));
            }
        }
        if self.enabled && (batch_size as u64) > self.max_batch_messages {
            issues.push(
                &f("max_batch_messages"),
                format!(
                    "is {} but delivery.batch_size is {batch_size}: every fetched batch could exceed it; raise \
                     size_policy.max_batch_messages or lower delivery.batch_size",
                    self.max_batch_messages
                ),
            );
        }
    }

    /// What the policy enforces, for `nats-sink validate`.
    pub fn describe(&self) -> Vec<String> {
        vec![format!(
            "size policy on every message: payload <= {} B (after encryption), headers <= {} ({} B each name, {} B \
             each value, {} B total), labels <= {} ({} B each, {} B total), mission metadata <= {} B, standard \
             metadata <= {} B, payload + metadata <= {} B",
            self.max_payload_bytes,
            self.max_header_count,
            self.max_header_name_bytes,
            self.max_header_value_bytes,
            self.max_headers_bytes,
            self.max_label_count,
            self.max_label_bytes,
            self.max_labels_bytes,
            self.max_mission_metadata_bytes,
            self.max_standard_metadata_bytes,
            self.max_normalized_record_bytes
        )]
    }

    /// Checks one message; `position` is its index in the fetched batch (messages at or past
    /// `max_batch_messages` are rejected).
    pub fn check(&self, envelope: &Envelope, position: usize) -> Result<(), Rejection> {
        let mut over: Vec<(&'static str, u64, u64)> = Vec::new();
        let mut limit = |reason, actual: u64, max: u64| {
            if actual > max {
                over.push((reason, actual, max));
            }
        };
        if position as u64 >= self.max_batch_messages {
            limit("batch_message_count_too_large", position as u64 + 1, self.max_batch_messages);
        }
        let payload = envelope.payload().len() as u64;
        limit("payload_too_large", payload, self.max_payload_bytes);
        let headers = envelope.headers();
        limit("header_count_too_large", headers.len() as u64, self.max_header_count);
        let (mut name_max, mut value_max, mut total) = (0u64, 0u64, 0u64);
        for (name, values) in headers.iter() {
            name_max = name_max.max(name.len() as u64);
            for value in values {
                value_max = value_max.max(value.len() as u64);
                total += (name.len() + value.len()) as u64;
            }
        }
        limit("header_name_too_large", name_max, self.max_header_name_bytes);
        limit("header_value_too_large", value_max, self.max_header_value_bytes);
        limit("headers_too_large", total, self.max_headers_bytes);
        let labels = &envelope.app().labels;
        limit("label_count_too_large", labels.len() as u64, self.max_label_count);
        limit("label_too_large", labels.iter().map(|l| l.len() as u64).max().unwrap_or(0), self.max_label_bytes);
        limit("labels_too_large", labels.iter().map(|l| l.len() as u64).sum(), self.max_labels_bytes);
        limit(
            "mission_metadata_too_large",
            json_size(envelope.mission_metadata_doc()),
            self.max_mission_metadata_bytes,
        );
        // Counted as the document's own writer writes it: the canonical length, with no
        // document built.
        let standard = crate::canonical::metadata_len(&MetadataDoc::new(envelope, time::OffsetDateTime::now_utc()));
        limit("standard_metadata_too_large", standard, self.max_standard_metadata_bytes);
        limit("normalized_record_too_large", payload + standard, self.max_normalized_record_bytes);
        let Some(&(reason, actual, max)) = over.first() else { return Ok(()) };
        let mut detail = format!("actual={actual} limit={max}");
        if over.len() > 1 {
            let all: Vec<&str> = over.iter().map(|(r, _, _)| *r).collect();
            detail.push_str(&format!("; all reasons: {}", all.join(", ")));
        }
        Err(Rejection::new(Step::Size, reason, detail))
    }
}

/// The canonical length of an attached document (its text's, when it kept one); 0 for none or
/// `null`.
fn json_size(doc: Option<&JsonDoc>) -> u64 {
    match doc {
        None => 0,
        Some(d) if d.canonical().map_or_else(|| d.value().is_null(), |text| text == "null") => 0,
        Some(d) => crate::canonical::doc_len(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::envelope::{AppMetadata, Headers};
    use sinks_contract::testing::envelope_with;

    fn on() -> SizePolicyConfig {
        SizePolicyConfig { enabled: true, ..SizePolicyConfig::default() }
    }

    fn reason(c: &SizePolicyConfig, e: &Envelope, position: usize) -> Option<String> {
        c.check(e, position).err().map(|r| r.reason.into_owned())
    }

    #[test]
    fn the_standard_metadata_size_is_the_rendered_documents_length() {
        // Headers with several values, escapes and non-ASCII, mission metadata with floats,
        // labels, a priority and security labels: counted as it serializes, the size must be
        // what rendering the document's Value gives.
        let headers = Headers::new()
            .with("Nats-Msg-Id", "m-\"1\"\n")
            .with("X-Multi", "one")
            .with("X-Multi", "twö")
            .with("Nats-Time-Stamp", "2026-12-01T10:00:00.123456789Z");
        let mission =
            serde_json::json!({"phase": "find", "speed": 12.5, "tiny": 1.5e-5, "big": 1e16, "n": -3, "ok": true});
        let labels = serde_json::json!({"classification": "SECRET", "releasability": ["A", "B"]});
        let envelope = envelope_with("STREAM", 42, "orders.eu", br#"{"k":"v\u0001"}"#.to_vec(), headers, 3)
            .with_app_metadata(AppMetadata {
                labels: vec!["released".into(), "ü".into()],
                priority: Some("flash".into()),
                ..AppMetadata::default()
            })
            .with_mission_metadata(Some(mission))
            .with_security_labels(Some(labels));
        let now = time::OffsetDateTime::now_utc();
        let doc = MetadataDoc::new(&envelope, now);
        let rendered = crate::canonical::to_vec(&serde_json::to_value(&doc).unwrap()).unwrap().len() as u64;
        assert!(rendered > 500, "{rendered}");
        assert_eq!(crate::canonical::len_of(&doc), rendered);
    }

    #[test]
    fn each_limit_at_and_just_over_its_bound() {
        let msg = |payload: usize, headers: Headers, labels: &[&str]| {
            envelope_with("S", 1, "a", vec![b'x'; payload], headers, 1).with_app_metadata(AppMetadata {
                labels: labels.iter().map(|s| (*s).to_owned()).collect(),
                ..AppMetadata::default()
            })
        };
        let c = SizePolicyConfig {
            max_payload_bytes: 10,
            max_header_count: 2,
            max_header_name_bytes: 4,
            max_header_value_bytes: 5,
            max_headers_bytes: 12,
            max_label_count: 2,
            max_label_bytes: 3,
            max_labels_bytes: 5,
            max_normalized_record_bytes: 100_000,
            ..on()
        };
        let h = |pairs: &[(&str, &str)]| pairs.iter().fold(Headers::new(), |h, (n, v)| h.with(n, *v));
        let table: Vec<(Envelope, usize, Option<&str>)> = vec![
            (msg(10, Headers::new(), &[]), 0, None),
            (msg(11, Headers::new(), &[]), 0, Some("payload_too_large")),
            (msg(1, h(&[("a", "1"), ("b", "2")]), &[]), 0, None),
            (msg(1, h(&[("a", "1"), ("b", "2"), ("c", "3")]), &[]), 0, Some("header_count_too_large")),
            (msg(1, h(&[("abcd", "1")]), &[]), 0, None),
            (msg(1, h(&[("abcde", "1")]), &[]), 0, Some("header_name_too_large")),
            (msg(1, h(&[("a", "12345")]), &[]), 0, None),
            (msg(1, h(&[("a", "123456")]), &[]), 0, Some("header_value_too_large")),
            (msg(1, h(&[("abcd", "1234"), ("b", "123")]), &[]), 0, None),
            (msg(1, h(&[("abcd", "1234"), ("b", "1234")]), &[]), 0, Some("headers_too_large")),
            (msg(1, Headers::new(), &["a", "b"]), 0, None),
            (msg(1, Headers::new(), &["a", "b", "c"]), 0, Some("label_count_too_large")),
            (msg(1, Headers::new(), &["abcd"]), 0, Some("label_too_large")),
            (msg(1, Headers::new(), &["abc", "de"]), 0, None),
            (msg(1, Headers::new(), &["abc", "def"]), 0, Some("labels_too_large")),
        ];
        for (i, (e, position, want)) in table.iter().enumerate() {
            assert_eq!(reason(&c, e, *position).as_deref(), *want, "row {i}");
        }
    }

    #[test]
    fn attached_mission_metadata_counts_as_its_canonical_text_either_way() {
        // As the mission step attaches it (its canonical text) and as a value: the same size,
        // the canonical length (a float spelled as Python does); `null` counts as nothing.
        let value = serde_json::json!({"mission": "\u{1}ä", "at": 1e-7, "n": [1, 2.5]});
        let len = crate::canonical::to_vec(&value).unwrap().len() as u64;
        let text = std::sync::Arc::new(crate::canonical::doc_of(&value).unwrap());
        let e = envelope_with("S", 1, "a", &b"{}"[..], Headers::new(), 1);
        for e in [e.clone().with_mission_metadata_doc(Some(text)), e.clone().with_mission_metadata(Some(value))] {
            assert_eq!(reason(&SizePolicyConfig { max_mission_metadata_bytes: len, ..on() }, &e, 0), None);
            let under = SizePolicyConfig { max_mission_metadata_bytes: len - 1, ..on() };
            assert_eq!(reason(&under, &e, 0).as_deref(), Some("mission_metadata_too_large"));
        }
        let null = std::sync::Arc::new(crate::canonical::doc_of(&serde_json::Value::Null).unwrap());
        for e in
            [e.clone().with_mission_metadata_doc(Some(null)), e.with_mission_metadata(Some(serde_json::Value::Null))]
        {
            assert_eq!(reason(&SizePolicyConfig { max_mission_metadata_bytes: 0, ..on() }, &e, 0), None);
        }
    }

    #[test]
    fn metadata_sizes_and_batch_position() {
        let e = envelope_with("S", 1, "a", &b"{}"[..], Headers::new(), 1)
            .with_mission_metadata(Some(serde_json::json!({"mission": "x".repeat(20)})));
        let mission = crate::canonical::to_vec(e.mission_metadata().unwrap()).unwrap().len() as u64;
        assert_eq!(reason(&SizePolicyConfig { max_mission_metadata_bytes: mission, ..on() }, &e, 0), None);
        assert_eq!(
            reason(&SizePolicyConfig { max_mission_metadata_bytes: mission - 1, ..on() }, &e, 0).as_deref(),
            Some("mission_metadata_too_large")
        );
        assert_eq!(
            reason(&SizePolicyConfig { max_standard_metadata_bytes: 100, ..on() }, &e, 0).as_deref(),
            Some("standard_metadata_too_large")
        );
        let c = SizePolicyConfig { max_batch_messages: 3, ..on() };
        assert_eq!(reason(&c, &e, 2), None);
        assert_eq!(reason(&c, &e, 3).as_deref(), Some("batch_message_count_too_large"));
    }

    #[test]
    fn config_checks_aggregates_and_batch_size() {
        let c = SizePolicyConfig { max_headers_bytes: 100, max_label_bytes: 0, max_batch_messages: 50, ..on() };
        let mut issues = Issues::default();
        c.validate_at("size_policy", 100, &mut issues);
        let issues = issues.finish().unwrap_err().issues;
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "size_policy.max_label_bytes",
                "size_policy.max_headers_bytes",
                "size_policy.max_headers_bytes",
                "size_policy.max_batch_messages"
            ]
        );
        assert!(issues[3].message.contains("delivery.batch_size is 100"), "{}", issues[3].message);
        let mut issues = Issues::default();
        SizePolicyConfig::default().validate_at("size_policy", 100, &mut issues);
        assert!(issues.finish().is_ok());
    }
}
