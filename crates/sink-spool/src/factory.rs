//! The factory of the encrypted edge spool (`type = "spool"`): builds it from its `sink`
//! section, and tells the operator commands that its directory is local (short waits as an
//! optional target) and that `create_directory` creates it (`test-sink` leaves that off
//! unless `--create`).

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory, SinkSection};

use crate::{SpoolSink, SpoolSinkConfig};

/// Builds encrypted edge spools; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpoolFactory;

impl SinkFactory for SpoolFactory {
    fn kind(&self) -> &'static str {
        "spool"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = SpoolSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        Ok(BuiltSink::new(SpoolSink::new(config)?, effective))
    }

    /// A directory on this machine: short waits as an optional target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_directory` (default on) creates the directory when it is missing.
    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        let directory = section.0.get("directory").and_then(serde_json::Value::as_str).unwrap_or("?");
        Creation::when_on(section, "create_directory", true, format!("the directory {directory} when it is missing"))
    }
}
