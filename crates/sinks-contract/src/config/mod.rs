//! The configuration types a sink crate uses: the problems a config can have
//! ([`ConfigError`], [`ConfigIssue`], [`Issues`]), the `sink` section a sink parses
//! ([`SinkSection`]), deserialization that names the bad field ([`deserialize_at`]), and the
//! words every message uses ([`wording`]).
//!
//! Loading a whole config file (figment, environment overrides, cross-section rules) is the
//! runtime's job (`sinks_runtime::config`); nothing here reads a file or the environment.

pub mod wording;

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The `sink` section: a `type` and the sink's own settings, parsed by the sink crate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SinkSection(pub serde_json::Map<String, serde_json::Value>);

impl SinkSection {
    /// The `type` field (`file`, `mysql`, …).
    pub fn kind(&self) -> Option<&str> {
        self.0.get("type").and_then(serde_json::Value::as_str)
    }

    /// Parses the settings (without `type`) into a sink's config type, naming any bad
    /// field as `sink.<field>`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let mut map = self.0.clone();
        map.remove("type");
        deserialize_at("sink", serde_json::Value::Object(map))
    }
}

/// One problem with the configuration, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted field path, e.g. `nats.stream` or `sink.directory`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    /// `` `path`: message ``, the message in the user's words ([`wording::rephrase`]: serde's
    /// Rust types and field lists become config words and a "did you mean"; `message` itself
    /// keeps serde's text for tools that read it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.path, wording::rephrase(&self.message))
    }
}

/// A configuration that cannot be used; lists every problem found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, each naming its field.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration: ")?;
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// An error with one issue.
    pub fn single(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { issues: vec![ConfigIssue { path: path.into(), message: message.into() }] }
    }
}

/// Collects validation problems.
#[derive(Debug, Default)]
pub struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// Records a problem at `path`.
    pub fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(ConfigIssue { path: path.to_owned(), message: message.into() });
    }

    /// Records a problem when `value` is outside `min..=max`.
    pub fn range(&mut self, path: &str, value: u64, min: u64, max: u64) {
        if value < min || value > max {
            let bound = if max == u64::MAX { format!("at least {min}") } else { format!("in {min}..={max}") };
            self.push(path, format!("must be {bound} (got {value})"));
        }
    }

    /// `Ok` when nothing was recorded.
    pub fn finish(self) -> Result<(), ConfigError> {
        if self.0.is_empty() { Ok(()) } else { Err(ConfigError { issues: self.0 }) }
    }
}

/// Which letters an environment variable name may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvName {
    /// Letters of either case, digits and `_`.
    AnyCase,
    /// Upper-case letters, digits and `_` only.
    Uppercase,
}

/// True when `name` can name an environment variable: 1 to 128 letters (of the case `case`
/// allows), digits and `_`, not starting with a digit.
pub fn is_env_name(name: &str, case: EnvName) -> bool {
    let letter = |c: char| match case {
        EnvName::AnyCase => c.is_ascii_alphabetic(),
        EnvName::Uppercase => c.is_ascii_uppercase(),
    };
    !name.is_empty()
        && name.len() <= 128
        && name.chars().all(|c| letter(c) || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Checks that `name` looks like an environment variable name.
pub fn check_env_name(name: &str, path: &str, issues: &mut Issues) {
    if !is_env_name(name, EnvName::AnyCase) {
        issues.push(path, "must be the name of an environment variable (letters, digits, `_`)");
    }
}

/// Checks that `name` is an upper-case environment variable name.
pub fn check_uppercase_env_name(name: &str, path: &str, issues: &mut Issues) {
    if !is_env_name(name, EnvName::Uppercase) {
        issues.push(path, "must be an uppercase environment variable name (letters, digits, `_`)");
    }
}

/// Most problems one deserialization reports before it stops looking.
const MAX_ISSUES: usize = 32;

/// Deserializes `value` into `T`, naming every bad field with its full path under `prefix`.
///
/// serde stops at the first problem; to report them all at once, the offending value is taken
/// out (an unknown field, or a value of the wrong type, which then takes its default) and the
/// rest is read again, up to `MAX_ISSUES` (32) problems. A missing required field ends the search.
pub fn deserialize_at<T: DeserializeOwned>(prefix: &str, value: serde_json::Value) -> Result<T, ConfigError> {
    let (parsed, issues) = deserialize_salvaged(prefix, value);
    parsed.filter(|_| issues.is_empty()).ok_or(ConfigError { issues })
}

/// [`deserialize_at`] that also returns `T` as read once every bad value was taken out (the
/// caller can check the rest and report it all at once); `None` when the search ended first.
pub fn deserialize_salvaged<T: DeserializeOwned>(
    prefix: &str,
    mut value: serde_json::Value,
) -> (Option<T>, Vec<ConfigIssue>) {
    let mut issues = Vec::new();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) => return (Some(parsed), issues),
            Err(e) => e,
        };
        let (issue, segments) = issue_of(prefix, &error);
        let missing = issue.message.starts_with("missing field `");
        let repeated = issues.contains(&issue);
        if !repeated {
            issues.push(issue);
        }
        if missing || repeated || issues.len() >= MAX_ISSUES || !take_out(&mut value, &segments) {
            return (None, issues);
        }
    }
}

/// A path segment of `value`: a map key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// The issue of one serde error, and where its value is in the tree.
fn issue_of(prefix: &str, error: &serde_path_to_error::Error<serde_json::Error>) -> (ConfigIssue, Vec<Segment>) {
    let mut segments: Vec<Segment> = error
        .path()
        .iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
            serde_path_to_error::Segment::Enum { variant } => Some(Segment::Key(variant.clone())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect();
    let inner = error.path().to_string();
    let mut path = match (prefix, inner.as_str()) {
        (p, ".") => p.to_owned(),
        ("", i) => i.to_owned(),
        (p, i) => format!("{p}.{i}"),
    };
    let message = error.inner().to_string();
    // serde reports a missing field at its parent (and an unknown one at itself); name the
    // field itself in both cases.
    for marker in ["unknown field `", "missing field `"] {
        if let Some(field) = message.strip_prefix(marker).and_then(|rest| rest.split('`').next()) {
            let already = path == field || path.ends_with(&format!(".{field}"));
            if !already {
                path = if path.is_empty() || path == "." { field.to_owned() } else { format!("{path}.{field}") };
            }
            if segments.last() != Some(&Segment::Key(field.to_owned())) {
                segments.push(Segment::Key(field.to_owned()));
            }
        }
    }
    if path.is_empty() {
        path = "config".to_owned();
    }
    (ConfigIssue { path, message }, segments)
}

/// Removes the value at `segments` from `value`; false when there is nothing to remove.
fn take_out(value: &mut serde_json::Value, segments: &[Segment]) -> bool {
    let Some((last, parents)) = segments.split_last() else { return false };
    let mut at = value;
    for segment in parents {
        at = match (segment, at) {
            (Segment::Key(k), serde_json::Value::Object(map)) => match map.get_mut(k) {
                Some(next) => next,
                None => return false,
            },
            (Segment::Index(i), serde_json::Value::Array(items)) => match items.get_mut(*i) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, at) {
        (Segment::Key(k), serde_json::Value::Object(map)) => map.remove(k).is_some(),
        (Segment::Index(i), serde_json::Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_reported_at_once() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only deserialized")]
        struct Inner {
            #[serde(default)]
            size: u32,
        }
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only deserialized")]
        struct Section {
            #[serde(default)]
            directory: String,
            #[serde(default)]
            fsync: bool,
            #[serde(default)]
            inner: Option<Inner>,
            #[serde(default)]
            list: Vec<Inner>,
        }
        let value = serde_json::json!({
            "directroy": "/x", "fsync": "yes", "inner": {"size": -1, "colour": 1}, "list": [{"size": 1}, {"sise": 2}],
        });
        let e = deserialize_at::<Section>("sink", value).unwrap_err();
        let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            ["sink.directroy", "sink.fsync", "sink.inner.colour", "sink.inner.size", "sink.list[1].sise"]
        );
        // A required field that is missing ends the search (nothing can stand in for it).
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only deserialized")]
        struct Required {
            url: String,
        }
        let e = deserialize_at::<Required>("sink", serde_json::json!({"uri": 1})).unwrap_err();
        let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["sink.uri", "sink.url"]);
        assert!(deserialize_at::<Required>("sink", serde_json::json!({"url": "x"})).is_ok());
        let (read, issues) = deserialize_salvaged::<Section>("sink", serde_json::json!({"fsync": "yes", "zz": 1}));
        assert_eq!((read.map(|s| s.fsync), issues.len()), (Some(false), 2), "defaults stand in for bad values");
    }

    #[test]
    fn environment_variable_names() {
        let rows = [
            ("EVENTS_TOKEN", true, true),
            ("_X1", true, true),
            ("lower_case", true, false),
            ("Mixed", true, false),
            ("1ST", false, false),
            ("", false, false),
            ("A-B", false, false),
            ("A B", false, false),
            ("ÄRGER", false, false),
        ];
        for (name, any, upper) in rows {
            assert_eq!(is_env_name(name, EnvName::AnyCase), any, "{name}");
            assert_eq!(is_env_name(name, EnvName::Uppercase), upper, "{name}");
        }
        assert!(is_env_name(&"A".repeat(128), EnvName::Uppercase));
        assert!(!is_env_name(&"A".repeat(129), EnvName::AnyCase));
        let mut issues = Issues::default();
        check_env_name("ok_name", "a", &mut issues);
        check_uppercase_env_name("ok_name", "b", &mut issues);
        check_env_name("9", "c", &mut issues);
        let paths: Vec<String> = issues.finish().unwrap_err().issues.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["b", "c"]);
    }
}
