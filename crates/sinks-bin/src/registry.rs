//! The sink registry: turns the `sink` section into a running sink. The only place that
//! knows the full list of sink kinds; each kind is behind its own cargo feature, and a kind
//! this binary was built without is named as such instead of being "unknown".

use std::sync::Arc;

use sinks_contract::Sink;
use sinks_runtime::Config;
use sinks_runtime::config::{ConfigError, ConfigIssue, SinkSection};

/// Every feature-gated sink kind nats-sinks knows, with the cargo feature that enables it.
/// (`blackhole`, from sinks-runtime, is always built in.)
pub(crate) const KNOWN: &[(&str, &str)] = &[
    ("file", "file"),
    ("mysql", "mysql"),
    ("http", "http"),
    ("s3", "s3"),
    ("spool", "spool"),
    ("coherence", "coherence"),
    ("oracle_nosql", "nosql"),
    ("oracle", "oracle"),
];

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
    if cfg!(feature = "coherence") {
        kinds.push("coherence");
    }
    if cfg!(feature = "nosql") {
        kinds.push("oracle_nosql");
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
            let config = sinks_runtime::blackhole::BlackholeConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sinks_runtime::blackhole::BlackholeSink::new(config)), effective, ddl: None })
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
        #[cfg(feature = "coherence")]
        "coherence" => {
            let config = sink_coherence::CoherenceSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            Ok(Built { sink: Arc::new(sink_coherence::CoherenceSink::new(config)?), effective, ddl: None })
        }
        #[cfg(feature = "nosql")]
        "oracle_nosql" => {
            let config = sink_nosql::NoSqlSinkConfig::from_section(section)?;
            let effective = serde_json::to_value(&config).unwrap_or_default();
            let sink = sink_nosql::NoSqlSink::new(config)?;
            let ddl = Some(sink.ddl());
            Ok(Built { sink: Arc::new(sink), effective, ddl })
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
pub(crate) const NOT_YET: &[&str] = &["review_package", "foundry", "gotham"];

/// Builds the active sink of `config` (a fan-out over its named sinks when `sink.type` is
/// `fanout`) and checks every named sink's config, naming a bad field as
/// `sinks.<name>.<field>`.
pub(crate) fn build_active(config: &Config) -> Result<Built, ConfigError> {
    let mut children = Vec::with_capacity(config.sinks.len());
    let mut issues = Vec::new();
    for (name, section) in &config.sinks {
        match build_named(name, section) {
            Ok(built) => children.push((name.clone(), built)),
            Err(e) => issues.extend(e.issues),
        }
    }
    if !issues.is_empty() {
        return Err(ConfigError { issues });
    }
    if !config.sink.kind().is_some_and(|k| k.eq_ignore_ascii_case("fanout")) {
        return build(&config.sink);
    }
    if config.sink.0.keys().any(|k| k != "type") {
        let extra: Vec<&String> = config.sink.0.keys().filter(|k| *k != "type").collect();
        return Err(ConfigError::single(
            format!("sink.{}", extra[0]),
            "a fanout sink takes only `type`, named `sinks` and the routing fields",
        ));
    }
    let mut effective = serde_json::Map::new();
    let mut ddl: Option<Vec<String>> = None;
    let mut targets: Vec<(String, Arc<dyn Sink>)> = Vec::new();
    for (name, built) in children {
        effective.insert(name.clone(), built.effective);
        if let Some(statements) = built.ddl {
            ddl.get_or_insert_with(Vec::new).extend(statements);
        }
        targets.push((name, built.sink));
    }
    let fanout = sinks_runtime::fanout::FanoutSink::new(targets, config.routing.clone());
    Ok(Built { sink: Arc::new(fanout), effective: serde_json::json!({"sinks": effective}), ddl })
}

/// Builds one named sink; problems are reported under `sinks.<name>`.
pub(crate) fn build_named(name: &str, section: &SinkSection) -> Result<Built, ConfigError> {
    let kind = section.kind().unwrap_or_default();
    if kind.eq_ignore_ascii_case("fanout") {
        return Err(ConfigError::single(format!("sinks.{name}.type"), "fanout can only be the active sink"));
    }
    build(section).map_err(|e| ConfigError {
        issues: e
            .issues
            .into_iter()
            .map(|issue| {
                let field = issue.path.strip_prefix("sink").unwrap_or(&issue.path);
                let message = match issue.message.strip_prefix("nats-sink was not compiled with") {
                    Some(rest) => {
                        format!("named sink `{name}` has type `{kind}`, but nats-sink was not compiled with{rest}")
                    }
                    None => issue.message,
                };
                ConfigIssue { path: format!("sinks.{name}{field}"), message }
            })
            .collect(),
    })
}

fn unknown_kind(kind: &str) -> String {
    match KNOWN.iter().find(|(k, _)| *k == kind) {
        Some((_, feature)) => format!("nats-sink was not compiled with the `{feature}` feature"),
        None if NOT_YET.contains(&kind) => format!("sink type `{kind}` is not supported by this build yet"),
        None => format!("unknown sink type `{kind}` (available: {})", available().join(", ")),
    }
}
