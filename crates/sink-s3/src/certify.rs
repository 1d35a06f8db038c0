//! The S3 sink's certification harness (feature `certify`): fresh buckets on a running
//! SeaweedFS server, read back by listing and downloading every object.
//!
//! The harness is given the server's S3 endpoint, its filer URL (buckets are created and
//! deleted as filer folders, since the S3 client has no bucket API) and an identity; tests
//! and `cargo xtask certify` get them from `sinks_testkit::shared_s3()`. Every fixture gets
//! its own uniquely named bucket, deleted when the fixture is dropped.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::value::RawValue;
use sinks_certify::{CrashTarget, Fixture, Harness, Record, Records};
use sinks_contract::{Envelope, Sink};

use crate::config::S3SinkConfig;
use crate::object;
use crate::sink::{S3Sink, STAGING_PREFIX};
use crate::store::{self, S3Credentials};

/// Environment variable names the crash-certification config refers to.
const CRASH_KEY_ENV: &str = "NATS_SINKS_CERT_S3_ACCESS_KEY_ID";
const CRASH_SECRET_ENV: &str = "NATS_SINKS_CERT_S3_SECRET_ACCESS_KEY";

/// Certifies the S3 sink against one running SeaweedFS server.
#[derive(Clone)]
pub struct S3Harness {
    endpoint: String,
    filer: String,
    credentials: S3Credentials,
}

impl std::fmt::Debug for S3Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Harness")
            .field("endpoint", &self.endpoint)
            .field("filer", &self.filer)
            .finish_non_exhaustive()
    }
}

/// A bucket made for one test; deleted (with its objects) on drop.
#[derive(Debug)]
pub struct TestBucket {
    name: String,
    filer: String,
}

impl TestBucket {
    /// The bucket name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestBucket {
    fn drop(&mut self) {
        let url = format!("{}/buckets/{}/?recursive=true&ignoreRecursiveError=true", self.filer, self.name);
        // Drop may run inside a runtime: delete from a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async { http().delete(&url).send().await.ok() })
        })
        .join();
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap_or_default()
}

impl S3Harness {
    /// A harness for the S3 `endpoint` of a SeaweedFS server whose filer is at `filer`, with
    /// an identity allowed to do everything.
    pub fn new(endpoint: impl Into<String>, filer: impl Into<String>, access_key_id: &str, secret: &str) -> Self {
        Self {
            endpoint: endpoint.into(),
            filer: filer.into(),
            credentials: S3Credentials {
                access_key_id: access_key_id.to_owned(),
                secret_access_key: secret.to_owned(),
                session_token: None,
            },
        }
    }

    /// The S3 endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The identity's credentials.
    pub fn credentials(&self) -> S3Credentials {
        self.credentials.clone()
    }

    /// Creates a new, uniquely named bucket.
    pub async fn bucket(&self) -> Result<TestBucket, String> {
        let n: u64 = rand::random();
        let name = format!("t-{}-{n:016x}", std::process::id());
        let url = format!("{}/buckets/{name}/?op=mkdir", self.filer);
        let response = http().post(&url).send().await.map_err(|e| format!("create bucket {name}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("create bucket {name}: filer answered {}", response.status()));
        }
        Ok(TestBucket { name, filer: self.filer.clone() })
    }

    /// The default configuration for `bucket` on this server (plain http to loopback).
    pub fn config(&self, bucket: &TestBucket) -> S3SinkConfig {
        let mut config = S3SinkConfig::new(bucket.name());
        config.endpoint_url = Some(self.endpoint.clone());
        config.allow_http_for_local_testing = true;
        config.region_name = Some("us-east-1".into());
        config
    }

    /// A sink for `config` with this harness's credentials (not opened).
    pub fn sink(&self, config: S3SinkConfig) -> Result<S3Sink, String> {
        S3Sink::with_credentials(config, self.credentials()).map_err(|e| e.to_string())
    }

    /// A reader of every object `config`'s sink writes to `bucket` (takes ownership of the
    /// bucket: it is deleted when the reader is dropped).
    pub fn read_back(&self, config: &S3SinkConfig, bucket: TestBucket) -> Result<BucketReadBack, String> {
        let store = store::build(config, Some(&self.credentials)).map_err(|e| e.display_chain())?;
        Ok(BucketReadBack { store: Arc::new(store), config: config.clone(), _bucket: bucket })
    }

    async fn fixture(&self, adjust: impl FnOnce(&mut S3SinkConfig)) -> Result<Fixture, String> {
        let bucket = self.bucket().await?;
        let mut config = self.config(&bucket);
        adjust(&mut config);
        let sink = self.sink(config.clone())?;
        sink.open().await.map_err(|e| e.display_chain())?;
        let read_back = self.read_back(&config, bucket)?;
        Ok(Fixture { sink: Arc::new(sink), records: Box::new(read_back) })
    }
}

/// Reads a bucket without going through the sink.
#[derive(Debug)]
pub struct BucketReadBack {
    store: Arc<AmazonS3>,
    config: S3SinkConfig,
    _bucket: TestBucket,
}

impl BucketReadBack {
    /// Every object key in the bucket, sidecars and staging objects included, sorted.
    pub async fn keys(&self) -> Result<Vec<String>, String> {
        let listed: Vec<_> = self.store.list(None).try_collect().await.map_err(|e| format!("list failed: {e}"))?;
        let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        Ok(keys)
    }

    /// The body of `key`, decompressed.
    pub async fn body(&self, key: &str) -> Result<Vec<u8>, String> {
        let bytes = self.raw(key).await?;
        object::decompress(&bytes, u64::MAX).ok_or_else(|| "stored gzip cannot be decoded".to_owned())
    }

    /// The body of `key` as stored.
    pub async fn raw(&self, key: &str) -> Result<Bytes, String> {
        let path = Path::parse(key).map_err(|e| e.to_string())?;
        let get = self.store.get(&path).await.map_err(|e| format!("get {key} failed: {e}"))?;
        get.bytes().await.map_err(|e| format!("get {key} failed: {e}"))
    }

    /// Deletes `key` (to simulate a crash between two puts).
    pub async fn delete(&self, key: &str) -> Result<(), String> {
        let path = Path::parse(key).map_err(|e| e.to_string())?;
        self.store.delete(&path).await.map_err(|e| format!("delete failed: {e}"))
    }

    /// Overwrites `key` with `body` and no user metadata: an edit behind the sink's back.
    pub async fn overwrite(&self, key: &str, body: Vec<u8>) -> Result<(), String> {
        let path = Path::parse(key).map_err(|e| e.to_string())?;
        self.store.put(&path, body.into()).await.map(drop).map_err(|e| format!("put failed: {e}"))
    }

    /// The user metadata of `key`.
    pub async fn metadata(&self, key: &str) -> Result<Vec<(String, String)>, String> {
        let path = Path::parse(key).map_err(|e| e.to_string())?;
        let options = object_store::GetOptions { head: true, ..Default::default() };
        let head = self.store.get_opts(&path, options).await.map_err(|e| format!("head failed: {e}"))?;
        let mut out: Vec<(String, String)> = head
            .attributes
            .iter()
            .filter_map(|(k, v)| match k {
                object_store::Attribute::Metadata(name) => Some((name.to_string(), v.as_ref().to_owned())),
                _ => None,
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Keys of primary objects (not sidecars, not staging objects).
    pub async fn object_keys(&self) -> Result<Vec<String>, String> {
        let staging = match &self.config.prefix {
            Some(p) => format!("{p}/{STAGING_PREFIX}/"),
            None => format!("{STAGING_PREFIX}/"),
        };
        Ok(self
            .keys()
            .await?
            .into_iter()
            .filter(|k| !k.starts_with(&staging))
            .filter(|k| {
                self.config.metadata_mode != crate::MetadataMode::Sidecar || !k.ends_with(&self.config.sidecar_suffix)
            })
            .collect())
    }
}

#[derive(serde::Deserialize)]
struct StoredObject<'a> {
    stream: String,
    /// Only in a later epoch of the stream.
    #[serde(default)]
    stream_epoch: Option<String>,
    stream_sequence: u64,
    #[serde(borrow)]
    payload: &'a RawValue,
    payload_info: StoredInfo,
}

#[derive(serde::Deserialize)]
struct StoredInfo {
    wrapped: bool,
}

/// `(stream-sequence key, original payload)` of an envelope-format object body: the key of
/// its keyed stream (`{stream}.{epoch}` when it has a `stream_epoch`).
pub fn decode_object(body: &[u8]) -> Result<Record, String> {
    let doc: StoredObject<'_> = serde_json::from_slice(body).map_err(|e| format!("not an object document: {e}"))?;
    let stream = match &doc.stream_epoch {
        Some(epoch) => format!("{}.{epoch}", doc.stream),
        None => doc.stream,
    };
    let key = format!("stream-sequence:{stream}:{}", doc.stream_sequence);
    let payload = if doc.payload_info.wrapped {
        Bytes::from(sinks_contract::payload::decode_stored(doc.payload.get()))
    } else {
        Bytes::copy_from_slice(doc.payload.get().as_bytes())
    };
    Ok((key, payload))
}

impl BucketReadBack {
    /// The client of the bucket (for tests that write behind the sink's back).
    pub fn store(&self) -> &AmazonS3 {
        &self.store
    }

    /// Keys of batch objects (the manifests under `_nats-sinks/` left out).
    pub async fn batch_object_keys(&self) -> Result<Vec<String>, String> {
        let manifests = format!("/{}/", sinks_toolkit::batch::naming::MANIFEST_DIR);
        Ok(self.keys().await?.into_iter().filter(|k| !k.contains(&manifests)).collect())
    }

    /// Keys of the manifests of batch objects.
    pub async fn manifest_keys(&self) -> Result<Vec<String>, String> {
        let manifests = format!("/{}/", sinks_toolkit::batch::naming::MANIFEST_DIR);
        Ok(self.keys().await?.into_iter().filter(|k| k.contains(&manifests)).collect())
    }

    /// The object `key` downloaded into a temporary file.
    pub async fn download(&self, key: &str) -> Result<std::fs::File, String> {
        use std::io::{Seek, Write};
        let bytes = self.raw(key).await?;
        let mut file = tempfile::tempfile().map_err(|e| e.to_string())?;
        file.write_all(&bytes).and_then(|()| file.rewind()).map_err(|e| e.to_string())?;
        Ok(file)
    }

    /// Every row of every batch object, as `(stream-sequence key, payload bytes)` (a row's
    /// `stream` is its keyed stream, `{stream}.{epoch}` in a later epoch).
    pub async fn batch_records(&self) -> Result<Vec<Record>, String> {
        use sinks_toolkit::batch::{BatchCompression, Format};
        let mut out = Vec::new();
        for key in self.batch_object_keys().await? {
            let (format, compression) = if key.ends_with(".parquet") {
                (Format::Parquet, BatchCompression::Snappy)
            } else if key.ends_with(".ndjson.gz") {
                (Format::Ndjson, BatchCompression::Gzip)
            } else if key.ends_with(".ndjson.zst") {
                (Format::Ndjson, BatchCompression::Zstd)
            } else if key.ends_with(".ndjson") {
                (Format::Ndjson, BatchCompression::None)
            } else {
                return Err(format!("{key} is not a batch object"));
            };
            out.extend(self.rows(&key, format, compression).await?);
        }
        Ok(out)
    }

    /// Every row of the batch object `key`, as `(stream-sequence key, payload bytes)`.
    async fn rows(
        &self,
        key: &str,
        format: sinks_toolkit::batch::Format,
        compression: sinks_toolkit::batch::BatchCompression,
    ) -> Result<Vec<Record>, String> {
        let file = self.download(key).await?;
        tokio::task::spawn_blocking(move || {
            let mut rows = Vec::new();
            sinks_toolkit::batch::encode::read_rows(file, format, compression, true, |row| {
                let key = format!("stream-sequence:{}:{}", row.stream, row.stream_sequence);
                rows.push((key, Bytes::from(sinks_contract::payload::decode_stored(&row.payload))));
            })
            .map(|_| rows)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{key}: {e}"))
    }

    /// `name` below the sink's prefix (the key of a table's file, whose paths are relative to
    /// the table's root: the prefix, or the bucket's root without one).
    fn under_prefix(&self, name: &str) -> String {
        match self.config.prefix.as_deref().map(|p| p.trim_matches('/')) {
            Some(p) if !p.is_empty() => format!("{p}/{name}"),
            _ => name.to_owned(),
        }
    }

    /// Every row of the Delta table at the sink's prefix, read without the sink's own log
    /// reader: the `_delta_log/` entries listed and downloaded, replayed in version order by
    /// `sinks_certify::delta_log` (a gap, or an object added twice with `dataChange`, is an
    /// error), then the rows of the live Parquet objects. No log (nothing committed yet) reads
    /// as empty.
    pub async fn table_records(&self) -> Result<Vec<Record>, String> {
        use sinks_certify::delta_log;
        use sinks_toolkit::batch::{BatchCompression, Format};
        let log = self.under_prefix(delta_log::LOG_DIR);
        let dir = Path::parse(&log).map_err(|e| e.to_string())?;
        let listed: Vec<_> =
            self.store.list(Some(&dir)).try_collect().await.map_err(|e| format!("list {log} failed: {e}"))?;
        let names = listed.into_iter().filter_map(|m| m.location.filename().map(str::to_owned));
        let mut entries = Vec::new();
        for name in delta_log::commit_entries(names)? {
            let body = self.raw(&format!("{log}/{name}")).await?;
            let text = String::from_utf8(body.to_vec()).map_err(|e| format!("{name}: {e}"))?;
            entries.push((name, text));
        }
        let mut out = Vec::new();
        for path in delta_log::live_files(&entries)? {
            let key = self.under_prefix(&path);
            out.extend(self.rows(&key, Format::Parquet, BatchCompression::Snappy).await?);
        }
        Ok(out)
    }
}

#[async_trait]
impl Records for BucketReadBack {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        if self.config.mode == crate::WriteMode::Batch {
            if self.config.batch.as_ref().is_some_and(|b| b.table.is_some()) {
                return self.table_records().await;
            }
            return self.batch_records().await;
        }
        let keys = self.object_keys().await?;
        let mut out = Vec::with_capacity(keys.len());
        // Bounded parallel downloads: crash certification reads 20,000 objects.
        let mut bodies =
            futures::stream::iter(keys.into_iter().map(|k| async move { self.body(&k).await })).buffer_unordered(32);
        while let Some(body) = bodies.next().await {
            let body: Vec<u8> = body?;
            out.push(decode_object(&body)?);
        }
        Ok(out)
    }

    /// Every object (sidecars included) as its key in the bucket and its whole body; the
    /// object of a message keyed by the idempotency key its document names.
    async fn read_stored(&self) -> Result<Option<Vec<Record>>, String> {
        if self.config.mode == crate::WriteMode::Batch {
            return Ok(None);
        }
        let mut out = Vec::new();
        for key in self.object_keys().await? {
            let body = self.body(&key).await?;
            let name = decode_object(&body).map(|(k, _)| k).unwrap_or(key);
            out.push((name, Bytes::from(body)));
        }
        Ok(Some(out))
    }
}

#[async_trait]
impl Harness for S3Harness {
    fn name(&self) -> &'static str {
        "s3"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.fixture(|_| {}).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        // Objects over max_object_bytes are refused before any request.
        let fixture = self.fixture(|c| c.max_object_bytes = 4096).await.ok()?;
        let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(8192));
        Some((fixture, sinks_contract::testing::envelope("CERT", 900, "cert.poison", big)))
    }

    async fn origin_keyed(&self) -> Option<Result<Fixture, String>> {
        Some(self.fixture(|c| c.key_strategy = crate::config::KeyStrategy::OriginSequence).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let mut config = S3SinkConfig::new("unreachable-bucket");
        config.endpoint_url = Some(format!("http://127.0.0.1:{closed}"));
        config.allow_http_for_local_testing = true;
        config.request_timeout_seconds = 2.0;
        Some(Arc::new(self.sink(config).ok()?))
    }

    fn secrets(&self) -> Vec<String> {
        vec![self.credentials.secret_access_key.clone()]
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        self.crash_target_with(|_| {}).await
    }
}

impl S3Harness {
    /// A crash target whose config `adjust` changed.
    async fn crash_target_with(&self, adjust: impl FnOnce(&mut S3SinkConfig)) -> Result<CrashTarget, String> {
        let bucket = self.bucket().await?;
        let mut config = self.config(&bucket);
        adjust(&mut config);
        config.credential_mode = crate::CredentialMode::Environment;
        config.aws_access_key_id_env = Some(CRASH_KEY_ENV.into());
        config.aws_secret_access_key_env = Some(CRASH_SECRET_ENV.into());
        let mut sink_section = serde_json::to_value(&config).map_err(|e| e.to_string())?;
        sink_section["type"] = "s3".into();
        let env = vec![
            (CRASH_KEY_ENV.to_owned(), self.credentials.access_key_id.clone()),
            (CRASH_SECRET_ENV.to_owned(), self.credentials.secret_access_key.clone()),
        ];
        let read_back = self.read_back(&config, bucket)?;
        Ok(CrashTarget { sink_section, records: Box::new(read_back), env })
    }
}

/// The batch mode (`mode: batch`, NDJSON) of [`S3Harness`]'s buckets: the sink behind
/// `sinks_toolkit::holding::Durable` (each write flushes its objects and returns final
/// outcomes), read back by downloading and parsing every object.
#[derive(Debug, Clone)]
pub struct S3BatchHarness(pub S3Harness);

fn batch_mode(config: &mut S3SinkConfig) {
    config.mode = crate::WriteMode::Batch;
}

/// The batch section of [`S3TableHarness`]: Parquet objects partitioned by stream, added to a
/// Delta table at the prefix, checkpoints every 5 commits (so the crash runs write and read
/// them too).
fn table_mode(config: &mut S3SinkConfig) {
    use sinks_toolkit::batch::{BatchConfig, Format, TableConfig};
    config.mode = crate::WriteMode::Batch;
    config.prefix = Some("lake/table".into());
    config.batch = Some(BatchConfig {
        format: Format::Parquet,
        partition_template: "stream_name={stream}".into(),
        table: Some(TableConfig { checkpoint_interval: 5, ..TableConfig::default() }),
        ..BatchConfig::default()
    });
}

impl S3Harness {
    /// A fresh batch-mode fixture (`mode` sets the mode up), the sink held durable.
    async fn batch_fixture(&self, mode: impl FnOnce(&mut S3SinkConfig)) -> Result<Fixture, String> {
        let mut fx = self.fixture(mode).await?;
        fx.sink = sinks_toolkit::holding::Durable::wrap(fx.sink);
        Ok(fx)
    }

    /// A batch-mode fixture and a poison message: a row over `max_object_bytes` fails alone,
    /// before anything is written.
    async fn batch_poison(&self, mode: fn(&mut S3SinkConfig)) -> Option<(Fixture, Envelope)> {
        let fx = self
            .batch_fixture(|c| {
                mode(c);
                c.max_object_bytes = 4096;
            })
            .await
            .ok()?;
        let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(8192));
        Some((fx, sinks_contract::testing::envelope("CERT", 900, "cert.poison", big)))
    }

    /// A batch-mode sink whose endpoint no server answers.
    fn batch_unreachable(&self, mode: fn(&mut S3SinkConfig)) -> Option<Arc<dyn Sink>> {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let mut config = S3SinkConfig::new("unreachable-bucket");
        mode(&mut config);
        config.endpoint_url = Some(format!("http://127.0.0.1:{closed}"));
        config.allow_http_for_local_testing = true;
        config.request_timeout_seconds = 2.0;
        Some(sinks_toolkit::holding::Durable::wrap(Arc::new(self.sink(config).ok()?)))
    }

    /// A batch-mode crash target: objects of at most 500 messages or 1 s.
    async fn batch_crash_target(&self, mode: fn(&mut S3SinkConfig)) -> Result<CrashTarget, String> {
        self.crash_target_with(|c| {
            mode(c);
            let batch = c.batch.get_or_insert_with(Default::default);
            batch.max_messages = 500;
            batch.max_age_ms = 1000;
        })
        .await
    }
}

/// Why batch objects have no key per event (clause C14 skipped).
const NO_KEY_PER_EVENT: &str = "batch objects are named by the consumed stream's sequences: sink.key_strategy: \
                                origin_sequence is refused with sink.mode: batch";

#[async_trait]
impl Harness for S3BatchHarness {
    fn name(&self) -> &'static str {
        "s3-batch"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.0.batch_fixture(batch_mode).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        self.0.batch_poison(batch_mode).await
    }

    fn no_key_per_event(&self) -> Option<&'static str> {
        Some(NO_KEY_PER_EVENT)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        self.0.batch_unreachable(batch_mode)
    }

    fn secrets(&self) -> Vec<String> {
        self.0.secrets()
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        self.0.batch_crash_target(batch_mode).await
    }
}

/// The batch mode's table mode (`sink.batch.table`: Parquet objects added to a Delta table at
/// the prefix `lake/table`, checkpoints every 5 commits) on [`S3Harness`]'s buckets, certified
/// like [`S3BatchHarness`] but read back through the table ([`BucketReadBack::table_records`]):
/// the `_delta_log/` entries replayed from version 0 without the sink's own log reader, then
/// the rows of the live objects.
#[derive(Debug, Clone)]
pub struct S3TableHarness(pub S3Harness);

impl S3TableHarness {
    /// Sets `config` up as the harness's fixtures are: batch mode, Parquet partitioned by
    /// stream, a Delta table at the prefix `lake/table`, checkpoints every 5 commits.
    pub fn table_mode(config: &mut S3SinkConfig) {
        table_mode(config);
    }
}

#[async_trait]
impl Harness for S3TableHarness {
    fn name(&self) -> &'static str {
        "s3-table"
    }

    async fn fresh(&self) -> Result<Fixture, String> {
        self.0.batch_fixture(table_mode).await
    }

    async fn poison(&self) -> Option<(Fixture, Envelope)> {
        self.0.batch_poison(table_mode).await
    }

    fn no_key_per_event(&self) -> Option<&'static str> {
        Some(NO_KEY_PER_EVENT)
    }

    async fn unreachable(&self) -> Option<Arc<dyn Sink>> {
        self.0.batch_unreachable(table_mode)
    }

    fn secrets(&self) -> Vec<String> {
        self.0.secrets()
    }

    async fn crash_target(&self) -> Result<CrashTarget, String> {
        self.0.batch_crash_target(table_mode).await
    }
}
