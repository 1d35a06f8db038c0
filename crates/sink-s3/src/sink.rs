//! [`S3Sink`]: writes one object per message to an S3-compatible bucket and reports
//! per-message outcomes.
//!
//! A write goes through three steps:
//! 1. **prepare** (pure, `object.rs`): the key, body, metadata and fingerprint of each
//!    message; a message without the identity its key needs, with a payload the mode refuses,
//!    or over a size limit fails permanently here, alone;
//! 2. **order**: each message is keyed by its envelope's ordering key (from
//!    `delivery.ordering_key`) and by its object key: messages sharing either are written one
//!    after another, in input order, and one behind a temporary failure is held back (see
//!    `sinks_contract::ordering`). The object key is the destination's own requirement (one
//!    object, one writer at a time), not an order of its own;
//! 3. **put**: up to `max_concurrent_requests` puts in flight. A temporary failure is
//!    retried in place while the wait is short and the write's budget allows, else handed
//!    back with the wait it needs for a delayed redelivery.
//!
//! A put is a conditional create (`If-None-Match: *`) unless `duplicate_policy = "replace"`.
//! "Already exists" is then resolved per policy, with the content check comparing payload
//! fingerprints (see `S3SinkConfig::content_check`). Bodies of `multipart_threshold_bytes`
//! or more go as multipart uploads: straight to the key with `replace`; otherwise to a
//! staging key under `_nats-sinks-staging/`, then copied to the key with a conditional
//! `CopyObject` and the staging object deleted (a crash can leave a staging object behind;
//! a lifecycle rule on that prefix removes them).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{
    Attribute, AttributeValue, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions,
    PutOptions, PutPayload, WriteMultipart,
};
use sinks_contract::existing::{self, Stored};
use sinks_contract::ordering::OrderKey;
use sinks_contract::{
    BatchResult, Capabilities, ConfigError, DestinationRef, Destinations, Envelope, Holding, MessageOutcome, Presence,
    ReadBack, Sink, SinkError,
};
use sinks_toolkit::batch::{BatchWriter, Settings};
use sinks_toolkit::in_order;
use sinks_toolkit::retry::InPlace;
use time::OffsetDateTime;

use crate::batch::S3Log;
use crate::config::S3SinkConfig;
use crate::error::{Failure, classify, classify_at_open, failure_of};
use crate::object::{self, FINGERPRINT_METADATA, ObjectBody, Prepared};
use crate::store::{Client, S3Credentials};

/// Key prefix (under `prefix`) of multipart uploads waiting for their conditional copy.
pub(crate) const STAGING_PREFIX: &str = "_nats-sinks-staging";
/// Key prefix (under `prefix`) listed by the start-up and health probes (holds nothing).
const PROBE_PREFIX: &str = "_nats-sinks-probe";
/// Parts of one multipart upload in flight at once.
const MULTIPART_CONCURRENCY: usize = 4;
/// Largest stored object read back for a content check (decompressed).
const MAX_CHECK_BYTES: u64 = 1024 * 1024 * 1024;
/// Delivers envelopes to an S3-compatible bucket, one object per message.
#[derive(Debug, Clone)]
pub struct S3Sink {
    inner: Arc<Inner>,
}

struct Inner {
    config: S3SinkConfig,
    client: Arc<Client>,
    retry: InPlace,
    /// The batch mode's writer (`mode: batch`).
    batch: Option<BatchWriter<S3Log>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Sink")
            .field("bucket", &self.config.bucket)
            .field("prefix", &self.config.prefix)
            .field("endpoint_url", &self.config.endpoint_url)
            .field("duplicate_policy", &self.config.duplicate_policy)
            .finish_non_exhaustive()
    }
}

/// What a put found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Put {
    /// This put created (or replaced) the object.
    Written,
    /// A conditional create found the key taken.
    Exists,
}

impl S3Sink {
    /// A sink for a validated config; credentials come from `credential_mode` at `open`.
    pub fn new(config: S3SinkConfig) -> Result<Self, ConfigError> {
        Self::build(config, None)
    }

    /// A sink with credentials supplied by the embedding program (they replace
    /// `credential_mode`). Never printed.
    pub fn with_credentials(config: S3SinkConfig, credentials: S3Credentials) -> Result<Self, ConfigError> {
        Self::build(config, Some(credentials))
    }

    fn build(config: S3SinkConfig, credentials: Option<S3Credentials>) -> Result<Self, ConfigError> {
        config.validate()?;
        let retry = config.in_place();
        let client = Arc::new(Client::new(config.clone(), credentials));
        let batch = config.batch_config().map(|batch| {
            let settings = Settings {
                batch,
                payload_mode: config.payload_mode,
                policy: config.duplicate_policy.on_existing(),
                content_check: config.content_check,
                max_row_bytes: config.max_object_bytes,
                sink: "s3",
                record: "batch object",
            };
            BatchWriter::new(S3Log::new(Arc::clone(&client)), settings)
        });
        Ok(Self { inner: Arc::new(Inner { config, client, retry, batch }) })
    }

    /// The configuration in use.
    pub fn config(&self) -> &S3SinkConfig {
        &self.inner.config
    }
}

#[async_trait]
impl Sink for S3Sink {
    fn name(&self) -> &str {
        "s3"
    }

    fn capabilities(&self) -> Capabilities {
        if self.inner.batch.is_some() {
            return Capabilities::new()
                .atomic_batch(false)
                .reports_duplicates(true)
                .detects_conflicts(self.inner.config.content_check);
        }
        let config = &self.inner.config;
        let conditional =
            existing::conditional(config.duplicate_policy.on_existing(), object::strategy_basis(config.key_strategy));
        Capabilities::new()
            .atomic_batch(false)
            .reports_duplicates(conditional)
            .detects_conflicts(conditional && self.inner.config.content_check)
    }

    async fn open(&self) -> Result<(), SinkError> {
        let inner = &self.inner;
        inner.probe(classify_at_open).await?;
        if let Some(writer) = &inner.batch {
            writer.open().await?;
        }
        tracing::info!(
            bucket = %inner.config.bucket,
            prefix = inner.config.prefix.as_deref().unwrap_or(""),
            duplicate_policy = inner.config.duplicate_policy.as_str(),
            "s3 sink ready"
        );
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(writer) = &self.inner.batch {
            let outcomes = writer.write(batch).await;
            sinks_contract::sink::log_outcomes("s3", &outcomes);
            return Ok(outcomes);
        }
        let deadline = Instant::now() + budget;
        let inner = &self.inner;
        let stored_at = OffsetDateTime::now_utc();
        let prepare = |envelope: &Envelope| {
            object::prepare(envelope, &inner.config, stored_at)
                .map(|prepared| (OrderKey::of(&[b"s3-object", prepared.primary.key.as_bytes()]), prepared))
        };
        let write = |envelope, prepared| async move { inner.write_one(envelope, &prepared, deadline).await };
        let limit = inner.config.max_concurrent_requests;
        let outcomes = in_order::write_each("s3 object", batch, limit, prepare, write).await;
        sinks_contract::sink::log_outcomes("s3", &outcomes);
        Ok(outcomes)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        self.inner.probe(|e| classify("health check", e)).await
    }

    async fn close(&self) -> Result<(), SinkError> {
        if let Some(writer) = &self.inner.batch {
            writer.discard_open();
        }
        Ok(())
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        Some(self)
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        Some(self)
    }

    fn holding(&self) -> Option<&dyn Holding> {
        self.inner.batch.as_ref().map(|writer| writer as &dyn Holding)
    }
}

impl Destinations for S3Sink {
    fn destination(&self, envelope: &Envelope, _outcome: &MessageOutcome) -> Option<DestinationRef> {
        if let Some(writer) = &self.inner.batch {
            return writer.destination(envelope);
        }
        let key = crate::object::object_key(envelope, &self.inner.config).ok()?;
        Some(DestinationRef::Object { bucket: self.inner.config.bucket.clone(), key })
    }
}

#[async_trait]
impl ReadBack for S3Sink {
    fn checks(&self) -> String {
        if self.inner.batch.is_some() {
            return String::from(
                "the partition's manifests name the object holding the stream sequence, and that object's row carries the payload's SHA-256",
            );
        }
        format!(
            "HEAD of each object key ({} in parallel): missing, or its `{FINGERPRINT_METADATA}` metadata compared \
             with the payload's SHA-256 (objects without it are downloaded and their payload fingerprint compared)",
            self.inner.config.max_concurrent_requests
        )
    }

    /// One `HEAD` per envelope, up to `max_concurrent_requests` in flight, in input order.
    /// Reads only; a missing bucket was already refused by [`Sink::open`].
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        if let Some(writer) = &self.inner.batch {
            return writer.reconcile(batch).await;
        }
        let inner = &self.inner;
        let mut checks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let check: std::pin::Pin<Box<dyn Future<Output = Result<Presence, SinkError>> + Send + '_>> =
                Box::pin(inner.presence(envelope));
            checks.push(check);
        }
        futures::stream::iter(checks).buffered(inner.config.max_concurrent_requests.max(1)).try_collect().await
    }
}

impl Inner {
    /// The client (see [`Client::get`]).
    fn store(&self) -> Result<&AmazonS3, SinkError> {
        self.client.get()
    }

    fn path(&self, relative: &str) -> Result<Path, SinkError> {
        Path::parse(relative).map_err(|_| SinkError::permanent("s3 object key is not a valid path"))
    }

    /// `[prefix/]name`.
    fn under_prefix(&self, name: &str) -> String {
        self.client.under_prefix(name)
    }

    /// Lists an always-empty prefix: proves the endpoint answers, the credentials are
    /// accepted and the bucket exists, without writing anything.
    async fn probe(&self, classify: impl Fn(&object_store::Error) -> SinkError) -> Result<(), SinkError> {
        let store = self.store()?;
        let prefix = self.path(&self.under_prefix(PROBE_PREFIX))?;
        match store.list(Some(&prefix)).next().await {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(classify(&e)),
        }
    }

    /// One message, retried in place after temporary failures while the wait is short
    /// (≤ `retry_max_backoff_ms`), the attempts last (`max_retries`) and the write's budget
    /// allows; otherwise the failure goes back with the wait it needs as `retry_after`
    /// (`sinks_toolkit::retry::InPlace`).
    async fn write_one(&self, envelope: &Envelope, prepared: &Prepared, deadline: Instant) -> MessageOutcome {
        self.retry.write("s3 write", envelope, deadline, |_| self.attempt(envelope, prepared)).await
    }

    async fn attempt(&self, envelope: &Envelope, prepared: &Prepared) -> Result<MessageOutcome, SinkError> {
        let policy = self.config.duplicate_policy.on_existing();
        let basis = object::key_basis(envelope, self.config.key_strategy);
        // A replacing policy writes conditionally under stream-sequence keys: it must not
        // overwrite an earlier event before it was compared.
        let conditional = existing::conditional(policy, basis);
        let outcome = match self.put(&prepared.primary, conditional).await? {
            Put::Written => MessageOutcome::Committed,
            Put::Exists => {
                let stored = self.stored(prepared).await?;
                existing::decide(policy, envelope, basis, stored, "s3 object key")
            }
        };
        // The sidecar follows only a primary that is (now or already) this message's.
        if let Some(sidecar) = &prepared.sidecar
            && matches!(outcome, MessageOutcome::Committed | MessageOutcome::Duplicate)
        {
            self.put(sidecar, conditional).await?;
        }
        Ok(outcome)
    }

    /// What the existing object holds for this message: compared by payload fingerprint
    /// with `content_check`, else not compared.
    async fn stored(&self, prepared: &Prepared) -> Result<Stored, SinkError> {
        if !self.config.content_check {
            return Ok(Stored::Unchecked);
        }
        let stored = self.stored_fingerprint(&prepared.primary.key).await?;
        Ok(existing::Stored::compare(stored.as_deref(), &prepared.fingerprint))
    }

    /// Whether `envelope`'s object is stored with the same payload fingerprint (reconcile).
    /// A message the sink cannot derive a key for was never written: missing.
    async fn presence(&self, envelope: &Envelope) -> Result<Presence, SinkError> {
        let Ok(key) = object::object_key(envelope, &self.config) else { return Ok(Presence::Missing) };
        let store = self.store()?;
        let path = self.path(&key)?;
        let head = match store.get_opts(&path, GetOptions { head: true, ..Default::default() }).await {
            Ok(head) => head,
            Err(e) if matches!(failure_of(&e), Failure::NotFound) => return Ok(Presence::Missing),
            Err(e) => return Err(classify("head", &e)),
        };
        let expected = object::sha256_hex(envelope.payload());
        if let Some(value) = head.attributes.get(&Attribute::Metadata(FINGERPRINT_METADATA.into())) {
            return Ok(if value.as_ref() == expected { Presence::Equal } else { Presence::Different });
        }
        // No fingerprint metadata (content_check off, `replace`, or rewritten behind the
        // sink's back): the body decides.
        let limit = self.config.max_object_bytes.saturating_mul(4).min(MAX_CHECK_BYTES);
        let stored = if head.meta.size > limit {
            None
        } else {
            let body = match store.get(&path).await {
                Ok(got) => got.bytes().await.map_err(|e| classify("get", &e))?,
                // Deleted between the HEAD and the GET.
                Err(e) if matches!(failure_of(&e), Failure::NotFound) => return Ok(Presence::Missing),
                Err(e) => return Err(classify("get", &e)),
            };
            object::decompress(&body, MAX_CHECK_BYTES)
                .and_then(|plain| object::stored_fingerprint(&plain, self.config.object_format))
        };
        if stored.is_none() {
            tracing::debug!(
                stream_sequence = envelope.jetstream().stream_sequence,
                size = head.meta.size,
                "s3 object holds content this sink cannot compare"
            );
        }
        Ok(if stored.as_deref() == Some(expected.as_str()) { Presence::Equal } else { Presence::Different })
    }

    /// The payload fingerprint of the stored object: its metadata, else read from its body.
    /// `None` when the object is not one this sink can compare.
    async fn stored_fingerprint(&self, key: &str) -> Result<Option<String>, SinkError> {
        let store = self.store()?;
        let path = self.path(key)?;
        let existing = |e: &object_store::Error| match failure_of(e) {
            // A conditional create lost to a write that is not visible yet.
            Failure::NotFound => SinkError::temporary("s3 object exists but cannot be read yet (concurrent write)"),
            _ => classify("head", e),
        };
        let head =
            store.get_opts(&path, GetOptions { head: true, ..Default::default() }).await.map_err(|e| existing(&e))?;
        if let Some(value) = head.attributes.get(&Attribute::Metadata(FINGERPRINT_METADATA.into())) {
            return Ok(Some(value.as_ref().to_owned()));
        }
        let limit = self.config.max_object_bytes.saturating_mul(4).min(MAX_CHECK_BYTES);
        if head.meta.size > limit {
            return Ok(None);
        }
        let body = store.get(&path).await.map_err(|e| existing(&e))?.bytes().await.map_err(|e| classify("get", &e))?;
        Ok(object::decompress(&body, MAX_CHECK_BYTES)
            .and_then(|plain| object::stored_fingerprint(&plain, self.config.object_format)))
    }

    fn attributes(object: &ObjectBody, content_type: &str) -> Attributes {
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, AttributeValue::from(content_type.to_owned()));
        if let Some(encoding) = object.content_encoding {
            attributes.insert(Attribute::ContentEncoding, AttributeValue::from(encoding));
        }
        for (name, value) in &object.metadata {
            attributes.insert(Attribute::Metadata(name.clone().into()), AttributeValue::from(value.clone()));
        }
        attributes
    }

    /// Puts `object`, as a conditional create when `conditional`.
    async fn put(&self, object: &ObjectBody, conditional: bool) -> Result<Put, SinkError> {
        let store = self.store()?;
        let path = self.path(&object.key)?;
        let attributes = Self::attributes(object, &self.config.content_type);
        if object.body.len() as u64 >= self.config.multipart_threshold_bytes {
            return self.put_multipart(store, &path, object, attributes, conditional).await;
        }
        let mode = if conditional { PutMode::Create } else { PutMode::Overwrite };
        let options = PutOptions { mode, attributes, ..Default::default() };
        match store.put_opts(&path, PutPayload::from_bytes(object.body.clone()), options).await {
            Ok(_) => Ok(Put::Written),
            Err(object_store::Error::AlreadyExists { .. }) if conditional => Ok(Put::Exists),
            Err(e) => Err(classify("put", &e)),
        }
    }

    async fn put_multipart(
        &self,
        store: &AmazonS3,
        path: &Path,
        object: &ObjectBody,
        attributes: Attributes,
        conditional: bool,
    ) -> Result<Put, SinkError> {
        if !conditional {
            self.upload(store, path, &object.body, attributes).await?;
            return Ok(Put::Written);
        }
        let staging_name = format!(
            "{STAGING_PREFIX}/{}-{:016x}",
            &object::sha256_hex(object.key.as_bytes())[..32],
            rand::random::<u64>()
        );
        let staging = self.path(&self.under_prefix(&staging_name))?;
        self.upload(store, &staging, &object.body, attributes).await?;
        let copied = store.copy_if_not_exists(&staging, path).await;
        if let Err(e) = store.delete(&staging).await {
            tracing::warn!(error_type = classify("delete", &e).error_type(), "s3 staging object not deleted");
        }
        match copied {
            Ok(()) => Ok(Put::Written),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Put::Exists),
            Err(e) => Err(classify("copy", &e)),
        }
    }

    /// A multipart upload of `body` to `path` (aborted on failure).
    async fn upload(
        &self,
        store: &AmazonS3,
        path: &Path,
        body: &Bytes,
        attributes: Attributes,
    ) -> Result<(), SinkError> {
        let upload = store
            .put_multipart_opts(path, PutMultipartOptions::from(attributes))
            .await
            .map_err(|e| classify("multipart start", &e))?;
        let part = usize::try_from(self.config.multipart_part_bytes).unwrap_or(usize::MAX);
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
        for chunk in body.chunks(part) {
            if let Err(e) = writer.wait_for_capacity(MULTIPART_CONCURRENCY).await {
                let _ = writer.abort().await;
                return Err(classify("multipart part", &e));
            }
            writer.write(chunk);
        }
        writer.finish().await.map(drop).map_err(|e| classify("multipart complete", &e))
    }
}
