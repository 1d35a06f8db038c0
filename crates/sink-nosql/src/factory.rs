//! The factory of the Oracle NoSQL sink (`type = "oracle_nosql"`): builds it from its `sink`
//! section with the DDL of its tables, and tells the operator commands that `auto_create`
//! creates missing tables (`test-sink` leaves that off unless `--create`).

use sinks_contract::{BuiltSink, ConfigError, Creation, SinkFactory};

use crate::{NoSqlSink, NoSqlSinkConfig};

/// Builds Oracle NoSQL sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSqlFactory;

impl SinkFactory for NoSqlFactory {
    type Config = NoSqlSinkConfig;

    fn kind(&self) -> &'static str {
        "oracle_nosql"
    }

    fn build(&self, config: NoSqlSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        let sink = NoSqlSink::new(config)?;
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink).with_ddl(ddl))
    }

    /// `auto_create` creates the tables that are missing.
    fn creation(&self, config: &NoSqlSinkConfig) -> Option<Creation> {
        Creation::when(config.auto_create, "auto_create", "the oracle_nosql tables that are missing")
    }
}
