//! [`NoSqlSink`]: writes one row per message to an Oracle NoSQL table through the official
//! SDK and reports per-message outcomes.
//!
//! A write goes through three steps:
//! 1. **prepare** (pure, `row.rs`): the row key, the event document and the payload
//!    fingerprint of each message; a message without the identity its key needs, with a
//!    payload the mode refuses, or over a size limit fails permanently here, alone;
//! 2. **order**: each message is keyed by its envelope's ordering key (from
//!    `delivery.ordering_key`) and by its row key: messages sharing either are written one
//!    after another, in input order, and one behind a temporary failure is held back (see
//!    `sinks_contract::ordering`). The row key is the destination's own requirement (one row,
//!    one writer at a time), not an order of its own;
//! 3. **put**: up to `max_concurrent_requests` puts in flight. A temporary failure is
//!    retried in place while the wait is short and the write's budget allows (the SDK does
//!    not retry throttling or server errors itself), else handed back with the wait it needs
//!    for a delayed redelivery.
//!
//! `skip_existing` and `fail_existing` put if absent with the existing row returned; the
//! stored row's payload fingerprint then tells a duplicate from a conflict. `replace` is a
//! plain put that also returns the previous row, so a redelivery of the same payload is still
//! reported as a duplicate and a changed one as an overwrite.
//!
//! `nats-sink reconcile` reads rows back with one `GET` per message (absolute
//! consistency), up to `max_concurrent_requests` in flight, each retried in place after a
//! temporary failure (throttling) like a put; `row::presence` compares what it finds.
//! Nothing is written.
//!
//! Start-up (`open`) builds the SDK handle, runs the `auto_create` DDL when asked, and checks
//! that the table exists, is active and has the configured columns with the right types: a
//! mismatch is a configuration error (exit 2), so a row the service refuses later is that
//! row's own problem, never a misconfiguration dead-lettering live traffic.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use oracle_nosql_rust_sdk::types::{Consistency, Durability as SdkDurability, MapValue, TableLimits, TableState};
use oracle_nosql_rust_sdk::{
    GetRequest, GetResult, GetTableRequest, Handle, HandleMode, NoSQLError, PutRequest, TableRequest,
};
use sinks_contract::existing;
use sinks_contract::ordering::OrderKey;
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, MessageOutcome, Presence, ReadBack,
    Sink, SinkError,
};
use sinks_toolkit::in_order;
use sinks_toolkit::retry::{Budget, InPlace};
use time::OffsetDateTime;
use tokio::sync::OnceCell;

use crate::config::{AuthMode, DeploymentMode, Durability, NoSqlSinkConfig};
use crate::error::{classify, classify_at_open};
use crate::row::{self, PreparedRow};

/// Delivers envelopes to an Oracle NoSQL table, one row per message.
#[derive(Debug, Clone)]
pub struct NoSqlSink {
    inner: Arc<Inner>,
}

struct Inner {
    config: NoSqlSinkConfig,
    table: String,
    handle: OnceCell<Handle>,
    retry: InPlace,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoSqlSink")
            .field("endpoint", &self.config.endpoint)
            .field("deployment_mode", &self.config.deployment_mode)
            .field("table", &self.table)
            .field("duplicate_policy", &self.config.duplicate_policy)
            .finish_non_exhaustive()
    }
}

/// The payload fingerprint of a stored row (`None`: a row this sink cannot compare).
type Stored = Option<String>;

/// What a put found.
enum Put {
    /// This put created (or replaced, with no previous row) the row.
    Written,
    /// The key was taken; the stored row's fingerprint when the service returned the row.
    Exists(Option<Stored>),
    /// A plain put replaced a previous row with this fingerprint.
    Replaced(Stored),
}

impl NoSqlSink {
    /// A sink for a validated config; the SDK handle is built at `open` (or first use).
    pub fn new(config: NoSqlSinkConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let retry = config.in_place();
        let table = config.qualified_table();
        Ok(Self { inner: Arc::new(Inner { config, table, handle: OnceCell::new(), retry }) })
    }

    /// The configuration in use.
    pub fn config(&self) -> &NoSqlSinkConfig {
        &self.inner.config
    }

    /// The statement `auto_create` runs.
    pub fn ddl(&self) -> Vec<String> {
        vec![self.inner.config.create_table_ddl()]
    }
}

#[async_trait]
impl Sink for NoSqlSink {
    fn name(&self) -> &str {
        "oracle_nosql"
    }

    fn capabilities(&self) -> Capabilities {
        let config = &self.inner.config;
        let basis = row::strategy_basis(config.key_strategy);
        let conditional = existing::conditional(config.duplicate_policy.on_existing(), basis);
        Capabilities::new().atomic_batch(false).reports_duplicates(conditional).detects_conflicts(conditional)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        let handle = inner.handle().await?;
        if inner.config.auto_create {
            inner.create_table(handle).await?;
        }
        let table = GetTableRequest::new(&inner.table)
            .timeout(&inner.timeout())
            .execute(handle)
            .await
            .map_err(|e| classify_at_open("get table", &e))?;
        if table.state() != TableState::Active {
            return Err(SinkError::config(format!("nosql table is not active (state {:?})", table.state())));
        }
        check_schema(&table.schema(), &inner.config).map_err(SinkError::config)?;
        tracing::info!(
            endpoint = %inner.config.endpoint,
            deployment_mode = inner.config.deployment_mode.as_str(),
            table = %inner.table,
            duplicate_policy = inner.config.duplicate_policy.as_str(),
            durability = inner.config.durability.as_str(),
            "nosql sink ready"
        );
        if inner.config.durability == Durability::OperatorConfirmed
            && inner.config.deployment_mode == DeploymentMode::Kvstore
        {
            // Nothing the sink can ask tells it the store's default; say so once.
            tracing::warn!(
                endpoint = %inner.config.endpoint,
                "nosql durability is operator_confirmed: puts ask for no durability and the sink cannot tell what \
                 the store commits before it answers (the proxy's default, COMMIT_NO_SYNC, can lose acknowledged \
                 puts when the store is killed); run the proxy with -kvDurability COMMIT_SYNC or use durability \
                 commit_sync"
            );
        }
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + budget;
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let prepare = |envelope: &Envelope| {
            row::prepare(envelope, &inner.config, stored_at)
                .map(|prepared| (OrderKey::of(&[b"nosql-row", prepared.key.as_bytes()]), prepared))
        };
        let write = |envelope, prepared| async move { inner.write_one(envelope, &prepared, deadline).await };
        let limit = inner.config.max_concurrent_requests;
        let outcomes = in_order::write_each("nosql row", batch, limit, prepare, write).await;
        sinks_contract::sink::log_outcomes("oracle_nosql", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        let handle = inner.handle().await?;
        GetTableRequest::new(&inner.table)
            .timeout(&inner.timeout())
            .execute(handle)
            .await
            .map(drop)
            .map_err(|e| classify("health check", &e))
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }
}

impl Destinations for NoSqlSink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        let key = row::row_key(envelope, &self.inner.config).ok()?;
        Some(DestinationRef::Row { table: self.inner.table.clone(), key })
    }
}

#[async_trait]
impl ReadBack for NoSqlSink {
    fn checks(&self) -> String {
        format!(
            "get of each row by primary key ({} in flight, absolute consistency): missing, or the event document's \
             payload_info.sha256 and the payload it holds (value, and payload_text when stored) compared with the \
             message's",
            self.inner.config.max_concurrent_requests
        )
    }

    /// One `GET` per envelope, up to `max_concurrent_requests` in flight, answers in input
    /// order. Reads only.
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let inner = &self.inner;
        let mut checks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let check: Pin<Box<dyn Future<Output = Result<Presence, SinkError>> + Send + '_>> = Box::pin(async move {
                // A message without the identity its key needs was never written.
                let Ok(key) = row::row_key(envelope, &inner.config) else { return Ok(Presence::Missing) };
                let stored = inner.read_row(&key).await?;
                Ok(row::presence(envelope, &inner.config, stored.row()))
            });
            checks.push(check);
        }
        futures::stream::iter(checks).buffered(inner.config.max_concurrent_requests.max(1)).try_collect().await
    }
}

impl Inner {
    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.config.request_timeout_seconds)
    }

    /// The SDK handle, built on first use. A handle that cannot be built (an unreadable OCI
    /// config file, no instance identity) is a configuration error.
    async fn handle(&self) -> Result<&Handle, SinkError> {
        self.handle
            .get_or_try_init(|| async {
                let config = &self.config;
                // Our own client: the SDK's default one logs request and response bodies
                // (payloads) at TRACE level.
                let client =
                    http_client(self.timeout()).map_err(|_| SinkError::config("nosql http client cannot be set up"))?;
                let mut builder = Handle::builder()
                    .endpoint(&config.endpoint_url())
                    .and_then(|b| b.timeout(self.timeout()))
                    .and_then(|b| b.reqwest_client(&client))
                    .map_err(|e| handle_error(&e))?;
                builder = match config.effective_auth_mode() {
                    AuthMode::StoreAccessToken => builder.mode(HandleMode::Onprem),
                    AuthMode::Cloudsim => builder.mode(HandleMode::Cloudsim),
                    AuthMode::OciConfigFile => {
                        let file = config.oci_config_file.clone().unwrap_or_else(|| "~/.oci/config".into());
                        builder.cloud_auth_from_file_with_profile(&file, &config.oci_profile)
                    }
                    AuthMode::InstancePrincipal => builder.cloud_auth_from_instance(),
                }
                .map_err(|e| handle_error(&e))?;
                if config.deployment_mode == DeploymentMode::Cloud {
                    // The file and instance providers switch the builder to the cloud; keep
                    // the configured endpoint.
                    builder = builder.endpoint(&config.endpoint_url()).map_err(|e| handle_error(&e))?;
                }
                if let Some(compartment) = &config.compartment_id {
                    builder = builder.compartment_id(compartment).map_err(|e| handle_error(&e))?;
                }
                builder.build().await.map_err(|e| handle_error(&e))
            })
            .await
    }

    /// Runs the `auto_create` DDL and waits until the table is active.
    async fn create_table(&self, handle: &Handle) -> Result<(), SinkError> {
        let config = &self.config;
        let mut request = TableRequest::new(&self.table).statement(&config.create_table_ddl()).timeout(&self.timeout());
        let limits;
        if config.deployment_mode != DeploymentMode::Kvstore {
            limits = TableLimits::provisioned(
                i32::try_from(config.read_units).unwrap_or(i32::MAX),
                i32::try_from(config.write_units).unwrap_or(i32::MAX),
                i32::try_from(config.storage_gb).unwrap_or(i32::MAX),
            );
            request = request.limits(&limits);
        }
        let mut result = request.execute(handle).await.map_err(|e| classify_at_open("create table", &e))?;
        result
            .wait_for_completion_ms(
                handle,
                config.table_timeout_ms,
                config.table_poll_interval_ms.min(config.table_timeout_ms),
            )
            .await
            .map_err(|e| classify_at_open("create table", &e))?;
        tracing::info!(table = %self.table, "nosql table ready (auto_create)");
        Ok(())
    }

    /// One message, retried in place after temporary failures while the wait is short
    /// (≤ `retry_max_backoff_ms`), the attempts last (`max_retries`) and the write's budget
    /// allows; otherwise the failure goes back with the wait it needs as `retry_after`
    /// (`sinks_toolkit::retry::InPlace`).
    async fn write_one(&self, envelope: &Envelope, prepared: &PreparedRow, deadline: Instant) -> MessageOutcome {
        self.retry.write("nosql write", envelope, deadline, |_| self.attempt(envelope, prepared)).await
    }

    /// One put, and what the row it found (or replaced) means for this message
    /// (`sinks_contract::existing`).
    async fn attempt(&self, envelope: &Envelope, prepared: &PreparedRow) -> Result<MessageOutcome, SinkError> {
        let policy = self.config.duplicate_policy.on_existing();
        let basis = row::key_basis(envelope, self.config.key_strategy);
        // A replacing policy puts only if absent under stream-sequence keys: it must not
        // overwrite an earlier event before it was compared.
        let found = match self.put(prepared, existing::conditional(policy, basis)).await? {
            Put::Written => return Ok(MessageOutcome::Committed),
            Put::Replaced(previous) => previous,
            Put::Exists(Some(row)) => row,
            Put::Exists(None) => match self.get(&prepared.key).await? {
                Some(row) => row,
                // The row that blocked the put is gone again (deleted meanwhile).
                None => return Err(SinkError::temporary("nosql row existed and vanished; retrying")),
            },
        };
        let stored = existing::Stored::compare(found.as_deref(), &prepared.fingerprint);
        Ok(existing::decide(policy, envelope, basis, stored, "nosql row key"))
    }

    /// Puts the row: if absent when `conditional`, else plainly; the previous or existing
    /// row is asked back either way.
    async fn put(&self, prepared: &PreparedRow, conditional: bool) -> Result<Put, SinkError> {
        let handle = self.handle().await?;
        let value = prepared.to_map(&self.config).map_err(|e| SinkError::permanent(e.to_string()))?;
        let mut request = PutRequest::new(&self.table).value(value).return_row(true).timeout(&self.timeout());
        if conditional {
            request = request.if_absent();
        }
        if self.config.durability == Durability::CommitSync {
            request = request.durability(SdkDurability::COMMIT_SYNC);
        }
        let result = request.execute(handle).await.map_err(|e| classify("put", &e))?;
        let existing = result.existing_value().map(|row| row::stored_fingerprint(row, &self.config));
        Ok(match (result.version().is_some(), existing) {
            (true, Some(previous)) if !conditional => Put::Replaced(previous),
            (true, _) => Put::Written,
            (false, existing) if conditional => Put::Exists(existing),
            // A plain put that reports no new version did not happen.
            (false, _) => return Err(SinkError::temporary("nosql put returned no version")),
        })
    }

    /// The answer to a get of `key` (its row, if any), read with absolute consistency; a
    /// temporary failure (throttling, timeout) is retried in place after the configured
    /// backoff (or the service's wait), up to `max_retries` times (reconcile has no write
    /// budget to keep: `Budget::Unbounded`).
    async fn read_row(&self, key: &str) -> Result<GetResult, SinkError> {
        let handle = self.handle().await?;
        let get = |_| async move {
            GetRequest::new(&self.table)
                .key(MapValue::new().str(&self.config.key_field, key))
                .consistency(Consistency::Absolute)
                .timeout(&self.timeout())
                .execute(handle)
                .await
                .map_err(|e| classify("get", &e))
        };
        self.retry.run("nosql read-back", Budget::Unbounded, get).await
    }

    /// The fingerprint of the stored row of `key` (`None`: no row), read with absolute
    /// consistency.
    async fn get(&self, key: &str) -> Result<Option<Stored>, SinkError> {
        let handle = self.handle().await?;
        let result = GetRequest::new(&self.table)
            .key(MapValue::new().str(&self.config.key_field, key))
            .consistency(Consistency::Absolute)
            .timeout(&self.timeout())
            .execute(handle)
            .await
            .map_err(|e| classify("get", &e))?;
        Ok(result.row().map(|row| row::stored_fingerprint(row, &self.config)))
    }
}

/// The HTTP client handed to the SDK: its timeouts, and no verbose connection logging (the
/// SDK's default client logs request and response bodies, i.e. payloads, at TRACE level).
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest012::Client, reqwest012::Error> {
    reqwest012::Client::builder().timeout(timeout).connect_timeout(timeout).connection_verbose(false).build()
}

fn handle_error(err: &NoSQLError) -> SinkError {
    SinkError::config(format!("nosql client cannot be set up ({:?})", err.code)).with_error_type("client_setup")
}

/// Checks the table's schema document (`GetTable`) against the configured columns.
fn check_schema(schema: &str, config: &NoSqlSinkConfig) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Schema {
        #[serde(default)]
        fields: Vec<Field>,
        #[serde(default, rename = "primaryKey")]
        primary_key: Vec<String>,
    }
    #[derive(serde::Deserialize)]
    struct Field {
        name: String,
        #[serde(rename = "type")]
        kind: String,
    }
    if schema.trim().is_empty() {
        // Some services do not return the schema; the puts will tell.
        return Ok(());
    }
    let parsed: Schema = serde_json::from_str(schema).map_err(|_| "nosql table schema cannot be read".to_owned())?;
    let kind_of = |name: &str| {
        parsed.fields.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| f.kind.to_ascii_uppercase())
    };
    let mut problems = Vec::new();
    for (field, column, wanted) in [
        ("sink.key_field", &config.key_field, "STRING"),
        ("sink.value_field", &config.value_field, "JSON"),
        ("sink.stored_at_field", &config.stored_at_field, "LONG"),
    ] {
        match kind_of(column) {
            Some(kind) if kind == wanted => {}
            Some(kind) => problems.push(format!("column `{column}` ({field}) is {kind}, not {wanted}")),
            None => problems.push(format!("column `{column}` ({field}) is missing")),
        }
    }
    let key_ok = parsed.primary_key.len() == 1 && parsed.primary_key[0].eq_ignore_ascii_case(&config.key_field);
    if !key_ok {
        problems.push(format!("the primary key must be exactly `{}` (sink.key_field)", config.key_field));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("nosql table `{}` does not match the sink: {}", config.qualified_table(), problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE_SCHEMA: &str = r#"{"json_version":2,"type":"table","name":"t","id":"13","fields":[
        {"name":"sink_key","type":"STRING","nullable":false},{"name":"event_json","type":"JSON","nullable":true},
        {"name":"stored_at_epoch_ns","type":"LONG","nullable":true}],"primaryKey":["sink_key"],"shardKey":["sink_key"]}"#;

    #[test]
    fn the_reference_table_matches() {
        let config = NoSqlSinkConfig::new("h:1", "t");
        assert_eq!(check_schema(LIVE_SCHEMA, &config), Ok(()));
        assert_eq!(check_schema("", &config), Ok(()));
    }

    #[test]
    fn mismatched_tables_are_named() {
        let config = NoSqlSinkConfig { value_field: "payload".into(), ..NoSqlSinkConfig::new("h:1", "t") };
        let err = check_schema(LIVE_SCHEMA, &config).unwrap_err();
        assert!(err.contains("`payload` (sink.value_field) is missing"), "{err}");
        let other_key = LIVE_SCHEMA.replace(r#""primaryKey":["sink_key"]"#, r#""primaryKey":["stored_at_epoch_ns"]"#);
        let err = check_schema(&other_key, &NoSqlSinkConfig::new("h:1", "t")).unwrap_err();
        assert!(err.contains("primary key"), "{err}");
        let wrong_type = LIVE_SCHEMA.replace(r#""type":"JSON""#, r#""type":"STRING""#);
        assert!(check_schema(&wrong_type, &NoSqlSinkConfig::new("h:1", "t")).unwrap_err().contains("not JSON"));
    }
}
