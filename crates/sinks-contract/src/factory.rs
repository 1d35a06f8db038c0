//! The factory of a sink kind: how a binary turns a config's `sink` section of that kind
//! into a sink, and what its operator commands need to know about the kind.
//!
//! Each sink crate implements [`SinkFactory`] once, over its own config type: the contract
//! parses the section into it (a bad field is named `sink.<field>`), shows it as the
//! effective config, and hands it to the factory's hooks; no hook reads the raw section. Only
//! [`SinkFactory::kind`] and [`SinkFactory::build`] are required; the other methods are hooks
//! with defaults that fit a kind which has nothing to say.
//!
//! A binary registers factories (`sinks_cli::Registry::with`) as [`DynSinkFactory`], the
//! section-level form every [`SinkFactory`] has through a blanket impl: an author never
//! implements it.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{ConfigError, SinkSection};
use crate::sink::Sink;

/// Builds the sinks of one kind (the `type` of a `sink` section) from its config type, and
/// describes the kind.
pub trait SinkFactory: Send + Sync + std::fmt::Debug + 'static {
    /// The kind's `sink` section without `type`: a serde struct whose defaults are the
    /// kind's (`deny_unknown_fields`, a default per optional field). Its serialization is
    /// the effective config (`nats-sink show-effective-config`).
    type Config: DeserializeOwned + Serialize;

    /// The `type` that names the kind in a config (lowercase, e.g. `file`).
    fn kind(&self) -> &'static str;

    /// Fills in what a parsed config leaves to other fields (an extension from the
    /// compression), before it is shown as the effective config and built. Nothing by
    /// default.
    fn complete(&self, config: &mut Self::Config) {
        let _ = config;
    }

    /// Checks `config` beyond what serde checks (every problem named `sink.<field>`) and
    /// builds the sink, without any I/O yet (the runner opens it).
    fn build(&self, config: Self::Config) -> Result<BuiltSink, ConfigError>;

    /// Where the kind's destination is, which sets its waits as an optional fan-out target.
    fn reach(&self) -> Reach {
        Reach::Remote
    }

    /// What opening a sink of `config` would create (a missing directory, missing tables):
    /// `nats-sink test-sink` turns the switch off unless `--create` and names what `run`
    /// would create. `None` when the kind creates nothing or the switch is off
    /// ([`Creation::when`]).
    fn creation(&self, config: &Self::Config) -> Option<Creation> {
        let _ = config;
        None
    }

    /// Lines `nats-sink validate` prints about a sink of `config` (its batch mode, and where
    /// a sample message of `stream` on `subject` would go). Empty by default.
    fn describe(&self, config: &Self::Config, stream: &str, subject: &str) -> Vec<String> {
        let _ = (config, stream, subject);
        Vec::new()
    }

    /// Environment variables the kind's driver reads once, with the values the process sets
    /// before it starts any thread when the operator has not set them. None by default.
    fn process_defaults(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}

/// A [`SinkFactory`] at the level of the raw `sink` section, as a registry holds it (`Box<dyn
/// DynSinkFactory>`). Every [`SinkFactory`] is one; nothing else needs to implement it.
pub trait DynSinkFactory: Send + Sync + std::fmt::Debug {
    /// [`SinkFactory::kind`].
    fn kind(&self) -> &'static str;

    /// Parses `section` (without `type`; a bad field is named `sink.<field>`), completes it,
    /// keeps its serialization as [`BuiltSink::effective`] and builds the sink.
    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError>;

    /// [`SinkFactory::reach`].
    fn reach(&self) -> Reach;

    /// [`SinkFactory::creation`] of the parsed section; `None` when it does not parse.
    fn creation(&self, section: &SinkSection) -> Option<Creation>;

    /// [`SinkFactory::describe`] of the parsed section; empty when it does not parse.
    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String>;

    /// [`SinkFactory::process_defaults`].
    fn process_defaults(&self) -> &'static [(&'static str, &'static str)];
}

/// The config of `section` for `factory`: parsed, then completed.
fn parsed<F: SinkFactory>(factory: &F, section: &SinkSection) -> Result<F::Config, ConfigError> {
    let mut config = section.parse()?;
    factory.complete(&mut config);
    Ok(config)
}

impl<F: SinkFactory> DynSinkFactory for F {
    fn kind(&self) -> &'static str {
        SinkFactory::kind(self)
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = parsed(self, section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        let mut built = SinkFactory::build(self, config)?;
        built.effective = effective;
        Ok(built)
    }

    fn reach(&self) -> Reach {
        SinkFactory::reach(self)
    }

    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        SinkFactory::creation(self, &parsed(self, section).ok()?)
    }

    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        parsed(self, section).map(|c| SinkFactory::describe(self, &c, stream, subject)).unwrap_or_default()
    }

    fn process_defaults(&self) -> &'static [(&'static str, &'static str)] {
        SinkFactory::process_defaults(self)
    }
}

/// A sink built from its config ([`SinkFactory::build`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct BuiltSink {
    /// The sink, not opened yet.
    pub sink: Arc<dyn Sink>,
    /// The effective config with its defaults filled in (`nats-sink show-effective-config`),
    /// without `type`: the serialization of the parsed config, which
    /// [`DynSinkFactory::build`] sets (`null` until then).
    pub effective: serde_json::Value,
    /// The `CREATE TABLE` statements of its tables (`nats-sink ddl`), for a kind with tables.
    pub ddl: Option<Vec<String>>,
}

impl BuiltSink {
    /// A sink, not opened yet.
    pub fn new(sink: impl Sink + 'static) -> Self {
        Self { sink: Arc::new(sink), effective: serde_json::Value::Null, ddl: None }
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
    /// `what` is created because the boolean `field` is `on` (its value in the parsed
    /// config); `None` when it is off.
    pub fn when(on: bool, field: &str, what: impl Into<String>) -> Option<Self> {
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

    /// The config of `plain`: a name, and a switch that defaults to on.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        name: String,
        #[serde(default = "on")]
        create: bool,
        #[serde(default)]
        upper: Option<String>,
    }

    fn on() -> bool {
        true
    }

    impl SinkFactory for Plain {
        type Config = Settings;

        fn kind(&self) -> &'static str {
            "plain"
        }

        fn complete(&self, config: &mut Settings) {
            config.upper = Some(config.name.to_uppercase());
        }

        fn build(&self, config: Settings) -> Result<BuiltSink, ConfigError> {
            if config.name.is_empty() {
                return Err(ConfigError::single("sink.name", "must not be empty"));
            }
            Ok(BuiltSink::new(Named(config.name)).with_ddl(vec!["CREATE TABLE t".into()]))
        }

        fn creation(&self, config: &Settings) -> Option<Creation> {
            Creation::when(config.create, "create", format!("the place {}", config.name))
        }
    }

    /// A kind with no hooks of its own.
    #[derive(Debug)]
    struct Bare;

    impl SinkFactory for Bare {
        type Config = serde_json::Map<String, serde_json::Value>;

        fn kind(&self) -> &'static str {
            "bare"
        }

        fn build(&self, _: Self::Config) -> Result<BuiltSink, ConfigError> {
            Ok(BuiltSink::new(Named("bare".into())))
        }
    }

    fn section(value: serde_json::Value) -> SinkSection {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_factory_parses_its_section_once_and_the_effective_config_is_the_completed_one() {
        let plain: &dyn DynSinkFactory = &Plain;
        let s = section(serde_json::json!({"type": "plain", "name": "p"}));
        let built = plain.build(&s).unwrap();
        assert_eq!(built.sink.name(), "p");
        assert_eq!(built.effective, serde_json::json!({"name": "p", "create": true, "upper": "P"}));
        assert_eq!(built.ddl, Some(vec!["CREATE TABLE t".to_owned()]));
        let missing = plain.build(&section(serde_json::json!({"type": "plain"}))).unwrap_err();
        assert_eq!(missing.issues[0].path, "sink.name");
        let unknown = plain.build(&section(serde_json::json!({"type": "plain", "name": "p", "x": 1}))).unwrap_err();
        assert_eq!(unknown.issues[0].path, "sink.x");
        let invalid = plain.build(&section(serde_json::json!({"type": "plain", "name": ""}))).unwrap_err();
        assert_eq!(invalid.issues[0].path, "sink.name", "the factory's own checks");
        assert_eq!(plain.kind(), "plain");
    }

    #[test]
    fn the_hooks_see_the_parsed_config_and_default_to_nothing() {
        let bare: &dyn DynSinkFactory = &Bare;
        let s = section(serde_json::json!({"type": "bare", "any": 1}));
        assert_eq!(bare.build(&s).unwrap().effective, serde_json::json!({"any": 1}));
        assert_eq!(bare.reach(), Reach::Remote);
        assert!(bare.creation(&s).is_none() && bare.describe(&s, "S", "s.x").is_empty());
        assert!(bare.process_defaults().is_empty());
        let plain: &dyn DynSinkFactory = &Plain;
        let on = plain.creation(&section(serde_json::json!({"type": "plain", "name": "p"}))).unwrap();
        assert_eq!((on.field.as_str(), on.what.as_str()), ("create", "the place p"), "the default is the config's");
        let off = section(serde_json::json!({"type": "plain", "name": "p", "create": false}));
        assert!(plain.creation(&off).is_none());
        assert!(plain.creation(&section(serde_json::json!({"type": "plain"}))).is_none(), "unparsed: nothing");
    }
}
