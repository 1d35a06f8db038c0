//! The factory of the S3-compatible object sink (`type = "s3"`): builds it from its `sink`
//! section, and tells `nats-sink validate` what its batch mode makes.

use sinks_contract::{BuiltSink, ConfigError, SinkFactory, SinkSection};

use crate::{S3Sink, S3SinkConfig};

/// Builds S3-compatible object sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct S3Factory;

impl SinkFactory for S3Factory {
    fn kind(&self) -> &'static str {
        "s3"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = S3SinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        Ok(BuiltSink::new(S3Sink::new(config)?, effective))
    }

    /// In batch mode: its objects, and where a sample message would go.
    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        match S3SinkConfig::from_section(section).ok().and_then(|c| c.batch_config()) {
            Some(batch) => sinks_toolkit::batch::describe::describe(&batch, stream, subject),
            None => Vec::new(),
        }
    }
}
