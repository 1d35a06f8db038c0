//! The factory of the review package sink (`type = "review_package"`): builds it from its
//! `sink` section, and tells the operator commands that its directory is local (short waits
//! as an optional target), that `create_directory` creates it (`test-sink` leaves that off
//! unless `--create`), and what `validate` should say about a sample message.

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory};

use crate::{ReviewPackageSink, ReviewPackageSinkConfig};

/// Builds review package sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReviewPackageFactory;

impl SinkFactory for ReviewPackageFactory {
    type Config = ReviewPackageSinkConfig;

    fn kind(&self) -> &'static str {
        "review_package"
    }

    fn build(&self, config: ReviewPackageSinkConfig) -> Result<BuiltSink, ConfigError> {
        config.validate()?;
        Ok(BuiltSink::new(ReviewPackageSink::new(config)?))
    }

    /// A directory on this machine: short waits as an optional target.
    fn reach(&self) -> Reach {
        Reach::Local
    }

    /// `create_directory` creates the directory when it is missing.
    fn creation(&self, config: &ReviewPackageSinkConfig) -> Option<Creation> {
        let what = format!("the directory {} when it is missing", config.directory.display());
        Creation::when(config.create_directory, "create_directory", what)
    }

    /// Where a message of the sample stream goes, and how the packages are checked.
    fn describe(&self, config: &ReviewPackageSinkConfig, stream: &str, _subject: &str) -> Vec<String> {
        let key = sinks_contract::idempotency::IdempotencyKey::stream_sequence(stream, 1);
        let id = format!("{}{}", crate::package::ID_PREFIX, &key.sha256_hex()[..32]);
        vec![
            format!(
                "review packages: one directory per message below {}, named by the SHA-256 of its idempotency key (stream {stream} sequence 1: {id})",
                config.directory.display()
            ),
            String::from(
                "check them with `nats-sink verify-packages CONFIG` (every file against manifest.json and hashes.json)",
            ),
        ]
    }
}
