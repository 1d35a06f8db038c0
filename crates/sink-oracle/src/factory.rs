//! The factory of the Oracle Database sink (`type = "oracle"`): builds it from its `sink`
//! section with the DDL of its tables, and tells the operator commands that `auto_create`
//! creates missing tables (`test-sink` leaves that off unless `--create`).

use sinks_contract::{BuiltSink, ConfigError, Creation, SinkFactory};

use crate::{OracleSink, OracleSinkConfig};

/// Builds Oracle Database sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct OracleFactory;

impl SinkFactory for OracleFactory {
    type Config = OracleSinkConfig;

    fn kind(&self) -> &'static str {
        "oracle"
    }

    /// The legacy column aliases, applied.
    fn complete(&self, config: &mut OracleSinkConfig) {
        config.complete();
    }

    fn build(&self, config: OracleSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        let sink = OracleSink::new(config)?;
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink).with_ddl(ddl))
    }

    /// `auto_create` creates the tables that are missing.
    fn creation(&self, config: &OracleSinkConfig) -> Option<Creation> {
        Creation::when(config.auto_create, "auto_create", "the oracle tables that are missing")
    }
}
