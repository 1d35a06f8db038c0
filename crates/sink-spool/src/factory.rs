//! The factory of the encrypted edge spool (`type = "spool"`): builds it from its `sink`
//! section, and tells the operator commands that its directory is local (short waits as an
//! optional target) and that `create_directory` creates it (`test-sink` leaves that off
//! unless `--create`).

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory};

use crate::{SpoolSink, SpoolSinkConfig};

/// Builds encrypted edge spools; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpoolFactory;

impl SinkFactory for SpoolFactory {
    type Config = SpoolSinkConfig;

    fn kind(&self) -> &'static str {
        "spool"
    }

    fn build(&self, config: SpoolSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(SpoolSink::new(config)?))
    }

    /// A directory on this machine: short waits as an optional target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_directory` creates the directory when it is missing.
    fn creation(&self, config: &SpoolSinkConfig) -> Option<Creation> {
        let what = format!("the directory {} when it is missing", config.directory.display());
        Creation::when(config.create_directory, "create_directory", what)
    }
}
