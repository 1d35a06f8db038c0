//! The factory of the Oracle NoSQL sink (`type = "oracle_nosql"`): builds it from its `sink`
//! section with the DDL of its tables, and tells the operator commands that `auto_create`
//! creates missing tables (`test-sink` leaves that off unless `--create`).

use sinks_contract::{BuiltSink, ConfigError, Creation, SinkFactory, SinkSection};

use crate::{NoSqlSink, NoSqlSinkConfig};

/// Builds Oracle NoSQL sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSqlFactory;

impl SinkFactory for NoSqlFactory {
    fn kind(&self) -> &'static str {
        "oracle_nosql"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = NoSqlSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        let sink = NoSqlSink::new(config)?;
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink, effective).with_ddl(ddl))
    }

    /// `auto_create` (default off) creates the tables that are missing.
    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        Creation::when_on(section, "auto_create", false, "the oracle_nosql tables that are missing")
    }
}
