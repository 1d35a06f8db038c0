//! Message metadata: application fields resolved from headers (this file), the standard
//! metadata document every JSON-storing sink writes next to the payload (`doc.rs`), and the
//! event document of the S3, Coherence and NoSQL sinks that holds it (`event.rs`), both
//! re-exported here.
//!
//! Application fields (priority, classification, labels) resolve as in the reference: a
//! configured header that is present and non-empty wins; present but blank means explicitly
//! none; absent falls through to the first subject rule that sets the field, then to the
//! global default.

mod doc;
mod event;

pub use doc::*;
pub use event::EventDoc;

use serde::{Deserialize, Serialize};

use crate::subject;
use sinks_contract::envelope::{AppMetadata, Headers};

/// Reserved NATS header names captured in `metadata.nats.reserved_headers` when present.
pub const NATS_RESERVED_HEADERS: [&str; 24] = [
    "Nats-Msg-Id",
    "Nats-Expected-Stream",
    "Nats-Expected-Last-Msg-Id",
    "Nats-Expected-Last-Sequence",
    "Nats-Expected-Last-Subject-Sequence",
    "Nats-Expected-Last-Subject-Sequence-Subject",
    "Nats-Rollup",
    "Nats-TTL",
    "Nats-Stream",
    "Nats-Subject",
    "Nats-Sequence",
    "Nats-Last-Sequence",
    "Nats-Time-Stamp",
    "Nats-Num-Pending",
    "Nats-UpTo-Sequence",
    "Nats-Stream-Source",
    "Nats-Trace-Dest",
    "Nats-Trace-Only",
    "Nats-Trace-Hop",
    "Nats-Trace-Origin-Account",
    "Nats-Schedule",
    "Nats-Schedule-TTL",
    "Nats-Schedule-Target",
    "Nats-Schedule-Time-Zone",
];

/// Non-`Nats-` headers that are also captured as standard headers.
pub const OTHER_STANDARD_HEADERS: [&str; 2] = ["traceparent", "Accept-Encoding"];

/// Default header for priority.
pub const DEFAULT_PRIORITY_HEADER: &str = "Nats-Sinks-Priority";
/// Default header for classification.
pub const DEFAULT_CLASSIFICATION_HEADER: &str = "Nats-Sinks-Classification";
/// Default header for labels (`;`-separated).
pub const DEFAULT_LABELS_HEADER: &str = "Nats-Sinks-Labels";

/// `message_metadata` config section: how priority, classification and labels resolve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MessageMetadataConfig {
    /// Priority header and default.
    pub priority: FieldConfig,
    /// Classification header and default.
    pub classification: FieldConfig,
    /// Labels header and default labels.
    pub labels: LabelsConfig,
    /// Subject rules supplying defaults when the header is absent; first match per field wins.
    pub rules: Vec<MetadataRule>,
}

impl Default for MessageMetadataConfig {
    fn default() -> Self {
        Self {
            priority: FieldConfig { header: DEFAULT_PRIORITY_HEADER.into(), default: None },
            classification: FieldConfig { header: DEFAULT_CLASSIFICATION_HEADER.into(), default: None },
            labels: LabelsConfig { header: DEFAULT_LABELS_HEADER.into(), default: Labels::default() },
            rules: Vec::new(),
        }
    }
}

/// One scalar metadata field: which header carries it and the global default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    /// Header name (case-insensitive) that carries the value; defaults to the standard
    /// `Nats-Sinks-*` header of the field.
    #[serde(default)]
    pub header: String,
    /// Value used when the header is absent and no rule applies.
    #[serde(default)]
    pub default: Option<String>,
}

/// Labels: header and default labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelsConfig {
    /// Header name (case-insensitive); its value is `;`-separated. Defaults to
    /// `Nats-Sinks-Labels`.
    #[serde(default)]
    pub header: String,
    /// Labels used when the header is absent and no rule applies.
    #[serde(default)]
    pub default: Labels,
}

/// Labels given in config either as a `;`-separated string or as an array of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Labels {
    /// A JSON array; items may not contain `;`.
    List(Vec<String>),
    /// A `;`-separated string.
    Text(String),
}

impl Default for Labels {
    fn default() -> Self {
        Self::List(Vec::new())
    }
}

impl Labels {
    /// Normalized labels: trimmed, blanks dropped, de-duplicated in order.
    pub fn normalized(&self) -> Vec<String> {
        match self {
            Self::List(items) => normalize_labels(items.iter().map(String::as_str)),
            Self::Text(text) => normalize_labels(text.split(';')),
        }
    }

    /// The first array item containing `;`, which the reference rejects.
    pub fn item_with_separator(&self) -> Option<&str> {
        match self {
            Self::List(items) => items.iter().find(|i| i.contains(';')).map(String::as_str),
            Self::Text(_) => None,
        }
    }
}

/// A subject rule: defaults for one subject pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataRule {
    /// Subject pattern the rule applies to.
    pub subject: String,
    /// Priority default for matching subjects (`null` sets "none").
    #[serde(default, skip_serializing_if = "Option::is_none", with = "double_option")]
    pub priority: Option<Option<String>>,
    /// Classification default for matching subjects (`null` sets "none").
    #[serde(default, skip_serializing_if = "Option::is_none", with = "double_option")]
    pub classification: Option<Option<String>>,
    /// Labels default for matching subjects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

mod double_option {
    //! Distinguishes an absent field from an explicit `null`.
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<Option<String>>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().and_then(Option::as_deref).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

impl MessageMetadataConfig {
    /// Fills header names left out of the config with the standard `Nats-Sinks-*` names.
    pub fn fill_default_headers(&mut self) {
        for (header, standard) in [
            (&mut self.priority.header, DEFAULT_PRIORITY_HEADER),
            (&mut self.classification.header, DEFAULT_CLASSIFICATION_HEADER),
            (&mut self.labels.header, DEFAULT_LABELS_HEADER),
        ] {
            if header.is_empty() {
                *header = standard.to_owned();
            }
        }
    }

    /// Problems with the section, as `(field path, message)` pairs.
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut errors = Vec::new();
        for (name, header) in [
            ("priority", &self.priority.header),
            ("classification", &self.classification.header),
            ("labels", &self.labels.header),
        ] {
            if header.trim().is_empty() || header.chars().any(|c| c.is_control() || c == ':') {
                errors.push((format!("message_metadata.{name}.header"), "must be a valid header name".into()));
            }
        }
        if let Some(item) = self.labels.default.item_with_separator() {
            errors.push(("message_metadata.labels.default".into(), format!("array item `{item}` contains `;`")));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if let Err(e) = subject::validate_pattern(&rule.subject) {
                errors.push((format!("message_metadata.rules[{i}].subject"), e.to_string()));
            }
            if rule.priority.is_none() && rule.classification.is_none() && rule.labels.is_none() {
                errors.push((
                    format!("message_metadata.rules[{i}]"),
                    "a rule must set priority, classification or labels".into(),
                ));
            }
            if let Some(item) = rule.labels.as_ref().and_then(Labels::item_with_separator) {
                errors
                    .push((format!("message_metadata.rules[{i}].labels"), format!("array item `{item}` contains `;`")));
            }
        }
        errors
    }

    /// Resolves priority, classification and labels for one message.
    pub fn resolve(&self, subject: &str, headers: &Headers) -> AppMetadata {
        let rule_for = |pick: &dyn Fn(&MetadataRule) -> bool| {
            self.rules.iter().find(|r| pick(r) && subject::matches(&r.subject, subject))
        };
        let scalar = |field: &FieldConfig, pick: fn(&MetadataRule) -> &Option<Option<String>>| match headers
            .get(&field.header)
        {
            Some(value) => clean(value),
            None => match rule_for(&|r| pick(r).is_some()) {
                Some(rule) => pick(rule).clone().flatten().as_deref().and_then(clean),
                None => field.default.as_deref().and_then(clean),
            },
        };
        let labels = match headers.get(&self.labels.header) {
            Some(value) => normalize_labels(value.split(';')),
            None => match rule_for(&|r| r.labels.is_some()) {
                Some(rule) => rule.labels.as_ref().map(Labels::normalized).unwrap_or_default(),
                None => self.labels.default.normalized(),
            },
        };
        AppMetadata {
            priority: scalar(&self.priority, |r| &r.priority),
            classification: scalar(&self.classification, |r| &r.classification),
            labels,
        }
    }
}

fn clean(value: &str) -> Option<String> {
    let t = value.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

fn normalize_labels<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in items.flat_map(|i| i.split(';')) {
        if let Some(label) = clean(part)
            && !out.contains(&label)
        {
            out.push(label);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MessageMetadataConfig {
        let mut c = MessageMetadataConfig::default();
        c.priority.default = Some("routine".into());
        c.labels.default = Labels::List(vec!["a".into(), " b ".into(), "a".into()]);
        c.rules.push(MetadataRule {
            subject: "orders.urgent".into(),
            priority: Some(Some("immediate".into())),
            classification: None,
            labels: Some(Labels::Text("x; y;;x".into())),
        });
        c.rules.push(MetadataRule {
            subject: "orders.*".into(),
            priority: None,
            classification: Some(Some("SECRET".into())),
            labels: None,
        });
        c
    }

    #[test]
    fn resolution_order_table() {
        let c = config();
        let none = Headers::new();
        let r = c.resolve("orders.urgent", &none);
        assert_eq!(r.priority.as_deref(), Some("immediate"));
        assert_eq!(r.classification.as_deref(), Some("SECRET"), "second rule sets classification");
        assert_eq!(r.labels, ["x", "y"]);

        let r = c.resolve("other", &none);
        assert_eq!(r.priority.as_deref(), Some("routine"));
        assert_eq!(r.classification, None);
        assert_eq!(r.labels, ["a", "b"]);

        let blank = Headers::new().with("nats-sinks-priority", "  ").with("Nats-Sinks-Labels", "");
        let r = c.resolve("orders.urgent", &blank);
        assert_eq!(r.priority, None, "a present blank header means none and beats rules");
        assert!(r.labels.is_empty());

        let set = Headers::new().with("NATS-SINKS-PRIORITY", " flash ");
        assert_eq!(c.resolve("orders.urgent", &set).priority.as_deref(), Some("flash"));
    }

    #[test]
    fn validation_names_fields() {
        let mut c = config();
        c.rules.push(MetadataRule { subject: "a..b".into(), priority: None, classification: None, labels: None });
        c.labels.default = Labels::List(vec!["a;b".into()]);
        let paths: Vec<String> = c.validate().into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            ["message_metadata.labels.default", "message_metadata.rules[2].subject", "message_metadata.rules[2]"]
        );
    }
}
