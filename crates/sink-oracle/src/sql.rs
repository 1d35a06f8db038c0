//! Every statement the sink sends, built by pure functions from validated identifiers; every
//! value is a positional bind (`:1`, `:2`, …).
//!
//! Identifiers (tables, columns) cannot be bound, so they pass the reference's allow-list
//! (`[A-Za-z][A-Za-z0-9_$#]{0,127}`, tables optionally `schema.table`), are upper-cased (what
//! Oracle does with unquoted names) and double-quoted (so a column named like a reserved word
//! still works). A [`TablePlan`] holds everything about one table: the column list in bind
//! order, the key columns, the columns a merge updates (the plan relational sinks share,
//! `sinks_toolkit::relational`); each statement comes with its [`Op`], the structured
//! description the scripted driver executes.
//!
//! The write path (see `write.rs`) uses these statements:
//! - [`TablePlan::insert_if_absent`]: `MERGE … WHEN NOT MATCHED THEN INSERT`, one row per
//!   bind row; its per-row count says new (1) or existing (0).
//! - [`TablePlan::insert`]: the plain `INSERT` of modes `insert` and `append` (with the
//!   reference's `/*+ append */` hint).
//! - [`TablePlan::update_by_key`]: the update a merge applies to an existing key.
//! - [`TablePlan::same_fingerprint`]: a no-op update that matches (count 1) only when the
//!   stored fingerprint equals the new one, so conflicts are found with array DML too.
//! - staging: [`StagingPlan`].
//!
//! `nats-sink reconcile` reads rows back with [`TablePlan::select_stored`], a bulk key
//! lookup (`SELECT keys, payload, fingerprint … WHERE keys IN (…)`).

use std::ops::Deref;

use sinks_toolkit::relational;

pub(crate) use crate::config::normalize;
use crate::config::{JsonColumnType, OracleSinkConfig};
use crate::driver::{Op, Statement};

pub(crate) use sinks_toolkit::columns::Field;

/// Double-quotes a normalized identifier (each part of `schema.table`).
pub(crate) fn quote(name: &str) -> String {
    name.split('.').map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(".")
}

/// `:1, :2, …` for `n` binds starting at `first`.
fn binds(first: usize, n: usize) -> Vec<String> {
    (first..first + n).map(|i| format!(":{i}")).collect()
}

/// Everything about writing one table: the plan relational sinks share
/// (`sinks_toolkit::relational::TablePlan`: normalized names, columns in bind order, key,
/// update columns, fingerprint; read through `Deref`) and Oracle's statements for it.
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
    pub(crate) fn all(config: &OracleSinkConfig) -> Result<Vec<Self>, (String, String)> {
        Self::all_with(config, |_| false)
    }

    /// [`Self::all`], with the fingerprint column also in the tables `has_fp` names
    /// (normalized names: an existing table that has the column without a conflict policy;
    /// under stream-sequence keys its fingerprint is written and compared, so a reused
    /// sequence is detected). The staging table must not be one of the targets.
    pub(crate) fn all_with(
        config: &OracleSinkConfig,
        has_fp: impl Fn(&str) -> bool,
    ) -> Result<Vec<Self>, (String, String)> {
        Ok(config.table_plans(has_fp)?.into_iter().map(Self).collect())
    }

    /// `SELECT "<fingerprint column>" FROM t WHERE 1 = 0`: succeeds when the table has the
    /// fingerprint column (ORA-00904 when it does not). `None` when the column name is not
    /// a valid identifier (the configuration refuses it before).
    pub(crate) fn fingerprint_probe(&self, config: &OracleSinkConfig) -> Option<Statement> {
        let column = normalize(Field::PayloadSha256.column(&config.columns).1, false)?;
        Some(probe(&self.table, &[column]))
    }

    fn quoted(&self, indexes: &[usize]) -> Vec<String> {
        indexes.iter().map(|i| quote(&self.columns[*i])).collect()
    }

    fn all_quoted(&self) -> Vec<String> {
        self.columns.iter().map(|c| quote(c)).collect()
    }

    fn names(&self, indexes: &[usize]) -> Vec<String> {
        indexes.iter().map(|i| self.columns[*i].clone()).collect()
    }

    /// `target."K" = source."K" AND …`
    fn on_clause(&self) -> String {
        self.quoted(&self.key).iter().map(|k| format!("target.{k} = source.{k}")).collect::<Vec<_>>().join(" AND ")
    }

    /// `MERGE INTO t target USING (SELECT :1 AS "C1", … FROM DUAL) source ON (keys)
    /// WHEN NOT MATCHED THEN INSERT (…) VALUES (source."C1", …)`: binds are every column.
    pub(crate) fn insert_if_absent(&self) -> Statement {
        let cols = self.all_quoted();
        let select: Vec<String> = binds(1, cols.len()).iter().zip(&cols).map(|(b, c)| format!("{b} AS {c}")).collect();
        let values: Vec<String> = cols.iter().map(|c| format!("source.{c}")).collect();
        let sql = format!(
            "MERGE INTO {} target USING (SELECT {} FROM DUAL) source ON ({}) WHEN NOT MATCHED THEN INSERT ({}) VALUES ({})",
            quote(&self.table),
            select.join(", "),
            self.on_clause(),
            cols.join(", "),
            values.join(", ")
        );
        Statement::new(sql, self.insert_op(true))
    }

    /// What an insert into this table does (for the scripted driver and the snapshots).
    fn insert_op(&self, if_absent: bool) -> Op {
        Op::Insert { table: self.table.clone(), columns: self.columns.clone(), key: self.names(&self.key), if_absent }
    }

    /// `INSERT [/*+ append */] INTO t (…) VALUES (:1, …)`: binds are every column.
    pub(crate) fn insert(&self, append_hint: bool) -> Statement {
        let cols = self.all_quoted();
        let hint = if append_hint { " /*+ append */" } else { "" };
        let sql = format!(
            "INSERT{hint} INTO {} ({}) VALUES ({})",
            quote(&self.table),
            cols.join(", "),
            binds(1, cols.len()).join(", ")
        );
        Statement::new(sql, self.insert_op(false))
    }

    /// `UPDATE t SET "U1" = :1, … WHERE "K1" = :n AND …`: binds are the update columns, then
    /// the key columns. `None` when the plan updates nothing.
    pub(crate) fn update_by_key(&self) -> Option<Statement> {
        self.update_of(&self.update)
    }

    /// The update of an overwritten conflict: the update columns (every non-key column when
    /// the mode updates nothing by itself), fingerprint included.
    pub(crate) fn overwrite(&self) -> Option<Statement> {
        let mut columns: Vec<usize> = if self.update.is_empty() {
            (0..self.fields.len()).filter(|i| !self.key.contains(i)).collect()
        } else {
            self.update.clone()
        };
        if let Some(fp) = self.fingerprint
            && !columns.contains(&fp)
        {
            columns.push(fp);
        }
        self.update_of(&columns)
    }

    fn update_of(&self, columns: &[usize]) -> Option<Statement> {
        if columns.is_empty() || self.key.is_empty() {
            return None;
        }
        let set: Vec<String> =
            self.quoted(columns).iter().zip(binds(1, columns.len())).map(|(c, b)| format!("{c} = {b}")).collect();
        let key: Vec<String> = self
            .quoted(&self.key)
            .iter()
            .zip(binds(columns.len() + 1, self.key.len()))
            .map(|(c, b)| format!("{c} = {b}"))
            .collect();
        let sql = format!("UPDATE {} SET {} WHERE {}", quote(&self.table), set.join(", "), key.join(" AND "));
        Some(Statement::new(
            sql,
            Op::Update {
                table: self.table.clone(),
                set: self.names(columns),
                key: self.names(&self.key),
                only_if: None,
            },
        ))
    }

    /// `UPDATE t SET "FP" = "FP" WHERE "K1" = :1 AND … AND "FP" = :n`: counts 1 when the stored
    /// fingerprint equals the bound one, 0 when it differs (a conflict). Binds are the key
    /// columns, then the fingerprint. `None` without a fingerprint column.
    pub(crate) fn same_fingerprint(&self) -> Option<Statement> {
        let fp = self.fingerprint?;
        let fp_col = quote(&self.columns[fp]);
        let mut conditions: Vec<String> =
            self.quoted(&self.key).iter().zip(binds(1, self.key.len())).map(|(c, b)| format!("{c} = {b}")).collect();
        conditions.push(format!("{fp_col} = :{}", self.key.len() + 1));
        let sql = format!("UPDATE {} SET {fp_col} = {fp_col} WHERE {}", quote(&self.table), conditions.join(" AND "));
        Some(Statement::new(
            sql,
            Op::Update {
                table: self.table.clone(),
                set: Vec::new(),
                key: self.names(&self.key),
                only_if: Some(self.columns[fp].clone()),
            },
        ))
    }

    /// The bulk key lookup of reconcile for `rows` rows: `SELECT "K1", …, <payload>[, "FP"]
    /// FROM t WHERE ("K1", …) IN ((:1, …), …)` (one key column: `"K" IN (:1, …)`). The
    /// payload of a native JSON column is read as `JSON_SERIALIZE(… RETURNING CLOB)`. Binds:
    /// each row's key values in turn. `None` without key columns (`append`).
    pub(crate) fn select_stored(&self, rows: usize, json: JsonColumnType) -> Option<Statement> {
        if self.key.is_empty() || rows == 0 {
            return None;
        }
        let payload_index = self.fields.iter().position(|f| *f == Field::Payload)?;
        let payload = quote(&self.columns[payload_index]);
        let mut items = self.quoted(&self.key);
        items.push(match json {
            JsonColumnType::Json => format!("JSON_SERIALIZE({payload} RETURNING CLOB)"),
            JsonColumnType::Clob => payload,
        });
        let mut select = self.names(&self.key);
        select.push(self.columns[payload_index].clone());
        if let Some(fp) = self.fingerprint {
            items.push(quote(&self.columns[fp]));
            select.push(self.columns[fp].clone());
        }
        let width = self.key.len();
        let tuples: Vec<String> = (0..rows)
            .map(|r| {
                let b = binds(1 + r * width, width);
                if width == 1 { b.join(", ") } else { format!("({})", b.join(", ")) }
            })
            .collect();
        let keys = self.quoted(&self.key);
        let keys = if width == 1 { keys.join(", ") } else { format!("({})", keys.join(", ")) };
        let sql =
            format!("SELECT {} FROM {} WHERE {keys} IN ({})", items.join(", "), quote(&self.table), tuples.join(", "));
        Some(Statement::new(sql, Op::Stored { table: self.table.clone(), key: self.names(&self.key), select }))
    }

    /// `SELECT "C1", … FROM t WHERE 1 = 0`: proves the table and every mapped column exist
    /// and are readable.
    pub(crate) fn probe(&self) -> Statement {
        probe(&self.table, &self.columns)
    }
}

/// `SELECT cols FROM table WHERE 1 = 0`.
pub(crate) fn probe(table: &str, columns: &[String]) -> Statement {
    let cols: Vec<String> = columns.iter().map(|c| quote(c)).collect();
    let sql = format!("SELECT {} FROM {} WHERE 1 = 0", cols.join(", "), quote(table));
    Statement::new(sql, Op::Probe { table: table.to_owned(), columns: columns.to_vec() })
}

/// The PRIMARY KEY and UNIQUE constraints of a table, one row per constraint column:
/// `(constraint name, column name)` in column position order. Binds: owner (NULL = the
/// current schema), table name.
pub(crate) fn key_constraints(table: &str) -> (Statement, Vec<crate::driver::Value>) {
    let (owner, name) = match table.split_once('.') {
        Some((o, t)) => (Some(o.to_owned()), t.to_owned()),
        None => (None, table.to_owned()),
    };
    let sql = "SELECT c.CONSTRAINT_NAME, cc.COLUMN_NAME FROM ALL_CONSTRAINTS c \
               JOIN ALL_CONS_COLUMNS cc ON cc.OWNER = c.OWNER AND cc.CONSTRAINT_NAME = c.CONSTRAINT_NAME \
               WHERE c.CONSTRAINT_TYPE IN ('P', 'U') \
               AND c.OWNER = COALESCE(:1, SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA')) AND c.TABLE_NAME = :2 \
               ORDER BY c.CONSTRAINT_NAME, cc.POSITION";
    let binds = vec![crate::driver::Value::Text(owner), crate::driver::Value::Text(Some(name))];
    (Statement::new(sql.to_owned(), Op::KeyConstraints { table: table.to_owned() }), binds)
}

/// The session setting run on every new session when `disable_parallel_dml` is on.
pub(crate) const DISABLE_PARALLEL_DML: &str = "ALTER SESSION DISABLE PARALLEL DML";

/// The statements of the staging path for one target table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StagingPlan {
    /// Staging table, normalized.
    pub(crate) table: String,
    /// Batch id column, normalized.
    pub(crate) batch_column: String,
    /// Delete the staged rows before the commit.
    pub(crate) delete: bool,
}

impl StagingPlan {
    /// The staging plan of `config`, when staging is on.
    pub(crate) fn of(config: &OracleSinkConfig) -> Result<Option<Self>, (String, String)> {
        let Some((table, batch_column)) = config.staging_names()? else { return Ok(None) };
        let delete = config.staging.cleanup == crate::config::StagingCleanup::DeleteOnSuccess;
        Ok(Some(Self { table, batch_column, delete }))
    }

    /// Every staging column: the batch id, then the plan's columns.
    pub(crate) fn columns(&self, plan: &TablePlan) -> Vec<String> {
        std::iter::once(self.batch_column.clone()).chain(plan.columns.iter().cloned()).collect()
    }

    /// `INSERT INTO stage ("BATCH", "C1", …) VALUES (:1, …)`: binds are the batch id, then
    /// every column.
    pub(crate) fn insert(&self, plan: &TablePlan) -> Statement {
        let cols: Vec<String> = self.columns(plan).iter().map(|c| quote(c)).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote(&self.table),
            cols.join(", "),
            binds(1, cols.len()).join(", ")
        );
        Statement::new(sql, Op::StageInsert { table: self.table.clone(), columns: self.columns(plan) })
    }

    /// `SELECT s."K1", … FROM stage s JOIN t ON (keys) WHERE s."BATCH" = :1`: the staged
    /// keys that already exist in the target (those rows are duplicates).
    pub(crate) fn existing(&self, plan: &TablePlan) -> Statement {
        let keys = plan.quoted(&plan.key);
        let select: Vec<String> = keys.iter().map(|k| format!("source.{k}")).collect();
        let sql = format!(
            "SELECT {} FROM {} source JOIN {} target ON ({}) WHERE source.{} = :1",
            select.join(", "),
            quote(&self.table),
            quote(&plan.table),
            plan.on_clause(),
            quote(&self.batch_column)
        );
        Statement::new(
            sql,
            Op::StagedExisting {
                staging: self.table.clone(),
                target: plan.table.clone(),
                key: plan.names(&plan.key),
                batch_column: self.batch_column.clone(),
            },
        )
    }

    /// The one set-based `MERGE` from the staged batch (bind: the batch id) into the target.
    pub(crate) fn merge(&self, plan: &TablePlan) -> Statement {
        let cols = plan.all_quoted();
        let values: Vec<String> = cols.iter().map(|c| format!("source.{c}")).collect();
        let matched = if plan.update.is_empty() {
            String::new()
        } else {
            let set: Vec<String> =
                plan.quoted(&plan.update).iter().map(|c| format!("target.{c} = source.{c}")).collect();
            format!(" WHEN MATCHED THEN UPDATE SET {}", set.join(", "))
        };
        let sql = format!(
            "MERGE INTO {} target USING (SELECT {} FROM {} WHERE {} = :1) source ON ({}){matched} WHEN NOT MATCHED THEN INSERT ({}) VALUES ({})",
            quote(&plan.table),
            cols.join(", "),
            quote(&self.table),
            quote(&self.batch_column),
            plan.on_clause(),
            cols.join(", "),
            values.join(", ")
        );
        Statement::new(
            sql,
            Op::StageMerge {
                staging: self.table.clone(),
                target: plan.table.clone(),
                columns: plan.columns.clone(),
                key: plan.names(&plan.key),
                update: plan.names(&plan.update),
                batch_column: self.batch_column.clone(),
            },
        )
    }

    /// `DELETE FROM stage WHERE "BATCH" = :1`.
    pub(crate) fn cleanup(&self) -> Statement {
        let sql = format!("DELETE FROM {} WHERE {} = :1", quote(&self.table), quote(&self.batch_column));
        Statement::new(sql, Op::StageDelete { table: self.table.clone(), batch_column: self.batch_column.clone() })
    }

    /// The staging table's probe.
    pub(crate) fn probe(&self, plan: &TablePlan) -> Statement {
        probe(&self.table, &self.columns(plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_allow_listed_and_normalized() {
        for (name, qualified, out) in [
            ("EVENTS", false, Some("EVENTS")),
            ("owner.events", true, Some("OWNER.EVENTS")),
            ("db.EVENTS", false, None),
            ("a.b.c", true, None),
            ("1abc", false, None),
            ("_x", false, None),
            ("ev\"ents", false, None),
            ("ev ents", false, None),
            ("x$1#", false, Some("X$1#")),
            ("", false, None),
        ] {
            assert_eq!(normalize(name, qualified).as_deref(), out, "{name}");
        }
        assert!(normalize(&"A".repeat(129), false).is_none());
        assert_eq!(quote("OWNER.EVENTS"), "\"OWNER\".\"EVENTS\"");
    }
}
