//! [`OracleSink`]: the async [`Sink`] over the blocking driver seam.
//!
//! Rows are mapped on the async side (pure, cheap); every driver call runs on the sink's own
//! thread pool ([`crate::pool::IoPool`], one thread per pooled connection). A batch takes one
//! connection for one transaction (see `write.rs`); batches in flight use separate
//! connections. `open` creates the pool (loading Instant Client: DPI-1047 is a configuration
//! error with what to install), runs `auto_create`, and checks every table: it exists, has
//! every mapped column, and its key columns carry a PRIMARY KEY or UNIQUE constraint.
//!
//! `nats-sink reconcile` reads rows back by key in bulk ([`TablePlan::select_stored`], up to
//! [`RECONCILE_CHUNK`] keys per query, on one connection, no locks) and compares them with
//! `row::presence`. Nothing is written.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use sinks_contract::config::ConfigError;
use sinks_contract::existing::KeyBasis;
use sinks_contract::{
    BatchResult, Capabilities, DestinationRef, Destinations, Envelope, MessageOutcome, Presence, ReadBack, Sink,
    SinkError,
};
use time::OffsetDateTime;

use crate::config::OracleSinkConfig;
use crate::config::connection::connect_string;
use crate::ddl;
use crate::driver::oci::{OciDriver, OciOptions};
use crate::driver::{Connection, Driver, SessionSetup, Statement};
use crate::error::classify;
use crate::lineage::{self, LineageQuery, LineageResult};
use crate::pool::IoPool;
use crate::row::{self, StoredContent};
use crate::sql::{self, StagingPlan, TablePlan};
use crate::write::{self, Ctx, Groups};

/// Keys per reconcile lookup: Oracle allows at most 1,000 expressions in an `IN` list.
const RECONCILE_CHUNK: usize = 500;

/// Durable Oracle Database destination.
#[derive(Debug, Clone)]
pub struct OracleSink {
    inner: Arc<Inner>,
}

/// A password given in code; never printed.
#[derive(Clone)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("********")
    }
}

#[derive(Debug)]
enum Source {
    /// The `oracle` crate, created at `open`.
    Oci(Option<Secret>),
    /// A driver given by the caller (the scripted driver in tests).
    Given(Arc<dyn Driver>),
}

/// Key constraint names per table.
type KeyConstraints = HashMap<String, Vec<String>>;

#[derive(Debug)]
struct Inner {
    config: OracleSinkConfig,
    /// The plans as the configuration says ([`TablePlan::all`]).
    plans: Vec<TablePlan>,
    /// The plans `open` settled on: the fingerprint column added for tables that have it
    /// under stream-sequence keys without a conflict policy.
    opened: OnceLock<Vec<TablePlan>>,
    staging: Option<StagingPlan>,
    io: IoPool,
    source: Source,
    driver: OnceLock<Arc<dyn Driver>>,
    key_constraints: OnceLock<HashMap<String, Vec<String>>>,
}

impl OracleSink {
    /// A sink for a validated `config` on the `oracle` crate. Connects nothing until
    /// [`Sink::open`].
    pub fn new(config: OracleSinkConfig) -> Result<Self, ConfigError> {
        Self::build(config, Source::Oci(None))
    }

    /// A sink for `config` over `driver` (any implementation of the seam).
    pub fn with_driver(config: OracleSinkConfig, driver: Arc<dyn Driver>) -> Result<Self, ConfigError> {
        Self::build(config, Source::Given(driver))
    }

    fn build(config: OracleSinkConfig, source: Source) -> Result<Self, ConfigError> {
        config.validate()?;
        let plans = TablePlan::all(&config).map_err(|(p, m)| ConfigError::single(p, m))?;
        let staging = StagingPlan::of(&config).map_err(|(p, m)| ConfigError::single(p, m))?;
        let io = IoPool::new("oracle-io", config.pool_max as usize);
        let inner = Inner {
            config,
            plans,
            opened: OnceLock::new(),
            staging,
            io,
            source,
            driver: OnceLock::new(),
            key_constraints: OnceLock::new(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Uses `password` instead of `password_env` (for programs that hold the secret
    /// themselves). Configuration files still only name variables.
    #[must_use]
    pub fn with_password(self, password: &str) -> Self {
        let config = self.inner.config.clone();
        let source = match &self.inner.source {
            Source::Oci(_) => Source::Oci(Some(Secret(password.to_owned()))),
            Source::Given(d) => Source::Given(Arc::clone(d)),
        };
        Self::build(config, source).unwrap_or(self)
    }

    /// The configuration in effect.
    pub fn config(&self) -> &OracleSinkConfig {
        &self.inner.config
    }

    /// The `CREATE TABLE` (and staging index) statements, generated from the column mapping
    /// and key columns: what `auto_create` runs and `nats-sink ddl` prints.
    pub fn ddl(&self) -> Vec<String> {
        self.inner.ddl_statements().into_iter().map(|s| s.sql).collect()
    }

    /// Every statement the sink can send with this configuration, labelled (for snapshot
    /// tests, reviews and `nats-sink ddl`'s readers).
    pub fn statements(&self) -> Vec<(String, String)> {
        let inner = &self.inner;
        let mut out = Vec::new();
        if inner.config.disable_parallel_dml {
            out.push(("session".to_owned(), sql::DISABLE_PARALLEL_DML.to_owned()));
        }
        for s in inner.ddl_statements() {
            out.push(("ddl".to_owned(), s.sql));
        }
        for plan in &inner.plans {
            let t = &plan.table;
            out.push((format!("{t}: probe"), plan.probe().sql));
            out.push((format!("{t}: key constraints"), sql::key_constraints(t).0.sql));
            let sent_at_open = inner.staging.is_none() && plan.fingerprint.is_none() && !plan.key.is_empty();
            if sent_at_open
                && plan.basis() == KeyBasis::StreamSequence
                && let Some(probe) = plan.fingerprint_probe(&inner.config)
            {
                out.push((format!("{t}: fingerprint column probe"), probe.sql));
            }
            match inner.config.mode {
                crate::WriteMode::Append => out.push((format!("{t}: append"), plan.insert(true).sql)),
                mode => {
                    if mode == crate::WriteMode::Insert {
                        out.push((format!("{t}: insert"), plan.insert(false).sql));
                    }
                    out.push((format!("{t}: insert if absent"), plan.insert_if_absent().sql));
                    if let Some(s) = plan.update_by_key() {
                        out.push((format!("{t}: update existing key"), s.sql));
                    }
                    if let Some(s) = plan.same_fingerprint() {
                        out.push((format!("{t}: same fingerprint"), s.sql));
                    }
                    if let Some(s) = plan.select_stored(2, inner.config.json_column_type) {
                        out.push((format!("{t}: reconcile lookup (2 keys)"), s.sql));
                    }
                    if inner.config.conflict_policy == Some(crate::ConflictPolicy::Overwrite)
                        && let Some(s) = plan.overwrite()
                    {
                        out.push((format!("{t}: overwrite conflict"), s.sql));
                    }
                }
            }
            if let Some(staging) = &inner.staging {
                out.push((format!("{t}: staging probe"), staging.probe(plan).sql));
                out.push((format!("{t}: staging insert"), staging.insert(plan).sql));
                out.push((format!("{t}: staged keys that exist"), staging.existing(plan).sql));
                out.push((format!("{t}: staging merge"), staging.merge(plan).sql));
                if staging.delete {
                    out.push((format!("{t}: staging cleanup"), staging.cleanup().sql));
                }
            }
        }
        out
    }

    /// Builds a lineage query for this sink's configuration (no IO).
    pub fn lineage_query(&self, request: &lineage::LineageRequest) -> Result<LineageQuery, lineage::LineageError> {
        lineage::build(&self.inner.config, request)
    }

    /// Runs a read-only lineage query (connects if needed; runs no DDL and no checks).
    pub async fn query_lineage(&self, query: LineageQuery) -> Result<LineageResult, SinkError> {
        let inner = Arc::clone(&self.inner);
        self.inner
            .io
            .run(move || {
                let mut conn = inner.connect()?;
                let rows = conn
                    .query(&query.statement, std::slice::from_ref(&query.bind))
                    .map_err(|e| classify(&e, "querying lineage"))?;
                Ok(lineage::records(&query, rows))
            })
            .await
    }
}

impl Inner {
    fn ddl_statements(&self) -> Vec<Statement> {
        let json = self.config.json_column_type;
        let mut out: Vec<Statement> = self.plans.iter().map(|p| ddl::create_table(p, json)).collect();
        if let Some(staging) = &self.staging {
            out.extend(ddl::create_staging(staging, &self.plans[0], json));
        }
        out
    }

    fn setup(&self) -> SessionSetup {
        let statements =
            if self.config.disable_parallel_dml { vec![sql::DISABLE_PARALLEL_DML.to_owned()] } else { Vec::new() };
        SessionSetup { statements }
    }

    /// The driver, created on first use (blocking: runs on a driver thread).
    fn driver(&self) -> Result<Arc<dyn Driver>, SinkError> {
        if let Some(d) = self.driver.get() {
            return Ok(Arc::clone(d));
        }
        let driver: Arc<dyn Driver> = match &self.source {
            Source::Given(d) => Arc::clone(d),
            Source::Oci(secret) => {
                let c = &self.config;
                let password = match (secret, &c.password_env) {
                    (Some(Secret(p)), _) => p.clone(),
                    (None, Some(var)) => std::env::var(var).map_err(|_| {
                        SinkError::config(format!("environment variable {var} (sink.password_env) is not set"))
                    })?,
                    (None, None) => return Err(SinkError::config("sink.password_env is not set")),
                };
                if let Some(var) = &c.wallet_password_env
                    && std::env::var(var).is_err()
                {
                    return Err(SinkError::config(format!(
                        "environment variable {var} (sink.wallet_password_env) is not set"
                    )));
                }
                let cs = connect_string(c);
                for field in &cs.unapplied {
                    tracing::warn!(field = %format!("sink.{field}"), "not applied: the dsn is a TNS alias or already sets it; set it in tnsnames.ora under sink.config_dir or in the descriptor");
                }
                let options = OciOptions {
                    user: c.user.clone(),
                    password,
                    connect_string: cs.value,
                    config_dir: c.config_dir.clone(),
                    min: c.pool_min,
                    max: c.pool_max,
                    increment: c.pool_increment,
                    setup: self.setup(),
                };
                Arc::new(OciDriver::new(&options).map_err(|e| classify(&e, "creating the oracle session pool"))?)
            }
        };
        Ok(Arc::clone(self.driver.get_or_init(|| driver)))
    }

    fn connect(&self) -> Result<Box<dyn Connection>, SinkError> {
        self.driver()?.connect().map_err(|e| classify(&e, "connecting to oracle"))
    }

    /// The plans in effect: as `open` settled them, or as configured before it.
    fn write_plans(&self) -> &[TablePlan] {
        self.opened.get().unwrap_or(&self.plans)
    }

    fn plan_for(&self, subject: &str) -> usize {
        let route = self.config.table_routes.iter().find(|r| sinks_toolkit::subject::matches(&r.subject, subject));
        route
            .and_then(|r| sql::normalize(&r.table, true))
            .and_then(|t| self.plans.iter().position(|p| p.table == t))
            .unwrap_or(0)
    }

    /// The plans to write with (blocking; on `conn`): under stream-sequence keys without a
    /// conflict policy and without staging (whose table mirrors the configured columns), a
    /// table that has the fingerprint column gets it written and compared, so a different
    /// payload under a stored key is refused as a reused sequence; one without it cannot
    /// tell, and says so once.
    fn settle_plans(&self, conn: &mut dyn Connection) -> Result<Vec<TablePlan>, SinkError> {
        if self.staging.is_some() {
            return Ok(self.plans.clone());
        }
        let mut with_fp = Vec::new();
        for plan in self.plans.iter().filter(|p| p.fingerprint.is_none() && !p.key.is_empty()) {
            if plan.basis() != KeyBasis::StreamSequence {
                continue;
            }
            let Some(probe) = plan.fingerprint_probe(&self.config) else { continue };
            match conn.query(&probe, &[]) {
                Ok(_) => {
                    tracing::info!(table = %plan.table, "the table has the fingerprint column: a reused stream sequence is detected at the row");
                    with_fp.push(plan.table.clone());
                }
                Err(e) if e.ora_code() == Some(904) => tracing::info!(
                    table = %plan.table,
                    "the table has no fingerprint column: a reused stream sequence cannot be detected at the row (the stream guard is the protection; a conflict_policy adds the column)"
                ),
                Err(e) => return Err(classify(&e, &format!("checking the columns of {}", plan.table))),
            }
        }
        if with_fp.is_empty() {
            return Ok(self.plans.clone());
        }
        TablePlan::all_with(&self.config, |t| with_fp.iter().any(|w| w == t))
            .map_err(|(path, m)| SinkError::config(m).with_field(path))
    }

    /// Reads every group's rows back by key (blocking) and compares them; `total` is the
    /// batch size (envelopes in no group are missing).
    fn reconcile(&self, groups: &Groups, total: usize) -> Result<Vec<Presence>, SinkError> {
        let json = self.config.json_column_type;
        let mut found = vec![Presence::Missing; total];
        let mut conn: Option<Box<dyn Connection>> = None;
        for (plan, group) in self.write_plans().iter().zip(groups).filter(|(p, g)| !g.is_empty() && !p.key.is_empty()) {
            for chunk in group.chunks(RECONCILE_CHUNK) {
                let Some(statement) = plan.select_stored(chunk.len(), json) else { continue };
                let binds: Vec<_> =
                    chunk.iter().flat_map(|(_, r)| plan.key.iter().map(|k| r.values[*k].clone())).collect();
                let conn = match &mut conn {
                    Some(c) => c,
                    None => conn.insert(self.connect()?),
                };
                let rows = conn
                    .query(&statement, &binds)
                    .map_err(|e| classify(&e, &format!("reading {} back", plan.table)))?;
                let width = plan.key.len();
                let stored: HashMap<String, StoredContent> = rows
                    .into_iter()
                    .map(|mut r| {
                        r.resize(width + 2, None);
                        let key = row::key_of(r[..width].iter().map(Option::as_deref));
                        let fingerprint = if plan.fingerprint.is_some() { r[width + 1].take() } else { None };
                        (key, StoredContent { payload: r[width].take(), fingerprint })
                    })
                    .collect();
                for (i, r) in chunk {
                    found[*i] = row::presence(r, plan, json, stored.get(&r.key));
                }
            }
        }
        Ok(found)
    }

    /// Start-up work on one connection: DDL, probes, key checks, the plans to write with.
    /// Returns the key constraint names per table, and the plans.
    fn prepare(&self) -> Result<(KeyConstraints, Vec<TablePlan>), SinkError> {
        let mut conn = self.connect()?;
        if self.config.auto_create {
            for statement in self.ddl_statements() {
                match conn.execute(&statement, &[]) {
                    Ok(_) => tracing::info!(statement = %first_line(&statement.sql), "created (auto_create)"),
                    Err(e) if e.ora_code() == Some(955) => {}
                    Err(e) => return Err(classify(&e, &format!("auto_create: {}", first_line(&statement.sql)))),
                }
            }
        }
        let mut constraints = HashMap::new();
        for plan in &self.plans {
            conn.query(&plan.probe(), &[]).map_err(|e| classify(&e, &format!("checking table {}", plan.table)))?;
            if !plan.key.is_empty() {
                constraints.insert(plan.table.clone(), check_key(conn.as_mut(), plan)?);
            }
            if let Some(staging) = &self.staging {
                conn.query(&staging.probe(plan), &[])
                    .map_err(|e| classify(&e, &format!("checking staging table {}", staging.table)))?;
            }
        }
        let plans = self.settle_plans(conn.as_mut())?;
        Ok((constraints, plans))
    }
}

fn first_line(sql: &str) -> &str {
    sql.lines().next().unwrap_or(sql)
}

/// Checks that a PRIMARY KEY or UNIQUE constraint covers exactly the key columns; returns
/// the names of those constraints.
fn check_key(conn: &mut dyn Connection, plan: &TablePlan) -> Result<Vec<String>, SinkError> {
    let (statement, binds) = sql::key_constraints(&plan.table);
    let rows =
        conn.query(&statement, &binds).map_err(|e| classify(&e, &format!("reading the keys of {}", plan.table)))?;
    let mut by_name: HashMap<String, Vec<String>> = HashMap::new();
    for row in rows {
        if let (Some(Some(name)), Some(Some(column))) = (row.first(), row.get(1)) {
            by_name.entry(name.clone()).or_default().push(column.to_ascii_uppercase());
        }
    }
    let mut want: Vec<String> = plan.key.iter().map(|i| plan.columns[*i].clone()).collect();
    want.sort();
    let names: Vec<String> = by_name
        .into_iter()
        .filter(|(_, cols)| {
            let mut have = cols.clone();
            have.sort();
            have == want
        })
        .map(|(n, _)| n)
        .collect();
    if names.is_empty() {
        return Err(SinkError::config(format!(
            "table {} has no PRIMARY KEY or UNIQUE constraint on the key columns ({}); duplicates could not be detected",
            plan.table,
            want.join(", ")
        )));
    }
    Ok(names)
}

#[async_trait]
impl Sink for OracleSink {
    fn name(&self) -> &str {
        "oracle"
    }

    fn capabilities(&self) -> Capabilities {
        let keyed = self.inner.config.mode.keyed();
        // A fingerprint column under stream-sequence keys tells a reused sequence apart
        // without a conflict policy (in every table the sink writes).
        let compared =
            self.inner.write_plans().iter().all(|p| p.fingerprint.is_some() && p.basis() == KeyBasis::StreamSequence);
        let capabilities = Capabilities::new()
            .atomic_batch(true)
            .reports_duplicates(keyed)
            .detects_conflicts(keyed && (self.inner.config.conflict_policy.is_some() || compared));
        if keyed { capabilities } else { capabilities.read_back_note("mode `append` has no key to look rows up by") }
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        let (constraints, plans) = self.inner.io.run(move || inner.prepare()).await?;
        let _ = self.inner.key_constraints.set(constraints);
        if self.inner.opened.set(plans).is_err() {
            tracing::debug!("oracle sink opened again: the plans of the first open stay");
        }
        tracing::info!(
            tables = self.inner.plans.len(),
            mode = ?self.inner.config.mode,
            staging = self.inner.staging.is_some(),
            threads = self.inner.io.size(),
            "oracle sink ready"
        );
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let mut outcomes: Vec<Option<MessageOutcome>> = batch.iter().map(|_| None).collect();
        let mut groups: Groups = vec![Vec::new(); inner.plans.len()];
        for (i, e) in batch.iter().enumerate() {
            let p = inner.plan_for(e.subject());
            match row::map(
                e,
                &inner.write_plans()[p],
                inner.config.payload_mode,
                (stored_at, inner.config.metadata_scope),
            ) {
                Ok(r) => groups[p].push((i, r)),
                Err(err) => outcomes[i] = Some(MessageOutcome::Failed(err)),
            }
        }
        if groups.iter().any(|g| !g.is_empty()) {
            let shared = Arc::clone(inner);
            let written = inner
                .io
                .run(move || {
                    let empty = HashMap::new();
                    let ctx = Ctx {
                        mode: shared.config.mode,
                        conflict_policy: shared.config.conflict_policy,
                        plans: shared.write_plans(),
                        key_constraints: shared.key_constraints.get().unwrap_or(&empty),
                        staging: shared.staging.as_ref(),
                        json: shared.config.json_column_type,
                    };
                    let mut conn = shared.connect()?;
                    write::write_batch(&ctx, conn.as_mut(), &groups)
                })
                .await?;
            for (i, o) in written {
                outcomes[i] = Some(o);
            }
        }
        let outcomes: Vec<MessageOutcome> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| MessageOutcome::temporary("row was not written")))
            .collect();
        sinks_contract::sink::log_outcomes("oracle", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        self.inner
            .io
            .run(move || {
                let mut conn = inner.connect()?;
                conn.ping().map_err(|e| classify(&e, "health check"))
            })
            .await
    }

    async fn close(&self) -> Result<(), SinkError> {
        let inner = Arc::clone(&self.inner);
        self.inner
            .io
            .run(move || match inner.driver.get() {
                Some(d) => d.close().map_err(|e| classify(&e, "closing the session pool")),
                None => Ok(()),
            })
            .await
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        if !self.inner.config.mode.keyed() {
            return None;
        }
        Some(self)
    }
}

impl Destinations for OracleSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let inner = &self.inner;
        let plan = &inner.write_plans()[inner.plan_for(envelope.subject())];
        if plan.key.is_empty() {
            return None;
        }
        let r = row::map(
            envelope,
            plan,
            inner.config.payload_mode,
            (OffsetDateTime::now_utc(), inner.config.metadata_scope),
        )
        .ok()?;
        Some(DestinationRef::Row { table: plan.table.clone(), key: r.key.replace('\u{1f}', "/") })
    }
}

#[async_trait]
impl ReadBack for OracleSink {
    fn checks(&self) -> String {
        let inner = &self.inner;
        let payload = match inner.config.json_column_type {
            crate::JsonColumnType::Clob => "the SHA-256 of its payload CLOB",
            crate::JsonColumnType::Json => "its payload (JSON_SERIALIZE of the JSON column) by JSON value",
        };
        if inner.config.conflict_policy.is_some() {
            format!("row exists (bulk key lookup) and both its payload_sha256 column and {payload} match")
        } else {
            format!("row exists (bulk key lookup) and {payload} matches")
        }
    }

    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let mut groups: Groups = vec![Vec::new(); inner.plans.len()];
        for (i, e) in batch.iter().enumerate() {
            let p = inner.plan_for(e.subject());
            // A message the sink cannot map (no key, a payload the mode refuses) was never
            // written: it stays missing (reconcile then looks for it in the DLQ).
            if let Ok(r) = row::map(
                e,
                &inner.write_plans()[p],
                inner.config.payload_mode,
                (stored_at, inner.config.metadata_scope),
            ) {
                groups[p].push((i, r));
            }
        }
        let shared = Arc::clone(inner);
        let total = batch.len();
        inner.io.run(move || shared.reconcile(&groups, total)).await
    }
}
