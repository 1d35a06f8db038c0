//! [`SqliteFactory`]: how a binary builds the sinks of `type = "sqlite"` from their config,
//! and what its operator commands should know about the kind.

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory};

use crate::{SqliteSink, SqliteSinkConfig};

/// Builds SQLite sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteFactory;

impl SinkFactory for SqliteFactory {
    type Config = SqliteSinkConfig;

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn build(&self, config: SqliteSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        let sink = SqliteSink::new(config);
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink).with_ddl(vec![ddl]))
    }

    /// A file on this machine: short waits as an optional fan-out target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_table` creates the database file and the table when they are missing.
    fn creation(&self, config: &SqliteSinkConfig) -> Option<Creation> {
        let what = format!("the database {} and its table {}", config.path.display(), config.table);
        Creation::when(config.create_table, "create_table", what)
    }

    /// Where a sample message goes.
    fn describe(&self, config: &SqliteSinkConfig, stream: &str, subject: &str) -> Vec<String> {
        vec![format!(
            "a message of {stream} on {subject} becomes one row of {} in {}, keyed by its {}",
            config.table,
            config.path.display(),
            config.key.as_str()
        )]
    }
}
