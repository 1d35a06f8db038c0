//! The sink registry: turns the `sink` section into a running sink. The only place that
//! knows the full list of sink kinds; each kind is behind its own cargo feature, and a kind
//! this binary was built without is named as such instead of being "unknown". It also hands
//! config loading what the runtime needs to know per kind ([`load_config`]).

use std::path::Path;
use std::sync::Arc;

use sinks_contract::Sink;
use sinks_runtime::Config;
use sinks_runtime::config::{ConfigError, ConfigIssue, KindDefaults, OptionalWait, SinkSection};

/// One feature-gated sink kind nats-sinks knows.
pub(crate) struct KnownKind {
    /// The `type` that names it.
    pub(crate) name: &'static str,
    /// The cargo feature that builds it in.
    pub(crate) feature: &'static str,
    /// Its defaults as an optional fan-out target (the reference's, by sink type).
    pub(crate) optional_wait: OptionalWait,
}

/// Optional-target waits of the local sinks (file, spool).
const LOCAL_WAIT: OptionalWait = OptionalWait { minimum_wait_ms: 100, timeout_ms: 1000 };
/// Optional-target waits of the sinks behind a network hop.
const REMOTE_WAIT: OptionalWait = OptionalWait { minimum_wait_ms: 1000, timeout_ms: 5000 };

/// Every feature-gated sink kind nats-sinks knows, whether built in or not. (`blackhole`,
/// from sinks-runtime, is always built in; like the reference it cannot be an optional
/// target's type.)
pub(crate) const KNOWN: &[KnownKind] = &[
    KnownKind { name: "file", feature: "file", optional_wait: LOCAL_WAIT },
    KnownKind { name: "mysql", feature: "mysql", optional_wait: REMOTE_WAIT },
    KnownKind { name: "http", feature: "http", optional_wait: REMOTE_WAIT },
    KnownKind { name: "s3", feature: "s3", optional_wait: REMOTE_WAIT },
    KnownKind { name: "spool", feature: "spool", optional_wait: LOCAL_WAIT },
    KnownKind { name: "coherence", feature: "coherence", optional_wait: REMOTE_WAIT },
    KnownKind { name: "oracle_nosql", feature: "nosql", optional_wait: REMOTE_WAIT },
    KnownKind { name: "oracle", feature: "oracle", optional_wait: REMOTE_WAIT },
];

/// What config loading needs to know about the kinds (the runtime names none).
pub(crate) fn kind_defaults() -> KindDefaults {
    KNOWN.iter().map(|kind| (kind.name, kind.optional_wait)).collect()
}

/// Loads and validates the config at `path` as `nats-sink` does: with [`kind_defaults`].
pub(crate) fn load_config(path: &Path) -> Result<Config, ConfigError> {
    Config::load_with(path, &kind_defaults())
}

/// A validated sink: the instance, its effective config (defaults filled in), and the DDL of
/// its tables when it has any.
pub(crate) struct Built {
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) effective: serde_json::Value,
    pub(crate) ddl: Option<Vec<String>>,
}

/// The switches by which a sink kind creates things when it opens: `(kind, field, default)`.
const CREATES: &[(&str, &str, bool)] = &[
    ("file", "create_directory", true),
    ("spool", "create_directory", true),
    ("mysql", "auto_create", false),
    ("oracle", "auto_create", false),
    ("oracle_nosql", "auto_create", false),
];

/// `config` with every sink section's creation switch off (`nats-sink test-sink` without
/// `--create` changes nothing), and for each switch that was on, what `run` would create.
pub(crate) fn without_creation(config: &Config) -> (Config, Vec<String>) {
    let mut dry = config.clone();
    let mut notes = Vec::new();
    let mut off = |at: &str, section: &mut SinkSection| {
        let Some(&(kind, field, default)) = CREATES.iter().find(|(k, _, _)| Some(*k) == section.kind()) else { return };
        let on = section.0.get(field).and_then(serde_json::Value::as_bool).unwrap_or(default);
        if on {
            let what = match field {
                "create_directory" => format!(
                    "{at}: `run` creates the directory {} when it is missing ({at}.{field})",
                    section.0.get("directory").and_then(serde_json::Value::as_str).unwrap_or("?")
                ),
                _ => format!("{at}: `run` creates the {kind} tables that are missing ({at}.{field})"),
            };
            notes.push(what);
            section.0.insert(field.into(), false.into());
        }
    };
    off("sink", &mut dry.sink);
    for (name, section) in &mut dry.sinks {
        off(&format!("sinks.{name}"), section);
    }
    (dry, notes)
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

/// What `nats-sink validate` says about a sink in batch mode (`mode: batch` of the file and
/// S3 sinks): its objects, and where a sample message of `stream` on `subject` would go.
pub(crate) fn describe_batch(section: &SinkSection, stream: &str, subject: &str) -> Vec<String> {
    let batch: Option<sinks_toolkit::batch::BatchConfig> = match section.kind().unwrap_or_default() {
        #[cfg(feature = "file")]
        "file" => sink_file::FileSinkConfig::from_section(section).ok().and_then(|c| c.batch_config()),
        #[cfg(feature = "s3")]
        "s3" => sink_s3::S3SinkConfig::from_section(section).ok().and_then(|c| c.batch_config()),
        _ => None,
    };
    let Some(batch) = batch else { return Vec::new() };
    let example = sinks_toolkit::batch::partition::example(
        &batch.template(),
        &batch.partition_fallback,
        stream,
        subject,
        batch.extension(),
    );
    vec![
        format!(
            "batch mode: {} objects ({}) of at most {} messages, {} bytes, or {} ms of waiting",
            batch.format.as_str(),
            batch.effective_compression().as_str(),
            batch.max_messages,
            batch.max_bytes,
            batch.max_age_ms
        ),
        format!("partition template `{}`: {example}", batch.partition_template),
    ]
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

/// `nats-sink sinks`: every sink kind, built in or not, and for the others which cargo
/// feature (or release binary) brings it; with `names`, only the built-in kinds, one per line.
pub(crate) fn describe_kinds(names: bool) -> String {
    let built = available();
    let mut out = String::new();
    for kind in &built {
        if names {
            out.push_str(&format!("{kind}\n"));
        } else {
            out.push_str(&format!("{kind}: built in\n"));
        }
    }
    if !names {
        for known in KNOWN.iter().filter(|k| !built.contains(&k.name)) {
            out.push_str(&format!(
                "{}: not in this build (cargo feature `{}`; the full nats-sink or the nats-sink-{} release binary has it)\n",
                known.name, known.feature, known.feature
            ));
        }
    }
    out
}

fn unknown_kind(kind: &str) -> String {
    match KNOWN.iter().find(|k| k.name == kind) {
        Some(known) => format!(
            "nats-sink was not compiled with the `{}` feature (the full nats-sink or the nats-sink-{} release binary has it; `nats-sink sinks` lists what this one has)",
            known.feature, known.feature
        ),
        None if NOT_YET.contains(&kind) => format!("sink type `{kind}` is not supported by this build yet"),
        None => format!("unknown sink type `{kind}` (available: {})", available().join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The reference's optional-target defaults by sink type, which lived in sinks-runtime
    /// (`routing::OPTIONAL_DEFAULTS`) before the registry supplied them.
    #[test]
    fn kind_defaults_are_the_references() {
        let kinds = kind_defaults();
        let got: Vec<(&str, u64, u64)> = kinds
            .kinds()
            .map(|k| {
                let wait = kinds.optional_wait(k).unwrap();
                (k, wait.minimum_wait_ms, wait.timeout_ms)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("coherence", 1000, 5000),
                ("file", 100, 1000),
                ("http", 1000, 5000),
                ("mysql", 1000, 5000),
                ("oracle", 1000, 5000),
                ("oracle_nosql", 1000, 5000),
                ("s3", 1000, 5000),
                ("spool", 100, 1000),
            ]
        );
    }

    /// A config loaded as the binary loads it gets the waits and the type check; the same
    /// config loaded without the kinds gets neither.
    #[test]
    fn the_binary_loads_with_the_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fanout.json");
        let config = json!({
            "nats": {"stream": "S", "consumer": "C", "subject": "s.>"},
            "sink": {"type": "fanout"},
            "sinks": {"f": {"type": "file", "directory": "/tmp/f"}, "h": {"type": "http", "url": "http://127.0.0.1/"}},
            "routing": {"enabled": true, "routes": [{"name": "r", "match": {"subject": ">"},
                "targets": [{"sink": "f", "required": false}, {"sink": "h", "required": false}]}]}
        });
        std::fs::write(&path, config.to_string()).unwrap();
        let waits = |c: &Config| -> Vec<(Option<u64>, Option<u64>)> {
            c.routing.routes[0].targets.iter().map(|t| (t.minimum_wait_ms, t.timeout_ms)).collect()
        };
        let loaded = load_config(&path).unwrap();
        assert_eq!(waits(&loaded), [(Some(100), Some(1000)), (Some(1000), Some(5000))]);
        assert_eq!(waits(&Config::load(&path).unwrap()), [(None, None), (None, None)]);
        let mut typed = config;
        typed["routing"]["target_sink_types"] = json!({"f": "file", "h": "ftp"});
        std::fs::write(&path, typed.to_string()).unwrap();
        let issues: Vec<(String, String)> =
            load_config(&path).unwrap_err().issues.into_iter().map(|i| (i.path, i.message)).collect();
        let unknown = "must be one of coherence, file, http, mysql, oracle, oracle_nosql, s3, spool";
        // The message names the kinds, then where in the file the value is.
        assert!(
            issues.iter().any(|(path, message)| path == "routing.target_sink_types.h" && message.starts_with(unknown)),
            "{issues:?}"
        );
        let issues = Config::load(&path).unwrap_err().issues;
        assert!(!issues.iter().any(|i| i.message.starts_with(unknown)), "{issues:?}");
    }
}
