//! SQL text, built from validated identifiers only; every value is a `?` placeholder.
//!
//! Identifiers (tables, columns) cannot be bound, so they pass an allow-list
//! (`[A-Za-z_][A-Za-z0-9_$]{0,63}`, tables optionally `schema.table`) and are backtick-quoted.
//! A [`TablePlan`] holds everything needed for one table: the column list in row order, the
//! key columns, the columns an upsert updates (the plan relational sinks share,
//! `sinks_toolkit::relational`), and the DDL generated from that mapping.

use std::fmt::Write as _;
use std::ops::Deref;

use sinks_toolkit::relational;

use crate::config::MySqlSinkConfig;

pub(crate) use sinks_toolkit::columns::Field;

/// Column type of `field` in generated DDL; `key` columns must be indexable and not null.
fn ddl_type(field: Field, key: bool) -> &'static str {
    match (field, key) {
        (Field::StreamName, _) => "varchar(255)",
        (Field::StreamSequence, _) => "bigint unsigned",
        (Field::MessageId, _) => "varchar(512)",
        (Field::Subject | Field::Priority | Field::Classification | Field::Labels, true) => "varchar(512)",
        (Field::Subject | Field::Priority | Field::Classification | Field::Labels, false) => "text",
        (Field::CreatedAt | Field::JetStreamTimestamp | Field::ReceivedAt | Field::StoredAt, _) => "bigint",
        (Field::Payload | Field::Headers | Field::Metadata | Field::MissionMetadata | Field::SecurityLabels, _) => {
            "json"
        }
        (Field::PayloadSha256, _) => "char(64)",
    }
}

/// Columns the generated DDL declares `NOT NULL` (besides the key).
fn not_null(field: Field) -> bool {
    matches!(field, Field::StreamName | Field::StreamSequence | Field::Subject | Field::ReceivedAt | Field::StoredAt)
}

/// Backtick-quotes a validated identifier (each part of `schema.table`).
pub(crate) fn quote(name: &str) -> String {
    name.split('.').map(|p| format!("`{p}`")).collect::<Vec<_>>().join(".")
}

/// What an insert does when the key already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDuplicate {
    /// Plain insert: a duplicate key is an error (1062).
    Fail,
    /// `ON DUPLICATE KEY UPDATE k = k`: a no-op that, unlike `INSERT IGNORE`, still reports
    /// data errors instead of truncating values.
    Keep,
    /// `ON DUPLICATE KEY UPDATE c = VALUES(c)` for the plan's update columns.
    Update,
}

/// Everything about writing one table: the plan relational sinks share
/// (`sinks_toolkit::relational::TablePlan`: columns in bind order, key, update columns,
/// fingerprint; read through `Deref`) and MySQL's statements for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TablePlan(relational::TablePlan);

impl Deref for TablePlan {
    type Target = relational::TablePlan;

    fn deref(&self) -> &relational::TablePlan {
        &self.0
    }
}

impl TablePlan {
    /// Plans for the default table and every route (routes sharing a table must agree), as
    /// the configuration says: with the fingerprint column when `conflict_policy` is set.
    pub(crate) fn all(config: &MySqlSinkConfig) -> Result<Vec<Self>, (String, String)> {
        Self::all_with(config, |_| false)
    }

    /// [`Self::all`], with the fingerprint column also in the tables `has_fp` names (an
    /// existing table that has the column without a conflict policy: under stream-sequence
    /// keys its fingerprint is written and compared, so a reused sequence is detected).
    pub(crate) fn all_with(
        config: &MySqlSinkConfig,
        has_fp: impl Fn(&str) -> bool,
    ) -> Result<Vec<Self>, (String, String)> {
        let plans = relational::TablePlan::all_with(&config.plan_config(), has_fp)?;
        Ok(plans.into_iter().map(Self).collect())
    }

    /// The fingerprint column's name, whether or not the plan writes it.
    pub(crate) fn fingerprint_column(config: &MySqlSinkConfig) -> &str {
        Field::PayloadSha256.column(&config.columns).1
    }

    /// `INSERT INTO t (cols) VALUES (?, …), … [ON DUPLICATE KEY UPDATE …]` for `rows` rows.
    pub(crate) fn insert(&self, rows: usize, on_duplicate: OnDuplicate) -> String {
        let cols: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
        let one = format!("({})", vec!["?"; cols.len()].join(", "));
        let mut sql =
            format!("INSERT INTO {} ({}) VALUES {}", quote(&self.table), cols.join(", "), vec![one; rows].join(", "));
        let keep = || {
            let k = quote(&self.columns[self.key[0]]);
            format!(" ON DUPLICATE KEY UPDATE {k} = {k}")
        };
        match on_duplicate {
            OnDuplicate::Fail => {}
            OnDuplicate::Keep => sql.push_str(&keep()),
            OnDuplicate::Update if self.update.is_empty() => sql.push_str(&keep()),
            OnDuplicate::Update => {
                let sets: Vec<String> =
                    self.update.iter().map(|i| format!("{0} = VALUES({0})", quote(&self.columns[*i]))).collect();
                let _ = write!(sql, " ON DUPLICATE KEY UPDATE {}", sets.join(", "));
            }
        }
        sql
    }

    /// `SELECT key cols[, fingerprint] FROM t WHERE (keys) IN (…) FOR UPDATE` for `rows` keys.
    pub(crate) fn select_existing(&self, rows: usize) -> String {
        let keys: Vec<String> = self.key.iter().map(|i| quote(&self.columns[*i])).collect();
        let mut select = keys.clone();
        if let Some(fp) = self.fingerprint {
            select.push(quote(&self.columns[fp]));
        }
        let tuple = if keys.len() == 1 { "?".to_owned() } else { format!("({})", vec!["?"; keys.len()].join(", ")) };
        let lhs = if keys.len() == 1 { keys[0].clone() } else { format!("({})", keys.join(", ")) };
        format!(
            "SELECT {} FROM {} WHERE {lhs} IN ({}) FOR UPDATE",
            select.join(", "),
            quote(&self.table),
            vec![tuple; rows].join(", ")
        )
    }

    /// `SELECT key cols, fingerprint-or-payload FROM t WHERE (keys) IN (…)` for `rows` keys,
    /// without locks (reconcile reads next to a live writer).
    pub(crate) fn select_stored(&self, rows: usize) -> String {
        let keys: Vec<String> = self.key.iter().map(|i| quote(&self.columns[*i])).collect();
        let mut select = keys.clone();
        select.push(quote(&self.columns[self.content_column()]));
        let tuple = if keys.len() == 1 { "?".to_owned() } else { format!("({})", vec!["?"; keys.len()].join(", ")) };
        let lhs = if keys.len() == 1 { keys[0].clone() } else { format!("({})", keys.join(", ")) };
        format!(
            "SELECT {} FROM {} WHERE {lhs} IN ({})",
            select.join(", "),
            quote(&self.table),
            vec![tuple; rows].join(", ")
        )
    }

    /// Index of the column reconcile compares: the fingerprint when there is one, else the
    /// payload.
    pub(crate) fn content_column(&self) -> usize {
        self.fingerprint.or_else(|| self.fields.iter().position(|f| *f == Field::Payload)).unwrap_or(0)
    }

    /// `SELECT 1 FROM t LIMIT 0`: proves the table exists and is readable.
    pub(crate) fn probe(&self) -> String {
        format!("SELECT 1 FROM {} LIMIT 0", quote(&self.table))
    }

    /// `CREATE TABLE IF NOT EXISTS` from the mapping and key columns (binary collation, so
    /// keys that differ only in case or accents stay distinct).
    pub(crate) fn ddl(&self) -> String {
        let mut lines: Vec<String> = self
            .fields
            .iter()
            .zip(&self.columns)
            .enumerate()
            .map(|(i, (f, c))| {
                let key = self.key.contains(&i);
                let null = if key || not_null(*f) { " NOT NULL" } else { "" };
                format!("  {} {}{null}", quote(c), ddl_type(*f, key))
            })
            .collect();
        if !self.key.is_empty() {
            let keys: Vec<String> = self.key.iter().map(|i| quote(&self.columns[*i])).collect();
            lines.push(format!("  PRIMARY KEY ({})", keys.join(", ")));
        }
        format!(
            "CREATE TABLE IF NOT EXISTS {} (\n{}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            quote(&self.table),
            lines.join(",\n")
        )
    }
}

#[cfg(test)]
mod tests {
    use sinks_contract::existing::KeyBasis;

    use super::*;

    fn config(extra: serde_json::Value) -> MySqlSinkConfig {
        let mut v = serde_json::json!({"type": "mysql", "database": "d", "user": "u"});
        if let (Some(base), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
            base.extend(e);
        }
        let serde_json::Value::Object(m) = v else { unreachable!() };
        MySqlSinkConfig::from_section(&sinks_contract::config::SinkSection(m)).unwrap()
    }

    #[test]
    fn the_default_key_pair_with_another_strategy_means_the_message_id_like_the_reference() {
        let pair = serde_json::json!({"strategy": "message_id", "columns": ["STREAM_NAME", "STREAM_SEQUENCE"]});
        let plan = TablePlan::all(&config(serde_json::json!({"idempotency": pair}))).unwrap().remove(0);
        let key: Vec<&str> = plan.key.iter().map(|i| plan.columns[*i].as_str()).collect();
        assert_eq!(key, ["MESSAGE_ID"]);
    }

    #[test]
    fn upsert_statement() {
        let plan =
            TablePlan::all(&config(serde_json::json!({"upsert_update_columns": ["PAYLOAD_JSON"]}))).unwrap().remove(0);
        let sql = plan.insert(2, OnDuplicate::Update);
        assert!(sql.starts_with("INSERT INTO `NATS_SINK_EVENTS` (`STREAM_NAME`, `STREAM_SEQUENCE`, `SUBJECT`,"));
        assert_eq!(sql.matches('?').count(), 32, "16 columns × 2 rows");
        assert!(sql.ends_with(" ON DUPLICATE KEY UPDATE `PAYLOAD_JSON` = VALUES(`PAYLOAD_JSON`)"), "{sql}");
        let keep = TablePlan::all(&config(serde_json::json!({"upsert_update_columns": []}))).unwrap().remove(0);
        assert!(
            keep.insert(1, OnDuplicate::Update).ends_with(" ON DUPLICATE KEY UPDATE `STREAM_NAME` = `STREAM_NAME`")
        );
        assert!(!keep.insert(1, OnDuplicate::Fail).contains("DUPLICATE"));
    }

    #[test]
    fn select_existing_statement() {
        let plan = TablePlan::all(&config(serde_json::json!({"conflict_policy": "keep_first"}))).unwrap().remove(0);
        assert_eq!(
            plan.select_existing(2),
            "SELECT `STREAM_NAME`, `STREAM_SEQUENCE`, `PAYLOAD_SHA256` FROM `NATS_SINK_EVENTS` WHERE (`STREAM_NAME`, `STREAM_SEQUENCE`) IN ((?, ?), (?, ?)) FOR UPDATE"
        );
        let by_id =
            TablePlan::all(&config(serde_json::json!({"idempotency": {"strategy": "message_id"}}))).unwrap().remove(0);
        assert_eq!(
            by_id.select_existing(3),
            "SELECT `MESSAGE_ID` FROM `NATS_SINK_EVENTS` WHERE `MESSAGE_ID` IN (?, ?, ?) FOR UPDATE"
        );
    }

    #[test]
    fn ddl_follows_the_mapping_and_keys() {
        let plan = TablePlan::all(&config(serde_json::json!({
            "table": "app.EVENTS",
            "columns": {"payload": "BODY"},
            "idempotency": {"strategy": "message_id"},
            "conflict_policy": "keep_first",
        })))
        .unwrap()
        .remove(0);
        let ddl = plan.ddl();
        assert!(ddl.starts_with("CREATE TABLE IF NOT EXISTS `app`.`EVENTS` ("), "{ddl}");
        assert!(ddl.contains("  `BODY` json,"));
        assert!(ddl.contains("  `MESSAGE_ID` varchar(512) NOT NULL,"));
        assert!(ddl.contains("  `PAYLOAD_SHA256` char(64),"));
        assert!(ddl.contains("  PRIMARY KEY (`MESSAGE_ID`)"));
        assert!(ddl.ends_with("COLLATE=utf8mb4_bin"));
    }

    #[test]
    fn a_table_with_the_fingerprint_column_gets_it_in_the_plan_without_a_conflict_policy() {
        let c = config(serde_json::json!({"table_routes": [{"subject": "a.*", "table": "T2"}]}));
        let plain = TablePlan::all(&c).unwrap();
        assert!(plain.iter().all(|p| p.fingerprint.is_none()));
        assert!(plain.iter().all(|p| p.basis() == KeyBasis::StreamSequence), "the default key pair");
        let found = TablePlan::all_with(&c, |t| t == "T2").unwrap();
        assert_eq!(found[0].fingerprint, None);
        let fp = found[1].fingerprint.expect("T2 has the column");
        assert_eq!(found[1].columns[fp], "PAYLOAD_SHA256");
        assert!(found[1].select_existing(1).contains("`PAYLOAD_SHA256`"), "it is read back and compared");
        assert!(found[1].insert(1, OnDuplicate::Fail).contains("`PAYLOAD_SHA256`"), "and written");
        assert_eq!(TablePlan::fingerprint_column(&c), "PAYLOAD_SHA256");
        let by_id = config(serde_json::json!({"idempotency": {"strategy": "message_id"}}));
        assert_eq!(TablePlan::all(&by_id).unwrap()[0].basis(), KeyBasis::Publisher);
    }

    #[test]
    fn routes_sharing_a_table_must_agree() {
        let parse = |v: serde_json::Value| {
            let serde_json::Value::Object(m) = v else { unreachable!() };
            sinks_contract::config::SinkSection(m).parse::<MySqlSinkConfig>().unwrap()
        };
        let err = TablePlan::all(&parse(serde_json::json!({
            "database": "d", "user": "u",
            "table_routes": [
                {"subject": "a.*", "table": "T2"},
                {"subject": "b.*", "table": "T2", "idempotency": {"strategy": "message_id"}},
            ]
        })));
        assert_eq!(err.unwrap_err().0, "sink.table_routes[1]");
    }
}
