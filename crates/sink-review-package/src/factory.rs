//! The factory of the review package sink (`type = "review_package"`): builds it from its
//! `sink` section, and tells the operator commands that its directory is local (short waits
//! as an optional target), that `create_directory` creates it (`test-sink` leaves that off
//! unless `--create`), and what `validate` should say about a sample message.

use sinks_contract::{BuiltSink, ConfigError, Creation, Reach, SinkFactory, SinkSection};

use crate::{ReviewPackageSink, ReviewPackageSinkConfig};

/// Builds review package sinks; register it with `sinks_cli::Registry::with`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReviewPackageFactory;

impl SinkFactory for ReviewPackageFactory {
    fn kind(&self) -> &'static str {
        "review_package"
    }

    fn build(&self, section: &SinkSection) -> Result<BuiltSink, ConfigError> {
        let config = ReviewPackageSinkConfig::from_section(section)?;
        let effective = serde_json::to_value(&config).unwrap_or_default();
        Ok(BuiltSink::new(ReviewPackageSink::new(config)?, effective))
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

    /// Where a message of the sample stream goes, and how the packages are checked.
    fn describe(&self, section: &SinkSection, stream: &str, _subject: &str) -> Vec<String> {
        let Ok(config) = ReviewPackageSinkConfig::from_section(section) else {
            return Vec::new();
        };
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
