//! The factory of the HTTP sink (`type = "http"`): builds it from its `sink` section (its
//! endpoint is remote, the default for the waits as an optional target).

use sinks_contract::{BuiltSink, ConfigError, SinkFactory, SinkSection};

use crate::{HttpSink, HttpSinkConfig};

/// Builds HTTP sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpFactory;

impl SinkFactory for HttpFactory {
    fn kind(&self) -> &'static str {
        "http"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = HttpSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        Ok(BuiltSink::new(HttpSink::new(config)?, effective))
    }
}
