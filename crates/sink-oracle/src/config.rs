//! [`OracleSinkConfig`]: the `sink` section of a `type: oracle` configuration.
//!
//! Field names, values and defaults are the reference's (python-oracledb names), so a
//! reference Oracle JSON section parses unchanged, with these deliberate differences:
//! secrets are only accepted through `*_env` (an inline `password` or `wallet_password` is
//! refused), and `conflict_policy`, `json_column_type` and `columns.payload_sha256` are new.
//! Every problem names its field as `sink.<field>`. The table side (modes, columns, keys,
//! routes, staging) is in [`table`], the connect string built from the connection fields in
//! [`connection`].

pub(crate) mod connection;
pub(crate) mod table;

use serde::{Deserialize, Serialize};
use sinks_contract::config::{ConfigError, EnvName, Issues, SinkSection, is_env_name};
use sinks_contract::{IdempotencyStrategy, PayloadMode};
use sinks_toolkit::metadata::MetadataScope;
use sinks_toolkit::relational::{self, MergeUpdateColumns, PlanConfig};

pub use table::{
    ColumnMapping, ConflictPolicy, IdempotencyConfig, JsonColumnType, StagingCleanup, StagingConfig, TableRoute,
    WriteMode,
};

/// Most connections (and blocking threads) one sink may use.
pub(crate) const MAX_POOL: u32 = 64;

/// Settings of the Oracle Database sink (`sink.type = "oracle"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleSinkConfig {
    /// Easy Connect string (`host:port/service`), TNS alias, or full connect descriptor.
    pub dsn: String,
    /// Database user.
    pub user: String,
    /// Refused: give the password through `password_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Environment variable holding the password (required).
    #[serde(default)]
    pub password_env: Option<String>,
    /// Directory with `tnsnames.ora` / `sqlnet.ora` (the Oracle Client configuration
    /// directory, `TNS_ADMIN`).
    #[serde(default)]
    pub config_dir: Option<String>,
    /// Directory with the wallet (Autonomous Database mTLS).
    #[serde(default)]
    pub wallet_location: Option<String>,
    /// Refused: give the wallet password through `wallet_password_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet_password: Option<String>,
    /// Environment variable holding the wallet password (needs `wallet_location`; the thick
    /// driver reads auto-login wallets and does not use it).
    #[serde(default)]
    pub wallet_password_env: Option<String>,
    /// Check the server certificate's distinguished name against the host (TCPS).
    #[serde(default)]
    pub ssl_server_dn_match: Option<bool>,
    /// The server certificate's expected distinguished name (TCPS).
    #[serde(default)]
    pub ssl_server_cert_dn: Option<String>,
    /// Run `ALTER SESSION DISABLE PARALLEL DML` on every new session (default true; avoids
    /// ORA-12838 on Autonomous Database `high` services).
    #[serde(default = "yes")]
    pub disable_parallel_dml: bool,
    /// TCP connect timeout, seconds.
    #[serde(default)]
    pub tcp_connect_timeout: Option<f64>,
    // `retry_count` and `retry_delay` are the driver's own connect settings (Easy Connect
    // parameters of the connect string, `config/connection.rs`), not retries inside a write:
    // they are not `sinks_toolkit::retry::RetrySettings`, which the S3, NoSQL and Coherence
    // sinks share.
    /// Oracle Net connection attempts after the first.
    #[serde(default)]
    pub retry_count: Option<u32>,
    /// Seconds between Oracle Net connection attempts.
    #[serde(default)]
    pub retry_delay: Option<u32>,
    /// HTTPS proxy for TCPS connections.
    #[serde(default)]
    pub https_proxy: Option<String>,
    /// HTTPS proxy port (needs `https_proxy`).
    #[serde(default)]
    pub https_proxy_port: Option<u16>,
    /// Default table (or `schema.table`).
    #[serde(default = "default_table")]
    pub table: String,
    /// Subject routes to other tables; every routed table is written in the same transaction.
    #[serde(default)]
    pub table_routes: Vec<TableRoute>,
    /// `merge` (default), `insert_ignore`, `insert` or `append`.
    #[serde(default)]
    pub mode: WriteMode,
    /// Columns a merge updates on an existing key: null = every non-key column, `[]` = none.
    #[serde(default)]
    pub merge_update_columns: Option<Vec<String>>,
    /// Create missing tables at start-up from the column mapping and key columns.
    #[serde(default)]
    pub auto_create: bool,
    /// Column type of JSON columns in generated DDL: `json` (default) or `clob`.
    #[serde(default)]
    pub json_column_type: JsonColumnType,
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
    /// The staging-table write path.
    #[serde(default)]
    pub staging: StagingConfig,
    /// Connections opened at start-up.
    #[serde(default = "one")]
    pub pool_min: u32,
    /// Most connections; also the number of blocking threads that run driver calls.
    #[serde(default = "default_pool_max")]
    pub pool_max: u32,
    /// Connections opened at a time when the pool grows.
    #[serde(default = "one")]
    pub pool_increment: u32,
}

fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn default_pool_max() -> u32 {
    4
}
fn default_table() -> String {
    "NATS_SINK_EVENTS".into()
}

impl OracleSinkConfig {
    /// The table side of this configuration as the shared plan reads it: names allow-listed
    /// and upper-cased, a key in the keyed modes, update columns only with `merge`.
    pub(crate) fn plan_config(&self) -> PlanConfig<'_, MergeUpdateColumns> {
        PlanConfig {
            table: &self.table,
            routes: &self.table_routes,
            columns: &self.columns,
            idempotency: &self.idempotency,
            update_columns: self.merge_update_columns.as_deref(),
            keyed: self.mode.keyed(),
            updates: self.mode == WriteMode::Merge,
            conflict_policy: self.conflict_policy.is_some(),
            identifier: normalize,
        }
    }

    /// The shared plans of the default table and every route, with the fingerprint column
    /// also in the tables `has_fp` names; the staging table must not be one of them.
    pub(crate) fn table_plans(
        &self,
        has_fp: impl Fn(&str) -> bool,
    ) -> Result<Vec<relational::TablePlan>, (String, String)> {
        let plans = relational::TablePlan::all_with(&self.plan_config(), has_fp)?;
        if let Some(staging) = self.staging_table() {
            match staging {
                Ok(name) if plans.iter().any(|p| p.table == name) => {
                    return Err(("sink.staging.table".into(), "must not be one of the target tables".into()));
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(plans)
    }

    /// The normalized staging table name, when staging is on.
    fn staging_table(&self) -> Option<Result<String, (String, String)>> {
        if !self.staging.enabled {
            return None;
        }
        let table = self.staging.table.as_deref()?;
        Some(normalize(table, true).ok_or_else(|| {
            ("sink.staging.table".to_owned(), format!("`{table}` is not a valid table name (table or schema.table)"))
        }))
    }

    /// The staging table and its batch id column, normalized, when staging is on.
    pub(crate) fn staging_names(&self) -> Result<Option<(String, String)>, (String, String)> {
        let Some(table) = self.staging_table() else { return Ok(None) };
        let table = table?;
        let column = &self.staging.batch_id_column;
        let Some(batch_column) = normalize(column, false) else {
            return Err(("sink.staging.batch_id_column".into(), format!("`{column}` is not a valid column name")));
        };
        Ok(Some((table, batch_column)))
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

    /// Every table the sink writes: the default table and each route table, once, as
    /// configured.
    pub fn tables(&self) -> Vec<String> {
        let mut tables = vec![self.table.clone()];
        for r in &self.table_routes {
            if !tables.iter().any(|t| t.eq_ignore_ascii_case(&r.table)) {
                tables.push(r.table.clone());
            }
        }
        tables
    }

    /// Checks every field; problems name `sink.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut issues = Issues::default();
        for (path, value) in [("sink.dsn", &self.dsn), ("sink.user", &self.user)] {
            if value.trim().is_empty() || value.chars().any(char::is_control) {
                issues.push(path, "must be non-empty text without control characters");
            }
        }
        for (path, inline) in [("sink.password", &self.password), ("sink.wallet_password", &self.wallet_password)] {
            if inline.is_some() {
                issues.push(
                    path,
                    format!("secrets are not accepted inline; set `{path}_env` to the name of an environment variable"),
                );
            }
        }
        match &self.password_env {
            None if self.password.is_none() => {
                issues.push("sink.password_env", "required: the name of the environment variable holding the password")
            }
            Some(name) if !is_env_name(name, EnvName::AnyCase) => {
                issues.push("sink.password_env", "must be the name of an environment variable")
            }
            _ => {}
        }
        if let Some(name) = &self.wallet_password_env {
            if !is_env_name(name, EnvName::AnyCase) {
                issues.push("sink.wallet_password_env", "must be the name of an environment variable");
            }
            if self.wallet_location.is_none() {
                issues.push("sink.wallet_password_env", "needs sink.wallet_location");
            }
        }
        for (path, value) in [
            ("sink.config_dir", &self.config_dir),
            ("sink.wallet_location", &self.wallet_location),
            ("sink.ssl_server_cert_dn", &self.ssl_server_cert_dn),
            ("sink.https_proxy", &self.https_proxy),
        ] {
            if value.as_ref().is_some_and(|v| v.trim().is_empty() || v.chars().any(char::is_control) || v.contains('"'))
            {
                issues.push(path, "must be non-empty text without control characters or double quotes");
            }
        }
        if self.tcp_connect_timeout.is_some_and(|t| !(t > 0.0 && t <= 3600.0)) {
            issues.push("sink.tcp_connect_timeout", "must be in (0, 3600] seconds");
        }
        if self.https_proxy_port.is_some() && self.https_proxy.is_none() {
            issues.push("sink.https_proxy_port", "needs sink.https_proxy");
        }
        if self.https_proxy_port == Some(0) {
            issues.push("sink.https_proxy_port", "must be in 1..=65535");
        }
        if !(1..=MAX_POOL).contains(&self.pool_max) {
            issues.push("sink.pool_max", format!("must be in 1..={MAX_POOL}"));
        }
        if self.pool_min < 1 || self.pool_min > self.pool_max {
            issues.push("sink.pool_min", "must be at least 1 and at most sink.pool_max");
        }
        if self.pool_increment < 1 {
            issues.push("sink.pool_increment", "must be at least 1");
        }
        if self.merge_update_columns.is_some() && self.mode != WriteMode::Merge {
            issues.push("sink.merge_update_columns", "applies only when sink.mode is `merge`");
        }
        if self.conflict_policy.is_some() && !self.mode.keyed() {
            issues.push("sink.conflict_policy", "needs a key: not available with mode `append`");
        }
        if self.staging.enabled {
            if !matches!(self.mode, WriteMode::Merge | WriteMode::InsertIgnore) {
                issues.push("sink.staging.enabled", "needs sink.mode `merge` or `insert_ignore`");
            }
            if self.staging.table.is_none() {
                issues.push("sink.staging.table", "required when sink.staging.enabled is true");
            }
            if self.conflict_policy.is_some() {
                issues.push("sink.conflict_policy", "is not available with the staging path (sink.staging.enabled)");
            }
        }
        if self.idempotency.strategy == IdempotencyStrategy::PayloadField
            && self.idempotency.payload_field.as_deref().is_none_or(|p| p.is_empty() || p.split('.').any(str::is_empty))
        {
            issues.push("sink.idempotency.payload_field", "a dotted path is required for the payload_field strategy");
        }
        // Unplannable tables are reported by the checks above.
        if self.plan_config().plannable()
            && let Err((path, message)) = self.table_plans(|_| false)
        {
            issues.push(&path, message);
        }
        if let Err((path, message)) = self.staging_names() {
            issues.push(&path, message);
        }
        for (i, route) in self.table_routes.iter().enumerate() {
            if let Err(e) = sinks_toolkit::subject::validate_pattern(&route.subject) {
                issues.push(&format!("sink.table_routes[{i}].subject"), e.to_string());
            }
            if route.update_columns.is_some() && self.mode != WriteMode::Merge {
                issues.push(
                    &format!("sink.table_routes[{i}].merge_update_columns"),
                    "applies only when sink.mode is `merge`",
                );
            }
            if let Some(idem) = &route.idempotency
                && idem.strategy == IdempotencyStrategy::PayloadField
                && idem.payload_field.as_deref().is_none_or(|p| p.is_empty() || p.split('.').any(str::is_empty))
            {
                issues.push(
                    &format!("sink.table_routes[{i}].idempotency.payload_field"),
                    "a dotted path is required for the payload_field strategy",
                );
            }
        }
        issues.finish()
    }
}

/// Normalizes an identifier of the configuration (a table or column name; identifiers
/// cannot be bound, so every one passes this allow-list and `sql.rs` quotes it) (optionally `schema.table` when `qualified`) to upper case, or
/// `None` when it fails the allow-list.
pub(crate) fn normalize(name: &str, qualified: bool) -> Option<String> {
    let part_ok = |p: &str| {
        let mut chars = p.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
            && p.len() <= 128
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '#'))
    };
    let parts: Vec<&str> = name.split('.').collect();
    let ok = match parts.as_slice() {
        [one] => part_ok(one),
        [schema, table] if qualified => part_ok(schema) && part_ok(table),
        _ => false,
    };
    ok.then(|| name.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(v: serde_json::Value) -> SinkSection {
        match v {
            serde_json::Value::Object(m) => SinkSection(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn reference_sections_parse_unchanged() {
        let wallet = section(serde_json::json!({
            "type": "oracle", "dsn": "mydb_low", "user": "NATS_SINK_TEST", "password_env": "ORACLE_PASSWORD",
            "config_dir": ".local/oracle-adb/wallet", "wallet_location": ".local/oracle-adb/wallet",
            "wallet_password_env": "ORACLE_WALLET_PASSWORD", "table": "NATS_SINK_EVENTS", "mode": "merge",
            "payload_mode": "json_or_envelope", "disable_parallel_dml": true, "ssl_server_dn_match": true,
            "retry_count": 20, "retry_delay": 3,
            "idempotency": {"strategy": "stream_sequence", "columns": ["STREAM_NAME", "STREAM_SEQUENCE"]}
        }));
        OracleSinkConfig::from_section(&wallet).unwrap();
        let routed = section(serde_json::json!({
            "type": "oracle", "dsn": "localhost:1521/FREEPDB1", "user": "app_user", "password_env": "ORACLE_PASSWORD",
            "table": "NATS_SINK_EVENTS", "mode": "merge", "auto_create": false, "payload_mode": "json_or_envelope",
            "payload_column": "PAYLOAD_JSON", "headers_column": "HEADERS_JSON",
            "table_routes": [{"subject": "orders.by-id", "table": "NATS_SINK_EVENTS_BY_ID",
                "idempotency": {"strategy": "message_id", "columns": ["MESSAGE_ID"]},
                "merge_update_columns": ["PAYLOAD_JSON", "METADATA_JSON"]}],
            "staging": {"enabled": true, "table": "NATS_SINK_EVENTS_STAGE", "batch_id_column": "NATS_SINKS_BATCH_ID",
                "cleanup": "delete_on_success"},
            "pool_min": 1, "pool_max": 4, "pool_increment": 1
        }));
        let c = OracleSinkConfig::from_section(&routed).unwrap();
        assert_eq!(c.tables(), ["NATS_SINK_EVENTS", "NATS_SINK_EVENTS_BY_ID"]);
    }

    #[test]
    fn problems_name_their_fields() {
        let cases = [
            (serde_json::json!({"password": "x"}), "sink.password"),
            (serde_json::json!({"wallet_password": "x", "wallet_location": "/w"}), "sink.wallet_password"),
            (serde_json::json!({"wallet_password_env": "W"}), "sink.wallet_password_env"),
            (serde_json::json!({"password_env": null}), "sink.password_env"),
            (serde_json::json!({"https_proxy_port": 8080}), "sink.https_proxy_port"),
            (serde_json::json!({"table": "bad table"}), "sink.table"),
            (serde_json::json!({"mode": "insert", "merge_update_columns": []}), "sink.merge_update_columns"),
            (serde_json::json!({"merge_update_columns": ["STREAM_NAME"]}), "sink.merge_update_columns"),
            (serde_json::json!({"idempotency": {"columns": ["NOPE"]}}), "sink.idempotency.columns"),
            (serde_json::json!({"columns": {"subject": "a.b"}}), "sink.columns.subject"),
            (serde_json::json!({"columns": {"subject": "PAYLOAD_JSON"}}), "sink.columns"),
            (serde_json::json!({"pool_max": 0}), "sink.pool_max"),
            (serde_json::json!({"pool_min": 5}), "sink.pool_min"),
            (serde_json::json!({"mode": "append", "conflict_policy": "keep_first"}), "sink.conflict_policy"),
            (serde_json::json!({"staging": {"enabled": true}}), "sink.staging.table"),
            (serde_json::json!({"mode": "insert", "staging": {"enabled": true, "table": "S"}}), "sink.staging.enabled"),
            (
                serde_json::json!({"staging": {"enabled": true, "table": "S", "batch_id_column": "1x"}}),
                "sink.staging.batch_id_column",
            ),
            (serde_json::json!({"staging": {"bogus": 1}}), "sink.staging.bogus"),
            (
                serde_json::json!({"table_routes": [{"subject": "a.>.b", "table": "T2"}]}),
                "sink.table_routes[0].subject",
            ),
            (serde_json::json!({"tcp_connect_timeout": 0}), "sink.tcp_connect_timeout"),
            (serde_json::json!({"bogus": 1}), "sink.bogus"),
        ];
        for (value, field) in cases {
            let mut v = serde_json::json!({"type": "oracle", "dsn": "h:1521/s", "user": "u", "password_env": "P"});
            if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), value) {
                base.extend(e);
            }
            let err = OracleSinkConfig::from_section(&section(v.clone())).unwrap_err();
            assert!(err.issues.iter().any(|i| i.path == field), "{v}: expected {field}, got {err}");
        }
    }
}
