//! The sink registry: turns the `sink` section into a running sink. The only place that
//! knows the full list of sink kinds; each kind is behind its own cargo feature, and a kind
//! this binary was built without is named as such instead of being "unknown".

use std::sync::Arc;

use sinks_core::config::SinkSection;
use sinks_core::{ConfigError, Sink};

/// Every feature-gated sink kind nats-sinks knows, with the cargo feature that enables it.
/// (`blackhole`, from sinks-core, is always built in.)
pub(crate) const KNOWN: &[(&str, &str)] =
    &[("file", "file"), ("mysql", "mysql"), ("http", "http"), ("s3", "s3"), ("spool", "spool"), ("oracle", "oracle")];

/// A validated sink: the instance, its effective config (defaults filled in), and the DDL of
/// its tables when it has any.
pub(crate) struct Built {
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) effective: serde_json::Value,
    pub(crate) ddl: Option<Vec<String>>,
}

/// Kinds compiled into this binary.
pub(crate) fn available() -> Vec<&'static str> {
    let mut kinds = vec!["blackhole"];
    if cfg!(feature = "file") {
        kinds.push("file");
    }
    if cfg!(feature = "mysql") {
        kinds.push("mysql");
    }
    if cfg!(feature = "http") {
        kinds.push("http");
    }
    if cfg!(feature = "s3") {
        kinds.push("s3");
    }
    if cfg!(feature = "spool") {
        kinds.push("spool");
    }
    if cfg!(feature = "oracle") {
        kinds.push("oracle");
    }
    kinds
}

/// Parses and validates the sink section and builds the sink (no IO yet).
pub(crate) fn build(section: &SinkSection) -> Result<Built, ConfigError> {
    let kind = section.kind().unwrap_or_default();
    match kind {
        "blackhole" => {
            let config = sinks_core::blackhole::BlackholeConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sinks_core::blackhole::BlackholeSink::new(config)), effective, ddl: None })
        }
        #[cfg(feature = "file")]
        "file" => {
            let config = sink_file::FileSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_file::FileSink::new(config)?), effective, ddl: None })
        }
        #[cfg(feature = "mysql")]
        "mysql" => {
            let config = sink_mysql::MySqlSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            let sink = sink_mysql::MySqlSink::new(config)?;
            let ddl = Some(sink.ddl());
            Ok(Built { sink: Arc::new(sink), effective, ddl })
        }
        #[cfg(feature = "http")]
        "http" => {
            let config = sink_http::HttpSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_http::HttpSink::new(config)?), effective, ddl: None })
        }
        #[cfg(feature = "s3")]
        "s3" => {
            let config = sink_s3::S3SinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_s3::S3Sink::new(config)?), effective, ddl: None })
        }
        #[cfg(feature = "spool")]
        "spool" => {
            let config = sink_spool::SpoolSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_spool::SpoolSink::new(config)?), effective, ddl: None })
        }
        #[cfg(feature = "oracle")]
        "oracle" => {
            let config = sink_oracle::OracleSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            let sink = sink_oracle::OracleSink::new(config)?;
            let ddl = Some(sink.ddl());
            Ok(Built { sink: Arc::new(sink), effective, ddl })
        }
        other => Err(ConfigError::single("sink.type", unknown_kind(other))),
    }
}

/// Sink types of the reference that nats-sinks does not implement yet: refused by name, so
/// a config written for them never runs as something else.
pub(crate) const NOT_YET: &[&str] = &["fanout", "oracle_nosql", "coherence", "review_package", "foundry", "gotham"];

fn unknown_kind(kind: &str) -> String {
    match KNOWN.iter().find(|(k, _)| *k == kind) {
        Some((_, feature)) => format!("nats-sink was not compiled with the `{feature}` feature"),
        None if NOT_YET.contains(&kind) => format!("sink type `{kind}` is not supported by this build yet"),
        None => format!("unknown sink type `{kind}` (available: {})", available().join(", ")),
    }
}
