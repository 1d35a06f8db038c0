//! [`MySqlSinkConfig`]: the `sink` section of a `type: mysql` configuration.
//!
//! Field names, values and defaults are the reference's, so a reference MySQL JSON section
//! parses unchanged, with two deliberate differences: the password is only accepted through
//! `password_env` (an inline `password` is refused), and `conflict_policy` is new. Every
//! problem names its field as `sink.<field>`.

use serde::{Deserialize, Serialize};
use sinks_contract::config::{ConfigError, EnvName, Issues, SinkSection, is_env_name};
use sinks_contract::{IdempotencyStrategy, PayloadMode};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::relational::{self, PlanConfig, UpsertUpdateColumns};

/// How rows are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteMode {
    /// Insert new keys; an existing key is updated with `upsert_update_columns` (default).
    #[default]
    Upsert,
    /// Insert new keys; an existing key is left unchanged and reported as a duplicate.
    InsertIgnore,
    /// Insert new keys; an existing key is reported as a duplicate (never an error).
    Insert,
    /// Insert every delivery as a new row; no key, so not idempotent.
    Append,
}

pub use sinks_toolkit::columns::ColumnMapping;
/// What to do when a redelivered key arrives with different content (`keep_first`,
/// `overwrite`, `dead_letter`; needs the fingerprint column, which `conflict_policy` adds).
pub use sinks_toolkit::relational::ConflictPolicy;
/// How each row's key is derived, and which columns hold it.
pub use sinks_toolkit::relational::IdempotencyConfig;

/// Route messages whose subject matches to another table (`subject`, `table`, `idempotency`,
/// `upsert_update_columns`).
pub type TableRoute = sinks_toolkit::relational::TableRoute<UpsertUpdateColumns>;

/// Settings of the MySQL sink (`sink.type = "mysql"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MySqlSinkConfig {
    /// Server host.
    #[serde(default = "default_host")]
    pub host: String,
    /// Server port.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Database (schema).
    pub database: String,
    /// User name.
    pub user: String,
    /// Refused: give the password through `password_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Environment variable holding the password (unset = no password).
    #[serde(default)]
    pub password_env: Option<String>,
    /// Connect timeout, seconds.
    #[serde(default = "default_connect_timeout")]
    pub connection_timeout: f64,
    /// CA bundle (PEM) to verify the server; enables TLS.
    #[serde(default)]
    pub ssl_ca: Option<String>,
    /// Client certificate (PEM) for mutual TLS; needs `ssl_key`.
    #[serde(default)]
    pub ssl_cert: Option<String>,
    /// Client key (PEM) for mutual TLS; needs `ssl_cert`.
    #[serde(default)]
    pub ssl_key: Option<String>,
    /// Check that the server certificate names `host` (default true).
    #[serde(default = "yes")]
    pub ssl_verify_identity: bool,
    /// Never use TLS (cannot be combined with the other `ssl_*` fields).
    #[serde(default)]
    pub ssl_disabled: bool,
    /// Default table (or `schema.table`).
    #[serde(default = "default_table")]
    pub table: String,
    /// Subject routes to other tables; every routed table is written in the same transaction.
    #[serde(default)]
    pub table_routes: Vec<TableRoute>,
    /// `upsert` (default), `insert_ignore`, `insert` or `append`.
    #[serde(default)]
    pub mode: WriteMode,
    /// Columns an upsert updates on an existing key: null = every non-key column, `[]` = none.
    #[serde(default)]
    pub upsert_update_columns: Option<Vec<String>>,
    /// Create missing tables at start-up from the column mapping and key columns.
    #[serde(default)]
    pub auto_create: bool,
    /// How message bytes become the stored payload JSON.
    #[serde(default)]
    pub payload_mode: PayloadMode,
    /// What the metadata column's document holds of each delivery: `message` (default: only
    /// the event's facts, the same for every delivery) or `delivery` (the reference's
    /// document, with the consumer, the receive and store times and freshness). The
    /// `RECEIVED_AT_EPOCH_NS` and `STORED_AT_EPOCH_NS` columns hold the row's one insert
    /// either way (a redelivery never rewrites a row).
    #[serde(default)]
    pub metadata_scope: MetadataScope,
    /// Legacy alias of `columns.payload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_column: Option<String>,
    /// Legacy alias of `columns.headers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_column: Option<String>,
    /// Column names.
    #[serde(default)]
    pub columns: ColumnMapping,
    /// Key strategy and key columns.
    #[serde(default)]
    pub idempotency: IdempotencyConfig,
    /// Opt-in conflict detection through the `payload_sha256` fingerprint column.
    #[serde(default)]
    pub conflict_policy: Option<ConflictPolicy>,
    /// Accepted for compatibility (the pool has no name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_name: Option<String>,
    /// Connections in the pool (1–32); batches in flight use separate connections.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn default_port() -> u16 {
    3306
}
fn default_connect_timeout() -> f64 {
    10.0
}
fn yes() -> bool {
    true
}
fn default_table() -> String {
    "NATS_SINK_EVENTS".into()
}
fn default_pool_size() -> usize {
    4
}

impl MySqlSinkConfig {
    /// The table side of `config` as the shared plan reads it: names allow-listed and kept as
    /// configured, a key in every mode but `append`, update columns planned in every mode.
    pub(crate) fn plan_config(&self) -> PlanConfig<'_, UpsertUpdateColumns> {
        PlanConfig {
            table: &self.table,
            routes: &self.table_routes,
            columns: &self.columns,
            idempotency: &self.idempotency,
            update_columns: self.upsert_update_columns.as_deref(),
            keyed: self.mode != WriteMode::Append,
            updates: true,
            conflict_policy: self.conflict_policy.is_some(),
            identifier: |name, qualified| valid_identifier(name, qualified).then(|| name.to_owned()),
        }
    }

    /// Parses and validates the `sink` section; applies the legacy column aliases.
    pub fn from_section(section: &SinkSection) -> Result<Self, ConfigError> {
        let mut config: Self = section.parse()?;
        config.complete();
        config.validate()?;
        Ok(config)
    }

    /// Applies the legacy column aliases (`payload_column`, `headers_column` become
    /// `columns.payload`, `columns.headers`): the effective config shows them there.
    pub fn complete(&mut self) {
        if let Some(c) = self.payload_column.take() {
            self.columns.payload = c;
        }
        if let Some(c) = self.headers_column.take() {
            self.columns.headers = c;
        }
    }

    /// Every table the sink writes: the default table and each route table, once.
    pub fn tables(&self) -> Vec<String> {
        let mut tables = vec![self.table.clone()];
        for r in &self.table_routes {
            if !tables.contains(&r.table) {
                tables.push(r.table.clone());
            }
        }
        tables
    }

    /// Checks every field; problems name `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        for (path, value) in [("sink.host", &self.host), ("sink.database", &self.database), ("sink.user", &self.user)] {
            if value.trim().is_empty() || value.chars().any(char::is_control) {
                issues.push(path, "must be non-empty text without control characters");
            }
        }
        if self.password.is_some() {
            issues.push(
                "sink.password",
                "secrets are not accepted inline; set `sink.password_env` to the name of an environment variable",
            );
        }
        if let Some(name) = &self.password_env
            && !is_env_name(name, EnvName::AnyCase)
        {
            issues.push("sink.password_env", "must be the name of an environment variable");
        }
        if !(self.connection_timeout > 0.0 && self.connection_timeout <= 3600.0) {
            issues.push("sink.connection_timeout", "must be in (0, 3600] seconds");
        }
        if self.ssl_disabled && (self.ssl_ca.is_some() || self.ssl_cert.is_some() || self.ssl_key.is_some()) {
            issues.push("sink.ssl_disabled", "cannot be combined with ssl_ca, ssl_cert or ssl_key");
        }
        if self.ssl_cert.is_some() != self.ssl_key.is_some() {
            issues.push("sink.ssl_cert", "`ssl_cert` and `ssl_key` must be given together");
        }
        if !(1..=32).contains(&self.pool_size) {
            issues.push("sink.pool_size", "must be in 1..=32");
        }
        if self.upsert_update_columns.is_some() && self.mode != WriteMode::Upsert {
            issues.push("sink.upsert_update_columns", "applies only when sink.mode is `upsert`");
        }
        if self.conflict_policy.is_some() && self.mode == WriteMode::Append {
            issues.push("sink.conflict_policy", "needs a key: not available with mode `append`");
        }
        if self.idempotency.strategy == IdempotencyStrategy::PayloadField
            && self.idempotency.payload_field.as_deref().is_none_or(|p| p.is_empty() || p.split('.').any(str::is_empty))
        {
            issues.push("sink.idempotency.payload_field", "a dotted path is required for the payload_field strategy");
        }
        if let Err((path, message)) = relational::TablePlan::validate_all(&self.plan_config()) {
            issues.push(&path, message);
        }
        for (i, route) in self.table_routes.iter().enumerate() {
            if let Err(e) = sinks_toolkit::subject::validate_pattern(&route.subject) {
                issues.push(&format!("sink.table_routes[{i}].subject"), e.to_string());
            }
            if route.update_columns.is_some() && self.mode != WriteMode::Upsert {
                issues.push(
                    &format!("sink.table_routes[{i}].upsert_update_columns"),
                    "applies only when sink.mode is `upsert`",
                );
            }
        }
        issues.finish()
    }
}

/// Checks an identifier, optionally `schema.table` when `qualified`: the allow-list every
/// table and column name of the configuration passes (`[A-Za-z_][A-Za-z0-9_$]{0,63}`), since
/// identifiers cannot be bound (`sql.rs` quotes them).
pub(crate) fn valid_identifier(name: &str, qualified: bool) -> bool {
    let part_ok = |p: &str| {
        let mut chars = p.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && p.len() <= 64
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        [one] => part_ok(one),
        [schema, table] if qualified => part_ok(schema) && part_ok(table),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_allow_listed() {
        for (name, qualified, ok) in [
            ("EVENTS", false, true),
            ("db.EVENTS", true, true),
            ("db.EVENTS", false, false),
            ("a.b.c", true, false),
            ("1abc", false, false),
            ("ev`ents", false, false),
            ("ev ents", false, false),
            ("_x$1", false, true),
            ("", false, false),
        ] {
            assert_eq!(valid_identifier(name, qualified), ok, "{name}");
        }
    }

    fn section(v: serde_json::Value) -> SinkSection {
        match v {
            serde_json::Value::Object(m) => SinkSection(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn reference_section_parses_unchanged() {
        let s = section(serde_json::json!({
            "type": "mysql", "host": "127.0.0.1", "port": 3306, "database": "nats_sinks", "user": "app_user",
            "password_env": "ORACLE_MYSQL_PASSWORD", "table": "NATS_SINK_EVENTS", "mode": "upsert",
            "upsert_update_columns": [], "auto_create": true, "payload_mode": "json_or_envelope",
            "table_routes": [{"subject": "orders.priority.*", "table": "NATS_SINK_PRIORITY_EVENTS"}]
        }));
        let c = MySqlSinkConfig::from_section(&s).unwrap();
        assert_eq!(c.tables(), ["NATS_SINK_EVENTS", "NATS_SINK_PRIORITY_EVENTS"]);
        assert_eq!(c.upsert_update_columns, Some(vec![]));
    }

    #[test]
    fn problems_name_their_fields() {
        let cases = [
            (serde_json::json!({"database": "d", "user": "u", "password": "x"}), "sink.password"),
            (serde_json::json!({"database": "d", "user": "u", "table": "bad table"}), "sink.table"),
            (
                serde_json::json!({"database": "d", "user": "u", "mode": "insert", "upsert_update_columns": []}),
                "sink.upsert_update_columns",
            ),
            (
                serde_json::json!({"database": "d", "user": "u", "idempotency": {"columns": ["NOPE"]}}),
                "sink.idempotency.columns",
            ),
            (serde_json::json!({"database": "d", "user": "u", "columns": {"subject": "a.b"}}), "sink.columns.subject"),
            (serde_json::json!({"database": "d", "user": "u", "columns": {"subject": "PAYLOAD_JSON"}}), "sink.columns"),
            (serde_json::json!({"database": "d", "user": "u", "pool_size": 0}), "sink.pool_size"),
            (
                serde_json::json!({"database": "d", "user": "u", "mode": "append", "conflict_policy": "keep_first"}),
                "sink.conflict_policy",
            ),
            (serde_json::json!({"database": "d", "user": "u", "bogus": 1}), "sink.bogus"),
            (serde_json::json!({"user": "u"}), "sink.database"),
        ];
        for (value, field) in cases {
            let mut v = value;
            v["type"] = "mysql".into();
            let err = MySqlSinkConfig::from_section(&section(v.clone())).unwrap_err();
            assert!(err.issues.iter().any(|i| i.path == field), "{v}: expected {field}, got {err}");
        }
    }
}
