//! The factory of the MySQL / MariaDB sink (`type = "mysql"`): builds it from its `sink`
//! section with the DDL of its tables, and tells the operator commands that `auto_create`
//! creates missing tables (`test-sink` leaves that off unless `--create`) and which driver
//! settings the process sets before its threads start.
//!
//! `mysql_async` keeps freed packet buffers for reuse: up to 128 of up to 4 MiB each. The
//! sink's multi-row statements make buffers of about half a megabyte, and the pool hands its
//! buffers out in turn (first in, first out) for every packet, large or small, so in time each
//! buffer it keeps has grown to that size, while a handful of connections use one each at a
//! time. A binary keeps 4 of at most 1 MiB, one per connection of the default pool
//! ([`SinkFactory::process_defaults`], set before its threads start):
//! at batch 500 the mysql-only build peaked 7–8 MiB lower than with 16, for the same CPU per
//! message (docs/performance.md, "The MySQL sink's peak RSS").
//! `MYSQL_ASYNC_BUFFER_POOL_CAP` and `MYSQL_ASYNC_BUFFER_SIZE_CAP` override this.

use sinks_contract::{BuiltSink, ConfigError, Creation, SinkFactory};

use crate::{MySqlSink, MySqlSinkConfig};

/// Builds MySQL / MariaDB sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MySqlFactory;

impl SinkFactory for MySqlFactory {
    type Config = MySqlSinkConfig;

    fn kind(&self) -> &'static str {
        "mysql"
    }

    /// The legacy column aliases, applied.
    fn complete(&self, config: &mut MySqlSinkConfig) {
        config.complete();
    }

    fn build(&self, config: MySqlSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        let sink = MySqlSink::new(config)?;
        let ddl = sink.ddl();
        Ok(BuiltSink::new(sink).with_ddl(ddl))
    }

    /// `auto_create` creates the tables that are missing.
    fn creation(&self, config: &MySqlSinkConfig) -> Option<Creation> {
        Creation::when(config.auto_create, "auto_create", "the mysql tables that are missing")
    }

    /// The driver's buffer pool, smaller (see the module docs).
    fn process_defaults(&self) -> &'static [(&'static str, &'static str)] {
        &[("MYSQL_ASYNC_BUFFER_POOL_CAP", "4"), ("MYSQL_ASYNC_BUFFER_SIZE_CAP", "1048576")]
    }
}
