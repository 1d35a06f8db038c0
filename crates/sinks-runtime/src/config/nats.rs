//! `nats` section: servers, stream, consumer, subject, authentication and TLS.
//!
//! Secrets come only through `*_env` fields (resolved when connecting); an inline `password`
//! or `token` is rejected at load time so a secret never sits in a config file.

use serde::{Deserialize, Serialize};

use super::{Issues, check_env_name};
use sinks_contract::subject;

/// Connection and JetStream binding settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL (`nats://` or `tls://`); ignored when `urls` is set.
    #[serde(default = "default_url")]
    pub url: String,
    /// Seed server URLs, tried in order.
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
    /// WebSocket headers: not supported yet; must be empty.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub websocket_headers: serde_json::Map<String, serde_json::Value>,
    /// WebSocket headers from environment variables: not supported yet; must be empty.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub websocket_headers_env: serde_json::Map<String, serde_json::Value>,
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

    pub(super) fn validate(&self, issues: &mut Issues) {
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
        if !self.websocket_headers.is_empty() || !self.websocket_headers_env.is_empty() {
            issues.push("nats.websocket_headers", "WebSocket transport is not supported yet");
        }
        if !self.allow_reconnect {
            issues.push("nats.allow_reconnect", "must be true: nats-sink always reconnects");
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

fn check_url(url: &str, path: &str, issues: &mut Issues) {
    let Some((scheme, rest)) = url.split_once("://") else {
        issues.push(path, "must be a URL like nats://host:4222");
        return;
    };
    match scheme {
        "nats" | "tls" => {}
        "ws" | "wss" => issues.push(path, "WebSocket transport is not supported yet"),
        _ => issues.push(path, "scheme must be nats:// or tls://"),
    }
    if rest.contains('@') {
        issues.push(path, "credentials in URLs are not accepted; use the *_env fields");
    }
    if rest.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        issues.push(path, "must name a host");
    }
}
