//! [`ScriptedDriver`]: the seam implemented by an in-memory database, for the certification
//! suite, the sink's tests and the benchmark (feature `scripted`).
//!
//! It executes each statement's [`Op`] (never its SQL text, which is pinned separately by
//! snapshot tests and a SQL parser) with the semantics the sink relies on:
//! - a session pool: a returned session is handed out again without its session setup;
//! - transactions per connection: changes are visible to their own connection until commit,
//!   undone by rollback or when the connection is dropped; DDL commits first, as in Oracle;
//! - row locks: a connection writing a key another connection changed waits until that one
//!   commits or rolls back; an insert that waited and then finds the key committed gets
//!   ORA-00001 (what Oracle's `MERGE` does), and a wait cycle gets ORA-00060 (deadlock),
//!   rolling back that statement only;
//! - array DML with batch errors and per-row counts, as ODPI-C reports them;
//! - `ORA-00001: unique constraint (SCHEMA.T_PK) violated`, ORA-00942, ORA-00904, ORA-00955
//!   from the tables it knows.
//!
//! A script adds faults: rows matching a [`RowRule`] are rejected with a real ORA code and
//! message at their batch-error offset, and [`Fault`]s fail the next connect, statement,
//! commit or ping. Every statement and its binds are recorded (unless recording is off, for
//! the benchmark), and the time spent inside the driver is summed so a benchmark can
//! subtract the backend's own cost.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{
    ArrayOutcome, Connection, DbError, Driver, DriverError, LineageFilter, Op, SessionSetup, Statement, Value,
};

/// How long a scripted row lock is waited for before the statement fails (ORA-30006).
const LOCK_WAIT: Duration = Duration::from_secs(20);

type ConnId = u64;
type Row = BTreeMap<String, Value>;

/// One recorded driver call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Connection that made the call.
    pub connection: u64,
    /// `array`, `execute`, `query`, `commit`, `rollback` or `ping`.
    pub call: &'static str,
    /// SQL text (empty for commit, rollback, ping).
    pub sql: String,
    /// Bind rows (one for `execute` and `query`).
    pub binds: Vec<Vec<Value>>,
}

/// Where a [`Fault`] strikes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultPoint {
    /// Taking a connection.
    Connect,
    /// Any statement whose SQL contains this text (empty: any statement).
    Statement(String),
    /// A commit.
    Commit,
    /// A ping.
    Ping,
}

/// A scripted failure of the next `times` calls at `point`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Where.
    pub point: FaultPoint,
    /// What is returned.
    pub error: DriverError,
    /// How many calls fail (`usize::MAX`: all).
    pub times: usize,
}

/// Rows written to `table` (or any table) whose `column` holds text longer than `longer_than`
/// characters, or containing `contains`, are rejected with `code` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRule {
    /// Table (normalized name), or any.
    pub table: Option<String>,
    /// Column whose value is checked.
    pub column: String,
    /// Reject values longer than this many characters.
    pub longer_than: Option<usize>,
    /// Reject values containing this text.
    pub contains: Option<String>,
    /// ORA code of the rejection.
    pub code: i32,
    /// The server message (as Oracle words it).
    pub message: String,
}

impl RowRule {
    /// ORA-12899 for values of `column` longer than `max` characters (a narrow column).
    pub fn too_large(table: Option<&str>, column: &str, max: usize) -> Self {
        let owner = table.unwrap_or("T");
        Self {
            table: table.map(str::to_owned),
            column: column.to_owned(),
            longer_than: Some(max),
            contains: None,
            code: 12899,
            message: format!(
                "ORA-12899: value too large for column \"APP\".\"{owner}\".\"{column}\" (actual: {}, maximum: {max})",
                max + 1
            ),
        }
    }

    fn rejects(&self, table: &str, row: &Row) -> bool {
        if self.table.as_deref().is_some_and(|t| t != table) {
            return false;
        }
        let Some(text) = row.get(&self.column).and_then(Value::as_text) else { return false };
        self.longer_than.is_some_and(|max| text.chars().count() > max)
            || self.contains.as_deref().is_some_and(|c| text.contains(c))
    }
}

#[derive(Debug, Default)]
struct Slot {
    committed: Option<Row>,
    pending: Option<(ConnId, Option<Row>)>,
}

impl Slot {
    fn visible(&self, conn: ConnId) -> Option<&Row> {
        match &self.pending {
            Some((owner, value)) if *owner == conn => value.as_ref(),
            _ => self.committed.as_ref(),
        }
    }

    fn locked_by_other(&self, conn: ConnId) -> Option<ConnId> {
        self.pending.as_ref().map(|(o, _)| *o).filter(|o| *o != conn)
    }
}

#[derive(Debug, Default)]
struct Table {
    columns: Vec<String>,
    key: Vec<String>,
    constraint: Option<String>,
    slots: Vec<Slot>,
    index: HashMap<String, usize>,
}

fn key_text(key: &[String], row: &Row) -> String {
    crate::row::key_of(
        key.iter().map(|k| row.get(k).and_then(Value::as_text)).collect::<Vec<_>>().iter().map(Option::as_deref),
    )
}

#[derive(Debug, Default)]
struct State {
    tables: HashMap<String, Table>,
    indexes: Vec<String>,
    waits_for: HashMap<ConnId, ConnId>,
    log: Vec<Recorded>,
    faults: Vec<Fault>,
    rules: Vec<RowRule>,
    recording: bool,
    next_conn: ConnId,
    /// Sessions returned to the pool (reused without running the session setup again).
    idle: Vec<ConnId>,
}

/// The in-memory database behind a [`ScriptedDriver`] and its connections.
#[derive(Debug, Default)]
struct Db {
    state: Mutex<State>,
    changed: Condvar,
    backend_nanos: AtomicU64,
}

impl Db {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The scripted implementation of [`Driver`]. Cloning shares the database.
#[derive(Debug, Clone)]
pub struct ScriptedDriver {
    db: Arc<Db>,
    setup: SessionSetup,
}

impl Default for ScriptedDriver {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedDriver {
    /// An empty database, recording every call.
    pub fn new() -> Self {
        let db = Db::default();
        db.lock().recording = true;
        Self { db: Arc::new(db), setup: SessionSetup::default() }
    }

    /// The same database, running `setup` on every connection it hands out.
    pub fn with_setup(&self, setup: SessionSetup) -> Self {
        Self { db: Arc::clone(&self.db), setup }
    }

    /// Creates `table` (normalized name) with `columns` and primary key `key`.
    pub fn create_table(&self, table: &str, columns: &[String], key: &[String]) {
        let mut state = self.db.lock();
        state.tables.insert(table.to_owned(), new_table(table, columns, key));
    }

    /// Adds a row rule.
    pub fn reject_rows(&self, rule: RowRule) {
        self.db.lock().rules.push(rule);
    }

    /// Adds a fault.
    pub fn fail(&self, fault: Fault) {
        self.db.lock().faults.push(fault);
    }

    /// Turns recording of statements and binds on or off.
    pub fn set_recording(&self, on: bool) {
        self.db.lock().recording = on;
    }

    /// Every recorded call, in order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.db.lock().log.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_recorded(&self) {
        self.db.lock().log.clear();
    }

    /// The committed rows of `table` (normalized name), each column as text.
    pub fn committed(&self, table: &str) -> Vec<BTreeMap<String, Option<String>>> {
        let state = self.db.lock();
        state
            .tables
            .get(table)
            .map(|t| {
                t.slots
                    .iter()
                    .filter_map(|s| s.committed.as_ref())
                    .map(|r| r.iter().map(|(k, v)| (k.clone(), v.as_text())).collect())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Deletes the committed rows of `table` whose `column` holds `value` (as text), behind
    /// the sink's back (an operator's or another program's change); returns how many.
    pub fn delete_committed(&self, table: &str, column: &str, value: &str) -> usize {
        self.change_committed(table, column, value, |_| None)
    }

    /// Sets `set_column` to `new_value` in the committed rows of `table` whose `column` holds
    /// `value` (as text), behind the sink's back; returns how many.
    pub fn update_committed(
        &self,
        table: &str,
        column: &str,
        value: &str,
        set_column: &str,
        new_value: Value,
    ) -> usize {
        self.change_committed(table, column, value, |mut row| {
            row.insert(set_column.to_owned(), new_value.clone());
            Some(row)
        })
    }

    fn change_committed(&self, table: &str, column: &str, value: &str, change: impl Fn(Row) -> Option<Row>) -> usize {
        let mut state = self.db.lock();
        let Some(t) = state.tables.get_mut(table) else { return 0 };
        let mut changed = 0;
        for slot in &mut t.slots {
            let matches = slot
                .committed
                .as_ref()
                .is_some_and(|r| r.get(column).and_then(Value::as_text).as_deref() == Some(value));
            if matches && let Some(row) = slot.committed.take() {
                slot.committed = change(row);
                changed += 1;
            }
        }
        changed
    }

    /// True when `table` exists.
    pub fn has_table(&self, table: &str) -> bool {
        self.db.lock().tables.contains_key(table)
    }

    /// Time spent inside the driver's calls so far.
    pub fn backend_time(&self) -> Duration {
        Duration::from_nanos(self.db.backend_nanos.load(Ordering::Relaxed))
    }
}

fn new_table(table: &str, columns: &[String], key: &[String]) -> Table {
    let part = table.rsplit('.').next().unwrap_or(table);
    Table {
        columns: columns.to_vec(),
        key: key.to_vec(),
        constraint: (!key.is_empty()).then(|| format!("{part}_PK")),
        ..Table::default()
    }
}

fn take_fault(state: &mut State, matches: impl Fn(&FaultPoint) -> bool) -> Option<DriverError> {
    let i = state.faults.iter().position(|f| f.times > 0 && matches(&f.point))?;
    let fault = &mut state.faults[i];
    if fault.times != usize::MAX {
        fault.times -= 1;
    }
    Some(fault.error.clone())
}

impl Driver for ScriptedDriver {
    fn connect(&self) -> Result<Box<dyn Connection>, DriverError> {
        let mut state = self.db.lock();
        if let Some(e) = take_fault(&mut state, |p| *p == FaultPoint::Connect) {
            return Err(e);
        }
        if let Some(id) = state.idle.pop() {
            return Ok(Box::new(ScriptedConnection { db: Arc::clone(&self.db), id }));
        }
        state.next_conn += 1;
        let id = state.next_conn;
        if state.recording {
            for sql in &self.setup.statements {
                state.log.push(Recorded { connection: id, call: "execute", sql: sql.clone(), binds: vec![Vec::new()] });
            }
        }
        drop(state);
        Ok(Box::new(ScriptedConnection { db: Arc::clone(&self.db), id }))
    }
}

/// One connection of a [`ScriptedDriver`].
#[derive(Debug)]
struct ScriptedConnection {
    db: Arc<Db>,
    id: ConnId,
}

fn db_error(code: i32, offset: usize, message: impl Into<String>) -> DriverError {
    DriverError::Db(DbError::new(code, offset, message))
}

fn no_table(table: &str) -> DriverError {
    let _ = table;
    db_error(942, 0, "ORA-00942: table or view does not exist")
}

/// Undo records of one statement: `(table, slot, pending before)`.
type Undo = Vec<(String, usize, Option<(ConnId, Option<Row>)>)>;

impl ScriptedConnection {
    fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.db.backend_nanos.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    fn record(&self, state: &mut State, call: &'static str, sql: &str, binds: &[Vec<Value>]) {
        if state.recording {
            state.log.push(Recorded { connection: self.id, call, sql: sql.to_owned(), binds: binds.to_vec() });
        }
    }

    /// Waits until `slot` of `table` is not locked by another connection. `Ok(true)` when it
    /// had to wait.
    fn wait_for<'g>(
        &self,
        mut state: MutexGuard<'g, State>,
        table: &str,
        slot: usize,
    ) -> Result<(MutexGuard<'g, State>, bool), (MutexGuard<'g, State>, DriverError)> {
        let mut waited = false;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            let holder =
                state.tables.get(table).and_then(|t| t.slots.get(slot)).and_then(|s| s.locked_by_other(self.id));
            let Some(holder) = holder else {
                state.waits_for.remove(&self.id);
                return Ok((state, waited));
            };
            // A wait cycle is a deadlock: this statement fails.
            let mut next = Some(holder);
            let mut hops = 0;
            while let Some(c) = next {
                if c == self.id || hops > 64 {
                    state.waits_for.remove(&self.id);
                    return Err((state, db_error(60, 0, "ORA-00060: deadlock detected while waiting for resource")));
                }
                next = state.waits_for.get(&c).copied();
                hops += 1;
            }
            let now = Instant::now();
            if now >= deadline {
                state.waits_for.remove(&self.id);
                return Err((state, db_error(30006, 0, "ORA-30006: resource busy; acquire with WAIT timeout expired")));
            }
            state.waits_for.insert(self.id, holder);
            waited = true;
            state = match self.db.changed.wait_timeout(state, (deadline - now).min(Duration::from_millis(200))) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    fn set_pending(&self, state: &mut State, undo: &mut Undo, table: &str, slot: usize, value: Option<Row>) {
        let Some(t) = state.tables.get_mut(table) else { return };
        let s = &mut t.slots[slot];
        undo.push((table.to_owned(), slot, s.pending.clone()));
        s.pending = Some((self.id, value));
    }

    fn revert(state: &mut State, undo: Undo) {
        for (table, slot, before) in undo.into_iter().rev() {
            if let Some(t) = state.tables.get_mut(&table) {
                t.slots[slot].pending = before;
            }
        }
    }

    /// Inserts one row (see [`Op::Insert`]); statement-level errors as `Err(_)`, row errors
    /// as `Ok(Err(_))`.
    #[allow(clippy::too_many_arguments)]
    fn insert_row<'g>(
        &self,
        mut state: MutexGuard<'g, State>,
        undo: &mut Undo,
        table: &str,
        columns: &[String],
        key: &[String],
        if_absent: bool,
        binds: &[Value],
        offset: usize,
    ) -> (MutexGuard<'g, State>, Result<Result<u64, DbError>, DriverError>) {
        let Some(t) = state.tables.get(table) else { return (state, Err(no_table(table))) };
        if let Some(c) = columns.iter().find(|c| !t.columns.contains(c)) {
            return (state, Err(db_error(904, 0, format!("ORA-00904: \"{c}\": invalid identifier"))));
        }
        let row: Row = columns.iter().cloned().zip(binds.iter().cloned()).collect();
        if let Some(rule) = state.rules.iter().find(|r| r.rejects(table, &row)) {
            let e = DbError::new(rule.code, offset, rule.message.clone());
            return (state, Ok(Err(e)));
        }
        if key.is_empty() {
            let Some(t) = state.tables.get_mut(table) else { return (state, Err(no_table(table))) };
            t.slots.push(Slot::default());
            let slot = t.slots.len() - 1;
            self.set_pending(&mut state, undo, table, slot, Some(row));
            return (state, Ok(Ok(1)));
        }
        let k = key_text(key, &row);
        let slot = match state.tables.get_mut(table) {
            Some(t) => match t.index.get(&k) {
                Some(s) => *s,
                None => {
                    t.slots.push(Slot::default());
                    let s = t.slots.len() - 1;
                    t.index.insert(k, s);
                    s
                }
            },
            None => return (state, Err(no_table(table))),
        };
        let (mut state, waited) = match self.wait_for(state, table, slot) {
            Ok(v) => v,
            Err((state, e)) => return (state, Err(e)),
        };
        let exists = state.tables[table].slots[slot].visible(self.id).is_some();
        if exists && (waited || !if_absent) {
            let constraint = state.tables[table].constraint.clone().unwrap_or_default();
            let e = DbError::new(1, offset, format!("ORA-00001: unique constraint (APP.{constraint}) violated"));
            return (state, Ok(Err(e)));
        }
        if exists {
            return (state, Ok(Ok(0)));
        }
        self.set_pending(&mut state, undo, table, slot, Some(row));
        (state, Ok(Ok(1)))
    }

    /// Applies one row of `op`; `Ok(count)` or a row-level error (statement-level errors come
    /// back as `Err(Err(_))`).
    fn apply_row<'g>(
        &self,
        state: MutexGuard<'g, State>,
        undo: &mut Undo,
        op: &Op,
        binds: &[Value],
        offset: usize,
    ) -> (MutexGuard<'g, State>, Result<Result<u64, DbError>, DriverError>) {
        match op {
            Op::Insert { table, columns, key, if_absent } => {
                self.insert_row(state, undo, table, columns, key, *if_absent, binds, offset)
            }
            Op::StageInsert { table, columns } => {
                self.insert_row(state, undo, table, columns, &[], false, binds, offset)
            }
            Op::Update { table, set, key, only_if } => {
                let Some(t) = state.tables.get(table) else { return (state, Err(no_table(table))) };
                let key_values: Row = key.iter().cloned().zip(binds[set.len()..].iter().cloned()).collect();
                let Some(&slot) = t.index.get(&key_text(key, &key_values)) else { return (state, Ok(Ok(0))) };
                let (mut state, _) = match self.wait_for(state, table, slot) {
                    Ok(v) => v,
                    Err((state, e)) => return (state, Err(e)),
                };
                let Some(current) = state.tables[table].slots[slot].visible(self.id).cloned() else {
                    return (state, Ok(Ok(0)));
                };
                if let Some(column) = only_if {
                    let wanted = binds.last().and_then(Value::as_text);
                    if current.get(column).and_then(Value::as_text) != wanted || wanted.is_none() {
                        return (state, Ok(Ok(0)));
                    }
                }
                let mut updated = current;
                for (c, v) in set.iter().zip(binds) {
                    updated.insert(c.clone(), v.clone());
                }
                if let Some(rule) = state.rules.iter().find(|r| r.rejects(table, &updated)) {
                    let e = DbError::new(rule.code, offset, rule.message.clone());
                    return (state, Ok(Err(e)));
                }
                self.set_pending(&mut state, undo, table, slot, Some(updated));
                (state, Ok(Ok(1)))
            }
            _ => (state, Err(DriverError::Other("statement is not array DML".into()))),
        }
    }

    fn staged_rows(&self, state: &State, staging: &str, batch_column: &str, id: &Option<String>) -> Vec<(usize, Row)> {
        state
            .tables
            .get(staging)
            .map(|t| {
                t.slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.visible(self.id).map(|r| (i, r)))
                    .filter(|(_, r)| r.get(batch_column).and_then(Value::as_text) == *id)
                    .map(|(i, r)| (i, r.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn execute_one(&self, statement: &Statement, binds: &[Value]) -> Result<u64, DriverError> {
        let mut state = self.db.lock();
        self.record(&mut state, "execute", &statement.sql, &[binds.to_vec()]);
        if let Some(e) =
            take_fault(&mut state, |p| matches!(p, FaultPoint::Statement(s) if statement.sql.contains(s.as_str())))
        {
            return Err(e);
        }
        match &statement.op {
            Op::Session => Ok(0),
            Op::CreateTable { table, columns, key } => {
                Self::commit_locked(&mut state, self.id);
                self.db.changed.notify_all();
                if state.tables.contains_key(table) {
                    return Err(db_error(955, 0, "ORA-00955: name is already used by an existing object"));
                }
                state.tables.insert(table.clone(), new_table(table, columns, key));
                Ok(0)
            }
            Op::CreateIndex { name } => {
                Self::commit_locked(&mut state, self.id);
                if state.indexes.contains(name) {
                    return Err(db_error(955, 0, "ORA-00955: name is already used by an existing object"));
                }
                state.indexes.push(name.clone());
                Ok(0)
            }
            Op::StageMerge { staging, target, columns, key, update, batch_column } => {
                let id = binds.first().and_then(Value::as_text);
                if !state.tables.contains_key(staging) || !state.tables.contains_key(target) {
                    return Err(no_table(target));
                }
                let staged = self.staged_rows(&state, staging, batch_column, &id);
                let mut undo = Undo::new();
                let mut count = 0;
                for (_, staged_row) in staged {
                    let row: Row =
                        columns.iter().filter_map(|c| staged_row.get(c).map(|v| (c.clone(), v.clone()))).collect();
                    let op = Op::Insert {
                        table: target.clone(),
                        columns: columns.clone(),
                        key: key.clone(),
                        if_absent: true,
                    };
                    let values: Vec<Value> =
                        columns.iter().map(|c| row.get(c).cloned().unwrap_or(Value::Text(None))).collect();
                    let (s, result) = self.apply_row(state, &mut undo, &op, &values, 0);
                    state = s;
                    match result {
                        Ok(Ok(1)) => count += 1,
                        Ok(Ok(_)) if !update.is_empty() => {
                            let mut binds: Vec<Value> =
                                update.iter().map(|c| row.get(c).cloned().unwrap_or(Value::Text(None))).collect();
                            binds.extend(key.iter().map(|c| row.get(c).cloned().unwrap_or(Value::Text(None))));
                            let up = Op::Update {
                                table: target.clone(),
                                set: update.clone(),
                                key: key.clone(),
                                only_if: None,
                            };
                            let (s, r) = self.apply_row(state, &mut undo, &up, &binds, 0);
                            state = s;
                            match r {
                                Ok(Ok(n)) => count += n,
                                Ok(Err(e)) => {
                                    Self::revert(&mut state, undo);
                                    return Err(DriverError::Db(e));
                                }
                                Err(e) => {
                                    Self::revert(&mut state, undo);
                                    return Err(e);
                                }
                            }
                        }
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            Self::revert(&mut state, undo);
                            return Err(DriverError::Db(DbError { offset: 0, ..e }));
                        }
                        Err(e) => {
                            Self::revert(&mut state, undo);
                            return Err(e);
                        }
                    }
                }
                Ok(count)
            }
            Op::StageDelete { table, batch_column } => {
                let id = binds.first().and_then(Value::as_text);
                let staged = self.staged_rows(&state, table, batch_column, &id);
                let mut undo = Undo::new();
                for (slot, _) in &staged {
                    self.set_pending(&mut state, &mut undo, table, *slot, None);
                }
                Ok(staged.len() as u64)
            }
            _ => {
                drop(state);
                let outcome = self.execute_array_inner(statement, std::slice::from_ref(&binds.to_vec()), false)?;
                match outcome.row_errors.into_iter().next() {
                    Some(e) => Err(DriverError::Db(e)),
                    None => Ok(outcome.row_counts.iter().sum()),
                }
            }
        }
    }

    fn execute_array_inner(
        &self,
        statement: &Statement,
        rows: &[Vec<Value>],
        record: bool,
    ) -> Result<ArrayOutcome, DriverError> {
        let mut state = self.db.lock();
        if record {
            self.record(&mut state, "array", &statement.sql, rows);
            if let Some(e) =
                take_fault(&mut state, |p| matches!(p, FaultPoint::Statement(s) if statement.sql.contains(s.as_str())))
            {
                return Err(e);
            }
        }
        let mut undo = Undo::new();
        let mut outcome = ArrayOutcome { row_counts: Vec::with_capacity(rows.len()), row_errors: Vec::new() };
        for (offset, binds) in rows.iter().enumerate() {
            let mut row_undo = Undo::new();
            let (s, result) = self.apply_row(state, &mut row_undo, &statement.op, binds, offset);
            state = s;
            match result {
                Ok(Ok(n)) => {
                    undo.extend(row_undo);
                    outcome.row_counts.push(n);
                }
                Ok(Err(e)) => {
                    Self::revert(&mut state, row_undo);
                    outcome.row_counts.push(0);
                    outcome.row_errors.push(e);
                }
                Err(e) => {
                    Self::revert(&mut state, row_undo);
                    Self::revert(&mut state, undo);
                    return Err(e);
                }
            }
        }
        Ok(outcome)
    }

    fn commit_locked(state: &mut State, id: ConnId) {
        for t in state.tables.values_mut() {
            for s in &mut t.slots {
                if s.pending.as_ref().is_some_and(|(o, _)| *o == id)
                    && let Some((_, value)) = s.pending.take()
                {
                    s.committed = value;
                }
            }
        }
    }

    fn rollback_locked(state: &mut State, id: ConnId) {
        for t in state.tables.values_mut() {
            for s in &mut t.slots {
                if s.pending.as_ref().is_some_and(|(o, _)| *o == id) {
                    s.pending = None;
                }
            }
        }
    }

    fn query_inner(&self, statement: &Statement, binds: &[Value]) -> Result<Vec<Vec<Option<String>>>, DriverError> {
        let mut state = self.db.lock();
        self.record(&mut state, "query", &statement.sql, &[binds.to_vec()]);
        if let Some(e) =
            take_fault(&mut state, |p| matches!(p, FaultPoint::Statement(s) if statement.sql.contains(s.as_str())))
        {
            return Err(e);
        }
        match &statement.op {
            Op::Probe { table, columns } => {
                let t = state.tables.get(table).ok_or_else(|| no_table(table))?;
                match columns.iter().find(|c| !t.columns.contains(c)) {
                    Some(c) => Err(db_error(904, 0, format!("ORA-00904: \"{c}\": invalid identifier"))),
                    None => Ok(Vec::new()),
                }
            }
            Op::KeyConstraints { table } => Ok(state
                .tables
                .get(table)
                .map(|t| {
                    t.constraint
                        .iter()
                        .flat_map(|c| t.key.iter().map(move |k| vec![Some(c.clone()), Some(k.clone())]))
                        .collect()
                })
                .unwrap_or_default()),
            Op::StagedExisting { staging, target, key, batch_column } => {
                let id = binds.first().and_then(Value::as_text);
                let t = state.tables.get(target).ok_or_else(|| no_table(target))?;
                let mut out = Vec::new();
                for (_, row) in self.staged_rows(&state, staging, batch_column, &id) {
                    let k = key_text(key, &row);
                    if t.index.get(&k).is_some_and(|s| t.slots[*s].visible(self.id).is_some()) {
                        out.push(key.iter().map(|c| row.get(c).and_then(Value::as_text)).collect());
                    }
                }
                Ok(out)
            }
            Op::Lineage { table, select, filter, limit, order } => {
                let t = state.tables.get(table).ok_or_else(|| no_table(table))?;
                let wanted = binds.first().and_then(Value::as_text);
                let mut rows: Vec<&Row> = t
                    .slots
                    .iter()
                    .filter_map(|s| s.visible(self.id))
                    .filter(|r| {
                        let value = match filter {
                            LineageFilter::Column(c) => r.get(c).and_then(Value::as_text),
                            LineageFilter::JsonField { column, field } => r
                                .get(column)
                                .and_then(Value::as_text)
                                .and_then(|doc| serde_json::from_str::<serde_json::Value>(&doc).ok())
                                .and_then(|doc| match doc.get(field) {
                                    Some(serde_json::Value::String(s)) => Some(s.clone()),
                                    Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                                        Some(v.to_string())
                                    }
                                    _ => None,
                                }),
                        };
                        value.is_some() && value == wanted
                    })
                    .collect();
                let number =
                    |r: &Row, c: &String| r.get(c).and_then(Value::as_text).and_then(|t| t.parse::<i128>().ok());
                rows.sort_by_key(|r| order.iter().map(|c| number(r, c).unwrap_or(i128::MAX)).collect::<Vec<_>>());
                Ok(rows
                    .into_iter()
                    .take(*limit)
                    .map(|r| select.iter().map(|c| r.get(c).and_then(Value::as_text)).collect())
                    .collect())
            }
            Op::Stored { table, key, select } => {
                let t = state.tables.get(table).ok_or_else(|| no_table(table))?;
                if key.is_empty() || !binds.len().is_multiple_of(key.len()) {
                    return Err(db_error(1008, 0, "ORA-01008: not all variables bound"));
                }
                let mut out = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for tuple in binds.chunks(key.len()) {
                    let texts: Vec<Option<String>> = tuple.iter().map(Value::as_text).collect();
                    let k = crate::row::key_of(texts.iter().map(Option::as_deref));
                    // `IN` matches each stored row once, however often its key is listed.
                    if !seen.insert(k.clone()) {
                        continue;
                    }
                    if let Some(row) = t.index.get(&k).and_then(|slot| t.slots[*slot].visible(self.id)) {
                        out.push(select.iter().map(|c| row.get(c).and_then(Value::as_text)).collect());
                    }
                }
                Ok(out)
            }
            _ => Err(DriverError::Other("statement is not a query".into())),
        }
    }
}

impl Drop for ScriptedConnection {
    fn drop(&mut self) {
        let mut state = self.db.lock();
        Self::rollback_locked(&mut state, self.id);
        state.waits_for.remove(&self.id);
        state.idle.push(self.id);
        drop(state);
        self.db.changed.notify_all();
    }
}

impl Connection for ScriptedConnection {
    fn execute_array(&mut self, statement: &Statement, rows: &[Vec<Value>]) -> Result<ArrayOutcome, DriverError> {
        let result = self.timed(|| self.execute_array_inner(statement, rows, true));
        self.db.changed.notify_all();
        result
    }

    fn execute(&mut self, statement: &Statement, binds: &[Value]) -> Result<u64, DriverError> {
        let result = self.timed(|| self.execute_one(statement, binds));
        self.db.changed.notify_all();
        result
    }

    fn query(&mut self, statement: &Statement, binds: &[Value]) -> Result<Vec<Vec<Option<String>>>, DriverError> {
        self.timed(|| self.query_inner(statement, binds))
    }

    fn commit(&mut self) -> Result<(), DriverError> {
        let result = self.timed(|| {
            let mut state = self.db.lock();
            self.record(&mut state, "commit", "", &[]);
            if let Some(e) = take_fault(&mut state, |p| *p == FaultPoint::Commit) {
                Self::rollback_locked(&mut state, self.id);
                return Err(e);
            }
            Self::commit_locked(&mut state, self.id);
            Ok(())
        });
        self.db.changed.notify_all();
        result
    }

    fn rollback(&mut self) -> Result<(), DriverError> {
        self.timed(|| {
            let mut state = self.db.lock();
            self.record(&mut state, "rollback", "", &[]);
            Self::rollback_locked(&mut state, self.id);
        });
        self.db.changed.notify_all();
        Ok(())
    }

    fn ping(&mut self) -> Result<(), DriverError> {
        let mut state = self.db.lock();
        self.record(&mut state, "ping", "", &[]);
        match take_fault(&mut state, |p| *p == FaultPoint::Ping) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
