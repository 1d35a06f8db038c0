//! One exchange with the endpoint, and nothing about what its answer means (`outcome.rs`).
//!
//! [`Endpoint`] is built once from the config: the `reqwest` client (a keep-alive pool,
//! HTTP/1.1 and HTTP/2, rustls with an optional CA bundle and client certificate, no proxy,
//! redirects never followed), the URL and method, the fixed headers (`Accept`, `User-Agent`,
//! the static `headers`) and the header names the config gives. [`Endpoint::headers`] adds
//! what one request carries besides (the `headers_env` values read now, the attempt's facts,
//! the idempotency key) into one map sized for all of them, and [`Endpoint::send`] hands that
//! map to the request as it is and reads the answer's status, `Retry-After` and response id,
//! draining at most `max_response_bytes` of its body.

use std::path::Path;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, USER_AGENT};
use reqwest::{Method, Url};
use sinks_contract::{ConfigError, Envelope, SinkError};
use time::OffsetDateTime;

use crate::answers::{self, Settled};
use crate::config::{HttpSinkConfig, HttpVersion};
use crate::request;

/// The endpoint and the fixed parts of every request to it.
pub(crate) struct Endpoint {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Url,
    pub(crate) method: Method,
    pub(crate) health_url: Option<Url>,
    /// Accept, User-Agent and the static `headers`.
    base_headers: HeaderMap,
    /// `headers_env`: header and the variable holding its value.
    env_headers: Vec<(HeaderName, String)>,
    key_header: HeaderName,
    /// `response_id_header`, reported in ledger receipts.
    response_id_header: Option<HeaderName>,
    /// `inquiry_fingerprint_header`, read by reconcile.
    pub(crate) fingerprint_header: Option<HeaderName>,
    /// `max_response_bytes`: most of an answer's body read.
    max_response_bytes: u64,
}

/// The answer to one request: status, the delay `Retry-After` asked for, and the response
/// id header's value.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) response_id: Option<String>,
}

impl Answer {
    /// What the ledger's receipt names of this answer.
    pub(crate) fn settled(&self) -> Settled {
        Settled { status: self.status, response_id: self.response_id.clone() }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The request could not be formed (a `headers_env` variable is missing, ...).
    Setup(SinkError),
    /// The client failed (connect, timeout, reset, ...).
    Http(reqwest::Error),
}

impl Endpoint {
    /// The endpoint of a validated `config`: parses its URLs, method and header names (an
    /// error names the field) and builds the client (reading the CA bundle and client
    /// certificate files). Makes no network call.
    pub(crate) fn new(config: &HttpSinkConfig) -> Result<Self, ConfigError> {
        let url = Url::parse(&config.url).map_err(|e| ConfigError::single("sink.url", e.to_string()))?;
        let health_url = match &config.health_url {
            Some(u) => Some(Url::parse(u).map_err(|e| ConfigError::single("sink.health_url", e.to_string()))?),
            None => None,
        };
        let method = Method::from_bytes(config.method.as_str().as_bytes())
            .map_err(|e| ConfigError::single("sink.method", e.to_string()))?;
        let mut base_headers = HeaderMap::new();
        base_headers.insert(ACCEPT, HeaderValue::from_static(request::CONTENT_TYPE_JSON));
        base_headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&config.user_agent)
                .map_err(|e| ConfigError::single("sink.user_agent", e.to_string()))?,
        );
        for (name, value) in &config.headers {
            let path = format!("sink.headers.{name}");
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| ConfigError::single(&path, e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| ConfigError::single(&path, e.to_string()))?;
            base_headers.insert(name, value);
        }
        let mut env_headers = Vec::new();
        for (name, variable) in &config.headers_env {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| ConfigError::single(format!("sink.headers_env.{name}"), e.to_string()))?;
            env_headers.push((header, variable.clone()));
        }
        let key_header = HeaderName::from_bytes(config.idempotency.header.as_bytes())
            .map_err(|e| ConfigError::single("sink.idempotency.header", e.to_string()))?;
        let optional_header = |name: &Option<String>, field: &str| match name {
            Some(name) => {
                HeaderName::from_bytes(name.as_bytes()).map(Some).map_err(|e| ConfigError::single(field, e.to_string()))
            }
            None => Ok(None),
        };
        let response_id_header = optional_header(&config.response_id_header, "sink.response_id_header")?;
        let fingerprint_header =
            optional_header(&config.inquiry_fingerprint_header, "sink.inquiry_fingerprint_header")?;
        let client = build_client(config)?;
        Ok(Self {
            client,
            url,
            method,
            health_url,
            base_headers,
            env_headers,
            key_header,
            response_id_header,
            fingerprint_header,
            max_response_bytes: config.max_response_bytes,
        })
    }

    /// The fixed headers and the `headers_env` headers, read from the environment now
    /// (values marked sensitive, never logged): what every request carries.
    pub(crate) fn plain_headers(&self) -> Result<HeaderMap, SinkError> {
        let mut headers = HeaderMap::with_capacity(self.base_headers.len() + self.env_headers.len());
        self.put_plain_headers(&mut headers)?;
        Ok(headers)
    }

    /// Puts [`Self::plain_headers`] into `headers`, in the same order.
    fn put_plain_headers(&self, headers: &mut HeaderMap) -> Result<(), SinkError> {
        for (name, value) in &self.base_headers {
            headers.append(name.clone(), value.clone());
        }
        for (name, variable) in &self.env_headers {
            let value = env_header(std::env::var(variable).ok().as_deref()).map_err(|problem| {
                SinkError::config(format!("the environment variable of sink.headers_env.{name} {problem}"))
            })?;
            headers.insert(name.clone(), value);
        }
        Ok(())
    }

    /// The headers of one request: [`Self::plain_headers`], the facts of one attempt of
    /// `attempt_of` sent at `now` (a value that is no header value is left out) and the
    /// idempotency key `key` in its header form.
    pub(crate) fn headers(
        &self,
        key: Option<&str>,
        attempt_of: Option<&Envelope>,
        now: OffsetDateTime,
    ) -> Result<HeaderMap, SinkError> {
        // One allocation for every header the request will carry (the content type too).
        let capacity = self.base_headers.len() + self.env_headers.len() + request::ATTEMPT_HEADERS.len() + 2;
        let mut headers = HeaderMap::with_capacity(capacity);
        self.put_plain_headers(&mut headers)?;
        if let Some(envelope) = attempt_of {
            let values = request::attempt_header_values(envelope, now);
            for (name, value) in request::ATTEMPT_HEADER_NAMES.iter().zip(values) {
                if let Some(value) = value {
                    headers.insert(name.clone(), value);
                }
            }
        }
        if let Some(key) = key {
            let value = HeaderValue::from_str(&request::header_value(key))
                .map_err(|e| SinkError::permanent("idempotency key is not a header value").with_source(e))?;
            headers.insert(self.key_header.clone(), value);
        }
        Ok(headers)
    }

    /// Sends one request and reads at most `max_response_bytes` of the answer's body.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &Url,
        body: Option<Bytes>,
        (key, attempt_of): (Option<&str>, Option<&Envelope>),
        content_type: &'static str,
        timeout: Option<Duration>,
    ) -> Result<Answer, SendError> {
        let mut headers = self.headers(key, attempt_of, OffsetDateTime::now_utc()).map_err(SendError::Setup)?;
        let mut builder = self.client.request(method, url.clone());
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(body) = body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            builder = builder.body(body);
        }
        // The request's own map is empty: it becomes `headers` as built (what
        // `RequestBuilder::headers` would copy into it one by one, in the same order).
        let mut request = builder.build().map_err(SendError::Http)?;
        *request.headers_mut() = headers;
        let mut response = self.client.execute(request).await.map_err(SendError::Http)?;
        let status = response.status().as_u16();
        let (retry_after, response_id) = self.read_headers(response.headers(), SystemTime::now());
        let mut left = usize::try_from(self.max_response_bytes).unwrap_or(usize::MAX);
        while left > 0 {
            match response.chunk().await {
                Ok(Some(chunk)) => left = left.saturating_sub(chunk.len()),
                Ok(None) => break,
                Err(e) => {
                    // The status already decided; a broken body only costs the connection.
                    tracing::debug!(status, error = %e, "cannot read the answer body");
                    break;
                }
            }
        }
        Ok(Answer { status, retry_after, response_id })
    }

    /// What an answer's headers tell, at `now`: the delay `Retry-After` asks for and the
    /// `response_id_header` value.
    fn read_headers(&self, headers: &HeaderMap, now: SystemTime) -> (Option<Duration>, Option<String>) {
        let retry_after =
            headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| request::parse_retry_after(v, now));
        let response_id = self
            .response_id_header
            .as_ref()
            .and_then(|name| headers.get(name))
            .and_then(|v| answers::response_id(v.as_bytes()));
        (retry_after, response_id)
    }
}

/// The header value of a `headers_env` variable whose value is `value` (`None`: not set), or
/// what is wrong with it, worded to follow the variable's description.
fn env_header(value: Option<&str>) -> Result<HeaderValue, &'static str> {
    match value {
        None => Err("is not set"),
        Some(v) if v.trim().is_empty() => Err("is empty"),
        Some(v) if v != v.trim() => Err("has leading or trailing whitespace"),
        Some(v) => match HeaderValue::from_str(v) {
            Ok(mut value) if !v.chars().any(char::is_control) => {
                value.set_sensitive(true);
                Ok(value)
            }
            _ => Err("is not a valid header value"),
        },
    }
}

/// The client: pool, versions, timeouts, TLS roots and identity, no redirects, no proxy.
fn build_client(config: &HttpSinkConfig) -> Result<reqwest::Client, ConfigError> {
    let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(config.pool_max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(config.pool_idle_timeout_seconds))
        .tcp_nodelay(true)
        .https_only(!config.allow_http_for_local_testing);
    builder = match config.http_version {
        HttpVersion::Auto => builder,
        HttpVersion::Http1Only => builder.http1_only(),
        HttpVersion::Http2PriorKnowledge => builder.http2_prior_knowledge(),
    };
    if let Some(file) = &config.tls_ca_file {
        let pem = read_file(file, "sink.tls_ca_file")?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ConfigError::single("sink.tls_ca_file", format!("is not a PEM certificate bundle ({e})")))?;
        if certs.is_empty() {
            return Err(ConfigError::single("sink.tls_ca_file", "holds no certificate"));
        }
        builder = if config.tls_ca_only { builder.tls_certs_only(certs) } else { builder.tls_certs_merge(certs) };
    }
    if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) {
        let mut pem = read_file(cert, "sink.tls_cert_file")?;
        pem.push(b'\n');
        pem.extend(read_file(key, "sink.tls_key_file")?);
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            ConfigError::single("sink.tls_cert_file", format!("cannot use the client certificate and key ({e})"))
        })?;
        builder = builder.identity(identity);
    }
    builder.build().map_err(|e| ConfigError::single("sink", format!("cannot build the HTTP client ({e})")))
}

fn read_file(path: &Path, field: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::single(field, format!("cannot read {} ({e})", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::Headers;
    use sinks_contract::testing::envelope_with;

    fn config() -> HttpSinkConfig {
        HttpSinkConfig::new("https://h.example/x")
    }

    fn issue(config: &HttpSinkConfig) -> String {
        match Endpoint::new(config) {
            Ok(_) => "no error".to_owned(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_bad_header_or_file_is_named_by_its_field() {
        let mut c = config();
        c.headers.insert("bad header".into(), "v".into());
        assert!(issue(&c).contains("sink.headers.bad header"), "{}", issue(&c));
        let mut c = config();
        c.headers.insert("x-ok".into(), "line\nbreak".into());
        assert!(issue(&c).contains("sink.headers.x-ok"), "{}", issue(&c));
        let mut c = config();
        c.headers_env.insert("bad header".into(), "VAR".into());
        assert!(issue(&c).contains("sink.headers_env.bad header"), "{}", issue(&c));
        let c = HttpSinkConfig { response_id_header: Some("bad header".into()), ..config() };
        assert!(issue(&c).contains("sink.response_id_header"), "{}", issue(&c));
        let c = HttpSinkConfig { user_agent: "a\nb".into(), ..config() };
        assert!(issue(&c).contains("sink.user_agent"), "{}", issue(&c));
        let c = HttpSinkConfig { tls_ca_file: Some("/nonexistent/ca.pem".into()), ..config() };
        let text = issue(&c);
        assert!(text.contains("sink.tls_ca_file") && text.contains("cannot read /nonexistent/ca.pem"), "{text}");
        assert_eq!(issue(&config()), "no error");
    }

    #[test]
    fn every_request_carries_the_fixed_headers_and_a_keyed_one_its_key() {
        let mut c = config();
        c.headers.insert("x-tenant".into(), "blue".into());
        let endpoint = Endpoint::new(&c).unwrap();
        let plain = endpoint.headers(None, None, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(plain.get(ACCEPT).unwrap(), request::CONTENT_TYPE_JSON);
        assert_eq!(plain.get(USER_AGENT).unwrap(), c.user_agent.as_str());
        assert_eq!(plain.get("x-tenant").unwrap(), "blue");
        assert!(plain.get(&endpoint.key_header).is_none());
        assert!(request::ATTEMPT_HEADERS.iter().all(|h| plain.get(*h).is_none()));

        let message = envelope_with("ORDERS", 7, "orders.created", "{}", Headers::new(), 2);
        let keyed =
            endpoint.headers(Some("stream-sequence:ORDERS:7"), Some(&message), OffsetDateTime::now_utc()).unwrap();
        assert_eq!(keyed.get(&endpoint.key_header).unwrap(), "stream-sequence:ORDERS:7");
        assert_eq!(keyed.get("Nats-Sinks-Attempt-Delivered").unwrap(), "2");
        assert!(request::ATTEMPT_HEADERS.iter().all(|h| keyed.get(*h).is_some()), "{keyed:?}");
    }

    /// The headers of one request as they were built before they went into one sized map
    /// (a copy of the fixed headers, each attempt header inserted by its documented name
    /// from its value as a string, the key's header form as a string).
    fn headers_as_before(
        endpoint: &Endpoint,
        key: Option<&str>,
        attempt_of: Option<&Envelope>,
        now: OffsetDateTime,
    ) -> HeaderMap {
        let mut headers = endpoint.base_headers.clone();
        if let Some(envelope) = attempt_of {
            let js = envelope.jetstream();
            let values = [
                sinks_toolkit::metadata::rfc3339(envelope.received_at()),
                js.delivered.to_string(),
                js.consumer.clone(),
                js.consumer_sequence.to_string(),
                sinks_toolkit::metadata::rfc3339(now),
            ];
            for (name, value) in request::ATTEMPT_HEADERS.iter().zip(values) {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(*name, value);
                }
            }
        }
        if let Some(key) = key {
            headers.insert(endpoint.key_header.clone(), HeaderValue::from_str(&request::header_value(key)).unwrap());
        }
        headers
    }

    /// Every header in order, with its value's bytes and whether it is sensitive.
    fn listed(headers: &HeaderMap) -> Vec<(String, Vec<u8>, bool)> {
        headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec(), v.is_sensitive())).collect()
    }

    #[test]
    fn a_request_carries_the_same_headers_in_the_same_order_as_before() {
        let mut c = config();
        c.headers.insert("x-tenant".into(), "blue".into());
        c.headers.insert("accept".into(), "application/vnd.x+json".into());
        c.idempotency.header = "X-Request-Key".into();
        let endpoint = Endpoint::new(&c).unwrap();
        let now = OffsetDateTime::now_utc();
        let message = envelope_with("ORDERS", 7, "orders.created", "{}", Headers::new(), 3);
        let js = sinks_contract::JetStreamInfo { consumer: "caf\u{e9}".into(), ..message.jetstream().clone() };
        let odd_consumer = Envelope::new("orders.created", "{}", Headers::new(), js);
        for key in [None, Some("stream-sequence:ORDERS:7"), Some("message-id:a b%\u{444}")] {
            for attempt_of in [None, Some(&message), Some(&odd_consumer)] {
                let built = endpoint.headers(key, attempt_of, now).unwrap();
                let before = headers_as_before(&endpoint, key, attempt_of, now);
                assert_eq!(listed(&built), listed(&before), "key {key:?}, attempt of {attempt_of:?}");
            }
        }
        // The comparison sees a difference: a value changed, or two headers swapped.
        let built = endpoint.headers(Some("k"), Some(&message), now).unwrap();
        let later = headers_as_before(&endpoint, Some("k"), Some(&message), now + time::Duration::seconds(1));
        assert_ne!(listed(&built), listed(&later));
        let mut swapped = HeaderMap::new();
        let mut pairs: Vec<_> = built.iter().collect();
        pairs.swap(0, 1);
        for (name, value) in pairs {
            swapped.append(name.clone(), value.clone());
        }
        assert_ne!(listed(&built), listed(&swapped));
    }

    #[test]
    fn an_environment_header_is_refused_with_its_problem() {
        assert_eq!(env_header(None).unwrap_err(), "is not set");
        assert_eq!(env_header(Some("  ")).unwrap_err(), "is empty");
        assert_eq!(env_header(Some(" token")).unwrap_err(), "has leading or trailing whitespace");
        assert_eq!(env_header(Some("a\tb")).unwrap_err(), "is not a valid header value");
        let value = env_header(Some("Bearer abc")).unwrap();
        assert!(value.is_sensitive());
        assert_eq!(value, "Bearer abc");
    }

    #[test]
    fn a_missing_environment_header_fails_as_a_config_error_naming_its_header() {
        let mut c = config();
        c.headers_env.insert("authorization".into(), "NATS_SINKS_TEST_SURELY_UNSET_VARIABLE".into());
        let e = Endpoint::new(&c).unwrap().plain_headers().unwrap_err();
        assert_eq!(e.class(), sinks_contract::ErrorClass::Config);
        assert!(e.to_string().contains("sink.headers_env.authorization is not set"), "{e}");
    }

    #[test]
    fn an_answer_tells_its_retry_after_and_response_id() {
        let c = HttpSinkConfig { response_id_header: Some("x-request-id".into()), ..config() };
        let endpoint = Endpoint::new(&c).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        headers.insert("x-request-id", HeaderValue::from_static("r-1"));
        let (retry_after, id) = endpoint.read_headers(&headers, SystemTime::now());
        assert_eq!(retry_after, Some(Duration::from_secs(7)));
        assert_eq!(id.as_deref(), Some("r-1"));
        let (retry_after, id) = endpoint.read_headers(&HeaderMap::new(), SystemTime::now());
        assert_eq!((retry_after, id), (None, None));
        let answer = Answer { status: 201, retry_after: None, response_id: Some("r-1".into()) };
        assert_eq!(answer.settled(), Settled { status: 201, response_id: Some("r-1".into()) });
    }
}
