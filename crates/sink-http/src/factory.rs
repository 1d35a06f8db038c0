//! The factory of the HTTP sink (`type = "http"`): builds it from its `sink` section (its
//! endpoint is remote, the default for the waits as an optional target).

use sinks_contract::{BuiltSink, ConfigError, SinkFactory};

use crate::{HttpSink, HttpSinkConfig};

/// Builds HTTP sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpFactory;

impl SinkFactory for HttpFactory {
    type Config = HttpSinkConfig;

    fn kind(&self) -> &'static str {
        "http"
    }

    fn build(&self, config: HttpSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(HttpSink::new(config)?))
    }
}
