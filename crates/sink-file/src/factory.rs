//! The factory of the file sink (`type = "file"`): builds it from its `sink` section, and
//! tells the operator commands that its directory is local (short waits as an optional
//! target), that `create_directory` creates it (`test-sink` leaves that off unless
//! `--create`), and what its batch mode makes (`validate`).

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory, SinkSection};

use crate::{FileSink, FileSinkConfig};

/// Builds file sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileFactory;

impl SinkFactory for FileFactory {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = FileSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        Ok(BuiltSink::new(FileSink::new(config)?, effective))
    }

    /// A directory on this machine: short waits as an optional target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_directory` (default on) creates the directory when it is missing.
    fn creation(&self, section: &SinkSection) -> Option<Creation> {
        let directory = section.0.get("directory").and_then(serde_json::Value::as_str).unwrap_or("?");
        Creation::when_on(section, "create_directory", true, format!("the directory {directory} when it is missing"))
    }

    /// In batch mode: its objects, and where a sample message would go.
    fn describe(&self, section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
        match FileSinkConfig::from_section(section).ok().and_then(|c| c.batch_config()) {
            Some(batch) => sinks_toolkit::batch::describe::describe(&batch, stream, subject),
            None => Vec::new(),
        }
    }
}
