//! `security_labels`: the data-centric security label profile of each message
//! (`nats-sinks.security-label.v1`), a small allow-listed JSON object extending priority,
//! classification and labels with releasability, handling caveats, owner, originator,
//! policy id, retention category and bounded `extensions`.
//!
//! Resolution, as in the reference: a present header is authoritative (blank = no profile);
//! else the first matching subject rule (`profile: null` = no profile); else the `default`.
//! A profile from the header takes `priority`, `classification` and `labels` it omits from
//! the message's resolved `message_metadata`. Profiles written in the config are completed
//! once, at start-up, without message metadata (the reference normalizes them while loading
//! the config, which fills omitted fields with `null`/`[]`), so they never take values from
//! the message; this is what nats-sinks 0.4.3 does, although its documentation says
//! otherwise.
//!
//! The object first passes every generic mission-metadata check ([`super::mission`], and
//! through it [`crate::strict_doc`]: strict JSON, keys, depth, sizes, secret-looking keys),
//! then: only the eleven profile fields at the root; `profile` must be
//! `nats-sinks.security-label.v1` (filled in when missing);
//! scalar fields are strings (trimmed; blank = `null`) of at most 512 characters without
//! control characters; list fields are a `;`-separated string or an array of strings
//! (trimmed, blanks dropped, de-duplicated, no `;` inside an item), at most 128 values of at
//! most 512 characters; non-empty allow-lists fail closed; `extensions` must be an object;
//! the canonical JSON of the result must fit in `max_bytes`.
//!
//! Reason codes (the reference only raises messages, so these are ours; each is stable):
//! - `security_labels_header_too_large`: header text longer than `max_bytes` bytes;
//! - `security_labels_invalid_json`: not strict JSON, duplicate keys included;
//! - `security_labels_not_object`: the root (or `extensions`) is not an object;
//! - `security_labels_depth_exceeded`, `security_labels_too_many_fields`,
//!   `security_labels_too_many_items`, `security_labels_invalid_key`,
//!   `security_labels_secret_key`, `security_labels_string_too_long`,
//!   `security_labels_control_characters`, `security_labels_integer_out_of_range`,
//!   `security_labels_non_finite_number`, `security_labels_too_large`: the generic checks
//!   (a lone surrogate escape in a string is `security_labels_invalid_json`, see
//!   [`super::mission`] and [`crate::strict_doc`]);
//! - `security_labels_profile_invalid`: the object (or `extensions`) names a built-in mission
//!   metadata profile and fails its checks (the reference runs them on any object);
//! - `security_labels_unknown_field`: a root field outside the profile;
//! - `security_labels_wrong_profile`: `profile` is not `nats-sinks.security-label.v1`;
//! - `security_labels_invalid_field`: a field of the wrong JSON type;
//! - `security_labels_value_too_long`: a value longer than 512 characters;
//! - `security_labels_too_many_values`: a list with more than 128 values;
//! - `security_labels_separator_in_item`: an array item containing `;`;
//! - `security_labels_value_not_allowed`: a value outside a configured allow-list.
//!
//! Rejection details name the field and the limit, never a value from the message.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::mission::{self, render_short};
use super::object_rules::{ObjectRules, check_object, normalize_object, normalized_allow_list, sorted_list};
use super::{Rejection, Step};
use crate::pycompat;
use crate::strict_doc::{self, Json, Problem, has_control};
use crate::violation::{Kind, Violation};
use sinks_contract::config::Issues;
use sinks_contract::envelope::{AppMetadata, Headers};
use sinks_contract::json::JsonDoc;
use sinks_toolkit::subject;

/// Every reason code a security label rejection can carry (see the module comment).
pub const REASON_CODES: [&str; 21] = [
    "security_labels_header_too_large",
    "security_labels_invalid_json",
    "security_labels_not_object",
    "security_labels_depth_exceeded",
    "security_labels_too_many_fields",
    "security_labels_too_many_items",
    "security_labels_invalid_key",
    "security_labels_secret_key",
    "security_labels_string_too_long",
    "security_labels_control_characters",
    "security_labels_integer_out_of_range",
    "security_labels_non_finite_number",
    "security_labels_profile_invalid",
    "security_labels_too_large",
    "security_labels_unknown_field",
    "security_labels_wrong_profile",
    "security_labels_invalid_field",
    "security_labels_value_too_long",
    "security_labels_too_many_values",
    "security_labels_separator_in_item",
    "security_labels_value_not_allowed",
];

/// Default header carrying a publisher's security label profile (a JSON object).
pub const DEFAULT_SECURITY_LABELS_HEADER: &str = "Nats-Sinks-Security-Labels";
/// The one profile name accepted.
pub const SECURITY_LABEL_PROFILE: &str = "nats-sinks.security-label.v1";
/// Default `max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 8192;
/// Largest accepted `max_bytes`.
pub const MAX_BYTES_LIMIT: u64 = 262_144;
/// Most values in one list field.
pub const MAX_LIST_ITEMS: usize = 128;
/// Longest value, in characters.
pub const MAX_VALUE_LENGTH: usize = 512;
/// The root fields a profile may have, sorted.
pub const PROFILE_FIELDS: [&str; 11] = [
    "classification",
    "extensions",
    "handling_caveats",
    "labels",
    "originator",
    "owner",
    "policy_id",
    "priority",
    "profile",
    "releasability",
    "retention_category",
];

/// `security_labels` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityLabelsConfig {
    /// Resolve a security label profile for every message (default false: the header is
    /// ignored).
    pub enabled: bool,
    /// Header (case-insensitive) whose value is the publisher's JSON profile; surrounding
    /// whitespace is ignored. Default `Nats-Sinks-Security-Labels`.
    pub header: String,
    /// Profile used when the header is absent and no rule matches (default none).
    pub default: Option<Value>,
    /// Subject rules used when the header is absent; the first matching rule wins.
    pub rules: Vec<SecurityLabelRule>,
    /// Largest header text and largest canonical JSON rendering, in bytes (1–262144,
    /// default 8192).
    pub max_bytes: u64,
    /// Allowed `priority` values (empty = any). Entries are trimmed and de-duplicated; a
    /// single string is accepted as a list of one.
    #[serde(deserialize_with = "mission::string_or_list")]
    pub allowed_priorities: Vec<String>,
    /// Allowed `classification` values (empty = any).
    #[serde(deserialize_with = "mission::string_or_list")]
    pub allowed_classifications: Vec<String>,
    /// Allowed values of every `releasability` item (empty = any).
    #[serde(deserialize_with = "mission::string_or_list")]
    pub allowed_releasability: Vec<String>,
    /// Allowed values of every `handling_caveats` item (empty = any).
    #[serde(deserialize_with = "mission::string_or_list")]
    pub allowed_handling_caveats: Vec<String>,
    /// Allowed `retention_category` values (empty = any).
    #[serde(deserialize_with = "mission::string_or_list")]
    pub allowed_retention_categories: Vec<String>,
}

impl Default for SecurityLabelsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            header: DEFAULT_SECURITY_LABELS_HEADER.into(),
            default: None,
            rules: Vec::new(),
            max_bytes: DEFAULT_MAX_BYTES,
            allowed_priorities: Vec::new(),
            allowed_classifications: Vec::new(),
            allowed_releasability: Vec::new(),
            allowed_handling_caveats: Vec::new(),
            allowed_retention_categories: Vec::new(),
        }
    }
}

/// One `security_labels.rules[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityLabelRule {
    /// NATS subject pattern (`*`, `>`) matched against the message subject.
    pub subject: String,
    /// Profile for matching subjects, or `null` to give them no profile (clearing the
    /// default). Required, even when `null`.
    #[serde(deserialize_with = "mission::present_or_null")]
    pub profile: Option<Value>,
}

impl SecurityLabelsConfig {
    /// Config problems, each naming its field under `path` (called with "security_labels").
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        mission::check_header(&format!("{path}.header"), &self.header, issues);
        issues.range(&format!("{path}.max_bytes"), self.max_bytes, 1, MAX_BYTES_LIMIT);
        for (name, list) in self.allow_lists() {
            mission::check_allow_list(&format!("{path}.{name}"), list, issues);
        }
        let max_bytes = self.max_bytes.clamp(1, MAX_BYTES_LIMIT);
        let mut check = |at: String, value: &Value| {
            if let Err(v) = self.normalize(&Json::from_value(value), max_bytes, None, false) {
                issues.push(&format!("{at}{}", v.at), v.message);
            }
        };
        if let Some(default) = &self.default {
            check(format!("{path}.default"), default);
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{i}]");
            if let Some(profile) = &rule.profile {
                check(format!("{at}.profile"), profile);
            }
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                issues.push(&format!("{path}.rules[{i}].subject"), e.to_string());
            }
        }
    }

    /// The security label profile of one message, `Ok(None)` when there is none. `app` is
    /// the message's resolved `message_metadata`. Only called when enabled.
    pub fn resolve(
        &self,
        subject: &str,
        headers: &Headers,
        app: &AppMetadata,
    ) -> Result<Option<Arc<JsonDoc>>, Rejection> {
        let reject =
            |source: &str, v: Violation| Rejection::new(Step::SecurityLabels, v.kind.labels_code(), v.detail(source));
        if let Some(text) = headers.get(pycompat::strip(&self.header)) {
            if pycompat::strip(text).is_empty() {
                return Ok(None);
            }
            return self.parse_header(text, app).map(|doc| Some(Arc::new(doc))).map_err(|v| reject("header", v));
        }
        let (source, profile) = match self.rules.iter().position(|r| subject::matches(&r.subject, subject)) {
            Some(i) => (format!("rules[{i}]"), self.rules[i].profile.as_ref()),
            None => ("default".to_owned(), self.default.as_ref()),
        };
        match profile {
            None => Ok(None),
            // Configured profiles take nothing from the message (see the module comment).
            Some(value) => self
                .normalize(&Json::from_value(value), self.max_bytes, None, false)
                .map(|doc| Some(Arc::new(doc)))
                .map_err(|v| reject(&source, v)),
        }
    }

    /// Human-readable lines for `nats-sink validate`: header, each rule in order with the
    /// subjects it covers and what it sets, default, limits, allow-lists.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let state = if self.enabled { "enabled" } else { "disabled (the header is ignored)" };
        lines.push(format!("security_labels: {state}"));
        lines.push(format!(
            "header `{}`: present and non-empty = its JSON profile is used, with priority, classification and labels \
             it omits taken from message_metadata; present and blank = no security labels; absent = the first \
             matching rule, else the default",
            pycompat::strip(&self.header)
        ));
        let shown = |value: &Value| match self.normalize(&Json::from_value(value), self.max_bytes, None, false) {
            Ok(normalized) => summary(normalized.value()),
            Err(_) => render_short(value),
        };
        for (i, rule) in self.rules.iter().enumerate() {
            let sets = match &rule.profile {
                Some(v) => format!("sets {}", shown(v)),
                None => "no security labels (clears the default)".to_owned(),
            };
            lines.push(format!("rule {}: subjects `{}` -> {sets}", i + 1, rule.subject));
        }
        lines.push(match &self.default {
            Some(v) => format!("default: {}", shown(v)),
            None => "default: none (messages no rule covers carry no security labels)".to_owned(),
        });
        lines.push(
            "configured profiles are used as written: fields they omit stay null or empty (not taken from \
             message_metadata)"
                .to_owned(),
        );
        lines.push(format!(
            "limits: {} bytes (header text and canonical JSON), {MAX_LIST_ITEMS} values per list, \
             {MAX_VALUE_LENGTH} characters per value, extensions bounded like mission metadata",
            self.max_bytes
        ));
        for (name, list) in self.allow_lists() {
            let allowed = normalized_allow_list(list);
            let shown = if allowed.is_empty() { "any".to_owned() } else { allowed.join(", ") };
            lines.push(format!("{}: {shown}", name.replace('_', " ")));
        }
        lines
    }

    fn allow_lists(&self) -> [(&'static str, &[String]); 5] {
        [
            ("allowed_priorities", &self.allowed_priorities),
            ("allowed_classifications", &self.allowed_classifications),
            ("allowed_releasability", &self.allowed_releasability),
            ("allowed_handling_caveats", &self.allowed_handling_caveats),
            ("allowed_retention_categories", &self.allowed_retention_categories),
        ]
    }

    fn parse_header(&self, text: &str, app: &AppMetadata) -> Result<JsonDoc, Violation> {
        if text.len() as u64 > self.max_bytes {
            return Err(Violation::new(
                Kind::HeaderTooLarge,
                format!("header text is {} bytes, over max_bytes {}", text.len(), self.max_bytes),
            ));
        }
        let parsed = strict_doc::parse(text)?;
        self.normalize(&parsed.json, self.max_bytes, Some(app), parsed.unencodable)
    }

    /// The reference's `normalize_security_label_profile`: checks `value` and returns the
    /// complete profile. `fallback` supplies omitted priority, classification and labels.
    /// `unencodable`: the header held a lone surrogate escape (refused where the reference
    /// first measures the size).
    fn normalize(
        &self,
        value: &Json,
        max_bytes: u64,
        fallback: Option<&AppMetadata>,
        unencodable: bool,
    ) -> Result<JsonDoc, Violation> {
        let Json::Object(members) = value else {
            return Err(Violation::new(Kind::NotObject, "must be a JSON object"));
        };
        check_object(value, &ObjectRules { unencodable, ..ObjectRules::generic(max_bytes) })?;
        let mut unknown: Vec<&str> =
            members.iter().map(|(k, _)| k.as_str()).filter(|k| !PROFILE_FIELDS.contains(k)).collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(Violation::new(
                Kind::UnknownField,
                format!("contains unsupported security label fields: {}", unknown.join(", ")),
            ));
        }
        let named = Json::Str(SECURITY_LABEL_PROFILE.to_owned());
        let profile = scalar(value.get("profile").unwrap_or(&named), "profile")?;
        if profile.as_deref() != Some(SECURITY_LABEL_PROFILE) {
            return Err(Violation::at_key(
                Kind::WrongProfile,
                "profile",
                format!("must be `{SECURITY_LABEL_PROFILE}`"),
            ));
        }
        let text = |s: Option<&String>| s.map_or(Json::Null, |s| Json::Str(s.clone()));
        let fallback_priority = text(fallback.and_then(|a| a.priority.as_ref()));
        let fallback_classification = text(fallback.and_then(|a| a.classification.as_ref()));
        let fallback_labels =
            Json::Array(fallback.map(|a| a.labels.iter().map(|l| Json::Str(l.clone())).collect()).unwrap_or_default());
        let empty = Json::Array(Vec::new());
        let priority = scalar(value.get("priority").unwrap_or(&fallback_priority), "priority")?;
        let classification = scalar(value.get("classification").unwrap_or(&fallback_classification), "classification")?;
        let owner = scalar(value.get("owner").unwrap_or(&Json::Null), "owner")?;
        let originator = scalar(value.get("originator").unwrap_or(&Json::Null), "originator")?;
        let policy_id = scalar(value.get("policy_id").unwrap_or(&Json::Null), "policy_id")?;
        let retention = scalar(value.get("retention_category").unwrap_or(&Json::Null), "retention_category")?;
        let labels = list(value.get("labels").unwrap_or(&fallback_labels), "labels")?;
        let releasability = list(value.get("releasability").unwrap_or(&empty), "releasability")?;
        let caveats = list(value.get("handling_caveats").unwrap_or(&empty), "handling_caveats")?;

        allowed_scalar(priority.as_deref(), "priority", &self.allowed_priorities)?;
        allowed_scalar(classification.as_deref(), "classification", &self.allowed_classifications)?;
        allowed_scalar(retention.as_deref(), "retention_category", &self.allowed_retention_categories)?;
        allowed_list(&releasability, "releasability", &self.allowed_releasability)?;
        allowed_list(&caveats, "handling_caveats", &self.allowed_handling_caveats)?;

        let extensions = match value.get_some("extensions") {
            None => None,
            Some(extensions @ Json::Object(_)) => {
                check_object(extensions, &ObjectRules::generic(max_bytes)).map_err(|v| v.under(".extensions"))?;
                Some(extensions.clone())
            }
            Some(_) => return Err(Violation::at_key(Kind::NotObject, "extensions", "must be a JSON object")),
        };
        // The complete profile, its members in key order (the canonical writer then sorts
        // nothing); the checks below find the same problems in any order, as only the
        // extensions, already checked alone, can fail them (nested one level deeper, or by size).
        let strings = |items: Vec<String>| Json::Array(items.into_iter().map(Json::Str).collect());
        let owned = |s: Option<String>| s.map_or(Json::Null, Json::Str);
        let mut result = Vec::with_capacity(PROFILE_FIELDS.len());
        result.push(("classification".to_owned(), owned(classification)));
        result.extend(extensions.map(|e| ("extensions".to_owned(), e)));
        result.extend([
            ("handling_caveats".to_owned(), strings(caveats)),
            ("labels".to_owned(), strings(labels)),
            ("originator".to_owned(), owned(originator)),
            ("owner".to_owned(), owned(owner)),
            ("policy_id".to_owned(), owned(policy_id)),
            ("priority".to_owned(), owned(priority)),
            ("profile".to_owned(), named),
            ("releasability".to_owned(), strings(releasability)),
            ("retention_category".to_owned(), owned(retention)),
        ]);
        normalize_object(&Json::Object(result), &ObjectRules::generic(max_bytes))
    }
}

/// The set fields of a complete profile, e.g. `classification=NATO SECRET; releasability=NATO,FVEY`.
fn summary(profile: &Value) -> String {
    let mut parts = Vec::new();
    for (key, value) in profile.as_object().into_iter().flatten() {
        let shown = match value {
            Value::String(s) if key != "profile" => s.clone(),
            Value::Array(items) if !items.is_empty() => {
                items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",")
            }
            Value::Object(_) => render_short(value),
            _ => continue,
        };
        parts.push(format!("{key}={shown}"));
    }
    if parts.is_empty() { "an empty profile (every field null)".to_owned() } else { parts.join("; ") }
}

/// One scalar field: a string (trimmed; blank = none) or `null`.
fn scalar(value: &Json, field: &str) -> Result<Option<String>, Violation> {
    let text = match value {
        Json::Null => return Ok(None),
        Json::Str(s) => pycompat::strip(s),
        _ => return Err(Violation::at_key(Kind::InvalidField, field, "must be a string")),
    };
    if text.is_empty() {
        return Ok(None);
    }
    if strict_doc::over_chars(text, MAX_VALUE_LENGTH) {
        return Err(Violation::at_key(Kind::ValueTooLong, field, format!("exceeds {MAX_VALUE_LENGTH} characters")));
    }
    if has_control(text) {
        return Err(Violation::at_key(
            Kind::Document(Problem::ControlCharacters),
            field,
            "contains control characters",
        ));
    }
    Ok(Some(text.to_owned()))
}

/// One list field: a `;`-separated string or an array of strings, normalized like labels.
fn list(value: &Json, field: &str) -> Result<Vec<String>, Violation> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |item: &str| {
        for part in item.split(';') {
            let part = pycompat::strip(part);
            if !part.is_empty() && !out.iter().any(|o| o == part) {
                out.push(part.to_owned());
            }
        }
    };
    match value {
        Json::Null => {}
        Json::Str(s) => add(s),
        Json::Array(items) => {
            for item in items {
                let Json::Str(s) = item else {
                    return Err(Violation::at_key(Kind::InvalidField, field, "must contain only strings"));
                };
                let rendered = pycompat::strip(s);
                if rendered.contains(';') {
                    return Err(Violation::at_key(
                        Kind::SeparatorInItem,
                        field,
                        "list items must not contain the `;` separator",
                    ));
                }
                add(rendered);
            }
        }
        _ => return Err(Violation::at_key(Kind::InvalidField, field, "must be a string or a list of strings")),
    }
    if out.len() > MAX_LIST_ITEMS {
        return Err(Violation::at_key(Kind::TooManyValues, field, format!("exceeds {MAX_LIST_ITEMS} values")));
    }
    for item in &out {
        if strict_doc::over_chars(item, MAX_VALUE_LENGTH) {
            return Err(Violation::at_key(
                Kind::ValueTooLong,
                field,
                format!("has a value longer than {MAX_VALUE_LENGTH} characters"),
            ));
        }
        if has_control(item) {
            return Err(Violation::at_key(
                Kind::Document(Problem::ControlCharacters),
                field,
                "contains control characters",
            ));
        }
    }
    Ok(out)
}

fn allowed_scalar(value: Option<&str>, field: &str, allow_list: &[String]) -> Result<(), Violation> {
    let allowed = normalized_allow_list(allow_list);
    match value {
        Some(v) if !allowed.is_empty() && !allowed.contains(&v) => Err(Violation::at_key(
            Kind::ValueNotAllowed,
            field,
            format!("must be one of the configured values: {}", sorted_list(&allowed)),
        )),
        _ => Ok(()),
    }
}

fn allowed_list(values: &[String], field: &str, allow_list: &[String]) -> Result<(), Violation> {
    let allowed = normalized_allow_list(allow_list);
    if !allowed.is_empty() && values.iter().any(|v| !allowed.contains(&v.as_str())) {
        return Err(Violation::at_key(
            Kind::ValueNotAllowed,
            field,
            format!("contains values outside the configured allow list: {}", sorted_list(&allowed)),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Expected outcomes were checked against the reference, nats-sinks 0.4.3
    //! (`nats_sinks.core.security_labels` and `config`), by running the same inputs through
    //! it; `dump_cases_for_reference` prints them for that check. Where the reference rejects
    //! the whole batch we reject the one message.

    use serde_json::{Value, json};

    use super::*;
    use crate::canonical;

    struct Case {
        config: Value,
        subject: &'static str,
        headers: Vec<(&'static str, String)>,
        app: AppMetadata,
        expect: Result<Option<Value>, &'static str>,
    }

    fn app() -> AppMetadata {
        AppMetadata {
            priority: Some("routine".into()),
            classification: Some("NATO SECRET".into()),
            labels: vec!["sensor".into(), "track".into()],
        }
    }

    /// The complete profile: `fields` over the all-empty profile.
    fn profile(fields: Value) -> Result<Option<Value>, &'static str> {
        let mut full = json!({"profile": SECURITY_LABEL_PROFILE, "priority": null, "classification": null,
            "labels": [], "releasability": [], "handling_caveats": [], "owner": null, "originator": null,
            "policy_id": null, "retention_category": null});
        for (k, v) in fields.as_object().unwrap() {
            full[k] = v.clone();
        }
        Ok(Some(full))
    }

    /// The complete profile of a header that omits priority, classification and labels.
    fn filled(fields: Value) -> Result<Option<Value>, &'static str> {
        let mut base = json!({"priority": "routine", "classification": "NATO SECRET", "labels": ["sensor", "track"]});
        for (k, v) in fields.as_object().unwrap() {
            base[k] = v.clone();
        }
        profile(base)
    }

    fn header_case(config: Value, text: impl Into<String>, expect: Result<Option<Value>, &'static str>) -> Case {
        Case {
            config,
            subject: "s.x",
            headers: vec![(DEFAULT_SECURITY_LABELS_HEADER, text.into())],
            app: app(),
            expect,
        }
    }

    fn enabled() -> Value {
        json!({"enabled": true})
    }

    fn header_cases() -> Vec<Case> {
        let e = enabled;
        let list = |n: usize| (0..n).map(|i| format!("v{i}")).collect::<Vec<_>>();
        let vocab = json!({"enabled": true, "allowed_priorities": ["routine", "flash"],
            "allowed_classifications": [" NATO SECRET "], "allowed_releasability": ["NATO", "FVEY"],
            "allowed_handling_caveats": "MISSION", "allowed_retention_categories": ["log-30d"]});
        vec![
            header_case(e(), "{}", filled(json!({}))),
            header_case(e(), "  ", Ok(None)),
            header_case(
                e(),
                r#"{"profile":"nats-sinks.security-label.v1","owner":" o ","policy_id":""}"#,
                filled(json!({"owner": "o"})),
            ),
            header_case(e(), r#"{"profile":" nats-sinks.security-label.v1 "}"#, filled(json!({}))),
            header_case(e(), r#"{"priority":null,"classification":" ","labels":[]}"#, profile(json!({}))),
            header_case(
                e(),
                r#"{"priority":"flash","classification":"NATO RESTRICTED"}"#,
                filled(json!({"priority": "flash", "classification": "NATO RESTRICTED"})),
            ),
            header_case(e(), r#"{"labels":"a; b;a;;"}"#, filled(json!({"labels": ["a", "b"]}))),
            header_case(e(), r#"{"labels":["a","a"," b ",""]}"#, filled(json!({"labels": ["a", "b"]}))),
            header_case(
                e(),
                r#"{"releasability":"NATO;FVEY","handling_caveats":["MISSION"]}"#,
                filled(json!({"releasability": ["NATO", "FVEY"], "handling_caveats": ["MISSION"]})),
            ),
            header_case(e(), r#"{"labels":null,"releasability":null}"#, filled(json!({"labels": []}))),
            header_case(
                e(),
                r#"{"extensions":{"mission":"m","n":[1,2]}}"#,
                filled(json!({"extensions": {"mission": "m", "n": [1, 2]}})),
            ),
            header_case(e(), r#"{"extensions":null}"#, filled(json!({}))),
            header_case(e(), r#"{"extensions":{}}"#, filled(json!({"extensions": {}}))),
            // Refusals.
            header_case(e(), "[]", Err("security_labels_not_object")),
            header_case(e(), r#"{"extensions":[]}"#, Err("security_labels_not_object")),
            header_case(e(), r#"{"a":1,"a":1}"#, Err("security_labels_invalid_json")),
            header_case(e(), r#"{"extensions":{"x":1,"x":2}}"#, Err("security_labels_invalid_json")),
            header_case(e(), r#"{"owner":NaN}"#, Err("security_labels_invalid_json")),
            header_case(e(), r#"{"owner":"o""#, Err("security_labels_invalid_json")),
            header_case(e(), r#"{"colour":"red","boo":1}"#, Err("security_labels_unknown_field")),
            header_case(e(), r#"{"Owner":"o"}"#, Err("security_labels_unknown_field")),
            header_case(e(), r#"{"profile":"nats-sinks.security-label.v2"}"#, Err("security_labels_wrong_profile")),
            header_case(e(), r#"{"profile":null}"#, Err("security_labels_wrong_profile")),
            header_case(e(), r#"{"profile":""}"#, Err("security_labels_wrong_profile")),
            header_case(e(), r#"{"profile":1}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"priority":5}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"owner":["o"]}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"labels":[1]}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"labels":{}}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"releasability":true}"#, Err("security_labels_invalid_field")),
            header_case(e(), r#"{"labels":["a;b"]}"#, Err("security_labels_separator_in_item")),
            header_case(
                e(),
                format!(r#"{{"owner":"{}"}}"#, "o".repeat(512)),
                filled(json!({"owner": "o".repeat(512)})),
            ),
            header_case(
                e(),
                format!(r#"{{"owner":" {} "}}"#, "o".repeat(512)),
                filled(json!({"owner": "o".repeat(512)})),
            ),
            header_case(e(), format!(r#"{{"owner":"{}"}}"#, "o".repeat(513)), Err("security_labels_value_too_long")),
            header_case(e(), format!(r#"{{"labels":"{}"}}"#, "l".repeat(513)), Err("security_labels_value_too_long")),
            header_case(e(), json!({"labels": list(128)}).to_string(), filled(json!({"labels": list(128)}))),
            header_case(e(), json!({"labels": list(129)}).to_string(), Err("security_labels_too_many_values")),
            header_case(
                e(),
                json!({"labels": list(129).join(";")}).to_string(),
                Err("security_labels_too_many_values"),
            ),
            header_case(
                e(),
                json!({"labels": ([list(128), list(100)].concat())}).to_string(),
                filled(json!({"labels": list(128)})),
            ),
            header_case(e(), json!({"labels": list(257)}).to_string(), Err("security_labels_too_many_items")),
            header_case(e(), r#"{"owner":"a\u0001"}"#, Err("security_labels_control_characters")),
            header_case(e(), r#"{"password":"x"}"#, Err("security_labels_secret_key")),
            header_case(e(), r#"{"extensions":{"api_key":"x"}}"#, Err("security_labels_secret_key")),
            header_case(e(), r#"{"extensions":{"bad key":"x"}}"#, Err("security_labels_invalid_key")),
            header_case(e(), r#"{"a b":1}"#, Err("security_labels_invalid_key")),
            header_case(e(), r#"{"extensions":{"n":9007199254740992}}"#, Err("security_labels_integer_out_of_range")),
            header_case(e(), r#"{"extensions":{"n":1e999}}"#, Err("security_labels_non_finite_number")),
            header_case(
                e(),
                format!(r#"{{"extensions":{{"s":"{}"}}}}"#, "s".repeat(4097)),
                Err("security_labels_string_too_long"),
            ),
            header_case(
                e(),
                format!(r#"{{"extensions":{{"a":{}1{}}}}}"#, "[".repeat(7), "]".repeat(7)),
                Err("security_labels_depth_exceeded"),
            ),
            header_case(
                e(),
                format!(r#"{{"extensions":{{"a":{}1{}}}}}"#, "[".repeat(6), "]".repeat(6)),
                filled(json!({"extensions": {"a": [[[[[[1]]]]]]}})),
            ),
            header_case(
                e(),
                json!({"extensions": (0..129).map(|i| (format!("k{i}"), json!(i)))
                .collect::<serde_json::Map<_, _>>()})
                .to_string(),
                Err("security_labels_too_many_fields"),
            ),
            header_case(
                e(),
                r#"{"extensions":{"profile":"nats-sinks.data-quality.v1","accuracy":2}}"#,
                Err("security_labels_profile_invalid"),
            ),
            header_case(
                e(),
                r#"{"profile":"nats-sinks.data-quality.v1","accuracy":2}"#,
                Err("security_labels_profile_invalid"),
            ),
            // Sizes: header text, then the complete profile's canonical JSON.
            header_case(
                json!({"enabled": true, "max_bytes": 16}),
                r#"{"owner":"12345"}"#,
                Err("security_labels_header_too_large"),
            ),
            header_case(json!({"enabled": true, "max_bytes": 200}), "{}", Err("security_labels_too_large")),
            header_case(json!({"enabled": true, "max_bytes": 262_144}), "{}", filled(json!({}))),
            // Allow-lists (entries trimmed; values from message_metadata are checked too).
            header_case(
                vocab.clone(),
                r#"{"releasability":["NATO"],"handling_caveats":"MISSION","retention_category":"log-30d"}"#,
                filled(
                    json!({"releasability": ["NATO"], "handling_caveats": ["MISSION"], "retention_category": "log-30d"}),
                ),
            ),
            header_case(vocab.clone(), r#"{"priority":"urgent"}"#, Err("security_labels_value_not_allowed")),
            header_case(
                vocab.clone(),
                r#"{"classification":"NATO RESTRICTED"}"#,
                Err("security_labels_value_not_allowed"),
            ),
            header_case(vocab.clone(), r#"{"releasability":["NATO","EU"]}"#, Err("security_labels_value_not_allowed")),
            header_case(vocab.clone(), r#"{"handling_caveats":"TRAINING"}"#, Err("security_labels_value_not_allowed")),
            header_case(vocab.clone(), r#"{"retention_category":"forever"}"#, Err("security_labels_value_not_allowed")),
            header_case(
                vocab.clone(),
                r#"{"priority":null,"classification":null}"#,
                profile(json!({"labels": ["sensor", "track"]})),
            ),
            Case {
                app: AppMetadata { priority: Some("deferred".into()), ..app() },
                ..header_case(vocab.clone(), "{}", Err("security_labels_value_not_allowed"))
            },
            Case {
                app: AppMetadata { labels: list(129), ..app() },
                ..header_case(e(), "{}", Err("security_labels_too_many_values"))
            },
            Case {
                app: AppMetadata { priority: Some("p".repeat(513)), ..app() },
                ..header_case(e(), "{}", Err("security_labels_value_too_long"))
            },
        ]
    }

    fn resolution_cases() -> Vec<Case> {
        let config = json!({"enabled": true, "header": "X-Labels", "allowed_priorities": ["routine"],
            "default": {"owner": "o", "labels": "d"},
            "rules": [{"subject": "a.>", "profile": {"classification": "X"}}, {"subject": "b.*", "profile": null}]});
        let case = |subject, headers: Vec<(&'static str, String)>, expect| Case {
            config: config.clone(),
            subject,
            headers,
            app: app(),
            expect,
        };
        let header = |text: &str| vec![("x-labels", text.to_owned())];
        vec![
            case("a.x", header(r#"{"owner":"h"}"#), filled(json!({"owner": "h"}))),
            case("a.x", header(""), Ok(None)),
            // Configured profiles take nothing from message_metadata (nats-sinks 0.4.3 behaviour).
            case("a.x", vec![], profile(json!({"classification": "X"}))),
            case("b.y", vec![], Ok(None)),
            case("c", vec![], profile(json!({"owner": "o", "labels": ["d"]}))),
            case(
                "c",
                vec![(DEFAULT_SECURITY_LABELS_HEADER, r#"{"owner":"ignored"}"#.into())],
                profile(json!({"owner": "o", "labels": ["d"]})),
            ),
            case("c", header(r#"{"priority":"flash"}"#), Err("security_labels_value_not_allowed")),
        ]
    }

    fn run(case: &Case) -> Result<Option<Value>, String> {
        let cfg: SecurityLabelsConfig = serde_json::from_value(case.config.clone()).unwrap();
        let mut issues = Issues::default();
        cfg.validate_at("security_labels", &mut issues);
        assert!(issues.finish().is_ok(), "case config must be valid: {}", case.config);
        let mut headers = Headers::new();
        for (name, value) in &case.headers {
            headers.append(name, value.clone());
        }
        let doc = cfg.resolve(case.subject, &headers, &case.app).map_err(|r| {
            assert_eq!(r.step, Step::SecurityLabels);
            r.reason.into_owned()
        })?;
        // A profile keeps its canonical text: the bytes of its value.
        assert!(doc.as_ref().is_none_or(|d| d.canonical().is_some()), "a resolved profile keeps its text");
        Ok(doc.map(|d| crate::canonical::checked_value(&d)))
    }

    fn check(cases: &[Case]) {
        for case in cases {
            let shown: Vec<String> =
                case.headers.iter().map(|(_, v)| v.chars().take(120).collect::<String>()).collect();
            assert_eq!(
                run(case),
                case.expect.clone().map_err(str::to_owned),
                "subject {} headers {shown:?}",
                case.subject
            );
        }
    }

    #[test]
    fn header_table() {
        check(&header_cases());
    }

    #[test]
    fn resolution_order() {
        check(&resolution_cases());
    }

    #[test]
    fn every_reason_code_is_listed_and_exercised() {
        for kind in Kind::ALL {
            assert!(REASON_CODES.contains(&kind.labels_code()), "{kind:?}");
        }
        let exercised: std::collections::BTreeSet<&str> =
            header_cases().iter().chain(&resolution_cases()).filter_map(|c| c.expect.as_ref().err().copied()).collect();
        let listed: std::collections::BTreeSet<&str> = REASON_CODES.into_iter().collect();
        assert_eq!(exercised, listed);
    }

    #[test]
    fn rejection_details_name_fields_not_values() {
        let cfg: SecurityLabelsConfig =
            serde_json::from_value(json!({"enabled": true, "allowed_releasability": ["NATO"]})).unwrap();
        let headers = Headers::new().with(DEFAULT_SECURITY_LABELS_HEADER, r#"{"releasability":["TOP-SECRET-X"]}"#);
        let r = cfg.resolve("s", &headers, &app()).unwrap_err();
        assert_eq!(r.reason, "security_labels_value_not_allowed");
        assert!(r.detail.starts_with("header.releasability: "), "{}", r.detail);
        assert!(!r.detail.contains("TOP-SECRET-X"), "{}", r.detail);
    }

    fn config_cases() -> Vec<(Value, Vec<&'static str>)> {
        vec![
            (json!({}), vec![]),
            (json!({"max_bytes": 0}), vec!["security_labels.max_bytes"]),
            (json!({"max_bytes": 262_145}), vec!["security_labels.max_bytes"]),
            (json!({"header": " "}), vec!["security_labels.header"]),
            (json!({"header": "a\rb"}), vec!["security_labels.header"]),
            (json!({"allowed_priorities": "routine", "allowed_classifications": null}), vec![]),
            (json!({"allowed_priorities": ["routine", ""]}), vec!["security_labels.allowed_priorities[1]"]),
            (json!({"allowed_releasability": ["N\u{1}"]}), vec!["security_labels.allowed_releasability[0]"]),
            (json!({"allowed_handling_caveats": [1]}), vec!["parse"]),
            (json!({"allowed_colours": []}), vec!["parse"]),
            (json!({"default": {"classification": "X", "releasability": "NATO"}}), vec![]),
            (json!({"default": {"colour": 1}}), vec!["security_labels.default"]),
            (json!({"default": "x"}), vec!["security_labels.default"]),
            (json!({"default": {"profile": "v2"}}), vec!["security_labels.default.profile"]),
            (json!({"default": {"labels": ["a;b"]}}), vec!["security_labels.default.labels"]),
            (json!({"default": {"extensions": {"secret": 1}}}), vec!["security_labels.default.extensions.secret"]),
            (json!({"default": {"extensions": 1}}), vec!["security_labels.default.extensions"]),
            (
                json!({"default": {"classification": "X"}, "allowed_classifications": ["Y"]}),
                vec!["security_labels.default.classification"],
            ),
            (json!({"default": {}, "max_bytes": 100}), vec!["security_labels.default"]),
            (json!({"rules": [{"subject": "a.>", "profile": null}]}), vec![]),
            (json!({"rules": [{"subject": "a.>"}]}), vec!["parse"]),
            (json!({"rules": [{"subject": "a.>.b", "profile": null}]}), vec!["security_labels.rules[0].subject"]),
            (
                json!({"rules": [{"subject": "a", "profile": {}}, {"subject": "b", "profile": {"owner": 1}}]}),
                vec!["security_labels.rules[1].profile.owner"],
            ),
            (
                json!({"allowed_retention_categories": ["r"], "rules": [{"subject": "a", "profile": {"retention_category": "q"}}]}),
                vec!["security_labels.rules[0].profile.retention_category"],
            ),
        ]
    }

    #[test]
    fn config_table() {
        for (value, want) in config_cases() {
            let got = match serde_json::from_value::<SecurityLabelsConfig>(value.clone()) {
                Err(_) => vec!["parse".to_owned()],
                Ok(cfg) => {
                    let mut issues = Issues::default();
                    cfg.validate_at("security_labels", &mut issues);
                    issues.finish().err().map(|e| e.issues.into_iter().map(|i| i.path).collect()).unwrap_or_default()
                }
            };
            assert_eq!(got, want, "{value}");
        }
    }

    #[test]
    fn documented_configs_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("labels-") {
                continue;
            }
            let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let cfg: SecurityLabelsConfig = serde_json::from_value(file["security_labels"].clone()).unwrap();
            let mut issues = Issues::default();
            cfg.validate_at("security_labels", &mut issues);
            assert!(issues.finish().is_ok(), "{name}");
            // The documented rule and default resolve to complete profiles.
            let sensor = cfg.resolve("mission.sensor.track", &Headers::new(), &app()).unwrap().unwrap();
            assert_eq!(sensor.value()["classification"], "NATO SECRET");
            assert_eq!(sensor.value()["releasability"], json!(["NATO", "FVEY"]));
            let other = cfg.resolve("other", &Headers::new(), &app()).unwrap().unwrap();
            assert_eq!(other.value()["retention_category"], "mission-log-30d");
            seen += 1;
        }
        assert_eq!(seen, 2);
    }

    #[test]
    fn defaults_match_the_reference() {
        let c = SecurityLabelsConfig::default();
        assert!(!c.enabled);
        assert_eq!((c.header.as_str(), c.max_bytes), (DEFAULT_SECURITY_LABELS_HEADER, 8192));
        assert_eq!(serde_json::from_value::<SecurityLabelsConfig>(json!({})).unwrap(), c);
    }

    #[test]
    fn describe_lists_rules_and_vocabularies() {
        let cfg: SecurityLabelsConfig = serde_json::from_value(json!({"enabled": true,
            "allowed_classifications": ["NATO SECRET", "NATO RESTRICTED"],
            "rules": [{"subject": "m.>", "profile": {"classification": "NATO SECRET"}}, {"subject": "x", "profile": null}]}))
        .unwrap();
        let text = cfg.describe().join("\n");
        assert!(text.contains("rule 1: subjects `m.>` -> sets classification=NATO SECRET"), "{text}");
        assert!(text.contains("rule 2: subjects `x` -> no security labels"), "{text}");
        assert!(text.contains("default: none"), "{text}");
        assert!(text.contains("allowed classifications: NATO SECRET, NATO RESTRICTED"), "{text}");
        assert!(text.contains("allowed priorities: any"), "{text}");
    }

    /// Every case of the tables above, run through the reference
    /// (`tests/reference/check_metadata_tables.py`), gives the same result there.
    #[test]
    fn tables_agree_with_the_reference() {
        let mut lines = Vec::new();
        for case in header_cases().into_iter().chain(resolution_cases()) {
            let expect = match &case.expect {
                Ok(v) => json!({"ok": v.as_ref().map(|v| String::from_utf8(canonical::to_vec(v).unwrap()).unwrap())}),
                Err(code) => json!({"code": code}),
            };
            let app = json!({"priority": case.app.priority, "classification": case.app.classification,
                "labels": case.app.labels});
            let line = json!({"section": "labels", "config": case.config, "subject": case.subject, "app": app,
                "headers": case.headers.iter().map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                    .collect::<serde_json::Map<_, _>>(), "expect": expect});
            lines.push(line.to_string());
        }
        for (config, paths) in config_cases() {
            lines.push(json!({"section": "labels_config", "config": config, "paths": paths}).to_string());
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
