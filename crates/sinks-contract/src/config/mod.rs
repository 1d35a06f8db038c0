//! The configuration types a sink crate uses: the problems a config can have
//! ([`ConfigError`], [`ConfigIssue`], [`Issues`]), the `sink` section a sink parses
//! ([`SinkSection`]), deserialization that names the bad field ([`deserialize_at`]), and the
//! `encryption` section shared by payload encryption and the spool.
//!
//! Loading a whole config file (figment, environment overrides, cross-section rules) is the
//! runtime's job (`sinks_runtime::config`); nothing here reads a file or the environment.

pub mod encryption;
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

/// Deserializes `value` into `T`, naming a bad field with its full path under `prefix`.
pub fn deserialize_at<T: DeserializeOwned>(prefix: &str, value: serde_json::Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let mut path = match (prefix, inner.as_str()) {
            (p, ".") => p.to_owned(),
            ("", i) => i.to_owned(),
            (p, i) => format!("{p}.{i}"),
        };
        let message = e.inner().to_string();
        // serde reports a missing field at its parent (and an unknown one at itself); name the
        // field itself in both cases.
        for marker in ["unknown field `", "missing field `"] {
            if let Some(field) = message.strip_prefix(marker).and_then(|rest| rest.split('`').next()) {
                let already = path == field || path.ends_with(&format!(".{field}"));
                if !already {
                    path = if path.is_empty() || path == "." { field.to_owned() } else { format!("{path}.{field}") };
                }
            }
        }
        if path.is_empty() {
            path = "config".to_owned();
        }
        ConfigError::single(path, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
