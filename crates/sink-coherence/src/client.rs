//! The gRPC side: one tonic channel to the Coherence proxy, and the two protocols it may
//! speak.
//!
//! - **v1** (`coherence.proxy.v1.ProxyService/subChannel`): one bidirectional stream per
//!   cache. The stream opens with `Init` (scope, format `json`, protocol `CacheService`
//!   version 1), then `EnsureCache` returns the cache id every later request names. Requests
//!   carry ids this client picks; a reader task matches each answer (messages, then
//!   `complete`, or an in-band `error`) to its request, so the requests of a batch are
//!   pipelined, spread over a few streams per cache in turn. A heartbeat every few seconds notices a stream that went
//!   silent. A stream that fails (status, close, timeout, unknown cache id) is dropped, and
//!   the next request opens a new one.
//! - **legacy** (`coherence.NamedCacheService`): unary calls naming scope, cache and format
//!   each time; concurrent calls share the HTTP/2 connection.
//!
//! With `protocol = "auto"` the first use opens a v1 stream; an `UNIMPLEMENTED` or
//! `INTERNAL` answer to `Init` selects legacy (as the official clients do). The choice is
//! logged once and kept for the life of the client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use tokio::sync::{OnceCell, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::config::{CoherenceSinkConfig, Protocol};
use crate::error::{CohError, Hint};

#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations,
    non_camel_case_types
)]
pub(crate) mod pb {
    pub(crate) mod google {
        pub(crate) mod protobuf {
            tonic::include_proto!("google.protobuf");
        }
    }
    pub(crate) mod coherence {
        tonic::include_proto!("coherence");
        pub(crate) mod proxy {
            pub(crate) mod v1 {
                tonic::include_proto!("coherence.proxy.v1");
            }
        }
        pub(crate) mod cache {
            pub(crate) mod v1 {
                tonic::include_proto!("coherence.cache.v1");
            }
        }
    }
}

use pb::coherence::cache::v1 as cache;
use pb::coherence::named_cache_service_client::NamedCacheServiceClient;
use pb::coherence::proxy::v1 as proxy;
use pb::coherence::proxy::v1::proxy_service_client::ProxyServiceClient;
use pb::google::protobuf::{Any, BytesValue, Int32Value};

/// The serializer format on the wire.
const FORMAT: &str = "json";
/// The v1 protocol of cache operations.
const CACHE_PROTOCOL: &str = "CacheService";
/// Interval of v1 heartbeats.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// Largest answer accepted (a duplicate's answer is the stored value).
const MAX_DECODING: usize = 64 * 1024 * 1024;
/// Requests queued for one v1 stream before senders wait.
const STREAM_QUEUE: usize = 1024;
/// v1 streams per cache, used in turn, so the proxy is never limited to one stream's
/// requests in order. (Measured on a loaded 2-core machine: 8 streams were no faster than
/// one there; the legacy protocol's independent unary calls were about twice as fast.)
const V1_STREAMS: usize = 8;

fn any<M: Message>(name: &str, message: &M) -> Any {
    Any { type_url: format!("type.googleapis.com/{name}"), value: Bytes::from(message.encode_to_vec()) }
}

/// The protocol in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen {
    /// `ProxyService.subChannel`.
    V1,
    /// `NamedCacheService`.
    Legacy,
}

impl Chosen {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::Legacy => "legacy",
        }
    }
}

/// What the proxy said about itself in the v1 handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxyInfo {
    /// The Coherence version of the proxy member.
    pub(crate) version: String,
    /// Its member id.
    pub(crate) member_id: i32,
}

/// A client of one cache on one Coherence proxy.
pub(crate) struct Client {
    config: Arc<CoherenceSinkConfig>,
    timeout: Duration,
    channel: Channel,
    chosen: OnceCell<Chosen>,
    info: Mutex<Option<ProxyInfo>>,
    streams: Vec<tokio::sync::Mutex<Option<Arc<SubChannel>>>>,
    next_stream: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.config.address)
            .field("cache_name", &self.config.cache_name)
            .field("protocol", &self.chosen.get())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for `config` (no connection yet). TLS files are read here; a problem with
    /// them is a setup error naming the field.
    pub(crate) fn new(config: Arc<CoherenceSinkConfig>) -> Result<Self, CohError> {
        let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
        let scheme = if config.tls_enabled { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{}", config.address))
            .map_err(|_| CohError::Setup("sink.address is not a usable endpoint".into()))?
            .connect_timeout(timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        if config.tls_enabled {
            endpoint = endpoint
                .tls_config(tls(&config)?)
                .map_err(|_| CohError::Setup("sink.tls_* settings are not usable".into()))?;
        }
        let channel = endpoint.connect_lazy();
        Ok(Self {
            config,
            timeout,
            channel,
            chosen: OnceCell::new(),
            info: Mutex::new(None),
            streams: (0..V1_STREAMS).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next_stream: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The protocol, deciding it on first use (`auto`: v1, else legacy).
    pub(crate) async fn protocol(&self) -> Result<Chosen, CohError> {
        self.chosen
            .get_or_try_init(|| async {
                let chosen = match self.config.protocol {
                    Protocol::Legacy => Chosen::Legacy,
                    Protocol::V1 => {
                        self.v1(0).await?;
                        Chosen::V1
                    }
                    Protocol::Auto => match self.v1(0).await {
                        Ok(_) => Chosen::V1,
                        Err(CohError::Status { code: tonic::Code::Unimplemented | tonic::Code::Internal, .. }) => {
                            Chosen::Legacy
                        }
                        Err(e) => return Err(e),
                    },
                };
                tracing::info!(
                    address = %self.config.address,
                    protocol = chosen.as_str(),
                    configured = self.config.protocol.as_str(),
                    "coherence grpc protocol selected"
                );
                Ok(chosen)
            })
            .await
            .copied()
    }

    /// The protocol, if already decided.
    pub(crate) fn protocol_if_known(&self) -> Option<Chosen> {
        self.chosen.get().copied()
    }

    /// What the proxy said in the last v1 handshake.
    pub(crate) fn proxy_info(&self) -> Option<ProxyInfo> {
        self.info.lock().ok().and_then(|i| i.clone())
    }

    fn legacy(&self) -> NamedCacheServiceClient<Channel> {
        NamedCacheServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_DECODING)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        request
    }

    /// Runs a unary call within the request timeout.
    async fn unary<T>(
        &self,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, CohError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(CohError::status(&status)),
            Err(_) => Err(CohError::Timeout),
        }
    }

    /// The open v1 stream `index` of the cache, opening one when there is none (or it
    /// broke).
    async fn v1(&self, index: usize) -> Result<Arc<SubChannel>, CohError> {
        let mut slot = self.streams[index % self.streams.len()].lock().await;
        if let Some(stream) = slot.as_ref()
            && !stream.is_broken()
        {
            return Ok(Arc::clone(stream));
        }
        *slot = None;
        let (stream, info) = SubChannel::open(self.channel.clone(), &self.config, self.timeout).await?;
        if let Ok(mut slot) = self.info.lock() {
            *slot = Some(info);
        }
        *slot = Some(Arc::clone(&stream));
        Ok(stream)
    }

    /// A v1 cache request; a failure that breaks the stream drops it.
    async fn v1_call(
        &self,
        kind: cache::NamedCacheRequestType,
        message: Option<Any>,
    ) -> Result<cache::NamedCacheResponse, CohError> {
        // Streams in turn. Requests that must be ordered are never in flight together (the
        // sink starts a key's next put only after the previous one answered), so which
        // stream carries a request does not matter for order.
        let index = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let stream = self.v1(index).await?;
        let result = stream.cache_request(kind, message).await;
        if let Err(e) = &result
            && e.breaks_stream()
        {
            stream.mark_broken();
        }
        result
    }

    /// Puts `value` under `key` (`putIfAbsent` when `if_absent`) with `ttl_ms` (0 = the
    /// cache's default). Returns the value found: the existing one for `putIfAbsent`
    /// (`None`: inserted), the replaced one for `put`.
    pub(crate) async fn put(
        &self,
        key: Bytes,
        value: Bytes,
        if_absent: bool,
        ttl_ms: i64,
    ) -> Result<Option<Bytes>, CohError> {
        match self.protocol().await? {
            Chosen::V1 => {
                let kind = if if_absent {
                    cache::NamedCacheRequestType::PutIfAbsent
                } else {
                    cache::NamedCacheRequestType::Put
                };
                let put = cache::PutRequest { key, value, ttl: Some(ttl_ms) };
                let response = self.v1_call(kind, Some(any("coherence.cache.v1.PutRequest", &put))).await?;
                let bytes = match response.message {
                    Some(m) => {
                        BytesValue::decode(m.value).map_err(|_| CohError::Protocol("put answer is not bytes"))?.value
                    }
                    None => Bytes::new(),
                };
                Ok(present(bytes))
            }
            Chosen::Legacy => {
                let c = &self.config;
                let found = if if_absent {
                    let request = pb::coherence::PutIfAbsentRequest {
                        scope: c.scope.clone(),
                        cache: c.cache_name.clone(),
                        format: FORMAT.into(),
                        key,
                        value,
                        ttl: ttl_ms,
                    };
                    self.unary(self.legacy().put_if_absent(self.request(request))).await?
                } else {
                    let request = pb::coherence::PutRequest {
                        scope: c.scope.clone(),
                        cache: c.cache_name.clone(),
                        format: FORMAT.into(),
                        key,
                        value,
                        ttl: ttl_ms,
                    };
                    self.unary(self.legacy().put(self.request(request))).await?
                };
                Ok(present(found.value))
            }
        }
    }

    /// The number of entries in the cache (the health probe).
    pub(crate) async fn size(&self) -> Result<i32, CohError> {
        match self.protocol().await? {
            Chosen::V1 => {
                let response = self.v1_call(cache::NamedCacheRequestType::Size, None).await?;
                let m = response.message.ok_or(CohError::Protocol("size answer is empty"))?;
                Ok(Int32Value::decode(m.value).map_err(|_| CohError::Protocol("size answer is not an int"))?.value)
            }
            Chosen::Legacy => {
                let request = pb::coherence::SizeRequest {
                    scope: self.config.scope.clone(),
                    cache: self.config.cache_name.clone(),
                };
                Ok(self.unary(self.legacy().size(self.request(request))).await?.value)
            }
        }
    }

    /// The value stored under `key`, if any (reconcile and read-backs).
    pub(crate) async fn get(&self, key: Bytes) -> Result<Option<Bytes>, CohError> {
        match self.protocol().await? {
            Chosen::V1 => {
                let request = any("google.protobuf.BytesValue", &BytesValue { value: key });
                let response = self.v1_call(cache::NamedCacheRequestType::Get, Some(request)).await?;
                let m = response.message.ok_or(CohError::Protocol("get answer is empty"))?;
                let v = cache::OptionalValue::decode(m.value)
                    .map_err(|_| CohError::Protocol("get answer is not optional"))?;
                Ok(if v.present { present(v.value) } else { None })
            }
            Chosen::Legacy => {
                let c = &self.config;
                let request = pb::coherence::GetRequest {
                    scope: c.scope.clone(),
                    cache: c.cache_name.clone(),
                    format: FORMAT.into(),
                    key,
                };
                let v = self.unary(self.legacy().get(self.request(request))).await?;
                Ok(if v.present { present(v.value) } else { None })
            }
        }
    }

    #[cfg(feature = "certify")]
    /// Removes the entry under `key`; true when there was one (tests that lose entries
    /// behind the sink's back).
    pub(crate) async fn remove(&self, key: Bytes) -> Result<bool, CohError> {
        let c = &self.config;
        let request = pb::coherence::RemoveRequest {
            scope: c.scope.clone(),
            cache: c.cache_name.clone(),
            format: FORMAT.into(),
            key,
        };
        let previous = self.unary(self.legacy().remove(self.request(request))).await?;
        Ok(present(previous.value).is_some())
    }

    #[cfg(feature = "certify")]
    /// Destroys the cache (its entries and persisted files); for test clean-up.
    pub(crate) async fn destroy(&self) -> Result<(), CohError> {
        let request =
            pb::coherence::DestroyRequest { scope: self.config.scope.clone(), cache: self.config.cache_name.clone() };
        self.unary(self.legacy().destroy(self.request(request))).await.map(drop)
    }

    #[cfg(feature = "certify")]
    /// Every entry of the cache, page by page (legacy `nextEntrySetPage`, which every
    /// proxy serves); for read-backs in tests and certification.
    pub(crate) async fn entries(&self) -> Result<Vec<(Bytes, Bytes)>, CohError> {
        let c = &self.config;
        let mut out = Vec::new();
        let mut cookie = Bytes::new();
        loop {
            let request = pb::coherence::PageRequest {
                scope: c.scope.clone(),
                cache: c.cache_name.clone(),
                format: FORMAT.into(),
                cookie: cookie.clone(),
            };
            let mut request = tonic::Request::new(request);
            request.set_timeout(self.timeout * 6);
            let mut stream =
                self.legacy().next_entry_set_page(request).await.map_err(|s| CohError::status(&s))?.into_inner();
            let mut first = true;
            let mut next = Bytes::new();
            while let Some(item) = stream.message().await.map_err(|s| CohError::status(&s))? {
                if first {
                    // The first result of a page carries the cookie of the next one.
                    first = false;
                    next = item.cookie;
                    if item.key.is_empty() {
                        continue;
                    }
                }
                out.push((item.key, item.value));
            }
            if next.is_empty() || first {
                return Ok(out);
            }
            cookie = next;
        }
    }
}

/// A value answered by the proxy, `None` for none: empty bytes, or a serialized JSON
/// `null` (what `put` answers when there was no previous value).
fn present(value: Bytes) -> Option<Bytes> {
    let null = value.is_empty() || crate::entry::from_wire(&value).is_some_and(|json| json.trim_ascii() == b"null");
    (!null).then_some(value)
}

/// The TLS settings of `config`.
fn tls(config: &CoherenceSinkConfig) -> Result<ClientTlsConfig, CohError> {
    let read = |field: &str, path: &str| {
        std::fs::read(path).map_err(|e| CohError::Setup(format!("sink.{field} cannot be read ({})", e.kind())))
    };
    let server_name = config.tls_server_name.clone().unwrap_or_else(|| config.host().to_owned());
    let mut tls = ClientTlsConfig::new().domain_name(server_name);
    tls = match &config.tls_ca_file {
        Some(path) => tls.ca_certificate(Certificate::from_pem(read("tls_ca_file", path)?)),
        None => tls.with_native_roots(),
    };
    if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) {
        tls = tls.identity(Identity::from_pem(read("tls_cert_file", cert)?, read("tls_key_file", key)?));
    }
    Ok(tls)
}

/// The answer a pending v1 request is collecting.
struct Pending {
    reply: oneshot::Sender<Result<Option<Any>, CohError>>,
    message: Option<Any>,
}

type PendingMap = Arc<Mutex<HashMap<i64, Pending>>>;

/// One v1 `subChannel` stream bound to one cache.
struct SubChannel {
    tx: mpsc::Sender<proxy::ProxyRequest>,
    pending: PendingMap,
    next_id: AtomicI64,
    cache_id: i32,
    broken: Arc<AtomicBool>,
    timeout: Duration,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SubChannel {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SubChannel {
    /// Opens a stream: `Init`, then `EnsureCache`.
    async fn open(
        channel: Channel,
        config: &CoherenceSinkConfig,
        timeout: Duration,
    ) -> Result<(Arc<Self>, ProxyInfo), CohError> {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let init = proxy::ProxyRequest {
            id: 1,
            request: Some(proxy::proxy_request::Request::Init(proxy::InitRequest {
                scope: config.scope.clone(),
                format: FORMAT.into(),
                protocol: CACHE_PROTOCOL.into(),
                protocol_version: 1,
                supported_protocol_version: 1,
                heartbeat: None,
                client_uuid: None,
            })),
        };
        // Queued before the call: the proxy answers the headers with the first message.
        tx.send(init).await.map_err(|_| CohError::Closed)?;
        let mut client = ProxyServiceClient::new(channel).max_decoding_message_size(MAX_DECODING);
        let opened = async {
            let mut responses =
                client.sub_channel(ReceiverStream::new(rx)).await.map_err(|s| CohError::status(&s))?.into_inner();
            let first = responses.message().await.map_err(|s| CohError::status(&s))?.ok_or(CohError::Closed)?;
            match first.response {
                Some(proxy::proxy_response::Response::Init(init)) => Ok((responses, init)),
                Some(proxy::proxy_response::Response::Error(e)) => Err(CohError::InBand { hint: Hint::of(&e.message) }),
                _ => Err(CohError::Protocol("no init answer")),
            }
        };
        let (responses, init) = tokio::time::timeout(timeout, opened).await.map_err(|_| CohError::Timeout)??;
        let info = ProxyInfo { version: init.version, member_id: init.proxy_member_id };
        let pending: PendingMap = Arc::new(Mutex::new(HashMap::new()));
        let broken = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_loop(responses, Arc::clone(&pending), Arc::clone(&broken)));
        let mut stream = Self { tx, pending, next_id: AtomicI64::new(2), cache_id: 0, broken, timeout, reader };
        let ensure = cache::NamedCacheRequest {
            r#type: cache::NamedCacheRequestType::EnsureCache as i32,
            cache_id: None,
            message: Some(any(
                "coherence.cache.v1.EnsureCacheRequest",
                &cache::EnsureCacheRequest { cache: config.cache_name.clone() },
            )),
        };
        let answer = stream
            .call(proxy::proxy_request::Request::Message(any("coherence.cache.v1.NamedCacheRequest", &ensure)))
            .await?;
        let answer = answer.ok_or(CohError::Protocol("no cache id"))?;
        stream.cache_id = cache::NamedCacheResponse::decode(answer.value)
            .map_err(|_| CohError::Protocol("ensure-cache answer is not a cache response"))?
            .cache_id;
        let stream = Arc::new(stream);
        tokio::spawn(heartbeat_loop(Arc::downgrade(&stream)));
        Ok((stream, info))
    }

    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire) || self.reader.is_finished()
    }

    fn mark_broken(&self) {
        self.broken.store(true, Ordering::Release);
    }

    /// Sends one request and waits for its answer (the last message before `complete`).
    async fn call(&self, request: proxy::proxy_request::Request) -> Result<Option<Any>, CohError> {
        if self.is_broken() {
            return Err(CohError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, Pending { reply, message: None });
        }
        let forget = || {
            if let Ok(mut pending) = self.pending.lock() {
                pending.remove(&id);
            }
        };
        let sent = proxy::ProxyRequest { id, request: Some(request) };
        let waited = tokio::time::timeout(self.timeout, async {
            self.tx.send(sent).await.map_err(|_| CohError::Closed)?;
            answer.await.map_err(|_| CohError::Closed)?
        })
        .await;
        match waited {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                forget();
                Err(e)
            }
            Err(_) => {
                forget();
                Err(CohError::Timeout)
            }
        }
    }

    /// A cache operation on this stream's cache.
    async fn cache_request(
        &self,
        kind: cache::NamedCacheRequestType,
        message: Option<Any>,
    ) -> Result<cache::NamedCacheResponse, CohError> {
        let request = cache::NamedCacheRequest { r#type: kind as i32, cache_id: Some(self.cache_id), message };
        let answer = self
            .call(proxy::proxy_request::Request::Message(any("coherence.cache.v1.NamedCacheRequest", &request)))
            .await?;
        match answer {
            Some(a) => {
                cache::NamedCacheResponse::decode(a.value).map_err(|_| CohError::Protocol("not a cache response"))
            }
            None => Ok(cache::NamedCacheResponse::default()),
        }
    }
}

/// Matches answers to pending requests until the stream ends, then fails what is left.
async fn read_loop(
    mut responses: tonic::Streaming<proxy::ProxyResponse>,
    pending: PendingMap,
    broken: Arc<AtomicBool>,
) {
    use proxy::proxy_response::Response;
    let end = loop {
        let response = match responses.message().await {
            Ok(Some(r)) => r,
            Ok(None) => break CohError::Closed,
            Err(status) => break CohError::status(&status),
        };
        let Ok(mut map) = pending.lock() else { break CohError::Closed };
        match response.response {
            Some(Response::Message(m)) => {
                if let Some(p) = map.get_mut(&response.id) {
                    p.message = Some(m);
                }
            }
            Some(Response::Complete(_)) => {
                if let Some(p) = map.remove(&response.id) {
                    let _ = p.reply.send(Ok(p.message));
                }
            }
            Some(Response::Error(e)) => {
                if let Some(p) = map.remove(&response.id) {
                    let _ = p.reply.send(Err(CohError::InBand { hint: Hint::of(&e.message) }));
                }
            }
            Some(Response::Heartbeat(_)) => {
                if let Some(p) = map.remove(&response.id) {
                    let _ = p.reply.send(Ok(None));
                }
            }
            // Init answers come before this loop starts; id 0 carries server events.
            Some(Response::Init(_)) | None => {}
        }
    };
    broken.store(true, Ordering::Release);
    if let Ok(mut map) = pending.lock() {
        for (_, p) in map.drain() {
            let _ = p.reply.send(Err(end.clone()));
        }
    }
}

/// Sends a heartbeat every [`HEARTBEAT`] while the stream lives; a heartbeat without an
/// answer marks the stream broken, so the next request opens a new one.
async fn heartbeat_loop(stream: Weak<SubChannel>) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let Some(stream) = stream.upgrade() else { return };
        if stream.is_broken() {
            return;
        }
        let beat = proxy::proxy_request::Request::Heartbeat(proxy::HeartbeatMessage { uuid: None, ack: true });
        if stream.call(beat).await.is_err() {
            tracing::debug!("coherence stream heartbeat failed; the stream will be reopened");
            stream.mark_broken();
            return;
        }
    }
}
