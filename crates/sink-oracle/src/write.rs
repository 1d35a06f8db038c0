//! The write path: one transaction per batch across every routed table, per-row outcomes
//! from array DML, committed before any outcome is reported. Runs on a driver thread.
//!
//! **Direct path**, per table, in passes (a key that occurs twice in the batch waits for the
//! next pass, so it meets its first occurrence as an existing row):
//! 1. `append`: `INSERT /*+ append */` of every row; a rejected row fails alone.
//! 2. keyed modes: `MERGE … WHEN NOT MATCHED THEN INSERT` (`insert`: a plain `INSERT`
//!    first) with batch errors and row counts: count 1 is a new row (committed), count 0 an
//!    existing key. A row rejected for its data fails permanently, alone. ORA-00001 naming
//!    the key's constraint is an existing key (a concurrent writer committed it); naming
//!    another unique constraint, that row's data (permanent); naming neither, the row is run
//!    again (at most twice) and then the batch fails temporarily. Never "the whole batch
//!    succeeded" (reference W2).
//! 3. existing keys: with `conflict_policy`, a fingerprint comparison (array `UPDATE … WHERE
//!    fingerprint = :fp`) tells a duplicate from a conflict, which is kept, overwritten or
//!    dead-lettered; without it, `merge` applies its update columns (array `UPDATE`) and the
//!    row is a duplicate, the other modes leave it and report a duplicate. Under
//!    stream-sequence keys the fingerprint is compared whenever the table has the column
//!    (policy or not), and a different one is a reused sequence: refused (`sequence_reused`)
//!    and never updated; a row whose fingerprint is null (read back to tell) cannot be
//!    compared and counts as a duplicate.
//!
//! **Staging path** (`staging.enabled`): the first occurrence of each key is array-inserted
//! into the staging table with the batch id (a rejected row fails alone), the staged keys
//! that exist in the target are read (they will be duplicates), one set-based `MERGE` moves
//! the batch, the staged rows are deleted, then one commit. If the merge's count is not what
//! the keys read predict (a concurrent writer), or the merge fails on data, the transaction
//! is rolled back and the batch is written by the direct path instead. Repeated keys of the
//! batch go through the direct path after the merge, in the same transaction.
//!
//! A temporary failure of any statement rolls the whole transaction back: nothing of the
//! batch is committed, so no message overtakes one that must be retried. A deadlock or busy
//! resource runs the transaction again in place (up to [`LOCK_ATTEMPTS`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sinks_contract::existing::{KeyBasis, Stored};
use sinks_contract::{MessageOutcome, SinkError};
use sinks_toolkit::relational::{self, RowWrite};

use crate::config::{ConflictPolicy, JsonColumnType, WriteMode};
use crate::driver::{Connection, DbError, DriverError, Value};
use crate::error::{classify, classify_db, is_data_error, is_lock_retry, named_object};
use crate::row::Row;
use crate::sql::{StagingPlan, TablePlan};

/// Attempts of one batch transaction when it hits a deadlock or a busy resource.
pub(crate) const LOCK_ATTEMPTS: u32 = 4;
/// Re-runs of a row whose ORA-00001 names no known constraint.
const DUPLICATE_RERUNS: u8 = 2;

/// What the write path needs besides the rows.
#[derive(Debug, Clone)]
pub(crate) struct Ctx<'a> {
    /// Write mode.
    pub(crate) mode: WriteMode,
    /// Conflict policy.
    pub(crate) conflict_policy: Option<ConflictPolicy>,
    /// Table plans, indexed like the groups.
    pub(crate) plans: &'a [TablePlan],
    /// Key constraint names per table (learned at start-up; empty when unknown).
    pub(crate) key_constraints: &'a HashMap<String, Vec<String>>,
    /// The staging plan, when staging is on.
    pub(crate) staging: Option<&'a StagingPlan>,
    /// The JSON column type (how stored rows are read back).
    pub(crate) json: JsonColumnType,
}

/// Rows of one batch grouped per table: `(position in the batch, row)`.
pub(crate) type Groups = Vec<Vec<(usize, Row)>>;
/// Outcomes by position in the batch.
pub(crate) type Outcomes = Vec<(usize, MessageOutcome)>;

/// Why a transaction attempt stopped.
#[derive(Debug)]
struct Stop {
    error: SinkError,
    /// Run the whole transaction again now (deadlock, busy).
    retry: bool,
    /// Run it again on the direct path (the staging merge could not be trusted).
    direct: bool,
}

impl Stop {
    fn driver(e: &DriverError, action: &str) -> Self {
        Self { error: classify(e, action), retry: is_lock_retry(e), direct: false }
    }

    fn sink(error: SinkError) -> Self {
        Self { error, retry: false, direct: false }
    }
}

fn jitter_ms() -> u64 {
    u64::from(rand::random::<u8>() % 20)
}

/// Writes and commits `groups` on `conn`; the outcomes are reported only after the commit.
pub(crate) fn write_batch(ctx: &Ctx<'_>, conn: &mut dyn Connection, groups: &Groups) -> Result<Outcomes, SinkError> {
    let mut staged = ctx.staging.is_some();
    let mut attempt = 0;
    loop {
        attempt += 1;
        match write_all(ctx, conn, groups, staged) {
            Ok(outcomes) => {
                return match conn.commit() {
                    Ok(()) => Ok(outcomes),
                    Err(e) => {
                        let _ = conn.rollback();
                        // The commit's outcome is unknown: retry; idempotency absorbs the rest.
                        let error = classify(&e, "committing the batch");
                        Err(SinkError::temporary(error.message().to_owned()))
                    }
                };
            }
            Err(stop) => {
                let _ = conn.rollback();
                if stop.direct && staged {
                    tracing::info!(reason = %stop.error.message(), "staging merge not used for this batch; writing it directly");
                    staged = false;
                    continue;
                }
                if stop.retry && attempt < LOCK_ATTEMPTS {
                    tracing::debug!(attempt, error = %stop.error.message(), "running the batch transaction again");
                    std::thread::sleep(Duration::from_millis(5 * u64::from(attempt) + jitter_ms()));
                    continue;
                }
                return Err(stop.error);
            }
        }
    }
}

fn write_all(ctx: &Ctx<'_>, conn: &mut dyn Connection, groups: &Groups, staged: bool) -> Result<Outcomes, Stop> {
    let mut outcomes = Vec::new();
    for (plan, group) in ctx.plans.iter().zip(groups).filter(|(_, g)| !g.is_empty()) {
        let rows: Vec<(usize, &Row)> = group.iter().map(|(i, r)| (*i, r)).collect();
        match (staged, ctx.staging) {
            (true, Some(staging)) => outcomes.extend(write_staged(ctx, conn, plan, staging, &rows)?),
            _ => outcomes.extend(write_direct(ctx, conn, plan, &rows)?),
        }
    }
    Ok(outcomes)
}

/// Rows of one table with their index in the batch.
type Indexed<'r> = Vec<(usize, &'r Row)>;

/// Splits `rows` into the first occurrence of each key and the rest (both in order).
fn first_occurrences<'r>(rows: &[(usize, &'r Row)]) -> (Indexed<'r>, Indexed<'r>) {
    let mut seen = HashSet::new();
    rows.iter().partition(|(_, r)| seen.insert(r.key.as_str()))
}

fn values_of(row: &Row, columns: &[usize]) -> Vec<Value> {
    columns.iter().map(|i| row.values[*i].clone()).collect()
}

/// What an ORA-00001 on a row means for `plan`.
enum Unique {
    /// The key exists (the key's own constraint).
    Exists,
    /// Another unique constraint: the row's data.
    Other(String),
    /// Unknown constraint: run the row again.
    Unknown,
}

fn unique_violation(ctx: &Ctx<'_>, plan: &TablePlan, e: &DbError) -> Unique {
    let known = ctx.key_constraints.get(&plan.table).filter(|k| !k.is_empty());
    match (named_object(e), known) {
        (Some(named), Some(keys)) => {
            let name = named.rsplit('.').next().unwrap_or(&named).to_owned();
            if keys.contains(&name) { Unique::Exists } else { Unique::Other(named) }
        }
        _ => Unique::Unknown,
    }
}

fn row_failure(plan: &TablePlan, e: &DbError) -> Result<MessageOutcome, Stop> {
    let error = classify_db(e, &format!("writing to {}", plan.table));
    if is_data_error(e.code) {
        tracing::warn!(table = %plan.table, error = %error.message(), "row rejected by the database");
        Ok(MessageOutcome::Failed(error))
    } else {
        Err(Stop::sink(error))
    }
}

/// The direct path for one table (see the module documentation).
fn write_direct(
    ctx: &Ctx<'_>,
    conn: &mut dyn Connection,
    plan: &TablePlan,
    rows: &[(usize, &Row)],
) -> Result<Outcomes, Stop> {
    let action = format!("writing to {}", plan.table);
    let mut outcomes: Outcomes = Vec::with_capacity(rows.len());
    if ctx.mode == WriteMode::Append {
        let values: Vec<Vec<Value>> = rows.iter().map(|(_, r)| r.values.clone()).collect();
        let result = conn.execute_array(&plan.insert(true), &values).map_err(|e| Stop::driver(&e, &action))?;
        let failed: HashMap<usize, &DbError> = result.row_errors.iter().map(|e| (e.offset, e)).collect();
        for (offset, (i, _)) in rows.iter().enumerate() {
            let outcome = match failed.get(&offset) {
                Some(e) => row_failure(plan, e)?,
                None => MessageOutcome::Committed,
            };
            outcomes.push((*i, outcome));
        }
        return Ok(outcomes);
    }
    let mut queue: Vec<(usize, &Row)> = rows.to_vec();
    let mut reruns: HashMap<usize, u8> = HashMap::new();
    let mut first_pass = true;
    while !queue.is_empty() {
        let (pass, deferred) = first_occurrences(&queue);
        let statement =
            if first_pass && ctx.mode == WriteMode::Insert { plan.insert(false) } else { plan.insert_if_absent() };
        first_pass = false;
        let values: Vec<Vec<Value>> = pass.iter().map(|(_, r)| r.values.clone()).collect();
        let result = conn.execute_array(&statement, &values).map_err(|e| Stop::driver(&e, &action))?;
        let failed: HashMap<usize, &DbError> = result.row_errors.iter().map(|e| (e.offset, e)).collect();
        let mut existing: Vec<(usize, &Row)> = Vec::new();
        let mut again: Vec<(usize, &Row)> = Vec::new();
        for (offset, (i, row)) in pass.iter().enumerate() {
            match failed.get(&offset) {
                Some(e) if e.code == 1 => match unique_violation(ctx, plan, e) {
                    Unique::Exists => existing.push((*i, row)),
                    Unique::Other(name) => {
                        let error = SinkError::permanent(format!(
                            "{action}: unique constraint {name} (not the idempotency key) violated: ORA-00001"
                        ))
                        .with_error_type("DataError");
                        outcomes.push((*i, MessageOutcome::Failed(error)));
                    }
                    Unique::Unknown => {
                        let n = reruns.entry(*i).or_insert(0);
                        *n += 1;
                        if *n > DUPLICATE_RERUNS {
                            return Err(Stop::sink(SinkError::temporary(format!(
                                "{action}: unique constraint violated by a concurrent writer: ORA-00001"
                            ))));
                        }
                        again.push((*i, row));
                    }
                },
                Some(e) => outcomes.push((*i, row_failure(plan, e)?)),
                None if result.row_counts.get(offset).copied().unwrap_or(0) > 0 => {
                    outcomes.push((*i, MessageOutcome::Committed));
                }
                None => existing.push((*i, row)),
            }
        }
        let vanished = resolve_existing(ctx, conn, plan, &existing, &mut outcomes)?;
        again.extend(vanished);
        again.extend(deferred);
        again.sort_by_key(|(i, _)| *i);
        queue = again;
    }
    Ok(outcomes)
}

/// Outcomes of rows whose key exists; returns rows whose stored row disappeared meanwhile
/// (to be inserted in the next pass).
fn resolve_existing<'r>(
    ctx: &Ctx<'_>,
    conn: &mut dyn Connection,
    plan: &TablePlan,
    existing: &[(usize, &'r Row)],
    outcomes: &mut Outcomes,
) -> Result<Vec<(usize, &'r Row)>, Stop> {
    if existing.is_empty() {
        return Ok(Vec::new());
    }
    let action = format!("writing to {}", plan.table);
    // (row, what the existing key means for it: outcome, and what to write)
    let mut decided: Vec<(usize, &Row, (MessageOutcome, RowWrite))> = Vec::new();
    let basis = plan.basis();
    let updates_duplicates = ctx.mode == WriteMode::Merge && !plan.update.is_empty();
    // The fingerprint is compared with a conflict policy, and under stream-sequence keys
    // whenever the table has the column (a different one is a reused sequence).
    let compared = ctx.conflict_policy.is_some() || basis == KeyBasis::StreamSequence;
    match (plan.same_fingerprint(), plan.fingerprint) {
        (Some(check), Some(fp)) if compared => {
            let binds: Vec<Vec<Value>> = existing
                .iter()
                .map(|(_, r)| {
                    let mut v = values_of(r, &plan.key);
                    v.push(r.values[fp].clone());
                    v
                })
                .collect();
            let result = conn.execute_array(&check, &binds).map_err(|e| Stop::driver(&e, &action))?;
            let failed: HashMap<usize, &DbError> = result.row_errors.iter().map(|e| (e.offset, e)).collect();
            let mut judged: Vec<(usize, &Row, Stored)> = Vec::with_capacity(existing.len());
            for (offset, (i, row)) in existing.iter().enumerate() {
                if let Some(e) = failed.get(&offset) {
                    outcomes.push((*i, row_failure(plan, e)?));
                    continue;
                }
                let matches = result.row_counts.get(offset).copied().unwrap_or(0) > 0;
                judged.push((*i, row, if matches { Stored::Same } else { Stored::Different }));
            }
            if basis == KeyBasis::StreamSequence {
                unset_fingerprints(ctx, conn, plan, &mut judged)?;
            }
            for (i, row, stored) in judged {
                if stored != Stored::Same {
                    tracing::info!(table = %plan.table, policy = ?ctx.conflict_policy, ?stored, "an existing key holds other content");
                }
                let updates = updates_duplicates && ctx.conflict_policy.is_none();
                decided.push((i, row, relational::existing_row(ctx.conflict_policy, basis, stored, updates)));
            }
        }
        _ => {
            for (i, row) in existing {
                decided.push((*i, row, relational::existing_row(None, basis, Stored::Unchecked, updates_duplicates)));
            }
        }
    }
    // (row, outcome if the update succeeds)
    let mut updates: Vec<(usize, &Row, MessageOutcome)> = Vec::new();
    for (i, row, (outcome, write)) in decided {
        match write {
            RowWrite::Nothing => outcomes.push((i, outcome)),
            RowWrite::Update | RowWrite::Overwrite => updates.push((i, row, outcome)),
        }
    }
    let mut vanished = Vec::new();
    if updates.is_empty() {
        return Ok(vanished);
    }
    let overwrite = updates.iter().any(|(_, _, o)| matches!(o, MessageOutcome::Conflict(_)));
    // An overwrite replaces every update column, fingerprint included.
    let (statement, columns) = if overwrite {
        let columns: Vec<usize> = overwrite_columns(plan);
        (plan.overwrite(), columns)
    } else {
        (plan.update_by_key(), plan.update.clone())
    };
    let Some(statement) = statement else {
        outcomes.extend(updates.into_iter().map(|(i, _, o)| (i, o)));
        return Ok(vanished);
    };
    let binds: Vec<Vec<Value>> = updates
        .iter()
        .map(|(_, r, _)| {
            let mut v = values_of(r, &columns);
            v.extend(values_of(r, &plan.key));
            v
        })
        .collect();
    let result = conn.execute_array(&statement, &binds).map_err(|e| Stop::driver(&e, &action))?;
    let failed: HashMap<usize, &DbError> = result.row_errors.iter().map(|e| (e.offset, e)).collect();
    for (offset, (i, row, outcome)) in updates.into_iter().enumerate() {
        if let Some(e) = failed.get(&offset) {
            outcomes.push((i, row_failure(plan, e)?));
        } else if result.row_counts.get(offset).copied().unwrap_or(0) > 0 {
            outcomes.push((i, outcome));
        } else {
            vanished.push((i, row));
        }
    }
    Ok(vanished)
}

/// The columns [`TablePlan::overwrite`] binds, in order.
fn overwrite_columns(plan: &TablePlan) -> Vec<usize> {
    let mut columns: Vec<usize> = if plan.update.is_empty() {
        (0..plan.fields.len()).filter(|i| !plan.key.contains(i)).collect()
    } else {
        plan.update.clone()
    };
    if let Some(fp) = plan.fingerprint
        && !columns.contains(&fp)
    {
        columns.push(fp);
    }
    columns
}

/// A batch id: 32 random hex digits.
fn batch_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The staging path for one table (see the module documentation).
fn write_staged(
    ctx: &Ctx<'_>,
    conn: &mut dyn Connection,
    plan: &TablePlan,
    staging: &StagingPlan,
    rows: &[(usize, &Row)],
) -> Result<Outcomes, Stop> {
    let action = format!("staging rows for {}", plan.table);
    let (first, repeats) = first_occurrences(rows);
    let id = batch_id();
    let binds: Vec<Vec<Value>> = first
        .iter()
        .map(|(_, r)| std::iter::once(Value::Text(Some(id.clone()))).chain(r.values.iter().cloned()).collect())
        .collect();
    let result = conn.execute_array(&staging.insert(plan), &binds).map_err(|e| Stop::driver(&e, &action))?;
    let failed: HashMap<usize, &DbError> = result.row_errors.iter().map(|e| (e.offset, e)).collect();
    let mut outcomes = Vec::with_capacity(rows.len());
    let mut staged: Vec<(usize, &Row)> = Vec::new();
    for (offset, (i, row)) in first.iter().enumerate() {
        match failed.get(&offset) {
            Some(e) => outcomes.push((*i, row_failure(plan, e)?)),
            None => staged.push((*i, row)),
        }
    }
    if !staged.is_empty() {
        let id_bind = [Value::Text(Some(id.clone()))];
        let existing: HashSet<String> = conn
            .query(&staging.existing(plan), &id_bind)
            .map_err(|e| Stop::driver(&e, &action))?
            .iter()
            .map(|r| crate::row::key_of(r.iter().map(Option::as_deref)))
            .collect();
        let merged = match conn.execute(&staging.merge(plan), &id_bind) {
            Ok(n) => n,
            Err(DriverError::Db(e)) if is_data_error(e.code) => {
                return Err(Stop { error: classify_db(&e, &action), retry: false, direct: true });
            }
            Err(e) => return Err(Stop::driver(&e, &action)),
        };
        let new = staged.iter().filter(|(_, r)| !existing.contains(&r.key)).count();
        let expected = if plan.update.is_empty() { new } else { staged.len() };
        if merged != expected as u64 {
            return Err(Stop {
                error: SinkError::temporary(format!(
                    "{action}: the merge changed {merged} rows where {expected} were expected (a concurrent writer)"
                )),
                retry: false,
                direct: true,
            });
        }
        if staging.delete {
            conn.execute(&staging.cleanup(), &id_bind).map_err(|e| Stop::driver(&e, &action))?;
        }
        for (i, row) in staged {
            let outcome =
                if existing.contains(&row.key) { MessageOutcome::Duplicate } else { MessageOutcome::Committed };
            outcomes.push((i, outcome));
        }
    }
    if !repeats.is_empty() {
        outcomes.extend(write_direct(ctx, conn, plan, &repeats)?);
    }
    Ok(outcomes)
}

/// Tells, among `judged` rows whose fingerprint check did not match, those whose stored
/// fingerprint is null (a row written without one: it cannot be compared, most likely an
/// earlier delivery) from those holding another one: the array check cannot (`fp = :fp` is
/// never true for null), so their stored fingerprints are read back (rare: only rows whose
/// key exists with other content).
fn unset_fingerprints(
    ctx: &Ctx<'_>,
    conn: &mut dyn Connection,
    plan: &TablePlan,
    judged: &mut [(usize, &Row, Stored)],
) -> Result<(), Stop> {
    if plan.fingerprint.is_none() || !judged.iter().any(|(_, _, s)| *s == Stored::Different) {
        return Ok(());
    }
    let action = format!("reading fingerprints of {}", plan.table);
    let differing: Vec<&Row> = judged.iter().filter(|(_, _, s)| *s == Stored::Different).map(|(_, r, _)| *r).collect();
    let Some(statement) = plan.select_stored(differing.len(), ctx.json) else { return Ok(()) };
    let binds: Vec<Value> = differing.iter().flat_map(|r| values_of(r, &plan.key)).collect();
    let rows = conn.query(&statement, &binds).map_err(|e| Stop::driver(&e, &action))?;
    let width = plan.key.len();
    // Selected: the key columns, the payload, the fingerprint.
    let unset: HashSet<String> = rows
        .iter()
        .filter(|r| r.get(width + 1).is_some_and(Option::is_none))
        .map(|r| crate::row::key_of(r[..width].iter().map(Option::as_deref)))
        .collect();
    for (_, row, stored) in judged.iter_mut() {
        if *stored == Stored::Different && unset.contains(&row.key) {
            *stored = Stored::Unchecked;
        }
    }
    Ok(())
}
