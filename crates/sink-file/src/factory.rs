//! The factory of the file sink (`type = "file"`): builds it from its `sink` section, and
//! tells the operator commands that its directory is local (short waits as an optional
//! target), that `create_directory` creates it (`test-sink` leaves that off unless
//! `--create`), and what its batch mode makes (`validate`).

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory};

use crate::{FileSink, FileSinkConfig};

/// Builds file sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileFactory;

impl SinkFactory for FileFactory {
    type Config = FileSinkConfig;

    fn kind(&self) -> &'static str {
        "file"
    }

    /// The extension in use, from the compression when none is given.
    fn complete(&self, config: &mut FileSinkConfig) {
        config.complete();
    }

    fn build(&self, config: FileSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(FileSink::new(config)?))
    }

    /// A directory on this machine: short waits as an optional target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_directory` creates the directory when it is missing.
    fn creation(&self, config: &FileSinkConfig) -> Option<Creation> {
        let what = format!("the directory {} when it is missing", config.directory.display());
        Creation::when(config.create_directory, "create_directory", what)
    }

    /// In batch mode: its objects, and where a sample message would go.
    fn describe(&self, config: &FileSinkConfig, stream: &str, subject: &str) -> Vec<String> {
        match config.batch_config() {
            Some(batch) => sinks_toolkit::batch::describe::describe(&batch, stream, subject),
            None => Vec::new(),
        }
    }
}
