//! `nats` section: servers, stream, consumer, subject, authentication and TLS.
//!
//! Secrets come only through `*_env` fields (resolved when connecting); an inline `password`
//! or `token` is rejected at load time so a secret never sits in a config file. The same goes
//! for WebSocket headers that carry credentials (`authorization`, `cookie`, `x-api-key`, …):
//! only `websocket_headers_env` may name them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Issues, check_env_name};
use sinks_toolkit::subject;

/// Connection and JetStream binding settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL (`nats://`, `tls://`, or `ws://` / `wss://` for NATS over WebSocket);
    /// ignored when `urls` is set.
    #[serde(default = "default_url")]
    pub url: String,
    /// Seed server URLs, tried in order (WebSocket and TCP URLs may not be mixed).
    #[serde(default)]
    pub urls: Vec<String>,
    /// Stream to consume from.
    pub stream: String,
    /// Durable consumer name (also the name of an ephemeral consumer's description).
    pub consumer: String,
    /// Subject filter of the consumer (wildcards allowed).
    pub subject: String,
    /// Durable consumer (default) or an ephemeral one that disappears with the process.
    #[serde(default = "yes")]
    pub durable: bool,
    /// Connection name shown in server monitoring.
    #[serde(default)]
    pub name: Option<String>,
    /// User name for user/password authentication (with `password_env`).
    #[serde(default)]
    pub user: Option<String>,
    /// Rejected: give the password through `password_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Rejected: give the token through `token_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Environment variable holding the authentication token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Path of a `.creds` file (JWT + NKey seed).
    #[serde(default)]
    pub creds_file: Option<String>,
    /// Path of a file holding an NKey seed.
    #[serde(default)]
    pub nkey_seed_file: Option<String>,
    /// CA bundle (PEM) used to verify the server; implies TLS.
    #[serde(default)]
    pub tls_ca_file: Option<String>,
    /// Client certificate (PEM) for mutual TLS; needs `tls_key_file`.
    #[serde(default)]
    pub tls_cert_file: Option<String>,
    /// Client private key (PEM) for mutual TLS; needs `tls_cert_file`.
    #[serde(default)]
    pub tls_key_file: Option<String>,
    /// Verify the server certificate. Must stay `true`: disabling verification is not offered.
    #[serde(default = "yes")]
    pub tls_verify: bool,
    /// Headers of the WebSocket handshake (`ws://`/`wss://` URLs only; at most 32 with
    /// `websocket_headers_env`): name → value. Sent through a loopback relay that serves this
    /// process only (async-nats sends no handshake headers itself). Protocol headers (`host`, `upgrade`,
    /// `connection`, `sec-websocket-*`) are refused, and so are credential headers
    /// (`authorization`, `cookie`, `x-api-key`, …): give those through
    /// `websocket_headers_env`. Values are masked in `show-effective-config`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub websocket_headers: BTreeMap<String, String>,
    /// Headers of the WebSocket handshake whose values come from environment variables:
    /// header name → variable name (read when connecting, never logged).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub websocket_headers_env: BTreeMap<String, String>,
    /// Ask the server not to echo this connection's own publishes.
    #[serde(default)]
    pub no_echo: bool,
    /// Must stay `true`: nats-sink always reconnects and never exits on a disconnect.
    #[serde(default = "yes")]
    pub allow_reconnect: bool,
    /// Timeout of one connection attempt, seconds (1–300).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_seconds: u64,
    /// Upper bound of the delay between reconnect attempts, seconds (0–3600).
    #[serde(default = "default_reconnect_wait")]
    pub reconnect_time_wait_seconds: u64,
    /// Accepted for compatibility; nats-sink never stops reconnecting (-1 = unlimited).
    #[serde(default = "default_max_reconnects")]
    pub max_reconnect_attempts: i64,
    /// Interval between client pings, seconds (1–3600).
    #[serde(default = "default_ping_interval")]
    pub ping_interval_seconds: u64,
    /// Accepted for compatibility (the client's own ping policy applies).
    #[serde(default = "default_max_pings")]
    pub max_outstanding_pings: u64,
    /// Accepted for compatibility (the client buffers by message count).
    #[serde(default = "default_pending_size")]
    pub pending_size_bytes: u64,
    /// How long shutdown may take to flush acks and drain the connection, seconds (1–3600).
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout_seconds: u64,
    /// The server's HTTP monitoring endpoint (`http://host:8222`), read by
    /// `nats-sink validate --connect`, `stream-plan --connect` and at start-up for the
    /// server's fsync setting (`/varz`), so a single-replica stream on a server that does not
    /// sync every write is reported (default none: the setting is then unknown, and said
    /// to be; extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring_url: Option<String>,
}

fn yes() -> bool {
    true
}
fn default_url() -> String {
    "nats://localhost:4222".into()
}
fn default_connect_timeout() -> u64 {
    2
}
fn default_reconnect_wait() -> u64 {
    2
}
fn default_max_reconnects() -> i64 {
    -1
}
fn default_ping_interval() -> u64 {
    120
}
fn default_max_pings() -> u64 {
    2
}
fn default_pending_size() -> u64 {
    2 * 1024 * 1024
}
fn default_drain_timeout() -> u64 {
    30
}

impl NatsConfig {
    /// The server list to connect to.
    pub fn servers(&self) -> Vec<String> {
        if self.urls.is_empty() { vec![self.url.clone()] } else { self.urls.clone() }
    }

    /// True when the servers are reached over WebSocket (`ws://`, `wss://`).
    pub fn websocket(&self) -> bool {
        self.servers().iter().any(|u| is_websocket_url(u))
    }

    fn validate_websocket(&self, issues: &mut Issues) {
        let servers = self.servers();
        let ws = servers.iter().filter(|u| is_websocket_url(u)).count();
        if ws > 0 && ws < servers.len() {
            issues.push(
                if self.urls.is_empty() { "nats.url" } else { "nats.urls" },
                "WebSocket (ws://, wss://) and TCP URLs may not be mixed",
            );
        }
        let headers = self.websocket_headers.len() + self.websocket_headers_env.len();
        if headers > 0 && ws == 0 {
            issues.push("nats.websocket_headers", "WebSocket headers need ws:// or wss:// URLs");
        }
        if headers > MAX_WEBSOCKET_HEADERS {
            issues.push(
                "nats.websocket_headers",
                format!("at most {MAX_WEBSOCKET_HEADERS} headers (with websocket_headers_env)"),
            );
        }
        for (name, value) in &self.websocket_headers {
            let path = format!("nats.websocket_headers.{name}");
            check_header_name(name, &path, issues);
            if is_credential_header(name) {
                issues.push(&path, "a credential header: give it through nats.websocket_headers_env");
            }
            if value.chars().any(|c| c.is_control()) {
                issues.push(&path, "must not contain control characters");
            }
        }
        for (name, var) in &self.websocket_headers_env {
            let path = format!("nats.websocket_headers_env.{name}");
            check_header_name(name, &path, issues);
            check_env_name(var, &path, issues);
            if self.websocket_headers.keys().any(|n| n.eq_ignore_ascii_case(name)) {
                issues.push(&path, "also set in nats.websocket_headers");
            }
        }
    }

    pub(super) fn validate(&self, issues: &mut Issues) {
        if let Some(url) = &self.monitoring_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            issues.push("nats.monitoring_url", "must be an http:// or https:// URL (the server's monitoring port)");
        }
        for (i, url) in self.servers().iter().enumerate() {
            let path = if self.urls.is_empty() { "nats.url".to_owned() } else { format!("nats.urls[{i}]") };
            check_url(url, &path, issues);
        }
        for (path, value) in [("nats.stream", &self.stream), ("nats.consumer", &self.consumer)] {
            if value.is_empty() {
                issues.push(path, "must not be empty");
            } else if value
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
            {
                issues.push(path, "must not contain whitespace, `.`, `*`, `>`, `/` or `\\`");
            }
        }
        if let Err(e) = subject::validate_pattern(&self.subject) {
            issues.push("nats.subject", e.to_string());
        }
        if self.password.is_some() {
            issues.push(
                "nats.password",
                "secrets are not accepted inline; set `nats.password_env` to the name of an environment variable",
            );
        }
        if self.token.is_some() {
            issues.push(
                "nats.token",
                "secrets are not accepted inline; set `nats.token_env` to the name of an environment variable",
            );
        }
        if self.user.is_some() != self.password_env.is_some() {
            issues.push("nats.user", "`nats.user` and `nats.password_env` must be given together");
        }
        let methods = [
            self.user.is_some() || self.password_env.is_some(),
            self.token_env.is_some(),
            self.creds_file.is_some(),
            self.nkey_seed_file.is_some(),
        ];
        if methods.iter().filter(|m| **m).count() > 1 {
            issues.push(
                "nats",
                "configure a single authentication method (user+password_env, token_env, creds_file or nkey_seed_file)",
            );
        }
        for (path, env) in [("nats.password_env", &self.password_env), ("nats.token_env", &self.token_env)] {
            if let Some(name) = env {
                check_env_name(name, path, issues);
            }
        }
        if self.tls_key_file.is_some() != self.tls_cert_file.is_some() {
            issues.push("nats.tls_cert_file", "`tls_cert_file` and `tls_key_file` must be given together");
        }
        for (path, file) in [
            ("nats.creds_file", &self.creds_file),
            ("nats.nkey_seed_file", &self.nkey_seed_file),
            ("nats.tls_ca_file", &self.tls_ca_file),
            ("nats.tls_cert_file", &self.tls_cert_file),
            ("nats.tls_key_file", &self.tls_key_file),
        ] {
            if let Some(f) = file
                && (f.trim() != f || f.is_empty() || f.chars().any(char::is_control))
            {
                issues.push(path, "must be a plain file path without padding or control characters");
            }
        }
        if !self.tls_verify {
            issues.push(
                "nats.tls_verify",
                "disabling TLS verification is not supported; use `tls_ca_file` for a private CA",
            );
        }
        self.validate_websocket(issues);
        if !self.allow_reconnect {
            issues.push("nats.allow_reconnect", format!("must be true: {} always reconnects", crate::program::name()));
        }
        issues.range("nats.connect_timeout_seconds", self.connect_timeout_seconds, 1, 300);
        issues.range("nats.reconnect_time_wait_seconds", self.reconnect_time_wait_seconds, 0, 3600);
        issues.range("nats.ping_interval_seconds", self.ping_interval_seconds, 1, 3600);
        issues.range("nats.drain_timeout_seconds", self.drain_timeout_seconds, 1, 3600);
        if self.max_reconnect_attempts < -1 {
            issues.push("nats.max_reconnect_attempts", "must be -1 (unlimited) or more");
        }
    }
}

/// Most WebSocket headers (the reference's limit).
const MAX_WEBSOCKET_HEADERS: usize = 32;

/// True for a `ws://` or `wss://` URL.
pub(crate) fn is_websocket_url(url: &str) -> bool {
    url.starts_with("ws://") || url.starts_with("wss://")
}

/// Headers that carry credentials: accepted only from the environment.
fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"].contains(&lower.as_str())
        || lower.contains("token")
        || lower.contains("secret")
}

fn check_header_name(name: &str, path: &str, issues: &mut Issues) {
    let lower = name.to_ascii_lowercase();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
        issues.push(path, "is not an HTTP header name");
    } else if ["host", "upgrade", "connection", "content-length", "transfer-encoding"].contains(&lower.as_str())
        || lower.starts_with("sec-websocket-")
    {
        issues.push(path, "a WebSocket protocol header cannot be set");
    }
}

fn check_url(url: &str, path: &str, issues: &mut Issues) {
    let Some((scheme, rest)) = url.split_once("://") else {
        issues.push(path, "must be a URL like nats://host:4222");
        return;
    };
    match scheme {
        "nats" | "tls" | "ws" | "wss" => {}
        _ => issues.push(path, "scheme must be nats://, tls://, ws:// or wss://"),
    }
    if rest.contains('@') {
        issues.push(path, "credentials in URLs are not accepted; use the *_env fields");
    }
    if rest.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        issues.push(path, "must name a host");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(nats: serde_json::Value) -> Vec<String> {
        let mut base = serde_json::json!({"stream": "S", "consumer": "C", "subject": "s.>"});
        base.as_object_mut().unwrap().extend(nats.as_object().unwrap().clone());
        let config: NatsConfig = serde_json::from_value(base).unwrap();
        let mut issues = Issues::default();
        config.validate(&mut issues);
        match issues.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| format!("{}: {}", i.path, i.message)).collect(),
        }
    }

    #[test]
    fn websocket_table() {
        #[rustfmt::skip]
        let table: &[(&str, serde_json::Value, &[&str])] = &[
            ("ws:// is accepted", serde_json::json!({"url": "ws://127.0.0.1:8080"}), &[]),
            ("wss:// with a private CA", serde_json::json!({"url": "wss://nats.example:443", "tls_ca_file": "/ca.pem"}), &[]),
            ("a seed list of ws URLs", serde_json::json!({"urls": ["ws://a:80", "wss://b:443"]}), &[]),
            ("ws and tcp mixed", serde_json::json!({"urls": ["ws://a:80", "nats://b:4222"]}), &["nats.urls: WebSocket (ws://, wss://) and TCP URLs may not be mixed"]),
            ("other schemes", serde_json::json!({"url": "http://a:80"}), &["nats.url: scheme must be nats://, tls://, ws:// or wss://"]),
            ("headers without a ws URL", serde_json::json!({"websocket_headers": {"X-Route": "a"}}), &["nats.websocket_headers: WebSocket headers need ws:// or wss:// URLs"]),
            ("a protocol header", serde_json::json!({"url": "ws://a:80", "websocket_headers": {"Sec-WebSocket-Key": "x"}}),
             &["nats.websocket_headers.Sec-WebSocket-Key: a WebSocket protocol header cannot be set"]),
            ("a credential inline", serde_json::json!({"url": "ws://a:80", "websocket_headers": {"Authorization": "Bearer x"}}),
             &["nats.websocket_headers.Authorization: a credential header: give it through nats.websocket_headers_env"]),
            ("a credential from the environment, a plain header inline", serde_json::json!({"url": "ws://a:80", "websocket_headers": {"X-Route": "edge"}, "websocket_headers_env": {"Cookie": "WS_COOKIE"}}), &[]),
            ("the same header twice", serde_json::json!({"url": "ws://a:80", "websocket_headers": {"X-Route": "edge"}, "websocket_headers_env": {"x-route": "R"}}),
             &["nats.websocket_headers_env.x-route: also set in nats.websocket_headers"]),
        ];
        for (what, nats, want) in table {
            let got = issues(nats.clone());
            assert_eq!(got.len(), want.len(), "{what}: {got:#?}");
            for w in *want {
                assert!(got.iter().any(|g| g.starts_with(w)), "{what}: missing `{w}` in {got:#?}");
            }
        }
    }
}
