//! `CREATE TABLE` statements generated from the actual column mapping and key columns (the
//! reference's `auto_create` always created its default shape whatever the mapping: its
//! defect W15). What `auto_create` runs (ignoring ORA-00955, "name already used") and what
//! `nats-sink ddl` prints.
//!
//! Column types follow the reference's recommended table: text metadata as `CLOB` (a key
//! column as `VARCHAR2`, since a `CLOB` cannot be in a key), epochs as `NUMBER(19)`, JSON
//! documents as native `JSON` or, with `json_column_type: clob`, `CLOB` with an `IS JSON`
//! check. The key columns form the primary key (`append` has none). The staging table has
//! the same columns plus the batch id, no key, and an index on the batch id.

use crate::config::JsonColumnType;
use crate::driver::{Op, Statement};
use crate::sql::{Field, StagingPlan, TablePlan, quote};

/// Oracle's identifier limit (12.2 and later).
const MAX_IDENTIFIER: usize = 128;

/// `base` + `suffix`, shortened to fit an identifier.
fn derived_name(base: &str, suffix: &str) -> String {
    let keep = MAX_IDENTIFIER.saturating_sub(suffix.len()).min(base.len());
    format!("{}{suffix}", &base[..keep])
}

fn column_type(field: Field, key: bool, json: JsonColumnType, column: &str) -> String {
    match field {
        Field::StreamName => "VARCHAR2(255)".into(),
        Field::StreamSequence => "NUMBER(20)".into(),
        Field::MessageId => "VARCHAR2(512)".into(),
        Field::Subject | Field::Priority | Field::Classification | Field::Labels if key => "VARCHAR2(1024)".into(),
        Field::Subject | Field::Priority | Field::Classification | Field::Labels => "CLOB".into(),
        Field::CreatedAt | Field::JetStreamTimestamp | Field::ReceivedAt | Field::StoredAt => "NUMBER(19)".into(),
        Field::PayloadSha256 => "VARCHAR2(64)".into(),
        f if f.is_json() => match json {
            JsonColumnType::Json => "JSON".into(),
            JsonColumnType::Clob => format!("CLOB CHECK ({} IS JSON)", quote(column)),
        },
        _ => "CLOB".into(),
    }
}

fn not_null(field: Field) -> bool {
    matches!(field, Field::StreamName | Field::StreamSequence | Field::Subject | Field::ReceivedAt | Field::StoredAt)
}

fn column_lines(plan: &TablePlan, json: JsonColumnType, with_key: bool) -> Vec<String> {
    plan.fields
        .iter()
        .zip(&plan.columns)
        .enumerate()
        .map(|(i, (f, c))| {
            let key = with_key && plan.key.contains(&i);
            let null = if key || not_null(*f) { " NOT NULL" } else { "" };
            format!("  {} {}{null}", quote(c), column_type(*f, key, json, c))
        })
        .collect()
}

/// `CREATE TABLE` of a target table.
pub(crate) fn create_table(plan: &TablePlan, json: JsonColumnType) -> Statement {
    let mut lines = column_lines(plan, json, true);
    if !plan.key.is_empty() {
        let table_part = plan.table.rsplit('.').next().unwrap_or(&plan.table);
        let keys: Vec<String> = plan.key.iter().map(|i| quote(&plan.columns[*i])).collect();
        lines.push(format!(
            "  CONSTRAINT {} PRIMARY KEY ({})",
            quote(&derived_name(table_part, "_PK")),
            keys.join(", ")
        ));
    }
    let sql = format!("CREATE TABLE {} (\n{}\n)", quote(&plan.table), lines.join(",\n"));
    Statement::new(
        sql,
        Op::CreateTable {
            table: plan.table.clone(),
            columns: plan.columns.clone(),
            key: plan.key.iter().map(|i| plan.columns[*i].clone()).collect(),
        },
    )
}

/// `CREATE TABLE` of the staging table (shaped after `plan`, the default table's) and the
/// index on its batch id.
pub(crate) fn create_staging(staging: &StagingPlan, plan: &TablePlan, json: JsonColumnType) -> [Statement; 2] {
    let mut lines = vec![format!("  {} VARCHAR2(64) NOT NULL", quote(&staging.batch_column))];
    lines.extend(column_lines(plan, json, false));
    let table = Statement::new(
        format!("CREATE TABLE {} (\n{}\n)", quote(&staging.table), lines.join(",\n")),
        Op::CreateTable { table: staging.table.clone(), columns: staging.columns(plan), key: Vec::new() },
    );
    let (schema, table_part) = match staging.table.split_once('.') {
        Some((s, t)) => (Some(s), t),
        None => (None, staging.table.as_str()),
    };
    let index = derived_name(table_part, "_BID_I");
    let qualified = schema.map_or_else(|| index.clone(), |s| format!("{s}.{index}"));
    let index = Statement::new(
        format!("CREATE INDEX {} ON {} ({})", quote(&qualified), quote(&staging.table), quote(&staging.batch_column)),
        Op::CreateIndex { name: qualified },
    );
    [table, index]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_oracle_identifiers() {
        assert_eq!(derived_name("EVENTS", "_PK"), "EVENTS_PK");
        assert_eq!(derived_name(&"A".repeat(128), "_PK").len(), 128);
    }
}
