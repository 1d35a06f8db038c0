//! The factory of the Oracle Coherence CE sink (`type = "coherence"`): builds it from its
//! `sink` section (its proxy is remote, the default for the waits as an optional target).

use sinks_contract::{BuiltSink, ConfigError, SinkFactory};

use crate::{CoherenceSink, CoherenceSinkConfig};

/// Builds Oracle Coherence CE sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoherenceFactory;

impl SinkFactory for CoherenceFactory {
    type Config = CoherenceSinkConfig;

    fn kind(&self) -> &'static str {
        "coherence"
    }

    fn build(&self, config: CoherenceSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(CoherenceSink::new(config)?))
    }
}
