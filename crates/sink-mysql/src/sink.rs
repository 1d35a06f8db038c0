//! [`MySqlSink`]: one transaction per batch, every routed table inside it, outcomes reported
//! only after `COMMIT`.
//!
//! A batch of first deliveries takes the fast path: one multi-row
//! `INSERT … ON DUPLICATE KEY UPDATE k = k` per table; if the affected-row count shows every
//! row was new, the transaction commits and every message is committed. Otherwise (a
//! redelivery in the batch, or a key that already existed) the slow path runs: the existing
//! keys (and fingerprints) are read `FOR UPDATE`, each row is classified as new, duplicate or
//! conflicting, new rows are inserted and updates applied per mode and conflict policy, then
//! one commit. Under stream-sequence keys (the default key pair) a different fingerprint is
//! a reused stream sequence: refused (`sequence_reused`) and never updated, whatever the
//! policy; a table that has the fingerprint column gets it written and compared even
//! without a conflict policy (found at `open`), one without it cannot tell. A data error (a value the server rejects) rolls the transaction back and the
//! batch is replayed row by row behind savepoints, so only the bad rows fail (permanently)
//! while their batch-mates commit in the same transaction.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Params, Pool, PoolConstraints, PoolOpts, SslOpts, TxOpts, Value};
use sinks_contract::config::ConfigError;
use sinks_contract::existing::{KeyBasis, Stored};
use sinks_contract::{
    BatchResult, Capabilities, DestinationRef, Destinations, Envelope, MessageOutcome, Presence, ReadBack, Sink,
    SinkError,
};
use sinks_toolkit::relational::{self, RowWrite};
use time::OffsetDateTime;
use tokio::sync::OnceCell;

use crate::config::{MySqlSinkConfig, WriteMode};
use crate::error::{classify, is_data_error};
use crate::row::{self, Row, key_of};
use crate::sql::{OnDuplicate, TablePlan, quote};

/// Rows per statement (keeps placeholders well under the protocol's 65,535).
const CHUNK_ROWS: usize = 1000;

/// Parameters from which a statement counts as large for [`Widest`]: the driver keeps a
/// column definition of about 200 bytes per parameter of a prepared statement, so 1,024 of
/// them hold about 200 KB.
const LARGE_STATEMENT_PARAMS: usize = 1024;

/// Which prepared statements stay in a connection's statement cache. The driver keeps, with
/// every cached statement, a column definition per parameter (a 500-row insert of 16 columns
/// holds 8,000 of them, about 1.6 MB), for the connection's life. A batch narrower than the
/// widest one written so far (a fetch that took what was there) seldom comes back at the same
/// width: cached, each such width stayed, up to 64 per connection, and a 100,000-message run
/// at batch 500 held a dozen of them. A large statement narrower than the widest is prepared,
/// run and closed at once; the widest width and small statements stay cached.
#[derive(Debug, Default)]
struct Widest(AtomicUsize);

impl Widest {
    /// Whether the statement for `rows` rows of `per_row` parameters stays cached (noting
    /// `rows` as the widest when it is).
    fn keeps(&self, rows: usize, per_row: usize) -> bool {
        let widest = self.0.fetch_max(rows, Ordering::Relaxed).max(rows);
        rows >= widest || rows * per_row < LARGE_STATEMENT_PARAMS
    }
}

/// Attempts of one batch transaction when it hits a deadlock or a lock wait timeout.
const LOCK_RETRIES: u64 = 4;

fn is_retryable_lock(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1213 || s.code == 1205)
}

fn rand_jitter() -> u8 {
    (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos()) % 20) as u8
}

/// Durable MySQL / MariaDB destination.
#[derive(Debug, Clone)]
pub struct MySqlSink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: MySqlSinkConfig,
    /// The plans as the configuration says ([`TablePlan::all`]).
    configured: Vec<TablePlan>,
    /// The plans `open` settled on: the fingerprint column added for tables that have it
    /// under stream-sequence keys without a conflict policy.
    opened: std::sync::OnceLock<Vec<TablePlan>>,
    pool: OnceCell<Pool>,
    password: Option<Secret>,
    /// The widest statement written so far (which statements stay cached).
    widest: Widest,
}

/// A password given in code; never printed.
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("********")
    }
}

type Outcomes = Vec<(usize, MessageOutcome)>;
type Groups = Vec<Vec<(usize, Row)>>;

impl MySqlSink {
    /// A sink for a validated `config`. Connects nothing until [`Sink::open`].
    pub fn new(config: MySqlSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let configured = TablePlan::all(&config).map_err(|(p, m)| ConfigError::single(p, m))?;
        let inner = Inner {
            config,
            configured,
            opened: std::sync::OnceLock::new(),
            pool: OnceCell::new(),
            password: None,
            widest: Widest::default(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Uses `password` instead of `password_env` (for programs that hold the secret
    /// themselves, such as a vault client). Configuration files still only name variables.
    #[must_use]
    pub fn with_password(self, password: &str) -> Self {
        let inner = Inner {
            config: self.inner.config.clone(),
            configured: self.inner.configured.clone(),
            opened: std::sync::OnceLock::new(),
            pool: OnceCell::new(),
            password: Some(Secret(password.to_owned())),
            widest: Widest::default(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// The `CREATE TABLE IF NOT EXISTS` statements for the default table and every route
    /// table, generated from the column mapping and key columns (what `auto_create` runs).
    pub fn ddl(&self) -> Vec<String> {
        self.inner.configured.iter().map(TablePlan::ddl).collect()
    }

    /// The configuration in effect.
    pub fn config(&self) -> &MySqlSinkConfig {
        &self.inner.config
    }
}

impl Inner {
    fn opts(&self) -> Result<Opts, SinkError> {
        let c = &self.config;
        let password = match (&self.password, &c.password_env) {
            (Some(Secret(p)), _) => Some(p.clone()),
            (None, None) => None,
            (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
                SinkError::config(format!("environment variable {var} (sink.password_env) is not set"))
            })?),
        };
        let mut builder = OptsBuilder::default()
            .ip_or_hostname(c.host.clone())
            .tcp_port(c.port)
            .user(Some(c.user.clone()))
            .pass(password)
            .db_name(Some(c.database.clone()))
            .stmt_cache_size(64)
            .pool_opts(
                // No COM_RESET_CONNECTION when a connection returns to the pool: it would drop the
                // prepared multi-row statements, which every batch would then prepare again.
                PoolOpts::default()
                    .with_constraints(PoolConstraints::new(1, c.pool_size).unwrap_or_default())
                    .with_reset_connection(false),
            );
        if !c.ssl_disabled && (c.ssl_ca.is_some() || c.ssl_cert.is_some()) {
            let mut ssl = SslOpts::default().with_danger_skip_domain_validation(!c.ssl_verify_identity);
            if let Some(ca) = &c.ssl_ca {
                ssl = ssl.with_root_certs(vec![std::path::PathBuf::from(ca).into()]);
            }
            if let (Some(cert), Some(key)) = (&c.ssl_cert, &c.ssl_key) {
                ssl = ssl.with_client_identity(Some(mysql_async::ClientIdentity::new(
                    std::path::PathBuf::from(cert).into(),
                    std::path::PathBuf::from(key).into(),
                )));
            }
            builder = builder.ssl_opts(ssl);
        }
        Ok(builder.into())
    }

    async fn pool(&self) -> Result<&Pool, SinkError> {
        self.pool.get_or_try_init(|| async { self.opts().map(Pool::new) }).await
    }

    async fn conn(&self) -> Result<Conn, SinkError> {
        let pool = self.pool().await?;
        let timeout = Duration::from_secs_f64(self.config.connection_timeout);
        match tokio::time::timeout(timeout, pool.get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(classify(&e, "connecting to mysql")),
            Err(_) => Err(SinkError::temporary("connecting to mysql timed out")),
        }
    }

    /// The plans in effect: as `open` settled them, or as configured before it.
    fn plans(&self) -> &[TablePlan] {
        self.opened.get().unwrap_or(&self.configured)
    }

    fn plan_for(&self, subject: &str) -> usize {
        let route = self.config.table_routes.iter().find(|r| sinks_toolkit::subject::matches(&r.subject, subject));
        route.and_then(|r| self.plans().iter().position(|p| p.table == r.table)).unwrap_or(0)
    }

    /// Whether `plan`'s table has the fingerprint column (`information_schema.COLUMNS`).
    async fn has_fingerprint_column(&self, conn: &mut Conn, plan: &TablePlan) -> Result<bool, SinkError> {
        let (schema, table) = self.schema_and_table(plan);
        let columns: Vec<String> = conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (schema, table),
            )
            .await
            .map_err(|e| classify(&e, "reading table columns"))?;
        let wanted = TablePlan::fingerprint_column(&self.config);
        Ok(columns.iter().any(|c| c.eq_ignore_ascii_case(wanted)))
    }

    /// The plans to write with: under stream-sequence keys without a conflict policy, a
    /// table that has the fingerprint column gets it written and compared (a different
    /// payload under a stored key is then refused as a reused sequence); one without it
    /// cannot tell, and says so once.
    async fn settle_plans(&self, conn: &mut Conn) -> Result<Vec<TablePlan>, SinkError> {
        let mut with_fp = Vec::new();
        for plan in self.configured.iter().filter(|p| p.fingerprint.is_none() && !p.key.is_empty()) {
            if plan.basis() != KeyBasis::StreamSequence {
                continue;
            }
            if self.has_fingerprint_column(conn, plan).await? {
                tracing::info!(table = %plan.table, "the table has the fingerprint column: a reused stream sequence is detected at the row");
                with_fp.push(plan.table.clone());
            } else {
                tracing::info!(
                    table = %plan.table,
                    "the table has no fingerprint column: a reused stream sequence cannot be detected at the row (the stream guard is the protection; a conflict_policy adds the column)"
                );
            }
        }
        if with_fp.is_empty() {
            return Ok(self.configured.clone());
        }
        TablePlan::all_with(&self.config, |t| with_fp.iter().any(|w| w == t))
            .map_err(|(path, m)| SinkError::config(m).with_field(path))
    }

    /// `(schema, table)` of `plan`'s table.
    fn schema_and_table(&self, plan: &TablePlan) -> (String, String) {
        match plan.table.split_once('.') {
            Some((s, t)) => (s.to_owned(), t.to_owned()),
            None => (self.config.database.clone(), plan.table.clone()),
        }
    }

    /// Checks a table exists and its key columns are unique (a PRIMARY KEY or UNIQUE index).
    async fn check_table(&self, conn: &mut Conn, plan: &TablePlan) -> Result<(), SinkError> {
        conn.query_drop(plan.probe()).await.map_err(|e| {
            let err = classify(&e, &format!("table {} is not usable", plan.table));
            if matches!(&e, mysql_async::Error::Server(s) if s.code == 1146) {
                SinkError::config(format!(
                    "table {} does not exist: create it (`nats-sink ddl CONFIG` prints the statement) or set sink.auto_create",
                    plan.table
                ))
            } else {
                err
            }
        })?;
        if plan.key.is_empty() {
            return Ok(());
        }
        let (schema, table) = self.schema_and_table(plan);
        let indexes: Vec<(String, String)> = conn
            .exec(
                "SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ',') \
                 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 \
                 GROUP BY INDEX_NAME",
                (schema, table),
            )
            .await
            .map_err(|e| classify(&e, "reading table indexes"))?;
        let mut want: Vec<String> = plan.key.iter().map(|i| plan.columns[*i].to_ascii_lowercase()).collect();
        want.sort();
        let covered = indexes.iter().any(|(_, cols)| {
            let mut have: Vec<String> = cols.split(',').map(str::to_ascii_lowercase).collect();
            have.sort();
            have == want
        });
        if covered {
            Ok(())
        } else {
            Err(SinkError::config(format!(
                "table {} has no PRIMARY KEY or UNIQUE index on the key columns ({}); duplicates could not be detected",
                plan.table,
                want.join(", ")
            )))
        }
    }
}

/// Runs `sql` with `params` and returns the affected rows: through the connection's statement
/// cache when `keep`, else prepared, run and closed (see [`Widest`]).
async fn exec_counted<Q: Queryable + Send>(
    q: &mut Q,
    sql: String,
    params: Params,
    keep: bool,
) -> Result<u64, mysql_async::Error> {
    if keep {
        let result = q.exec_iter(sql, params).await?;
        let affected = result.affected_rows();
        result.drop_result().await?;
        return Ok(affected);
    }
    let stmt = q.prep(sql).await?;
    let result = q.exec_iter(&stmt, params).await?;
    let affected = result.affected_rows();
    result.drop_result().await?;
    q.close(stmt).await?;
    Ok(affected)
}

/// Runs the query `sql` with `params` and returns its rows, the statement cached or closed
/// after as in [`exec_counted`].
async fn exec_rows<Q: Queryable + Send>(
    q: &mut Q,
    sql: String,
    params: Params,
    keep: bool,
) -> Result<Vec<mysql_async::Row>, mysql_async::Error> {
    if keep {
        return q.exec(sql, params).await;
    }
    let stmt = q.prep(sql).await?;
    let rows = q.exec(&stmt, params).await?;
    q.close(stmt).await?;
    Ok(rows)
}

async fn insert_rows<Q: Queryable + Send>(
    q: &mut Q,
    (plan, widest): (&TablePlan, &Widest),
    rows: &[&Row],
    on_dup: OnDuplicate,
) -> Result<u64, mysql_async::Error> {
    let mut affected = 0;
    for chunk in rows.chunks(CHUNK_ROWS) {
        let params: Vec<Value> = chunk.iter().flat_map(|r| r.values.iter().cloned()).collect();
        let keep = widest.keeps(chunk.len(), plan.columns.len());
        affected += exec_counted(q, plan.insert(chunk.len(), on_dup), Params::Positional(params), keep).await?;
    }
    Ok(affected)
}

/// Existing keys among `rows`, with their stored fingerprint when the plan has one.
async fn existing<Q: Queryable + Send>(
    q: &mut Q,
    (plan, widest): (&TablePlan, &Widest),
    rows: &[&Row],
) -> Result<HashMap<String, Option<String>>, mysql_async::Error> {
    let mut found = HashMap::new();
    for chunk in rows.chunks(CHUNK_ROWS) {
        let params: Vec<Value> = chunk.iter().flat_map(|r| plan.key.iter().map(|i| r.values[*i].clone())).collect();
        let keep = widest.keeps(chunk.len(), plan.key.len());
        let result = exec_rows(q, plan.select_existing(chunk.len()), Params::Positional(params), keep).await?;
        for mut r in result {
            let key: Vec<Value> = (0..plan.key.len()).map(|i| r.take::<Value, _>(i).unwrap_or(Value::NULL)).collect();
            let fp = plan.fingerprint.and_then(|_| r.take::<Option<String>, _>(plan.key.len()).flatten());
            found.insert(key_of(&key), fp);
        }
    }
    Ok(found)
}

/// The stored fingerprint of every existing key among `rows` (the fingerprint column, or the
/// SHA-256 of the stored payload text when the table has none).
async fn stored_content<Q: Queryable + Send>(
    q: &mut Q,
    plan: &TablePlan,
    rows: &[&Row],
) -> Result<HashMap<String, Option<String>>, mysql_async::Error> {
    use sha2::Digest;
    let mut found = HashMap::new();
    for chunk in rows.chunks(CHUNK_ROWS) {
        let params: Vec<Value> = chunk.iter().flat_map(|r| plan.key.iter().map(|i| r.values[*i].clone())).collect();
        let result: Vec<mysql_async::Row> = q.exec(plan.select_stored(chunk.len()), Params::Positional(params)).await?;
        for mut r in result {
            let key: Vec<Value> = (0..plan.key.len()).map(|i| r.take::<Value, _>(i).unwrap_or(Value::NULL)).collect();
            let content = r.take::<Option<Vec<u8>>, _>(plan.key.len()).flatten();
            let fp = match plan.fingerprint {
                Some(_) => content.map(|c| String::from_utf8_lossy(&c).into_owned()),
                None => content.map(|c| hex::encode(sha2::Sha256::digest(&c))),
            };
            found.insert(key_of(&key), fp);
        }
    }
    Ok(found)
}

impl Inner {
    /// Writes one table's rows after reading which keys exist. Returns per-row outcomes.
    async fn write_group_slow<Q: Queryable + Send>(
        &self,
        q: &mut Q,
        plan: &TablePlan,
        group: &[(usize, Row)],
    ) -> Result<Outcomes, mysql_async::Error> {
        let rows: Vec<&Row> = group.iter().map(|(_, r)| r).collect();
        let mut stored = existing(q, (plan, &self.widest), &rows).await?;
        let mode = self.config.mode;
        let mut outcomes = Vec::with_capacity(group.len());
        let (mut inserts, mut updates) = (Vec::new(), Vec::new());
        for (i, row) in group {
            let outcome = match stored.get(&row.key) {
                None => {
                    inserts.push(row);
                    MessageOutcome::Committed
                }
                Some(fp) => {
                    // Without a fingerprint the content cannot be compared: an upsert
                    // applies its update columns, as the reference does. With one, under
                    // stream-sequence keys a different payload is a reused sequence (never
                    // updated), conflict policy or not.
                    let policy = self.config.conflict_policy.filter(|_| plan.fingerprint.is_some());
                    let stored = match fp.as_deref() {
                        Some(f) if f == row.fingerprint.as_str() => Stored::Same,
                        Some(_) => Stored::Different,
                        None => Stored::Unchecked,
                    };
                    let (outcome, write) =
                        relational::existing_row(policy, plan.basis(), stored, mode == WriteMode::Upsert);
                    if write != RowWrite::Nothing {
                        updates.push(row);
                    }
                    outcome
                }
            };
            // A key seen earlier in this batch counts as existing for the rest of it.
            stored.entry(row.key.clone()).or_insert_with(|| Some(row.fingerprint.clone()));
            outcomes.push((*i, outcome));
        }
        if !inserts.is_empty() {
            let on_dup = if mode == WriteMode::Insert { OnDuplicate::Fail } else { OnDuplicate::Keep };
            insert_rows(q, (plan, &self.widest), &inserts, on_dup).await?;
        }
        if !updates.is_empty() {
            insert_rows(q, (plan, &self.widest), &updates, OnDuplicate::Update).await?;
        }
        Ok(outcomes)
    }

    /// The whole batch in one transaction: fast path, else slow path.
    async fn write_groups(
        &self,
        conn: &mut Conn,
        groups: &Groups,
        redelivery: bool,
    ) -> Result<Outcomes, mysql_async::Error> {
        let committed = |groups: &Groups| -> Outcomes {
            groups.iter().flatten().map(|(i, _)| (*i, MessageOutcome::Committed)).collect()
        };
        if self.config.mode == WriteMode::Append {
            let mut tx = conn.start_transaction(TxOpts::default()).await?;
            for (plan, group) in self.plans().iter().zip(groups).filter(|(_, g)| !g.is_empty()) {
                let rows: Vec<&Row> = group.iter().map(|(_, r)| r).collect();
                insert_rows(&mut tx, (plan, &self.widest), &rows, OnDuplicate::Fail).await?;
            }
            tx.commit().await?;
            return Ok(committed(groups));
        }
        if !redelivery {
            let mut tx = conn.start_transaction(TxOpts::default()).await?;
            let mut all_new = true;
            for (plan, group) in self.plans().iter().zip(groups).filter(|(_, g)| !g.is_empty()) {
                let rows: Vec<&Row> = group.iter().map(|(_, r)| r).collect();
                if insert_rows(&mut tx, (plan, &self.widest), &rows, OnDuplicate::Keep).await? != rows.len() as u64 {
                    all_new = false;
                    break;
                }
            }
            if all_new {
                tx.commit().await?;
                return Ok(committed(groups));
            }
            tx.rollback().await?;
        }
        let mut tx = conn.start_transaction(TxOpts::default()).await?;
        let mut outcomes = Vec::new();
        for (plan, group) in self.plans().iter().zip(groups).filter(|(_, g)| !g.is_empty()) {
            outcomes.extend(self.write_group_slow(&mut tx, plan, group).await?);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// After a data error: every row behind its own savepoint, one transaction.
    async fn write_isolated(&self, conn: &mut Conn, groups: &Groups) -> Result<Outcomes, mysql_async::Error> {
        let mut tx = conn.start_transaction(TxOpts::default()).await?;
        let mut outcomes = Vec::new();
        for (plan, group) in self.plans().iter().zip(groups) {
            for (i, row) in group {
                tx.query_drop("SAVEPOINT nats_sinks_row").await?;
                let single = [(*i, row.clone())];
                let result = if self.config.mode == WriteMode::Append {
                    insert_rows(&mut tx, (plan, &self.widest), &[row], OnDuplicate::Fail)
                        .await
                        .map(|_| vec![(*i, MessageOutcome::Committed)])
                } else {
                    self.write_group_slow(&mut tx, plan, &single).await
                };
                match result {
                    Ok(o) => outcomes.extend(o),
                    Err(e) if is_data_error(&e) => {
                        tx.query_drop("ROLLBACK TO SAVEPOINT nats_sinks_row").await?;
                        tracing::warn!(table = %plan.table, error = %classify(&e, "row rejected").message(), "row rejected by the server");
                        outcomes
                            .push((*i, MessageOutcome::Failed(classify(&e, &format!("writing to {}", plan.table)))));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        tx.commit().await?;
        Ok(outcomes)
    }
}

#[async_trait]
impl Sink for MySqlSink {
    fn name(&self) -> &str {
        "mysql"
    }

    fn capabilities(&self) -> Capabilities {
        let keyed = self.inner.config.mode != WriteMode::Append;
        // A fingerprint column under stream-sequence keys tells a reused sequence apart
        // without a conflict policy (in every table the sink writes).
        let compared =
            self.inner.plans().iter().all(|p| p.fingerprint.is_some() && p.basis() == KeyBasis::StreamSequence);
        let capabilities = Capabilities::new()
            .atomic_batch(true)
            .reports_duplicates(keyed)
            .detects_conflicts(keyed && (self.inner.config.conflict_policy.is_some() || compared));
        if keyed { capabilities } else { capabilities.read_back_note("mode `append` has no key to look rows up by") }
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        // A direct connection (not the pool), so that an authentication or database error
        // surfaces at once as a configuration error instead of a pool wait.
        let timeout = Duration::from_secs_f64(inner.config.connection_timeout);
        let mut conn = match tokio::time::timeout(timeout, Conn::new(inner.opts()?)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(classify(&e, "connecting to mysql")),
            Err(_) => return Err(SinkError::temporary("connecting to mysql timed out")),
        };
        if inner.config.auto_create {
            for plan in &inner.configured {
                conn.query_drop(plan.ddl())
                    .await
                    .map_err(|e| classify(&e, &format!("creating table {}", plan.table)))?;
                tracing::info!(table = %plan.table, "table ready (auto_create)");
            }
        }
        for plan in &inner.configured {
            inner.check_table(&mut conn, plan).await?;
        }
        let plans = inner.settle_plans(&mut conn).await?;
        if inner.opened.set(plans).is_err() {
            tracing::debug!("mysql sink opened again: the plans of the first open stay");
        }
        tracing::info!(host = %inner.config.host, database = %inner.config.database, tables = inner.configured.len(), "mysql sink ready");
        let _ = conn.disconnect().await;
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        let inner = &self.inner;
        let started = std::time::Instant::now();
        let stored_at = OffsetDateTime::now_utc();
        let mut outcomes: Vec<Option<MessageOutcome>> = batch.iter().map(|_| None).collect();
        let mut groups: Groups = vec![Vec::new(); inner.plans().len()];
        for (i, e) in batch.iter().enumerate() {
            let p = inner.plan_for(e.subject());
            match row::map(e, &inner.plans()[p], inner.config.payload_mode, (stored_at, inner.config.metadata_scope)) {
                Ok(r) => groups[p].push((i, r)),
                Err(err) => outcomes[i] = Some(MessageOutcome::Failed(err)),
            }
        }
        let mapped = started.elapsed();
        if groups.iter().any(|g| !g.is_empty()) {
            let mut conn = inner.conn().await?;
            let redelivery = batch.iter().any(Envelope::redelivered);
            let mut attempt = 0;
            let written = loop {
                attempt += 1;
                let result = match inner.write_groups(&mut conn, &groups, redelivery).await {
                    Err(e) if is_data_error(&e) => inner.write_isolated(&mut conn, &groups).await,
                    other => other,
                };
                match result {
                    // A deadlock or lock wait rolled the transaction back: run it again here
                    // rather than sending the whole batch back to JetStream.
                    Err(e) if is_retryable_lock(&e) && attempt < LOCK_RETRIES => {
                        tracing::debug!(attempt, error = %classify(&e, "writing the batch").message(), "retrying the transaction");
                        tokio::time::sleep(Duration::from_millis(5 * attempt + u64::from(rand_jitter()))).await;
                    }
                    other => break other,
                }
            };
            for (i, o) in written.map_err(|e| classify(&e, "writing the batch"))? {
                outcomes[i] = Some(o);
            }
            tracing::debug!(
                rows = batch.len(),
                map_us = mapped.as_micros() as u64,
                db_us = (started.elapsed() - mapped).as_micros() as u64,
                "mysql batch committed"
            );
        }
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| MessageOutcome::temporary("row was not written")))
            .collect())
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let mut conn = self.inner.conn().await?;
        conn.query_drop("SELECT 1").await.map_err(|e| classify(&e, "health check"))
    }

    async fn close(&self) -> Result<(), SinkError> {
        if let Some(pool) = self.inner.pool.get() {
            pool.clone().disconnect().await.map_err(|e| classify(&e, "closing the pool"))?;
        }
        Ok(())
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        if self.inner.config.mode == WriteMode::Append {
            return None;
        }
        Some(self)
    }
}

impl Destinations for MySqlSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let plan = &self.inner.plans()[self.inner.plan_for(envelope.subject())];
        let row = row::map(
            envelope,
            plan,
            self.inner.config.payload_mode,
            (OffsetDateTime::now_utc(), self.inner.config.metadata_scope),
        )
        .ok()?;
        let key = if plan.key.is_empty() {
            envelope.idempotency_key().ok()?.to_string()
        } else {
            key_of(&plan.key.iter().map(|i| row.values[*i].clone()).collect::<Vec<_>>()).replace('\u{1f}', "/")
        };
        Some(DestinationRef::Row { table: plan.table.clone(), key })
    }
}

#[async_trait]
impl ReadBack for MySqlSink {
    fn checks(&self) -> String {
        let what = if self.inner.config.conflict_policy.is_some() {
            "row exists (bulk key lookup) and its payload_sha256 column matches"
        } else {
            "row exists (bulk key lookup) and its payload column hashes to the same fingerprint"
        };
        what.to_owned()
    }

    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let mut groups: Vec<Vec<(usize, Row)>> = vec![Vec::new(); inner.plans().len()];
        for (i, e) in batch.iter().enumerate() {
            let p = inner.plan_for(e.subject());
            let r =
                row::map(e, &inner.plans()[p], inner.config.payload_mode, (stored_at, inner.config.metadata_scope))?;
            groups[p].push((i, r));
        }
        let mut found = vec![Presence::Missing; batch.len()];
        let mut conn = inner.conn().await?;
        for (plan, group) in inner.plans().iter().zip(&groups).filter(|(_, g)| !g.is_empty()) {
            let rows: Vec<&Row> = group.iter().map(|(_, r)| r).collect();
            let stored = stored_content(&mut conn, plan, &rows)
                .await
                .map_err(|e| classify(&e, &format!("reading {} back", plan.table)))?;
            for (i, r) in group {
                found[*i] = match stored.get(&r.key) {
                    None => Presence::Missing,
                    Some(fp) if fp.as_deref() == Some(r.fingerprint.as_str()) => Presence::Equal,
                    Some(_) => Presence::Different,
                };
            }
        }
        Ok(found)
    }
}

/// Quoted name of a table (for tests and tools that read back).
pub fn quoted_table(name: &str) -> String {
    quote(name)
}

#[cfg(test)]
mod tests {
    use super::Widest;

    #[test]
    fn only_the_widest_and_small_statements_stay_cached() {
        let w = Widest::default();
        // 16 columns: 64 rows make 1,024 parameters, a large statement.
        for rows in [63, 125, 250, 500] {
            assert!(w.keeps(rows, 16), "the widest so far ({rows}) stays");
        }
        assert!(w.keeps(500, 16), "the widest again");
        assert!(!w.keeps(373, 16), "a large one narrower than the widest is closed after use");
        assert!(!w.keeps(64, 16));
        assert!(w.keeps(63, 16), "a small one stays");
        assert!(w.keeps(1, 16));
        assert!(w.keeps(1000, 16), "a wider one becomes the widest");
        assert!(!w.keeps(500, 16));
    }
}
