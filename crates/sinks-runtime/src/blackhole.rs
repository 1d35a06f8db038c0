//! [`BlackholeSink`] (`sink.type = "blackhole"`): commits every message instantly and keeps
//! nothing. It measures the framework's own overhead (`cargo xtask bench`) and lets a
//! pipeline be exercised without a destination. Never use it where data matters.
//! [`BlackholeFactory`] builds it from its section.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, SinkSection};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::factory::{BuiltSink, SinkFactory};
use sinks_contract::sink::{BatchResult, Capabilities, MessageOutcome, Sink};

/// Settings of the blackhole sink.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlackholeConfig {
    /// Pretend each batch takes this long to write, milliseconds (default 0).
    #[serde(default)]
    pub write_delay_ms: u64,
}

impl BlackholeConfig {
    /// Parses the `sink` section.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        section.parse()
    }
}

/// A sink that reports every message committed and stores nothing.
#[derive(Debug, Clone, Default)]
pub struct BlackholeSink {
    config: BlackholeConfig,
}

impl BlackholeSink {
    /// A blackhole with `config`.
    pub fn new(config: BlackholeConfig) -> Self {
        Self { config }
    }
}

#[async_trait]
impl Sink for BlackholeSink {
    fn name(&self) -> &str {
        "blackhole"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        if self.config.write_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.config.write_delay_ms)).await;
        }
        Ok(batch.iter().map(|_| MessageOutcome::Committed).collect())
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Builds [`BlackholeSink`]s (`type = "blackhole"`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BlackholeFactory;

impl SinkFactory for BlackholeFactory {
    type Config = BlackholeConfig;

    fn kind(&self) -> &'static str {
        "blackhole"
    }

    fn build(&self, config: BlackholeConfig) -> Result<BuiltSink, ConfigError> {
        Ok(BuiltSink::new(BlackholeSink::new(config)))
    }
}
