//! The factory of the S3-compatible object sink (`type = "s3"`): builds it from its `sink`
//! section, and tells `nats-sink validate` what its batch mode makes.

use sinks_contract::{BuiltSink, ConfigError, SinkFactory};

use crate::{S3Sink, S3SinkConfig};

/// Builds S3-compatible object sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct S3Factory;

impl SinkFactory for S3Factory {
    type Config = S3SinkConfig;

    fn kind(&self) -> &'static str {
        "s3"
    }

    fn build(&self, config: S3SinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(S3Sink::new(config)?))
    }

    /// In batch mode: its objects, and where a sample message would go.
    fn describe(&self, config: &S3SinkConfig, stream: &str, subject: &str) -> Vec<String> {
        match config.batch_config() {
            Some(batch) => sinks_toolkit::batch::describe::describe(&batch, stream, subject),
            None => Vec::new(),
        }
    }
}
