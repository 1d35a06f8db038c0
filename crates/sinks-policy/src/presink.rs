//! Pre-sink policy gate: data-only rules that a message must satisfy before any sink sees it
//! (the reference's `pre_sink_policy` section). Unlike every other rule list, **every**
//! matching rule applies; a subject no rule covers is rejected unless
//! `unmatched_subject_action` is `allow`.
//!
//! Reason codes: `subject_not_covered_by_policy`, `priority_required`,
//! `classification_required`, `required_label_missing`, `mission_metadata_required`,
//! `encrypted_payload_required`, `payload_too_large`, `mission_metadata_key_not_allowed`.

use serde::{Deserialize, Serialize};

use super::authenticity::UnmatchedAction;
use super::{Rejection, Step};
use sinks_contract::config::Issues;
use sinks_contract::envelope::Envelope;
use sinks_toolkit::metadata::Labels;
use sinks_toolkit::subject;

/// Key-name fragments that mark a secret; such names are refused in allow-lists.
pub const SECRET_KEY_PARTS: [&str; 9] =
    ["password", "passwd", "pwd", "token", "secret", "private_key", "credential", "api_key", "key_material"];

/// `pre_sink_policy` config section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreSinkPolicyConfig {
    /// Enforce the rules (default false). Needs at least one rule.
    pub enabled: bool,
    /// What happens to a message no rule covers: `reject` (default) or `allow`.
    pub unmatched_subject_action: UnmatchedAction,
    /// Rules; every rule whose subject matches applies.
    pub rules: Vec<PreSinkRule>,
}

/// One rule: the checks for messages on matching subjects. At least one check is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreSinkRule {
    /// Subject pattern (default `>`: every subject).
    #[serde(default = "all_subjects")]
    pub subject: String,
    /// The message must have a priority.
    #[serde(default)]
    pub require_priority: bool,
    /// The message must have a classification.
    #[serde(default)]
    pub require_classification: bool,
    /// Labels the message must carry (all of them), as a list or a `;`-separated string.
    #[serde(default)]
    pub required_labels: Labels,
    /// The message must have mission metadata.
    #[serde(default)]
    pub require_mission_metadata: bool,
    /// The payload must be a payload-encryption envelope (encryption on, or encrypted by the
    /// producer).
    #[serde(default)]
    pub require_encrypted_payload: bool,
    /// Largest sink-bound payload in bytes (at most 1 GiB).
    #[serde(default)]
    pub max_payload_bytes: Option<u64>,
    /// Mission metadata root keys allowed (others reject the message).
    #[serde(default)]
    pub allowed_mission_metadata_keys: Option<Vec<String>>,
}

fn all_subjects() -> String {
    ">".into()
}

impl PreSinkRule {
    fn has_check(&self) -> bool {
        self.require_priority
            || self.require_classification
            || !self.required_labels.normalized().is_empty()
            || self.require_mission_metadata
            || self.require_encrypted_payload
            || self.max_payload_bytes.is_some()
            || self.allowed_mission_metadata_keys.is_some()
    }

    fn violations(&self, envelope: &Envelope) -> Vec<&'static str> {
        let app = envelope.app();
        let mut out = Vec::new();
        if self.require_priority && app.priority.is_none() {
            out.push("priority_required");
        }
        if self.require_classification && app.classification.is_none() {
            out.push("classification_required");
        }
        if self.required_labels.normalized().iter().any(|l| !app.labels.contains(l)) {
            out.push("required_label_missing");
        }
        if self.require_mission_metadata && envelope.mission_metadata_doc().is_none() {
            out.push("mission_metadata_required");
        }
        if self.require_encrypted_payload && !sinks_toolkit::encryption::is_encrypted(envelope.payload()) {
            out.push("encrypted_payload_required");
        }
        if self.max_payload_bytes.is_some_and(|max| envelope.payload().len() as u64 > max) {
            out.push("payload_too_large");
        }
        // The document's value is parsed only when its keys are checked.
        if let Some(allowed) = &self.allowed_mission_metadata_keys
            && let Some(serde_json::Value::Object(doc)) = envelope.mission_metadata()
            && doc.keys().any(|k| !allowed.iter().any(|a| a.trim() == k))
        {
            out.push("mission_metadata_key_not_allowed");
        }
        out
    }

    fn describe(&self) -> String {
        let mut checks = Vec::new();
        if self.require_priority {
            checks.push("priority required".to_owned());
        }
        if self.require_classification {
            checks.push("classification required".to_owned());
        }
        let labels = self.required_labels.normalized();
        if !labels.is_empty() {
            checks.push(format!("labels required: {}", labels.join(", ")));
        }
        if self.require_mission_metadata {
            checks.push("mission metadata required".to_owned());
        }
        if self.require_encrypted_payload {
            checks.push("encrypted payload required".to_owned());
        }
        if let Some(max) = self.max_payload_bytes {
            checks.push(format!("payload <= {max} B"));
        }
        if let Some(keys) = &self.allowed_mission_metadata_keys {
            checks.push(format!("mission metadata keys only from [{}]", keys.join(", ")));
        }
        checks.join("; ")
    }
}

impl PreSinkPolicyConfig {
    /// Checks the section (`path` is `pre_sink_policy`).
    pub fn validate_at(&self, path: &str, issues: &mut Issues) {
        if self.enabled && self.rules.is_empty() {
            issues.push(&format!("{path}.rules"), "at least one rule is required when pre_sink_policy is enabled");
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("{path}.rules[{i}]");
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                issues.push(&format!("{at}.subject"), e.to_string());
            }
            if !rule.has_check() {
                issues.push(&at, "a rule must configure at least one check");
            }
            if let Some(item) = rule.required_labels.item_with_separator() {
                issues.push(&format!("{at}.required_labels"), format!("array item `{item}` contains `;`"));
            }
            for label in rule.required_labels.normalized() {
                if label.chars().count() > 128 {
                    issues.push(&format!("{at}.required_labels"), "labels must not exceed 128 characters");
                } else if label.chars().any(char::is_control) {
                    issues.push(&format!("{at}.required_labels"), "labels must not contain control characters");
                }
            }
            if let Some(max) = rule.max_payload_bytes {
                issues.range(&format!("{at}.max_payload_bytes"), max, 0, 1 << 30);
            }
            for (k, key) in rule.allowed_mission_metadata_keys.iter().flatten().enumerate() {
                let field = format!("{at}.allowed_mission_metadata_keys[{k}]");
                let key = key.trim();
                let mut chars = key.chars();
                let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                    && key.len() <= 128
                    && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
                if !well_formed {
                    issues.push(
                        &field,
                        "must start with a letter and hold only letters, digits, `_`, `.`, `:` or `-` (at most 128)",
                    );
                } else if SECRET_KEY_PARTS.iter().any(|p| key.to_lowercase().contains(p)) {
                    issues.push(&field, "must not be a secret-like name");
                }
            }
        }
    }

    /// What the gate does, for `nats-sink validate`.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "pre-sink policy: every matching rule applies; subjects no rule covers are {}",
            match self.unmatched_subject_action {
                UnmatchedAction::Reject => "dead-lettered (subject_not_covered_by_policy)",
                UnmatchedAction::Allow => "let through",
            }
        )];
        for (i, rule) in self.rules.iter().enumerate() {
            out.push(format!("  rule {} `{}`: {}", i + 1, rule.subject, rule.describe()));
        }
        out
    }

    /// Checks one message against every matching rule.
    pub fn check(&self, envelope: &Envelope) -> Result<(), Rejection> {
        let matching: Vec<&PreSinkRule> =
            self.rules.iter().filter(|r| subject::matches(&r.subject, envelope.subject())).collect();
        if matching.is_empty() {
            return match self.unmatched_subject_action {
                UnmatchedAction::Allow => Ok(()),
                UnmatchedAction::Reject => {
                    Err(Rejection::new(Step::PreSink, "subject_not_covered_by_policy", "rule subject `<unmatched>`"))
                }
            };
        }
        let mut found: Vec<(&str, &'static str)> = Vec::new();
        for rule in matching {
            found.extend(rule.violations(envelope).into_iter().map(|r| (rule.subject.as_str(), r)));
        }
        let Some(&(rule, reason)) = found.first() else { return Ok(()) };
        let mut detail = format!("rule subject `{rule}`");
        if found.len() > 1 {
            let all: Vec<&str> = found.iter().map(|(_, r)| *r).collect();
            detail.push_str(&format!("; all reasons: {}", all.join(", ")));
        }
        Err(Rejection::new(Step::PreSink, reason, detail))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sinks_contract::envelope::{AppMetadata, Headers};
    use sinks_contract::testing::envelope_with;

    fn rules(v: serde_json::Value) -> PreSinkPolicyConfig {
        serde_json::from_value(json!({"enabled": true, "rules": v})).unwrap()
    }

    fn msg(subject: &str, app: AppMetadata, mission: Option<serde_json::Value>, payload: &[u8]) -> Envelope {
        envelope_with("S", 1, subject, payload.to_vec(), Headers::new(), 1)
            .with_app_metadata(app)
            .with_mission_metadata(mission)
    }

    #[test]
    fn every_matching_rule_applies() {
        let c = rules(json!([
            {"subject": ">", "require_priority": true},
            {"subject": "ops.>", "required_labels": "alpha;bravo", "max_payload_bytes": 4},
            {"subject": "ops.secure", "require_encrypted_payload": true},
            {"subject": "mission.>", "require_mission_metadata": true, "allowed_mission_metadata_keys": ["phase", "track"]},
            {"subject": "cls.>", "require_classification": true}
        ]));
        let p = |priority: Option<&str>, labels: &[&str]| AppMetadata {
            priority: priority.map(str::to_owned),
            classification: None,
            labels: labels.iter().map(|s| (*s).to_owned()).collect(),
        };
        let table: Vec<(Envelope, Option<&str>)> = vec![
            (msg("a", p(Some("high"), &[]), None, b"{}"), None),
            (msg("a", p(None, &[]), None, b"{}"), Some("priority_required")),
            (msg("ops.x", p(Some("h"), &["bravo", "alpha"]), None, b"1234"), None),
            (msg("ops.x", p(Some("h"), &["alpha"]), None, b"1234"), Some("required_label_missing")),
            (msg("ops.x", p(Some("h"), &["alpha", "bravo"]), None, b"12345"), Some("payload_too_large")),
            (msg("ops.secure", p(Some("h"), &["alpha", "bravo"]), None, b"{}"), Some("encrypted_payload_required")),
            (msg("mission.a", p(Some("h"), &[]), None, b"{}"), Some("mission_metadata_required")),
            (msg("mission.a", p(Some("h"), &[]), Some(json!({"phase": "find"})), b"{}"), None),
            (
                msg("mission.a", p(Some("h"), &[]), Some(json!({"phase": "f", "pw": 1})), b"{}"),
                Some("mission_metadata_key_not_allowed"),
            ),
            (msg("cls.a", p(Some("h"), &[]), None, b"{}"), Some("classification_required")),
        ];
        for (i, (e, want)) in table.iter().enumerate() {
            let got = c.check(e).err().map(|r| r.reason.into_owned());
            assert_eq!(got.as_deref(), *want, "row {i}");
        }
        let both = c.check(&msg("ops.x", p(None, &[]), None, b"{}")).unwrap_err();
        assert_eq!(both.reason, "priority_required");
        assert!(both.detail.contains("required_label_missing"), "{}", both.detail);
    }

    #[test]
    fn unmatched_subjects_and_config_errors() {
        let mut c = rules(json!([{"subject": "a.>", "require_priority": true}]));
        let e = msg("b", AppMetadata::default(), None, b"{}");
        assert_eq!(c.check(&e).unwrap_err().reason, "subject_not_covered_by_policy");
        c.unmatched_subject_action = UnmatchedAction::Allow;
        assert_eq!(c.check(&e), Ok(()));
        let bad = rules(
            json!([{"subject": "a.>"}, {"allowed_mission_metadata_keys": ["1x", "api_key"], "required_labels": ["a;b"]}]),
        );
        let mut issues = Issues::default();
        bad.validate_at("pre_sink_policy", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(
            paths,
            [
                "pre_sink_policy.rules[0]",
                "pre_sink_policy.rules[1].required_labels",
                "pre_sink_policy.rules[1].allowed_mission_metadata_keys[0]",
                "pre_sink_policy.rules[1].allowed_mission_metadata_keys[1]",
            ]
        );
        let mut issues = Issues::default();
        PreSinkPolicyConfig { enabled: true, ..PreSinkPolicyConfig::default() }.validate_at("p", &mut issues);
        assert_eq!(issues.finish().unwrap_err().issues[0].path, "p.rules");
    }
}
