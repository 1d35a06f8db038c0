//! The factory of a sink kind: how a binary turns a config's `sink` section of that kind
//! into a sink, and what its operator commands need to know about the kind.
//!
//! Each sink crate implements [`SinkFactory`] once; a binary registers the factories of the
//! kinds it wants (`sinks_cli::Registry::with`) and gets every operator command for them.
//! Only [`SinkFactory::kind`] and [`SinkFactory::build`] are required; the other methods are
//! hooks with defaults that fit a kind which has nothing to say.

use std::sync::Arc;

use crate::config::{ConfigError, SinkSection};
use crate::sink::Sink;

/// Builds the sinks of one kind (the `type` of a `sink` section) and describes the kind.
pub trait SinkFactory: Send + Sync + std::fmt::Debug {
    /// The `type` that names the kind in a config (lowercase, e.g. `file`).
    fn kind(&self) -> &'static str;

    /// Parses and validates `section` (a bad field is named `sink.<field>`) and builds the
    /// sink, without any I/O yet (the runner opens it).
    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError>;

    /// Where the kind's destination is, which sets its waits as an optional fan-out target.
    fn reach(&self) -> Reach {
        Reach::Remote
    }

    /// What opening a sink of `section` would create (a missing directory, missing tables):
    /// `nats-sink test-sink` turns the switch off unless `--create` and names what `run`
    /// would create. `None` when the kind creates nothing or the switch is off.
    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        let _ = section;
        None
    }

    /// Lines `nats-sink validate` prints about a sink of `section` (its batch mode, and where
    /// a sample message of `stream` on `subject` would go). Empty by default.
    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        let _ = (section, stream, subject);
        Vec::new()
    }

    /// Environment variables the kind's driver reads once, with the values the process sets
    /// before it starts any thread when the operator has not set them. None by default.
    fn process_defaults(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}

/// A sink built from its section ([`SinkFactory::build`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct BuiltSink {
    /// The sink, not opened yet.
    pub sink: Arc<dyn Sink>,
    /// The effective config with its defaults filled in (`nats-sink show-effective-config`),
    /// without `type`.
    pub effective: serde_json::Value,
    /// The `CREATE TABLE` statements of its tables (`nats-sink ddl`), for a kind with tables.
    pub ddl: Option<Vec<String>>,
}

impl BuiltSink {
    /// A sink and its effective config (`serde_json::to_value` of the parsed settings).
    pub fn new(sink: impl Sink + 'static, effective: serde_json::Value) -> Self {
        Self { sink: Arc::new(sink), effective, ddl: None }
    }

    /// With the `CREATE TABLE` statements of its tables.
    pub fn with_ddl(mut self, statements: Vec<String>) -> Self {
        self.ddl = Some(statements);
        self
    }
}

/// Where a destination is ([`SinkFactory::reach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reach {
    /// On this machine (a directory): short waits as an optional target.
    Local,
    /// Behind a network hop: longer waits.
    Remote,
}

/// What opening a sink would create, and the switch that turns it off ([`SinkFactory::creation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Creation {
    /// The boolean field of the section that switches creation (`create_directory`).
    pub field: String,
    /// What `run` creates, completing "`run` creates …" (`the directory /out when it is missing`).
    pub what: String,
}

impl Creation {
    /// `what` is created when the boolean `field` of `section` is on (`default` when unset).
    pub fn when_on(section: &SinkSection, field: &str, default: bool, what: impl Into<String>) -> Option<Self> {
        let on = section.0.get(field).and_then(serde_json::Value::as_bool).unwrap_or(default);
        on.then(|| Self { field: field.to_owned(), what: what.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink named after its section's `name`.
    #[derive(Debug)]
    struct Named(String);

    #[async_trait::async_trait]
    impl Sink for Named {
        fn name(&self) -> &str {
            &self.0
        }

        async fn write(&self, batch: &[crate::Envelope], _: std::time::Duration) -> crate::BatchResult {
            Ok(batch.iter().map(|_| crate::MessageOutcome::Committed).collect())
        }

        async fn health_check(&self) -> Result<(), crate::SinkError> {
            Ok(())
        }
    }

    #[derive(Debug)]
    struct Plain;

    impl SinkFactory for Plain {
        fn kind(&self) -> &'static str {
            "plain"
        }

        fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
            #[derive(serde::Serialize, serde::Deserialize)]
            struct Settings {
                name: String,
            }
            let settings: Settings = section.parse()?;
            let effective = serde_json::to_value(&settings).unwrap();
            Ok(BuiltSink::new(Named(settings.name), effective).with_ddl(vec!["CREATE TABLE t".into()]))
        }
    }

    fn section(value: serde_json::Value) -> SinkSection {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_factory_builds_from_its_section_and_its_hooks_default_to_nothing() {
        let s = section(serde_json::json!({"type": "plain", "name": "p"}));
        let built = Plain.build(&s).unwrap();
        assert_eq!((built.sink.name(), &built.effective), ("p", &serde_json::json!({"name": "p"})));
        assert_eq!(built.ddl, Some(vec!["CREATE TABLE t".to_owned()]));
        let bad = Plain.build(&section(serde_json::json!({"type": "plain"}))).unwrap_err();
        assert_eq!(bad.issues[0].path, "sink.name");
        assert_eq!(Plain.reach(), Reach::Remote);
        assert!(Plain.creation(&s).is_none() && Plain.describe(&s, "S", "s.x").is_empty());
        assert!(Plain.process_defaults().is_empty());
    }

    #[test]
    fn creation_follows_its_switch() {
        let unset = section(serde_json::json!({"type": "plain"}));
        let on = Creation::when_on(&unset, "create", true, "it").unwrap();
        assert_eq!((on.field.as_str(), on.what.as_str()), ("create", "it"));
        assert!(Creation::when_on(&unset, "create", false, "it").is_none());
        let off = section(serde_json::json!({"type": "plain", "create": false}));
        assert!(Creation::when_on(&off, "create", true, "it").is_none());
    }
}
