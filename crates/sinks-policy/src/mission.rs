//! `mission_metadata`: one validated JSON object of mission context per message (mission,
//! operation, platform, track, phase, …), carried next to the payload to every sink.
//!
//! Resolution, as in the reference: when the configured header is present, its value is
//! authoritative (a blank value means "no mission metadata", even when defaults exist);
//! when it is absent, the first subject rule that matches decides (`metadata: null` clears),
//! then the global `default`. Only header text is validated per message: defaults and rule
//! objects are validated once at start-up, where a problem is a configuration error naming
//! the field (`mission_metadata.default.some_key`).
//!
//! Validation treats every object as hostile: the root must be an object; JSON is parsed
//! strictly (duplicate keys, `NaN`/`Infinity`, raw control characters refused); keys match
//! `^[A-Za-z][A-Za-z0-9_.:-]{0,127}$` and must not look secret-like; nesting depth ≤ 8, ≤ 128
//! fields per object, ≤ 256 items per array, strings ≤ 4096 characters without control
//! characters, integers within ±(2^53 − 1), floats finite (all of this is
//! [`crate::strict_doc`], shared with the security labels); `allowed_profiles` fails closed;
//! the built-in and operator-defined profiles ([`super::profiles`]) are checked; and the
//! canonical JSON rendering must fit in `max_bytes` (the header text itself is measured
//! first, in UTF-8 bytes).
//!
//! Reason codes of rejected messages (the reference only raises messages, so these are
//! ours; each is stable):
//! - `mission_metadata_header_too_large`: header text longer than `max_bytes` bytes;
//! - `mission_metadata_invalid_json`: not strict JSON (syntax, `NaN`/`Infinity`, raw control
//!   characters), or an otherwise valid object holding a lone surrogate escape (`"\ud800"`),
//!   which UTF-8 cannot encode (the reference fails there with an unexpected exception);
//! - `mission_metadata_ambiguous_json`: a duplicate key in any object, or an integer literal
//!   of more than 4300 digits (the reference's "ambiguous" category);
//! - `mission_metadata_not_object`: the root is not an object;
//! - `mission_metadata_depth_exceeded`: nested deeper than 8 levels;
//! - `mission_metadata_too_many_fields`: an object with more than 128 fields;
//! - `mission_metadata_too_many_items`: an array with more than 256 items;
//! - `mission_metadata_invalid_key`: a key that is empty, padded, longer than 128
//!   characters, has control characters or does not match the key pattern;
//! - `mission_metadata_secret_key`: a key that looks secret-like (`password`, `token`, …);
//! - `mission_metadata_string_too_long`: a string value longer than 4096 characters;
//! - `mission_metadata_control_characters`: a string value with control characters;
//! - `mission_metadata_integer_out_of_range`: an integer beyond ±9007199254740991;
//! - `mission_metadata_non_finite_number`: a number that overflows to infinity (`1e400`);
//! - `mission_metadata_profile_not_allowed`: `profile` missing or not in `allowed_profiles`;
//! - `mission_metadata_profile_invalid`: a built-in or operator profile check failed;
//! - `mission_metadata_too_large`: canonical JSON longer than `max_bytes` bytes.
//!
//! Rejection details name the field path and the limit, never a value.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::profiles::{self, MetadataProfile};
use super::{Rejection, Step};
use crate::canonical;
use crate::object_rules::{ObjectRules, check_object, normalize_object, normalized_allow_list};
use crate::pycompat;
use crate::strict_doc::{self, Json};
use crate::violation::{Kind, Violation};
use sinks_contract::config::Issues;
use sinks_contract::envelope::Headers;
use sinks_contract::json::JsonDoc;
use sinks_toolkit::subject;

/// Every reason code a mission metadata rejection can carry (see the module comment).
pub const REASON_CODES: [&str; 16] = [
    "mission_metadata_header_too_large",
    "mission_metadata_invalid_json",
    "mission_metadata_ambiguous_json",
    "mission_metadata_not_object",
    "mission_metadata_depth_exceeded",
    "mission_metadata_too_many_fields",
    "mission_metadata_too_many_items",
    "mission_metadata_invalid_key",
    "mission_metadata_secret_key",
    "mission_metadata_string_too_long",
    "mission_metadata_control_characters",
    "mission_metadata_integer_out_of_range",
    "mission_metadata_non_finite_number",
    "mission_metadata_profile_not_allowed",
    "mission_metadata_profile_invalid",
    "mission_metadata_too_large",
];

/// Default header carrying a publisher's mission metadata (a JSON object).
pub const DEFAULT_MISSION_METADATA_HEADER: &str = "Nats-Sinks-Mission-Metadata";
/// Default `max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 8192;
/// Largest accepted `max_bytes`.
pub const MAX_BYTES_LIMIT: u64 = 262_144;
// The bounds of every object are the strict document reader's.
pub use crate::strict_doc::{
    MAX_ARRAY_ITEMS, MAX_DEPTH, MAX_INTEGER_ABS, MAX_KEY_LENGTH, MAX_OBJECT_FIELDS, MAX_STRING_LENGTH, SECRET_KEY_PARTS,
};

/// Longest rendering of an object in [`MissionMetadataConfig::describe`] lines.
const DESCRIBE_WIDTH: usize = 160;

/// `mission_metadata` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MissionMetadataConfig {
    /// Resolve mission metadata for every message (default false: the header is ignored).
    pub enabled: bool,
    /// Header (case-insensitive) whose value is the publisher's JSON object; surrounding
    /// whitespace is ignored. Default `Nats-Sinks-Mission-Metadata`.
    pub header: String,
    /// Object used when the header is absent and no rule matches (default none).
    pub default: Option<Value>,
    /// Subject rules used when the header is absent; the first matching rule wins.
    pub rules: Vec<MissionMetadataRule>,
    /// Largest header text and largest canonical JSON rendering, in bytes (1–262144,
    /// default 8192).
    pub max_bytes: u64,
    /// When not empty, every object must carry a `profile` string from this list
    /// (entries are trimmed and de-duplicated; a single string is accepted as a list of one).
    #[serde(deserialize_with = "string_or_list")]
    pub allowed_profiles: Vec<String>,
    /// Operator-defined profiles: an object whose `profile` names one is checked against it.
    pub profiles: Vec<MetadataProfile>,
}

impl Default for MissionMetadataConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            header: DEFAULT_MISSION_METADATA_HEADER.into(),
            default: None,
            rules: Vec::new(),
            max_bytes: DEFAULT_MAX_BYTES,
            allowed_profiles: Vec::new(),
            profiles: Vec::new(),
        }
    }
}

/// One `mission_metadata.rules[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MissionMetadataRule {
    /// NATS subject pattern (`*`, `>`) matched against the message subject.
    pub subject: String,
    /// Object for matching subjects, or `null` to give them no mission metadata (clearing the
    /// default). Required, even when `null`.
    #[serde(deserialize_with = "present_or_null")]
    pub metadata: Option<Value>,
}

impl MissionMetadataConfig {
    /// Config problems, each naming its field under `path` (called with "mission_metadata").
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        check_header(&format!("{path}.header"), &self.header, issues);
        issues.range(&format!("{path}.max_bytes"), self.max_bytes, 1, MAX_BYTES_LIMIT);
        check_allow_list(&format!("{path}.allowed_profiles"), &self.allowed_profiles, issues);
        profiles::validate_profiles(&format!("{path}.profiles"), &self.profiles, issues);
        // The reference checks defaults only once the section's own fields are valid; with a
        // bad `max_bytes` they are still checked, against the largest allowed size.
        let rules = self.object_rules(self.max_bytes.clamp(1, MAX_BYTES_LIMIT));
        if let Some(default) = &self.default {
            check_config_object(&format!("{path}.default"), default, &rules, issues);
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{i}]");
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                issues.push(&format!("{at}.subject"), e.to_string());
            }
            if let Some(metadata) = &rule.metadata {
                check_config_object(&format!("{at}.metadata"), metadata, &rules, issues);
            }
        }
    }

    /// The mission metadata of one message, `Ok(None)` when there is none. Only called when
    /// enabled.
    pub fn resolve(&self, subject: &str, headers: &Headers) -> Result<Option<Arc<JsonDoc>>, Rejection> {
        if let Some(text) = headers.get(pycompat::strip(&self.header)) {
            if pycompat::strip(text).is_empty() {
                return Ok(None);
            }
            return self
                .parse_header(text)
                .map(|doc| Some(Arc::new(doc)))
                .map_err(|v| Rejection::new(Step::MissionMetadata, v.kind.mission_code(), v.detail("header")));
        }
        // Defaults and rule objects were validated at start-up (`validate_at`); like the
        // reference, they are used as they are.
        let object = match self.rules.iter().find(|r| subject::matches(&r.subject, subject)) {
            Some(rule) => rule.metadata.as_ref(),
            None => self.default.as_ref(),
        };
        Ok(object.map(|value| Arc::new(JsonDoc::from_value(value.clone()))))
    }

    /// Human-readable lines for `nats-sink validate`: header, each rule in order with the
    /// subjects it covers and what it sets, default, limits, allowed profiles.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let state = if self.enabled { "enabled" } else { "disabled (the header is ignored)" };
        lines.push(format!("mission_metadata: {state}"));
        lines.push(format!(
            "header `{}`: present and non-empty = its JSON object is used; present and blank = no mission metadata; \
             absent = the first matching rule, else the default",
            pycompat::strip(&self.header)
        ));
        for (i, rule) in self.rules.iter().enumerate() {
            let sets = match &rule.metadata {
                Some(v) => format!("sets {}", render_short(v)),
                None => "no mission metadata (clears the default)".to_owned(),
            };
            lines.push(format!("rule {}: subjects `{}` -> {sets}", i + 1, rule.subject));
        }
        lines.push(match &self.default {
            Some(v) => format!("default: {}", render_short(v)),
            None => "default: none (messages no rule covers carry no mission metadata)".to_owned(),
        });
        lines.push(format!(
            "limits: {} bytes (header text and canonical JSON), depth {MAX_DEPTH}, {MAX_OBJECT_FIELDS} fields per \
             object, {MAX_ARRAY_ITEMS} items per array, {MAX_STRING_LENGTH} characters per string, integers within \
             ±{MAX_INTEGER_ABS}",
            self.max_bytes
        ));
        lines.push(if self.allowed_profiles.is_empty() {
            "allowed profiles: any (no `profile` required)".to_owned()
        } else {
            format!("allowed profiles: {}", normalized_allow_list(&self.allowed_profiles).join(", "))
        });
        lines.push(format!("built-in profiles checked when named: {}", profiles::BUILT_IN_PROFILES.join(", ")));
        lines.extend(self.profiles.iter().map(MetadataProfile::describe));
        lines
    }

    fn object_rules(&self, max_bytes: u64) -> ObjectRules<'_> {
        ObjectRules {
            max_bytes,
            allowed_profiles: &self.allowed_profiles,
            profiles: &self.profiles,
            unencodable: false,
        }
    }

    fn parse_header(&self, text: &str) -> Result<JsonDoc, Violation> {
        if text.len() as u64 > self.max_bytes {
            return Err(Violation::new(
                Kind::HeaderTooLarge,
                format!("header text is {} bytes, over max_bytes {}", text.len(), self.max_bytes),
            ));
        }
        let parsed = strict_doc::parse(text)?;
        normalize_object(
            &parsed.json,
            &ObjectRules { unencodable: parsed.unencodable, ..self.object_rules(self.max_bytes) },
        )
    }
}

/// Checks a configured object (a default or a rule's metadata), recording a problem at
/// `path` plus the offending field.
fn check_config_object(path: &str, value: &Value, rules: &ObjectRules<'_>, issues: &mut Issues) {
    if let Err(v) = check_object(&Json::from_value(value), rules) {
        issues.push(&format!("{path}{}", v.at), v.message);
    }
}

/// Checks a configured header name: not blank, no line breaks or NUL.
pub(crate) fn check_header(path: &str, header: &str, issues: &mut Issues) {
    let name = pycompat::strip(header);
    if name.is_empty() {
        issues.push(path, "must not be empty");
    } else if name.contains(['\n', '\r', '\0']) {
        issues.push(path, "must not contain control characters");
    }
}

/// Checks a configured allow-list: every entry non-blank and free of control characters.
pub(crate) fn check_allow_list(path: &str, entries: &[String], issues: &mut Issues) {
    for (i, entry) in entries.iter().enumerate() {
        let entry = pycompat::strip(entry);
        if entry.is_empty() {
            issues.push(&format!("{path}[{i}]"), "must not be empty");
        } else if strict_doc::has_control(entry) {
            issues.push(&format!("{path}[{i}]"), "must not contain control characters");
        }
    }
}

/// Compact canonical JSON of `value`, cut at [`DESCRIBE_WIDTH`] characters.
pub(crate) fn render_short(value: &Value) -> String {
    let text = canonical::to_vec(value).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    if text.chars().count() <= DESCRIBE_WIDTH {
        text
    } else {
        let cut: String = text.chars().take(DESCRIBE_WIDTH).collect();
        format!("{cut}…")
    }
}

// ---------------------------------------------------------------------------------------
// Config deserialization helpers.

/// A field that must be present but may be `null`.
pub(crate) fn present_or_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Option::<Value>::deserialize(deserializer)
}

/// A list of strings, also accepted as one string or `null` (the reference's allow-lists).
pub(crate) fn string_or_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct StringOrList;

    impl<'de> Visitor<'de> for StringOrList {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of strings")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![v.to_owned()])
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<String>()? {
                out.push(item);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_any(StringOrList)
}

#[cfg(test)]
mod tests {
    //! Expected outcomes were checked against the reference, nats-sinks 0.4.3
    //! (`nats_sinks.core.mission_metadata`, `metadata_profiles` and `config`), by running the
    //! same inputs through it; `dump_cases_for_reference` prints them for that check.
    //! Where the reference rejects the whole batch we reject the one message; where it fails
    //! with an unexpected exception (a lone surrogate in a value, an unparseable URI host) we
    //! reject with the code named in the case. `generated_headers_against_reference` compares
    //! with further headers generated at random and judged by the reference (40,000 when
    //! written, mission metadata and security labels, no difference).

    use serde_json::{Value, json};

    use super::*;

    /// A case: section config, subject, headers, expected outcome (`Ok(document)` /
    /// `Err(reason code)`).
    struct Case {
        config: Value,
        subject: &'static str,
        headers: Vec<(&'static str, String)>,
        expect: Result<Option<Value>, &'static str>,
    }

    fn config(value: &Value) -> MissionMetadataConfig {
        serde_json::from_value(value.clone()).unwrap()
    }

    fn enabled() -> Value {
        json!({"enabled": true})
    }

    fn header_case(config: Value, text: impl Into<String>, expect: Result<Option<Value>, &'static str>) -> Case {
        Case { config, subject: "s.x", headers: vec![(DEFAULT_MISSION_METADATA_HEADER, text.into())], expect }
    }

    fn ok(value: Value) -> Result<Option<Value>, &'static str> {
        Ok(Some(value))
    }

    fn nested(depth: usize, inner: &str) -> String {
        format!("{{\"a\":{}{inner}{}}}", "[".repeat(depth), "]".repeat(depth))
    }

    fn fields(n: usize) -> String {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{{}}}", members.join(","))
    }

    fn items(n: usize) -> String {
        format!("{{\"a\":[{}]}}", vec!["0"; n].join(","))
    }

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn artifact(extra: Value) -> String {
        let mut doc = json!({"profile": profiles::ARTIFACT_REFERENCE_PROFILE, "artifact_id": "A-1",
            "uri": "s3://bucket/key", "media_type": "image/png", "sha256": SHA});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() && k.starts_with('-') {
                doc.as_object_mut().unwrap().remove(&k[1..]);
            } else {
                doc[k] = v.clone();
            }
        }
        doc.to_string()
    }

    fn track(extra: Value) -> String {
        let mut doc = json!({"profile": profiles::GEO_TEMPORAL_TRACK_FIX_PROFILE, "track_id": "T-1",
            "source_system": "synthetic", "event_time": "2026-01-01T12:00:00Z"});
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        doc.to_string()
    }

    fn relation(extra: Value) -> String {
        let mut doc = json!({"profile": profiles::OBJECT_RELATIONSHIP_PROFILE, "object_id": "O-1",
            "object_type": "vehicle", "object_operation": "upsert"});
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        doc.to_string()
    }

    fn operator_config() -> Value {
        json!({"enabled": true, "profiles": [
            {"name": "ops.v1", "version": 1, "unknown_fields": "forbid", "max_fields": 6,
             "required_fields": [
                {"name": "phase", "type": "string", "enum": ["find", "fix"]},
                {"name": "count", "type": "integer"}],
             "optional_fields": [
                {"name": "tags", "type": "array", "max_items": 2},
                {"name": "note", "type": "string", "max_length": 5},
                {"name": "ctx", "type": "object", "max_fields": 1, "max_depth": 2}]},
            {"name": "loose", "version": " r1 ", "max_depth": 1,
             "optional_fields": [{"name": "level", "type": "number", "enum": [1, "a", null]}]}]})
    }

    fn header_cases() -> Vec<Case> {
        let e = enabled;
        let small = json!({"enabled": true, "max_bytes": 24});
        let allowed = json!({"enabled": true, "allowed_profiles": ["p1", " p2 ", "p1"]});
        let a = |n: usize| "a".repeat(n);
        vec![
            header_case(
                e(),
                r#"{"mission_id":"SYN-1","f2t2ea_phase":"track","n":1}"#,
                ok(json!({"mission_id": "SYN-1", "f2t2ea_phase": "track", "n": 1})),
            ),
            header_case(e(), " {} ", ok(json!({}))),
            // The publisher headers of docs/mission-metadata.md and f2t2ea-event-phase-tagging.md.
            header_case(
                e(),
                r#"{"profile":"mission-event-v1","profile_version":1,"mission_id":"SYN-MISSION-001","f2t2ea_phase":"track","source_system":"synthetic-sensor"}"#,
                ok(json!({"profile": "mission-event-v1", "profile_version": 1, "mission_id": "SYN-MISSION-001",
                    "f2t2ea_phase": "track", "source_system": "synthetic-sensor"})),
            ),
            header_case(
                e(),
                r#"{"schema":"nats_sinks.use_case.mission_metadata.v1","profile":"f2t2ea-event-phase-tagging","profile_version":1,"f2t2ea":{"phase":"track","phase_label":"Track","phase_source":"publisher","phase_asserted_at":"2026-01-01T12:00:00Z"}}"#,
                ok(
                    json!({"schema": "nats_sinks.use_case.mission_metadata.v1", "profile": "f2t2ea-event-phase-tagging",
                    "profile_version": 1, "f2t2ea": {"phase": "track", "phase_label": "Track",
                    "phase_source": "publisher", "phase_asserted_at": "2026-01-01T12:00:00Z"}}),
                ),
            ),
            header_case(e(), "   ", Ok(None)),
            header_case(e(), "", Ok(None)),
            header_case(e(), "[]", Err("mission_metadata_not_object")),
            header_case(e(), r#""x""#, Err("mission_metadata_not_object")),
            header_case(e(), "null", Err("mission_metadata_not_object")),
            // Strict JSON.
            header_case(e(), r#"{"a":1,"a":2}"#, Err("mission_metadata_ambiguous_json")),
            header_case(e(), r#"{"a":{"b":1,"b":2}}"#, Err("mission_metadata_ambiguous_json")),
            header_case(e(), r#"{"a":[{"b":1,"b":2}]}"#, Err("mission_metadata_ambiguous_json")),
            header_case(e(), r#"{"a":{"b":1,"b":2},"c":}"#, Err("mission_metadata_ambiguous_json")),
            header_case(e(), r#"{"a":1,"\u0061":2}"#, Err("mission_metadata_ambiguous_json")),
            header_case(e(), r#"{"a":1,"a":2"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":NaN}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":Infinity}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":-Infinity}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":[1,2,]}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), "{'a':1}", Err("mission_metadata_invalid_json")),
            header_case(e(), "\u{feff}{}", Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":1} x"#, Err("mission_metadata_invalid_json")),
            header_case(e(), "{\"a\":\"x\u{1}\"}", Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":01}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":1.}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":1e}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":"\x"}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":"\u12"}"#, Err("mission_metadata_invalid_json")),
            header_case(e(), r#"{"a":1e400}"#, Err("mission_metadata_non_finite_number")),
            header_case(
                e(),
                r#"{"a":-0,"b":1E5,"c":-0.0,"d":1e-400,"e":2.50}"#,
                ok(json!({"a": 0, "b": 100000.0, "c": -0.0, "d": 0.0, "e": 2.5})),
            ),
            header_case(e(), r#"{"a":"\ud83d\ude00 \u00e9 \/"}"#, ok(json!({"a": "😀 é /"}))),
            header_case(e(), r#"{"a\ud800":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"a":"\ud800"}"#, Err("mission_metadata_invalid_json")),
            header_case(
                e(),
                r#"{"a":"\udc00\ud800x","b":9007199254740992}"#,
                Err("mission_metadata_integer_out_of_range"),
            ),
            // Integers.
            header_case(
                e(),
                r#"{"a":9007199254740991,"b":-9007199254740991}"#,
                ok(json!({"a": 9_007_199_254_740_991_i64, "b": -9_007_199_254_740_991_i64})),
            ),
            header_case(e(), r#"{"a":9007199254740992}"#, Err("mission_metadata_integer_out_of_range")),
            header_case(e(), r#"{"a":-9007199254740992}"#, Err("mission_metadata_integer_out_of_range")),
            header_case(e(), r#"{"a":9007199254740992.0}"#, ok(json!({"a": 9_007_199_254_740_992.0}))),
            header_case(e(), format!("{{\"a\":{}}}", "1".repeat(4300)), Err("mission_metadata_integer_out_of_range")),
            header_case(e(), format!("{{\"a\":{}}}", "1".repeat(4301)), Err("mission_metadata_ambiguous_json")),
            // Strings.
            header_case(e(), format!("{{\"a\":\"{}\"}}", a(4096)), ok(json!({"a": a(4096)}))),
            header_case(e(), format!("{{\"a\":\"{}\"}}", a(4097)), Err("mission_metadata_string_too_long")),
            header_case(
                json!({"enabled": true, "max_bytes": 262_144}),
                format!("{{\"a\":\"{}\"}}", "é".repeat(4096)),
                ok(json!({"a": "é".repeat(4096)})),
            ),
            header_case(e(), r#"{"a":"x\u0001"}"#, Err("mission_metadata_control_characters")),
            header_case(e(), "{\"a\":\"\u{7f}\"}", Err("mission_metadata_control_characters")),
            header_case(e(), r#"{"a":["ok","\u001f"]}"#, Err("mission_metadata_control_characters")),
            // Keys.
            header_case(e(), r#"{" a":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"a\u001f":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"a\u0001":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"1a":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"a b":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"aé":1}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"a":{"_x":1}}"#, Err("mission_metadata_invalid_key")),
            header_case(e(), format!("{{\"{}\":1}}", a(128)), ok(json!({a(128): 1}))),
            header_case(e(), format!("{{\"{}\":1}}", a(129)), Err("mission_metadata_invalid_key")),
            header_case(e(), r#"{"A.b:c-d_e9":1}"#, ok(json!({"A.b:c-d_e9": 1}))),
            header_case(e(), r#"{"myToken":1}"#, Err("mission_metadata_secret_key")),
            header_case(e(), r#"{"PASSWORD":1}"#, Err("mission_metadata_secret_key")),
            header_case(e(), r#"{"credentials":1}"#, Err("mission_metadata_secret_key")),
            header_case(e(), r#"{"a":{"db.pwd":1}}"#, Err("mission_metadata_secret_key")),
            header_case(e(), r#"{"a":[{"api_key":1}]}"#, Err("mission_metadata_secret_key")),
            header_case(e(), r#"{"keymaterial":1,"tokn":2}"#, ok(json!({"keymaterial": 1, "tokn": 2}))),
            // Depth (the root is level 0), fields, items.
            header_case(e(), nested(7, "1"), ok(serde_json::from_str(&nested(7, "1")).unwrap())),
            header_case(e(), nested(8, "1"), Err("mission_metadata_depth_exceeded")),
            header_case(e(), nested(8, ""), ok(serde_json::from_str(&nested(8, "")).unwrap())),
            header_case(e(), nested(9, ""), Err("mission_metadata_depth_exceeded")),
            header_case(e(), nested(600, ""), Err("mission_metadata_depth_exceeded")),
            header_case(e(), fields(128), ok(serde_json::from_str(&fields(128)).unwrap())),
            header_case(e(), fields(129), Err("mission_metadata_too_many_fields")),
            header_case(e(), format!("{{\"a\":{}}}", fields(129)), Err("mission_metadata_too_many_fields")),
            header_case(e(), items(256), ok(serde_json::from_str(&items(256)).unwrap())),
            header_case(e(), items(257), Err("mission_metadata_too_many_items")),
            // Sizes: the header text first, then the canonical rendering (max_bytes 24).
            header_case(small.clone(), format!("{{\"a\":\"{}\"}}", a(16)), ok(json!({"a": a(16)}))),
            header_case(small.clone(), format!("{{\"a\":\"{}\"}}", a(17)), Err("mission_metadata_header_too_large")),
            header_case(small.clone(), format!("{{ \"a\" : \"{}\"}}", a(16)), Err("mission_metadata_header_too_large")),
            header_case(small.clone(), r#"{"a":"\u00e9\u00e9"}"#, ok(json!({"a": "éé"}))),
            header_case(small.clone(), r#"{"a":1e5,"b":1e5}"#, Err("mission_metadata_too_large")),
            header_case(small, "{\"a\":\"ééééééééé\"}", Err("mission_metadata_header_too_large")),
            // allowed_profiles (entries trimmed).
            header_case(allowed.clone(), r#"{"profile":"p1"}"#, ok(json!({"profile": "p1"}))),
            header_case(allowed.clone(), r#"{"profile":"p2"}"#, ok(json!({"profile": "p2"}))),
            header_case(allowed.clone(), r#"{"profile":" p1"}"#, Err("mission_metadata_profile_not_allowed")),
            header_case(allowed.clone(), "{}", Err("mission_metadata_profile_not_allowed")),
            header_case(allowed.clone(), r#"{"profile":1}"#, Err("mission_metadata_profile_not_allowed")),
            header_case(allowed, r#"{"profile":"p3"}"#, Err("mission_metadata_profile_not_allowed")),
        ]
    }

    fn profile_cases() -> Vec<Case> {
        let e = enabled;
        let bad = || Err("mission_metadata_profile_invalid");
        let good = |text: String| {
            let value: Value = serde_json::from_str(&text).unwrap();
            header_case(e(), text, ok(value))
        };
        let dq = profiles::DATA_QUALITY_PROFILE;
        vec![
            good(artifact(json!({}))),
            good(artifact(json!({"uri": "file:/tmp/x", "size_bytes": 10_995_116_277_760_i64, "labels": ["a"]}))),
            good(artifact(json!({"uri": "urn:x:y", "created_at": "2026-01-01T00:00:00Z", "encryption": {}}))),
            good(artifact(json!({"uri": "HTTPS://host/p", "sha256": SHA.to_uppercase(), "source": null}))),
            good(artifact(json!({"uri": " https://h/p"}))),
            good(artifact(json!({"uri": "https://[::1]:8443/x"}))),
            good(artifact(json!({"uri": "https://[fe80::1%25eth0]/x"}))),
            good(artifact(json!({"uri": "https://[v1.x]/x"}))),
            good(artifact(json!({"uri": "artifact://store/a#frag"}))),
            header_case(e(), artifact(json!({"uri": "ftp://host/x"})), bad()),
            header_case(e(), artifact(json!({"uri": "s3:bucket/key"})), bad()),
            header_case(e(), artifact(json!({"uri": "https:///x"})), bad()),
            header_case(e(), artifact(json!({"uri": "relative/path"})), bad()),
            header_case(e(), artifact(json!({"uri": "https://[1.2.3.4]/x"})), bad()),
            header_case(e(), artifact(json!({"uri": "https://[::1/x"})), bad()),
            header_case(e(), artifact(json!({"uri": "https://[::g]/x"})), bad()),
            header_case(e(), artifact(json!({"uri": "https://ex\u{ff0f}ample/x"})), bad()),
            header_case(e(), artifact(json!({"uri": "   "})), bad()),
            header_case(e(), artifact(json!({"sha256": &SHA[1..]})), bad()),
            header_case(e(), artifact(json!({"sha256": format!("{}g", &SHA[1..])})), bad()),
            header_case(e(), artifact(json!({"size_bytes": -1})), bad()),
            header_case(e(), artifact(json!({"size_bytes": 10_995_116_277_761_i64})), bad()),
            header_case(e(), artifact(json!({"size_bytes": 1.0})), bad()),
            header_case(e(), artifact(json!({"size_bytes": true})), bad()),
            header_case(e(), artifact(json!({"created_at": "2026-13-01"})), bad()),
            header_case(e(), artifact(json!({"created_at": 5})), bad()),
            header_case(e(), artifact(json!({"labels": ["a", " "]})), bad()),
            header_case(e(), artifact(json!({"labels": "a"})), bad()),
            header_case(e(), artifact(json!({"encryption": []})), bad()),
            header_case(e(), artifact(json!({"-media_type": null})), bad()),
            header_case(e(), artifact(json!({"artifact_id": null})), bad()),
            header_case(e(), artifact(json!({"media_type": "m".repeat(129)})), bad()),
            header_case(e(), artifact(json!({"classification": ""})), bad()),
            good(json!({"profile": dq, "accuracy": 0.5, "validity": 1, "quality_source": "q"}).to_string()),
            header_case(e(), json!({"profile": dq, "accuracy": 1.5}).to_string(), bad()),
            header_case(e(), json!({"profile": dq, "timeliness": -0.1}).to_string(), bad()),
            header_case(e(), json!({"profile": dq, "confidence": true}).to_string(), bad()),
            header_case(e(), json!({"profile": dq, "accuracy": "0.5"}).to_string(), bad()),
            header_case(e(), json!({"profile": dq, "assessed_at": "yesterday"}).to_string(), bad()),
            good(track(json!({"heading": 360, "speed": 0, "altitude_or_elevation": -5, "synthetic": true,
                "position_kind": "grid", "position_reference": {"latitude": -90, "longitude": 180.0},
                "data_quality": {"accuracy": 1}, "receive_time": "2026-01-01T12:00:01.5+01:00"}))),
            good(track(json!({"position_reference": "grid-ref", "heading": null}))),
            header_case(e(), track(json!({"heading": 360.5})), bad()),
            header_case(e(), track(json!({"speed": -1})), bad()),
            header_case(e(), track(json!({"position_reference": {"latitude": 91}})), bad()),
            header_case(e(), track(json!({"position_reference": {"longitude": "east"}})), bad()),
            header_case(e(), track(json!({"synthetic": "yes"})), bad()),
            header_case(e(), track(json!({"position_kind": "gps"})), bad()),
            header_case(e(), track(json!({"data_quality": {"accuracy": 2}})), bad()),
            header_case(e(), track(json!({"data_quality": 1})), bad()),
            header_case(e(), track(json!({"event_time": "2026-01-01T12:00:00+24:00"})), bad()),
            header_case(e(), track(json!({"event_time": format!("2026-01-01T12:00:00.{}", "1".repeat(45))})), bad()),
            header_case(e(), track(json!({"track_id": " "})), bad()),
            good(relation(json!({"tombstone": false, "event_time": "2026-01-01"}))),
            good(relation(json!({"object_operation": "relationship_upsert", "relationship_id": "R",
                "relationship_type": "t", "source_object_id": "a", "target_object_id": "b"}))),
            header_case(e(), relation(json!({"object_operation": "relationship_upsert"})), bad()),
            header_case(e(), relation(json!({"object_operation": "create"})), bad()),
            header_case(e(), relation(json!({"object_operation": " upsert"})), bad()),
            header_case(e(), relation(json!({"tombstone": "y"})), bad()),
            header_case(e(), relation(json!({"owner": 3})), bad()),
            // Operator profiles.
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"find","count":3}"#,
                ok(json!({"profile": "ops.v1", "profile_version": 1, "phase": "find", "count": 3})),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1.0,"phase":"fix","count":3}"#,
                ok(json!({"profile": "ops.v1", "profile_version": 1.0, "phase": "fix", "count": 3})),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":true,"phase":"fix","count":0}"#,
                ok(json!({"profile": "ops.v1", "profile_version": true, "phase": "fix", "count": 0})),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":"1","phase":"fix","count":3}"#,
                bad(),
            ),
            header_case(operator_config(), r#"{"profile":"ops.v1","phase":"fix","count":3}"#, bad()),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"track","count":3}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":3.0}"#,
                bad(),
            ),
            header_case(operator_config(), r#"{"profile":"ops.v1","profile_version":1,"phase":"fix"}"#, bad()),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"tags":[1,2,3]}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"note":"abcdef"}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"ctx":{"a":1,"b":2}}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"ctx":{"a":{"b":{}}}}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"other":1}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"tags":[],"note":"a"}"#,
                ok(json!({"profile": "ops.v1", "profile_version": 1, "phase": "fix", "count": 1, "tags": [],
                    "note": "a"})),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"ops.v1","profile_version":1,"phase":"fix","count":1,"tags":[],"note":"a","ctx":{}}"#,
                bad(),
            ),
            header_case(
                operator_config(),
                r#"{"profile":"loose","profile_version":"r1","level":1.0,"x":2}"#,
                ok(json!({"profile": "loose", "profile_version": "r1", "level": 1.0, "x": 2})),
            ),
            header_case(operator_config(), r#"{"profile":"loose","profile_version":"r1","level":null}"#, bad()),
            header_case(operator_config(), r#"{"profile":"loose","profile_version":"r1","level":2}"#, bad()),
            header_case(operator_config(), r#"{"profile":"loose","profile_version":"r1","x":[[]]}"#, bad()),
            header_case(
                operator_config(),
                r#"{"profile":"other","anything":[[1]]}"#,
                ok(json!({"profile": "other", "anything": [[1]]})),
            ),
        ]
    }

    fn resolution_cases() -> Vec<Case> {
        let config = json!({"enabled": true, "header": " X-Mission ",
            "default": {"origin": "default"},
            "rules": [{"subject": "a.>", "metadata": {"origin": "rule"}}, {"subject": "b.*", "metadata": null},
                      {"subject": "a.x", "metadata": {"origin": "shadowed"}}]});
        let case = |subject, headers: Vec<(&'static str, String)>, expect| Case {
            config: config.clone(),
            subject,
            headers,
            expect,
        };
        let header = |text: &str| vec![("x-mission", text.to_owned())];
        vec![
            case("a.x", header(r#"{"origin":"header"}"#), ok(json!({"origin": "header"}))),
            case("a.x", header(" "), Ok(None)),
            case("c", header(""), Ok(None)),
            case("a.x", vec![], ok(json!({"origin": "rule"}))),
            case(
                "a.x",
                vec![("Nats-Sinks-Mission-Metadata", r#"{"origin":"h"}"#.into())],
                ok(json!({"origin": "rule"})),
            ),
            case("b.y", vec![], Ok(None)),
            case("b.y.z", vec![], ok(json!({"origin": "default"}))),
            case("c", vec![], ok(json!({"origin": "default"}))),
            case("c", header("{bad"), Err("mission_metadata_invalid_json")),
        ]
    }

    fn run(case: &Case) -> Result<Option<Value>, String> {
        let cfg = config(&case.config);
        let mut issues = Issues::default();
        cfg.validate_at("mission_metadata", &mut issues);
        assert!(issues.finish().is_ok(), "case config must be valid: {}", case.config);
        let mut headers = Headers::new();
        for (name, value) in &case.headers {
            headers.append(name, value.clone());
        }
        let doc = cfg.resolve(case.subject, &headers).map_err(|r| {
            assert_eq!(r.step, Step::MissionMetadata);
            r.reason.into_owned()
        })?;
        // A document read from the header keeps its canonical text: the bytes of its value.
        Ok(doc.map(|d| canonical::checked_value(&d)))
    }

    fn check(cases: &[Case]) {
        for case in cases {
            let got = run(case);
            let want = case.expect.clone().map_err(str::to_owned);
            let shown: Vec<String> =
                case.headers.iter().map(|(_, v)| v.chars().take(120).collect::<String>()).collect();
            assert_eq!(got, want, "subject {} headers {shown:?}", case.subject);
            if let Ok(Some(v)) = &got {
                // Numbers keep their kind (1 stays an integer, 1.0 a float).
                let want = case.expect.as_ref().ok().cloned().flatten().unwrap_or_default();
                assert_eq!(canonical::to_vec(v).unwrap(), canonical::to_vec(&want).unwrap());
            }
        }
    }

    #[test]
    fn header_table() {
        check(&header_cases());
    }

    #[test]
    fn profile_table() {
        check(&profile_cases());
    }

    #[test]
    fn resolution_order() {
        check(&resolution_cases());
    }

    #[test]
    fn every_reason_code_is_listed_and_exercised() {
        let mission_kinds = &Kind::ALL[..16];
        for kind in mission_kinds {
            assert!(REASON_CODES.contains(&kind.mission_code()), "{kind:?}");
        }
        let exercised: std::collections::BTreeSet<&str> = header_cases()
            .iter()
            .chain(&profile_cases())
            .chain(&resolution_cases())
            .filter_map(|c| c.expect.as_ref().err().copied())
            .collect();
        let listed: std::collections::BTreeSet<&str> = REASON_CODES.into_iter().collect();
        assert_eq!(exercised, listed);
    }

    #[test]
    fn rejection_details_name_fields_not_values() {
        let cfg = config(&json!({"enabled": true}));
        let headers = Headers::new().with(DEFAULT_MISSION_METADATA_HEADER, r#"{"a":{"b":"SECRET-VALUE\u0001"}}"#);
        let r = cfg.resolve("s", &headers).unwrap_err();
        assert_eq!(r.reason, "mission_metadata_control_characters");
        assert_eq!(r.detail, "header.a.b: string contains control characters");
        let headers = Headers::new().with(DEFAULT_MISSION_METADATA_HEADER, r#"{"a":{"Bad Key!":1}}"#);
        let r = cfg.resolve("s", &headers).unwrap_err();
        assert!(r.detail.starts_with("header.a: contains a key that"), "{}", r.detail);
        assert!(!r.detail.contains("Bad Key"));
        let headers = Headers::new().with(DEFAULT_MISSION_METADATA_HEADER, r#"{"db_password":"hunter2"}"#);
        let r = cfg.resolve("s", &headers).unwrap_err();
        assert_eq!(r.detail, "header.db_password: key looks secret-like and is not allowed");
    }

    /// `(config, expected issue paths)`; `["parse"]` when the section does not deserialize.
    fn config_cases() -> Vec<(Value, Vec<&'static str>)> {
        let artifact_default: Value = serde_json::from_str(&artifact(json!({"uri": "ftp://x/y"}))).unwrap();
        vec![
            (json!({}), vec![]),
            (json!({"enabled": true, "header": "X-M", "max_bytes": 1}), vec![]),
            (json!({"max_bytes": 262_144}), vec![]),
            (json!({"max_bytes": 0}), vec!["mission_metadata.max_bytes"]),
            (json!({"max_bytes": 262_145}), vec!["mission_metadata.max_bytes"]),
            (json!({"max_bytes": -1}), vec!["parse"]),
            (json!({"header": ""}), vec!["mission_metadata.header"]),
            (json!({"header": "  "}), vec!["mission_metadata.header"]),
            (json!({"header": "X\nY"}), vec!["mission_metadata.header"]),
            (json!({"header": "X\tY"}), vec![]),
            (json!({"colour": 1}), vec!["parse"]),
            (json!({"allowed_profiles": "p1"}), vec![]),
            (json!({"allowed_profiles": null}), vec![]),
            (json!({"allowed_profiles": ["a", " "]}), vec!["mission_metadata.allowed_profiles[1]"]),
            (json!({"allowed_profiles": ["a\u{7f}"]}), vec!["mission_metadata.allowed_profiles[0]"]),
            (json!({"allowed_profiles": [1]}), vec!["parse"]),
            (json!({"default": {"a": 1}}), vec![]),
            (json!({"default": null}), vec![]),
            (json!({"default": []}), vec!["mission_metadata.default"]),
            (json!({"default": "x"}), vec!["mission_metadata.default"]),
            (json!({"default": {"password": 1}}), vec!["mission_metadata.default.password"]),
            (json!({"default": {"a": {"b b": 1}}}), vec!["mission_metadata.default.a"]),
            (json!({"default": {"a": ["x", "y".repeat(4097)]}}), vec!["mission_metadata.default.a[1]"]),
            (json!({"default": {"a": 9_007_199_254_740_992_i64}}), vec!["mission_metadata.default.a"]),
            (json!({"default": {"a": "x".repeat(40)}, "max_bytes": 32}), vec!["mission_metadata.default"]),
            (json!({"default": {"a": 1}, "allowed_profiles": ["p"]}), vec!["mission_metadata.default.profile"]),
            (json!({"default": {"profile": "p"}, "allowed_profiles": ["p"]}), vec![]),
            (json!({"default": artifact_default}), vec!["mission_metadata.default.uri"]),
            (json!({"rules": [{"subject": "a.>", "metadata": null}]}), vec![]),
            (json!({"rules": [{"subject": "a.>"}]}), vec!["parse"]),
            (json!({"rules": [{"subject": "a.>", "metadata": null, "x": 1}]}), vec!["parse"]),
            (json!({"rules": [{"subject": "a..b", "metadata": null}]}), vec!["mission_metadata.rules[0].subject"]),
            (json!({"rules": [{"subject": " a", "metadata": null}]}), vec!["mission_metadata.rules[0].subject"]),
            (
                json!({"rules": [{"subject": "a", "metadata": {}}, {"subject": "b", "metadata": {"x": {"token": 1}}}]}),
                vec!["mission_metadata.rules[1].metadata.x.token"],
            ),
            (json!({"rules": [{"subject": "a", "metadata": [1]}]}), vec!["mission_metadata.rules[0].metadata"]),
            (
                json!({"allowed_profiles": ["p"], "rules": [{"subject": "a", "metadata": {"profile": "q"}}]}),
                vec!["mission_metadata.rules[0].metadata.profile"],
            ),
            (operator_config(), vec![]),
            (
                json!({"profiles": [{"name": "ops", "required_fields": [{"name": "n", "type": "integer"}]}],
                       "default": {"profile": "ops", "n": "1"}}),
                vec!["mission_metadata.default.n"],
            ),
            (json!({"profiles": [{"name": "1bad"}]}), vec!["mission_metadata.profiles[0].name"]),
            (json!({"profiles": [{"name": " "}]}), vec!["mission_metadata.profiles[0].name"]),
            (json!({"profiles": [{"name": "x.token"}]}), vec![]),
            (json!({"profiles": [{"name": "a"}, {"name": " a "}]}), vec!["mission_metadata.profiles[1].name"]),
            (json!({"profiles": [{"name": "a", "version": -1}]}), vec!["mission_metadata.profiles[0].version"]),
            (json!({"profiles": [{"name": "a", "version": " "}]}), vec!["mission_metadata.profiles[0].version"]),
            (
                json!({"profiles": [{"name": "a", "version": "v".repeat(65)}]}),
                vec!["mission_metadata.profiles[0].version"],
            ),
            (json!({"profiles": [{"name": "a", "version": 1.5}]}), vec!["parse"]),
            (json!({"profiles": [{"name": "a", "max_depth": 9}]}), vec!["mission_metadata.profiles[0].max_depth"]),
            (json!({"profiles": [{"name": "a", "max_fields": 129}]}), vec!["mission_metadata.profiles[0].max_fields"]),
            (json!({"profiles": [{"name": "a", "unknown_fields": "deny"}]}), vec!["parse"]),
            (json!({"profiles": [{"name": "a", "extra": 1}]}), vec!["parse"]),
            (
                json!({"profiles": [{"name": "a", "required_fields": [{"name": "profile", "type": "string"}]}]}),
                vec!["mission_metadata.profiles[0].required_fields[0].name"],
            ),
            (
                json!({"profiles": [{"name": "a", "required_fields": [{"name": "api_key", "type": "string"}]}]}),
                vec!["mission_metadata.profiles[0].required_fields[0].name"],
            ),
            (
                json!({"profiles": [{"name": "a", "required_fields": [{"name": "n", "type": "integer", "max_length": 3}]}]}),
                vec!["mission_metadata.profiles[0].required_fields[0].max_length"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "string", "max_length": 4097}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].max_length"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "object", "max_items": 1}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].max_items"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "array", "max_fields": 1}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].max_fields"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "array", "max_depth": 9}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].max_depth"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "string", "enum": [[1]]}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].enum[0]"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "string", "enum": null}]}]}),
                vec![],
            ),
            (json!({"profiles": [{"name": "a", "optional_fields": [{"name": "n", "type": "text"}]}]}), vec!["parse"]),
            (
                json!({"profiles": [{"name": "a", "required_fields": [{"name": "n", "type": "string"}],
                                     "optional_fields": [{"name": "n", "type": "string"}]}]}),
                vec!["mission_metadata.profiles[0].optional_fields[0].name"],
            ),
            (
                json!({"profiles": (0..65).map(|i| json!({"name": format!("p{i}")})).collect::<Vec<_>>()}),
                vec!["mission_metadata.profiles"],
            ),
            (
                json!({"profiles": [{"name": "a", "optional_fields":
                    (0..129).map(|i| json!({"name": format!("f{i}"), "type": "string"})).collect::<Vec<_>>()}]}),
                vec!["mission_metadata.profiles[0]"],
            ),
        ]
    }

    fn issue_paths(value: &Value) -> Vec<String> {
        let cfg: MissionMetadataConfig = match serde_json::from_value(value.clone()) {
            Ok(c) => c,
            Err(_) => return vec!["parse".to_owned()],
        };
        let mut issues = Issues::default();
        cfg.validate_at("mission_metadata", &mut issues);
        match issues.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| i.path).collect(),
        }
    }

    #[test]
    fn config_table() {
        for (value, want) in config_cases() {
            let shown: String = value.to_string().chars().take(200).collect();
            assert_eq!(issue_paths(&value), want, "{shown}");
        }
    }

    #[test]
    fn documented_configs_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("mission-") {
                continue;
            }
            let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let cfg = config(&file["mission_metadata"]);
            let mut issues = Issues::default();
            cfg.validate_at("mission_metadata", &mut issues);
            assert!(issues.finish().is_ok(), "{name}");
            seen += 1;
        }
        assert_eq!(seen, 2);
    }

    #[test]
    fn config_messages_are_lowercase_without_values() {
        let value = json!({"default": {"a": "SECRET-VALUE\u{1}", "db_secret": "SECRET-VALUE"}, "max_bytes": 0});
        let cfg: MissionMetadataConfig = serde_json::from_value(value).unwrap();
        let mut issues = Issues::default();
        cfg.validate_at("mission_metadata", &mut issues);
        let err = issues.finish().unwrap_err();
        for issue in &err.issues {
            assert!(!issue.message.contains("SECRET-VALUE"), "{issue}");
            assert!(issue.message.starts_with(|c: char| c.is_lowercase()), "{issue}");
            assert!(!issue.message.ends_with('.'), "{issue}");
        }
    }

    #[test]
    fn defaults_match_the_reference() {
        let c = MissionMetadataConfig::default();
        assert!(!c.enabled);
        assert_eq!((c.header.as_str(), c.max_bytes, c.default.clone()), (DEFAULT_MISSION_METADATA_HEADER, 8192, None));
        let parsed: MissionMetadataConfig = serde_json::from_value(json!({})).unwrap();
        assert_eq!(parsed, c);
        let back = config(&operator_config());
        assert_eq!(config(&serde_json::to_value(&back).unwrap()), back, "serializes back to the same config");
    }

    #[test]
    fn describe_lists_rules_in_order() {
        let cfg = config(&json!({"enabled": true, "allowed_profiles": ["p"], "default": {"profile": "p"},
            "rules": [{"subject": "a.>", "metadata": {"profile": "p", "k": 1}}, {"subject": "b", "metadata": null}],
            "profiles": operator_config()["profiles"].clone()}));
        let lines = cfg.describe();
        let text = lines.join("\n");
        assert!(lines[0].contains("enabled"));
        assert!(text.contains("rule 1: subjects `a.>` -> sets {\"k\":1,\"profile\":\"p\"}"), "{text}");
        assert!(text.contains("rule 2: subjects `b` -> no mission metadata"), "{text}");
        assert!(text.contains("default: {\"profile\":\"p\"}"), "{text}");
        assert!(text.contains("allowed profiles: p"), "{text}");
        assert!(text.contains("operator profile `ops.v1` (profile_version 1): required phase (string)"), "{text}");
        assert!(text.contains("8192 bytes"), "{text}");
    }

    /// Random headers generated and judged by the reference (`tests/reference/gen_headers.py`,
    /// fixed seed) give the same result here: the same canonical document or reason code.
    #[test]
    fn generated_headers_agree_with_the_reference() {
        let text = super::super::reference_script(
            "generated_headers_agree_with_the_reference",
            "gen_headers.py",
            &["11", "1500"],
            None,
        );
        let mut wrong = Vec::new();
        assert!(text.lines().count() > 2000, "the generator produced too few cases");
        for line in text.lines() {
            let case: Value = serde_json::from_str(line).unwrap();
            let header = case["text"].as_str().unwrap();
            let got = if case["kind"] == "mission" {
                let cfg = config(&json!({"enabled": true, "max_bytes": case["max_bytes"],
                    "allowed_profiles": case["allowed"]}));
                cfg.resolve("s", &Headers::new().with(DEFAULT_MISSION_METADATA_HEADER, header))
            } else {
                let mut section = case["config"].clone();
                section["enabled"] = json!(true);
                section["max_bytes"] = case["max_bytes"].clone();
                let cfg: super::super::labels::SecurityLabelsConfig = serde_json::from_value(section).unwrap();
                let app = &case["app"];
                let app = sinks_contract::envelope::AppMetadata {
                    priority: app["priority"].as_str().map(str::to_owned),
                    classification: app["classification"].as_str().map(str::to_owned),
                    labels: app["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_owned()).collect(),
                };
                let headers = Headers::new().with(super::super::labels::DEFAULT_SECURITY_LABELS_HEADER, header);
                cfg.resolve("s", &headers, &app)
            };
            let got = match got {
                Ok(v) => json!({"ok": v.map(|d| d.canonical().expect("a header document keeps its text").to_owned())}),
                Err(r) => json!({"code": r.reason}),
            };
            let want = match case.get("code") {
                Some(code) => json!({"code": code}),
                None => json!({"ok": case["ok"]}),
            };
            if got != want {
                wrong.push(format!("{header} -> got {got}, want {want}"));
            }
        }
        assert!(wrong.is_empty(), "{} differ:\n{}", wrong.len(), wrong[..wrong.len().min(15)].join("\n"));
    }

    /// Every case of the tables above, run through the reference
    /// (`tests/reference/check_metadata_tables.py`), gives the same result there.
    #[test]
    fn tables_agree_with_the_reference() {
        let mut lines = Vec::new();
        for case in header_cases().into_iter().chain(profile_cases()).chain(resolution_cases()) {
            let expect = match &case.expect {
                Ok(v) => json!({"ok": v.as_ref().map(|v| String::from_utf8(canonical::to_vec(v).unwrap()).unwrap())}),
                Err(code) => json!({"code": code}),
            };
            let line = json!({"section": "mission", "config": case.config, "subject": case.subject,
                "headers": case.headers.iter().map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                    .collect::<serde_json::Map<_, _>>(), "expect": expect});
            lines.push(line.to_string());
        }
        for (config, paths) in config_cases() {
            lines.push(json!({"section": "mission_config", "config": config, "paths": paths}).to_string());
        }
        let report = super::super::reference_script(
            "tables_agree_with_the_reference",
            "check_metadata_tables.py",
            &[],
            Some(lines.join("\n")),
        );
        assert!(report.trim_end().ends_with(&format!("{} cases, 0 mismatches", lines.len())), "{report}");
    }
}
