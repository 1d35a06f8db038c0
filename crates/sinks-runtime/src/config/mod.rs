//! Configuration: the reference's JSON layout, also as TOML or YAML, with environment
//! overrides, loaded through figment.
//!
//! Every error names the field path (`nats.stream`, `sink.directory`, …). Unknown fields are
//! rejected, and so are reference features this build does not implement yet (a section such
//! as `encryption` is accepted only while it stays disabled). Environment overrides:
//! `NATS_SINKS__<SECTION>__<FIELD>=value` for any field (double underscores separate path
//! segments), plus the reference's fixed names such as `NATS_SINKS_NATS_URL`.

mod consumer;
pub mod dead_letter;
mod delivery;
pub mod guard;
pub mod ledger;
pub mod metrics;
mod nats;
pub mod otel;
pub mod redact;
pub mod rescue;
pub mod routing;
pub mod source;

use std::collections::BTreeMap;

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Json, Toml, Yaml};

use serde::{Deserialize, Serialize};

pub use consumer::{
    ConsumerManagementConfig, ConsumerMode, DeliverPolicy, ReplayPolicy, StreamManagementConfig, StreamStorage,
};
pub use dead_letter::{DeadLetterConfig, EncryptedPayload};
pub use delivery::{
    AckConfirmationConfig, AckPolicyName, DeliveryConfig, InProgressConfig, LogFormat, LoggingConfig, OrderingKey,
    TemporaryAction,
};
pub use guard::{OnStreamChange, StreamGuardConfig};
pub use ledger::{LedgerConfig, LedgerMode};
pub use metrics::{AdvisoriesConfig, MetricsConfig};
pub use nats::NatsConfig;
pub use otel::{OpenTelemetryConfig, OtlpProtocol};
pub use sinks_contract::config::{ConfigError, ConfigIssue, Issues, SinkSection, check_env_name, deserialize_at};
pub use sinks_toolkit::encryption::config as encryption;

pub use routing::{KindDefaults, OptionalWait};

use sinks_toolkit::metadata::MessageMetadataConfig;
use sinks_toolkit::subject;

/// The whole configuration of one `nats-sink` process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// NATS connection and the stream/consumer/subject to consume.
    pub nats: NatsConfig,
    /// Durable consumer creation, binding and drift checks.
    #[serde(default)]
    pub consumer_management: ConsumerManagementConfig,
    /// Opt-in stream creation (nats-sinks extension).
    #[serde(default)]
    pub stream_management: StreamManagementConfig,
    /// Batching, pipelining, retry and ack behaviour.
    #[serde(default)]
    pub delivery: DeliveryConfig,
    /// Where permanently failing messages go.
    #[serde(default)]
    pub dead_letter: DeadLetterConfig,
    /// Log level and format.
    #[serde(default)]
    pub logging: LoggingConfig,
    /// Opt-in delivery receipts: one per settled message, published after commit.
    #[serde(default)]
    pub ledger: LedgerConfig,
    /// Priority, classification and labels resolution.
    #[serde(default)]
    pub message_metadata: MessageMetadataConfig,
    /// Metrics, the snapshot file, the `/metrics`, `/healthz` and `/readyz` listener, event
    /// freshness.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// OTLP export of the metrics and of one trace span per message (extension; off unless
    /// enabled).
    #[serde(default)]
    pub opentelemetry: OpenTelemetryConfig,
    /// Reference section, not supported yet: accepted only while disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_consumer: Option<NotYetSupported>,
    /// Observation of JetStream advisories (counted and logged, never acted on).
    #[serde(default)]
    pub advisories: AdvisoriesConfig,
    /// The rescue of messages the server stops redelivering (`max_deliver` exhausted).
    #[serde(default)]
    pub rescue: rescue::RescueConfig,
    /// What the sink watches about the stream under it: its identity (re-created, restored or
    /// rewound streams) and how close unsettled messages are to its limits (extension).
    #[serde(default)]
    pub stream_guard: StreamGuardConfig,
    /// Mission metadata resolution (JSON object from a header, subject rules and a default).
    #[serde(default)]
    pub mission_metadata: sinks_policy::mission::MissionMetadataConfig,
    /// Data-centric security label profile resolution.
    #[serde(default)]
    pub security_labels: sinks_policy::labels::SecurityLabelsConfig,
    /// Payload encryption before any sink sees the data.
    #[serde(default)]
    pub encryption: encryption::EncryptionConfig,
    /// Per-message signature verification (HMAC-SHA256, Ed25519).
    #[serde(default)]
    pub message_authenticity: sinks_policy::authenticity::AuthenticityConfig,
    /// Tamper-evident custody hashes stored with each record.
    #[serde(default)]
    pub custody: sinks_policy::custody::CustodyConfig,
    /// Per-message size limits.
    #[serde(default)]
    pub size_policy: sinks_policy::size::SizePolicyConfig,
    /// Data-only rules every message must satisfy before the sink.
    #[serde(default)]
    pub pre_sink_policy: sinks_policy::presink::PreSinkPolicyConfig,
    /// Which named sink(s) each message goes to when the active sink is `fanout`.
    #[serde(default)]
    pub routing: routing::RoutingConfig,
    /// Reference section, not supported yet: accepted only while disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<NotYetSupported>,
    /// Named sinks (`name → sink section`): the children of a `fanout` active sink, and
    /// the targets of `nats-sink test-sink --sink-name`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sinks: BTreeMap<String, SinkSection>,
    /// The destination: `type` plus the sink's own fields.
    pub sink: SinkSection,
}

/// A reference config section this build does not implement. It is accepted only when
/// nothing in it would act on any message: its `enabled` flag absent or false. Anything else
/// is refused, naming the field: an unimplemented feature fails closed, never silently off.
/// (None of these sections has rules that act while the section is disabled; the one that
/// does, `encryption`, is implemented.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NotYetSupported(pub serde_json::Map<String, serde_json::Value>);

/// The reference's top-level sections this build does not implement yet (each a
/// [`NotYetSupported`]); named `sinks` are refused the same way.
pub const NOT_YET_SUPPORTED: [&str; 2] = ["push_consumer", "plugins"];

impl NotYetSupported {
    /// Records an issue for every setting of section `name` that would turn it on.
    fn refuse_activation(&self, name: &str, issues: &mut Issues) {
        let unsupported = format!("`{name}` is not supported by this build yet");
        match self.0.get("enabled") {
            None | Some(serde_json::Value::Null | serde_json::Value::Bool(false)) => {}
            Some(serde_json::Value::Bool(true)) => issues.push(&format!("{name}.enabled"), unsupported.clone()),
            Some(_) => issues.push(&format!("{name}.enabled"), format!("must be a boolean; {unsupported}")),
        }
    }
}

impl Config {
    /// Loads `path` (`.json`, `.toml`, `.yaml`/`.yml`), applies environment overrides,
    /// and validates, knowing no sink kind (see [`Config::load_with`]). Makes no connections
    /// and reads no secrets.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, &KindDefaults::default())
    }

    /// [`Config::load`] with what the binary's registry knows about the sink kinds: the
    /// optional fan-out targets' waits are filled from their sink types and
    /// `routing.target_sink_types` is checked against the kinds ([`KindDefaults`]).
    pub fn load_with(path: &Path, kinds: &KindDefaults) -> Result<Self, ConfigError> {
        let loaded = extract(figment_for(path)?).and_then(|value| Self::from_value_with(value, kinds));
        loaded.map_err(|e| source::annotate(e, path))
    }

    /// Builds from an already assembled figment (file plus overrides) and validates,
    /// knowing no sink kind.
    pub fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        Self::from_value(extract(figment)?)
    }

    /// Builds from a JSON value (the merged config tree) and validates, knowing no sink
    /// kind.
    pub fn from_value(value: serde_json::Value) -> Result<Self, ConfigError> {
        Self::from_value_with(value, &KindDefaults::default())
    }

    /// [`Config::from_value`] with the sink kinds (see [`Config::load_with`]).
    pub fn from_value_with(mut value: serde_json::Value, kinds: &KindDefaults) -> Result<Self, ConfigError> {
        routing::normalize_compact_fanout(&mut value)?;
        implied_metrics(&mut value);
        // Every problem at once: the values serde refused are taken out (their defaults stand
        // in), and the rest is checked too (ranges, rules between fields).
        let (parsed, mut found) = sinks_contract::config::deserialize_salvaged::<Self>("", value);
        let Some(mut config) = parsed else { return Err(ConfigError { issues: found }) };
        config.message_metadata.fill_default_headers();
        let named = config.named_sink_types();
        config.routing.complete(&named, kinds);
        let checked = config.validate_with(kinds);
        if found.is_empty() {
            return checked.map(|()| config);
        }
        for issue in &mut found {
            // A whole number of the wrong type is told its range too (serde's text keeps its
            // shape: `…, expected usize in 1..=10000`, which `wording` puts in words).
            let expected = issue.message.rsplit_once(", expected ").map(|(_, t)| t).unwrap_or_default();
            let whole = (expected.starts_with('u') || expected.starts_with('i'))
                && (expected[1..].chars().all(|c| c.is_ascii_digit()) || &expected[1..] == "size");
            if let (true, Some(bound)) = (whole, bound_of(&config, kinds, &issue.path)) {
                issue.message = format!("{} {bound}", issue.message);
            }
        }
        for issue in checked.err().map(|e| e.issues).unwrap_or_default() {
            if !found.iter().any(|f| f.path == issue.path) {
                found.push(issue);
            }
        }
        Err(ConfigError { issues: found })
    }

    /// Every `*_env` field of the NATS section and of the sinks this run uses (the active
    /// sink, and every named sink when it is a fan-out) whose environment variable is not set
    /// now: `run` would fail on it when it connects or opens the sink, so `validate` reports it
    /// first. (Policy and encryption keys are read by building the policy pipeline.)
    pub fn unset_secrets(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut check = |at: &str, value: &serde_json::Value| {
            missing_env_vars(at, value, &mut |path, var| {
                issues.push(ConfigIssue {
                    path,
                    message: format!("names the environment variable `{var}`, which is not set"),
                });
            });
        };
        check("nats", &serde_json::to_value(&self.nats).unwrap_or_default());
        check("sink", &serde_json::Value::Object(self.sink.0.clone()));
        if self.sink.kind() == Some("fanout") {
            for (name, section) in &self.sinks {
                check(&format!("sinks.{name}"), &serde_json::Value::Object(section.0.clone()));
            }
        }
        issues
    }

    /// Every `*_env` field of the whole config (every section, every named sink) whose
    /// environment variable is not set now: what `validate --no-environment` lists as notes.
    pub fn unset_variables(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let serde_json::Value::Object(sections) = serde_json::to_value(self).unwrap_or_default() {
            for (section, value) in &sections {
                missing_env_vars(section, value, &mut |path, var| {
                    issues.push(ConfigIssue {
                        path,
                        message: format!("names the environment variable `{var}`, which is not set"),
                    });
                });
            }
        }
        issues
    }

    /// The sections of the message policy steps, for `sinks_policy::Pipeline`.
    pub fn policy_sections(&self) -> sinks_policy::Sections<'_> {
        sinks_policy::Sections {
            message_metadata: &self.message_metadata,
            mission_metadata: &self.mission_metadata,
            security_labels: &self.security_labels,
            message_authenticity: &self.message_authenticity,
            encryption: &self.encryption,
            size_policy: &self.size_policy,
            pre_sink_policy: &self.pre_sink_policy,
            custody: &self.custody,
            priority_lanes: &self.delivery.priority_lanes,
        }
    }

    /// `name → type` of every named sink.
    pub fn named_sink_types(&self) -> BTreeMap<String, String> {
        self.sinks.iter().map(|(name, section)| (name.clone(), section.kind().unwrap_or_default().to_owned())).collect()
    }

    /// Checks cross-field rules, knowing no sink kind; every problem is reported with its
    /// field path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&KindDefaults::default())
    }

    /// [`Config::validate`] with the sink kinds (see [`Config::load_with`]).
    pub fn validate_with(&self, kinds: &KindDefaults) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        self.nats.validate(&mut issues);
        self.consumer_management.validate(&self.nats.subject, &mut issues);
        self.stream_management.validate(&mut issues);
        self.delivery.validate(&mut issues);
        self.logging.validate(&mut issues);
        self.metrics.validate_at("metrics", &mut issues);
        self.advisories.validate_at("advisories", &mut issues);
        self.opentelemetry.validate_at(
            "opentelemetry",
            self.metrics.enabled,
            &crate::metrics::catalogue::is_catalogue_name,
            &mut issues,
        );
        self.rescue.validate_at("rescue", &mut issues);
        self.stream_guard.validate_at("stream_guard", &mut issues);
        self.encryption.validate_at("encryption", &mut issues);
        self.mission_metadata.validate_at("mission_metadata", &mut issues);
        self.security_labels.validate_at("security_labels", &mut issues);
        self.message_authenticity.validate_at("message_authenticity", &mut issues);
        self.custody.validate_at("custody", &mut issues);
        self.size_policy.validate_at("size_policy", self.delivery.batch_size, &mut issues);
        self.pre_sink_policy.validate_at("pre_sink_policy", &mut issues);
        for (path, message) in self.message_metadata.validate() {
            issues.push(&path, message);
        }
        let dl = &self.dead_letter;
        if dl.enabled {
            match dl.subject.as_deref() {
                None => issues.push("dead_letter.subject", "required when dead_letter.enabled is true"),
                Some(s) => {
                    // A subject nats.subject matches is a problem only when the consumed stream
                    // captures it too (then its records would be consumed again): the server
                    // knows, so `validate --connect` and `run` check it (`setup`); offline it is
                    // a warning (`runner::config_warnings`).
                    if let Err(e) = subject::validate_literal(s) {
                        issues.push("dead_letter.subject", e.to_string());
                    }
                }
            }
        }
        if self.stream_management.dead_letter_stream.is_some() && !dl.enabled {
            issues.push("stream_management.dead_letter_stream", "requires dead_letter.enabled");
        }
        self.ledger.validate_at(
            "ledger",
            &self.nats.subject,
            dl.subject.as_deref().filter(|_| dl.enabled),
            &mut issues,
        );
        let ip = &self.delivery.in_progress;
        if ip.enabled {
            if !self.nats.durable {
                issues.push("delivery.in_progress.enabled", "requires a durable consumer (nats.durable)");
            }
            if self.consumer_management.backoff_seconds.is_some() {
                issues.push(
                    "delivery.in_progress.enabled",
                    "cannot be combined with consumer_management.backoff_seconds",
                );
            }
            if let Some(ack_wait) = self.consumer_management.ack_wait_seconds {
                if (ip.interval_ms as f64) >= ack_wait * 1000.0 * 0.8 {
                    issues.push(
                        "delivery.in_progress.interval_ms",
                        "must be below 80% of consumer_management.ack_wait_seconds",
                    );
                }
            } else if self.consumer_management.mode != ConsumerMode::BindOnly {
                issues.push("consumer_management.ack_wait_seconds", "required when delivery.in_progress is enabled");
            }
        }
        for (name, section) in self.unsupported_sections() {
            if let Some(section) = section {
                section.refuse_activation(name, &mut issues);
            }
        }
        let named = self.named_sink_types();
        for (name, section) in &self.sinks {
            if section.kind().is_none() {
                issues.push(&format!("sinks.{name}.type"), "required (e.g. \"file\")");
            }
        }
        self.routing.validate_at(&named, self.sink.kind(), kinds, &mut issues);
        match self.sink.kind() {
            None => issues.push("sink.type", "required (e.g. \"file\")"),
            Some(k)
                if k.is_empty()
                    || !k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c)) =>
            {
                issues.push("sink.type", "must be a lowercase sink name");
            }
            Some(_) => {}
        }
        issues.finish()
    }

    fn unsupported_sections(&self) -> [(&'static str, &Option<NotYetSupported>); NOT_YET_SUPPORTED.len()] {
        [("push_consumer", &self.push_consumer), ("plugins", &self.plugins)]
    }
}

/// The range validation holds the whole number at `path` (`delivery.batch_size`) of `config`
/// to (`in 1..=10000`, `at least 1`), found by trying the smallest and the largest values
/// there; `None` when none is refused (or `path` is no plain field).
fn bound_of(config: &Config, kinds: &KindDefaults, path: &str) -> Option<String> {
    let tree = serde_json::to_value(config).ok()?;
    let pointer = format!("/{}", path.replace('.', "/"));
    for probe in [0, u64::from(u32::MAX), u64::MAX] {
        let mut tried = tree.clone();
        *tried.pointer_mut(&pointer)? = probe.into();
        let Ok(probed) = serde_json::from_value::<Config>(tried) else { continue };
        let refused = probed.validate_with(kinds).err().into_iter().flat_map(|e| e.issues);
        if let Some(issue) = refused.into_iter().find(|i| i.path == path) {
            // `Issues::range`'s words: `in 1..=10000`, `at least 1`.
            let bound = issue.message.strip_prefix("must be ").and_then(|m| m.split(" (got ").next());
            return bound.filter(|b| b.starts_with("in ") || b.starts_with("at least ")).map(str::to_owned);
        }
    }
    None
}

/// Asking for an output of the metrics turns their recording on: OTLP metrics
/// (`opentelemetry.metrics.enabled`) or the `/metrics` listener (`metrics.listen`) with
/// `metrics.enabled` left out sets it (`show-effective-config` shows it on). A
/// `metrics.enabled: false` written out stays, and the contradiction is reported naming both.
fn implied_metrics(value: &mut serde_json::Value) {
    let wants = value.pointer("/opentelemetry/metrics/enabled") == Some(&serde_json::Value::Bool(true))
        || value.pointer("/metrics/listen").is_some_and(|l| !l.is_null());
    if !wants || value.pointer("/metrics/enabled").is_some() {
        return;
    }
    if let Some(root) = value.as_object_mut() {
        let metrics = root.entry("metrics").or_insert_with(|| serde_json::json!({}));
        if let Some(metrics) = metrics.as_object_mut() {
            metrics.insert("enabled".into(), true.into());
        }
    }
}

/// The reference's fixed environment override names that map to supported fields.
pub(crate) const FIXED_ENV: [(&str, &str); 30] = [
    ("NATS_SINKS_NATS_URL", "nats.url"),
    ("NATS_SINKS_NATS_STREAM", "nats.stream"),
    ("NATS_SINKS_NATS_CONSUMER", "nats.consumer"),
    ("NATS_SINKS_NATS_SUBJECT", "nats.subject"),
    ("NATS_SINKS_NATS_NO_ECHO", "nats.no_echo"),
    ("NATS_SINKS_CONSUMER_MANAGEMENT_MODE", "consumer_management.mode"),
    ("NATS_SINKS_LOG_LEVEL", "logging.level"),
    ("NATS_SINKS_ENCRYPTION_ENABLED", "encryption.enabled"),
    ("NATS_SINKS_ENCRYPTION_ALGORITHM", "encryption.algorithm"),
    ("NATS_SINKS_ENCRYPTION_KEY_ID", "encryption.key_id"),
    ("NATS_SINKS_ENCRYPTION_KEY_B64_ENV", "encryption.key_b64_env"),
    ("NATS_SINKS_MESSAGE_AUTHENTICITY_ENABLED", "message_authenticity.enabled"),
    ("NATS_SINKS_MESSAGE_AUTHENTICITY_SIGNATURE_HEADER", "message_authenticity.signature_header"),
    ("NATS_SINKS_MESSAGE_AUTHENTICITY_ALGORITHM_HEADER", "message_authenticity.algorithm_header"),
    ("NATS_SINKS_MESSAGE_AUTHENTICITY_KEY_ID_HEADER", "message_authenticity.key_id_header"),
    ("NATS_SINKS_PRIORITY_HEADER", "message_metadata.priority.header"),
    ("NATS_SINKS_PRIORITY_DEFAULT", "message_metadata.priority.default"),
    ("NATS_SINKS_CLASSIFICATION_HEADER", "message_metadata.classification.header"),
    ("NATS_SINKS_CLASSIFICATION_DEFAULT", "message_metadata.classification.default"),
    ("NATS_SINKS_LABELS_HEADER", "message_metadata.labels.header"),
    ("NATS_SINKS_LABELS_DEFAULT", "message_metadata.labels.default"),
    ("NATS_SINKS_MISSION_METADATA_ENABLED", "mission_metadata.enabled"),
    ("NATS_SINKS_MISSION_METADATA_HEADER", "mission_metadata.header"),
    ("NATS_SINKS_SECURITY_LABELS_ENABLED", "security_labels.enabled"),
    ("NATS_SINKS_SECURITY_LABELS_HEADER", "security_labels.header"),
    ("NATS_SINKS_CUSTODY_ENABLED", "custody.enabled"),
    ("NATS_SINKS_CUSTODY_ALGORITHM", "custody.algorithm"),
    ("NATS_SINKS_CUSTODY_KEY_ID", "custody.key_id"),
    ("NATS_SINKS_ADVISORIES_ENABLED", "advisories.enabled"),
    ("NATS_SINKS_SINK_TYPE", "sink.type"),
];

/// The figment for `path`: the file (format by extension) merged with the environment.
pub fn figment_for(path: &Path) -> Result<Figment, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::single("config", format!("cannot read {}: {e}", path.display())))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let figment = match ext.as_str() {
        "json" => {
            sinks_contract::json::validate_strict(&text)
                .map_err(|e| ConfigError::single("config", format!("not strict JSON: {e}")))?;
            Figment::from(Json::string(&text))
        }
        "toml" => Figment::from(Toml::string(&text)),
        "yaml" | "yml" => Figment::from(Yaml::string(&text)),
        other => {
            return Err(ConfigError::single(
                "config",
                format!("unknown config format `.{other}` (use .json, .toml or .yaml)"),
            ));
        }
    };
    Ok(with_env_overrides(figment))
}

/// Merges the environment overrides over `figment`.
pub fn with_env_overrides(figment: Figment) -> Figment {
    let fixed = Env::raw()
        .filter_map(|key| {
            FIXED_ENV.iter().find(|(name, _)| key.as_str().eq_ignore_ascii_case(name)).map(|(_, path)| (*path).into())
        })
        .split(".");
    figment.merge(fixed).merge(Env::prefixed("NATS_SINKS__").split("__"))
}

/// Calls `found(path, var)` for every `*_env` field under `at` (a string naming a variable,
/// or a map of names to variables) whose variable is not set.
fn missing_env_vars(at: &str, value: &serde_json::Value, found: &mut impl FnMut(String, String)) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let path = format!("{at}.{key}");
                match (key.ends_with("_env"), v) {
                    (true, serde_json::Value::String(var)) if !var.is_empty() => {
                        if std::env::var_os(var).is_none() {
                            found(path, var.clone());
                        }
                    }
                    (true, serde_json::Value::Object(vars)) => {
                        for (name, var) in vars {
                            if let Some(var) = var.as_str().filter(|v| std::env::var_os(v).is_none()) {
                                found(format!("{path}.{name}"), var.to_owned());
                            }
                        }
                    }
                    _ => missing_env_vars(&path, v, found),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                missing_env_vars(&format!("{at}[{i}]"), item, found);
            }
        }
        _ => {}
    }
}

/// The merged config tree of `path` with the environment overrides, as `run` reads it (for
/// a section that is checked on its own, like the sink's, when the rest fails).
pub fn raw_tree(path: &Path) -> Result<serde_json::Value, ConfigError> {
    extract(figment_for(path)?)
}

/// The merged config tree of `figment`.
fn extract(figment: Figment) -> Result<serde_json::Value, ConfigError> {
    figment.extract().map_err(|e| figment_error(&e))
}

fn figment_error(e: &figment::Error) -> ConfigError {
    let issues = e
        .clone()
        .into_iter()
        .map(|err| {
            let path = if err.path.is_empty() { "config".to_owned() } else { err.path.join(".") };
            ConfigIssue { path, message: err.kind.to_string() }
        })
        .collect();
    ConfigError { issues }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asking_for_an_output_of_the_metrics_turns_their_recording_on() {
        let base = |extra: serde_json::Value| {
            let mut v = serde_json::json!({
                "nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
                "sink": {"type": "file", "directory": "/tmp/x"},
            });
            if let (Some(b), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                for (k, x) in e {
                    b.insert(k.clone(), x.clone());
                }
            }
            Config::from_value(v)
        };
        let otlp = base(
            serde_json::json!({"opentelemetry": {"endpoint": "http://127.0.0.1:4318", "metrics": {"enabled": true}}}),
        );
        assert!(otlp.unwrap().metrics.enabled, "OTLP metrics record the metrics");
        let listener = base(serde_json::json!({"metrics": {"listen": "127.0.0.1:9108"}}));
        assert!(listener.unwrap().metrics.enabled, "the /metrics listener records the metrics");
        assert!(!base(serde_json::json!({})).unwrap().metrics.enabled, "off unless asked for");
        let contradiction = base(serde_json::json!({
            "metrics": {"enabled": false},
            "opentelemetry": {"endpoint": "http://127.0.0.1:4318", "metrics": {"enabled": true}},
        }))
        .unwrap_err();
        assert_eq!(contradiction.issues[0].path, "opentelemetry.metrics.enabled");
        assert!(contradiction.issues[0].message.contains("contradicts metrics.enabled = false"), "{contradiction}");
    }

    #[test]
    fn an_issue_set_by_the_environment_names_the_variable() {
        let value = serde_json::json!({
            "nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
            "delivery": {"batch_siz": "5"},
            "sink": {"type": "file", "directory": "/tmp/x"},
        });
        let e = Config::from_value(value).unwrap_err();
        let env = [("delivery.batch_siz".to_owned(), "NATS_SINKS__DELIVERY__BATCH_SIZ".to_owned())];
        let e = source::name_env_sources(e, &env);
        assert_eq!(e.issues[0].path, "delivery.batch_siz");
        let shown = e.issues[0].to_string();
        assert!(
            shown.contains("did you mean `batch_size`?")
                && shown.ends_with("(set by the environment variable NATS_SINKS__DELIVERY__BATCH_SIZ)"),
            "{shown}"
        );
        // An unset `*_env` variable is found wherever it is named.
        let mut unset = Vec::new();
        let tree = serde_json::json!({"a": {"password_env": "NATS_SINKS_TEST_SURELY_UNSET_1"}, "h": {"headers_env": {"X": "NATS_SINKS_TEST_SURELY_UNSET_2"}}, "l": [{"key_b64_env": "PATH"}]});
        missing_env_vars("sink", &tree, &mut |path, var| unset.push((path, var)));
        assert_eq!(
            unset,
            [
                ("sink.a.password_env".to_owned(), "NATS_SINKS_TEST_SURELY_UNSET_1".to_owned()),
                ("sink.h.headers_env.X".to_owned(), "NATS_SINKS_TEST_SURELY_UNSET_2".to_owned()),
            ],
            "PATH is set"
        );
        // A field from the file names no variable.
        let e = source::name_env_sources(e, &[("nats.url".to_owned(), "NATS_SINKS_NATS_URL".to_owned())]);
        assert!(!e.issues[0].to_string().contains("NATS_SINKS_NATS_URL"));
    }
}
