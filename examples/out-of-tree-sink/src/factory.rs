//! [`SqliteFactory`]: how a binary builds the sinks of `type = "sqlite"` from their `sink`
//! section, and what its operator commands should know about the kind.

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory, SinkSection};

use crate::{SqliteSink, SqliteSinkConfig};

/// Builds SQLite sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteFactory;

impl SinkFactory for SqliteFactory {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = SqliteSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        let sink = SqliteSink::new(config);
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink, effective).with_ddl(vec![ddl]))
    }

    /// A file on this machine: short waits as an optional fan-out target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_table` (default on) creates the database file and the table when they are
    /// missing.
    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        let text = |field: &str, default: &str| {
            section.0.get(field).and_then(serde_json::Value::as_str).unwrap_or(default).to_owned()
        };
        let (path, table) = (text("path", "?"), text("table", "messages"));
        Creation::when_on(section, "create_table", true, format!("the database {path} and its table {table}"))
    }

    /// Where a sample message goes.
    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        match SqliteSinkConfig::from_section(section) {
            Ok(c) => vec![format!(
                "a message of {stream} on {subject} becomes one row of {} in {}, keyed by its {}",
                c.table,
                c.path.display(),
                c.key.as_str()
            )],
            Err(_) => Vec::new(),
        }
    }
}
