//! Opening the NATS connection: options from the `nats` section, secrets from the
//! environment, and connection events turned into log lines.
//!
//! The client reconnects forever; a disconnect is logged as a warning and the recovery as
//! info, so an outage and its end are visible in the logs. With a [`Metrics`] handle the
//! same events are counted and set the connection state `/readyz` reports.
//!
//! `ws://` and `wss://` URLs go through async-nats's WebSocket support; with handshake headers
//! (`nats.websocket_headers*`), which it cannot send, through the loopback relay of
//! `crate::wsrelay`, which then also does the TLS.

use std::time::Duration;

use async_nats::{ConnectOptions, Event, ServerAddr};

use crate::config::{ConfigError, NatsConfig};
use crate::metrics::{CounterId, Metrics};

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A setting or secret is missing or malformed (exit code 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The server could not be reached or refused us (retried by the caller).
    #[error("cannot connect to nats: {0}")]
    Unreachable(String),
}

fn env_secret(var: &str, path: &str) -> Result<String, ConfigError> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(ConfigError::single(path, format!("environment variable {var} is not set or empty"))),
    }
}

/// Counts a connection event and keeps the connection state of `metrics`.
fn record(metrics: &Metrics, event: &Event) {
    match event {
        Event::Connected => {
            // The first `Connected` is the initial connection; every later one a recovery.
            if !metrics.status().first_connection() {
                metrics.inc(CounterId::NatsConnectionReconnected, 1);
            }
            metrics.status().set_nats_connected(true);
        }
        Event::Disconnected => {
            metrics.inc(CounterId::NatsConnectionDisconnected, 1);
            metrics.status().set_nats_connected(false);
        }
        Event::Closed => {
            metrics.inc(CounterId::NatsConnectionClosed, 1);
            metrics.status().set_nats_connected(false);
        }
        Event::ServerError(_) | Event::ClientError(_) => metrics.inc(CounterId::NatsAsyncErrors, 1),
        Event::LameDuckMode | Event::Draining | Event::SlowConsumer(_) => {}
    }
}

/// Builds connect options from the config, reading secrets from the environment; with
/// `metrics`, connection events are counted there.
pub(crate) async fn options_observed(
    cfg: &NatsConfig,
    metrics: Option<Metrics>,
) -> Result<ConnectOptions, ConfigError> {
    let mut opts = ConnectOptions::new();
    if let (Some(user), Some(var)) = (&cfg.user, &cfg.password_env) {
        opts = opts.user_and_password(user.clone(), env_secret(var, "nats.password_env")?);
    }
    if let Some(var) = &cfg.token_env {
        opts = opts.token(env_secret(var, "nats.token_env")?);
    }
    if let Some(path) = &cfg.creds_file {
        opts = opts
            .credentials_file(path)
            .await
            .map_err(|e| ConfigError::single("nats.creds_file", format!("cannot read credentials file: {e}")))?;
    }
    if let Some(path) = &cfg.nkey_seed_file {
        let seed = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::single("nats.nkey_seed_file", format!("cannot read seed file: {e}")))?;
        opts = opts.nkey(seed.trim().to_owned());
    }
    let tls_url = cfg.servers().iter().any(|u| u.starts_with("tls://"));
    if crate::wsrelay::needed(cfg) {
        // The relay does TLS (and is the only server: announced ones would bypass it).
        opts = opts.ignore_discovered_servers();
    } else {
        if let Some(ca) = &cfg.tls_ca_file {
            opts = opts.add_root_certificates(ca.into()).require_tls(true);
        }
        if let (Some(cert), Some(key)) = (&cfg.tls_cert_file, &cfg.tls_key_file) {
            opts = opts.add_client_certificate(cert.into(), key.into()).require_tls(true);
        }
    }
    if tls_url {
        opts = opts.require_tls(true);
    }
    if let Some(name) = &cfg.name {
        opts = opts.name(name);
    }
    if cfg.no_echo {
        opts = opts.no_echo();
    }
    let max_wait = Duration::from_secs(cfg.reconnect_time_wait_seconds).max(Duration::from_millis(100));
    Ok(opts
        .connection_timeout(Duration::from_secs(cfg.connect_timeout_seconds))
        .ping_interval(Duration::from_secs(cfg.ping_interval_seconds))
        .max_reconnects(None)
        .reconnect_delay_callback(move |attempt| reconnect_delay(attempt, max_wait))
        .event_callback(move |event| {
            let metrics = metrics.clone();
            async move {
                if let Some(m) = &metrics {
                    record(m, &event);
                }
                match event {
                    Event::Connected => tracing::info!("nats connection established"),
                    Event::Disconnected => tracing::warn!("nats connection lost; reconnecting"),
                    Event::LameDuckMode => tracing::warn!("nats server entered lame duck mode"),
                    Event::Draining => tracing::info!("nats connection draining"),
                    Event::Closed => tracing::info!("nats connection closed"),
                    Event::SlowConsumer(sid) => tracing::warn!(sid, "nats slow consumer"),
                    Event::ServerError(err) => tracing::warn!(error = %err, "nats server error"),
                    Event::ClientError(err) => tracing::warn!(error = %err, "nats client error"),
                }
            }
        }))
}

/// Delay before connection attempt `attempt` (1-based, counted by the client): none for the
/// first, then 100 ms doubling up to `max_wait`.
fn reconnect_delay(attempt: usize, max_wait: Duration) -> Duration {
    if attempt <= 1 {
        return Duration::ZERO;
    }
    let exp = u32::try_from(attempt - 2).unwrap_or(u32::MAX).min(16);
    Duration::from_millis(100).saturating_mul(1 << exp).min(max_wait)
}

/// Connects once. Parses the server list and fails fast on configuration problems.
pub(crate) async fn connect(cfg: &NatsConfig) -> Result<async_nats::Client, ConnectError> {
    connect_observed(cfg, None).await
}

/// [`connect`], with connection events counted in `metrics` when given.
pub(crate) async fn connect_observed(
    cfg: &NatsConfig,
    metrics: Option<Metrics>,
) -> Result<async_nats::Client, ConnectError> {
    let mut servers: Vec<ServerAddr> = cfg
        .servers()
        .iter()
        .map(|u| u.parse::<ServerAddr>().map_err(|e| ConfigError::single("nats.url", e.to_string())))
        .collect::<Result<_, _>>()?;
    let opts = options_observed(cfg, metrics.clone()).await?;
    // With WebSocket headers the client connects to the relay, which lives as long as the
    // connection (for the process, once connected).
    let relay = match crate::wsrelay::needed(cfg) {
        true => Some(crate::wsrelay::start(cfg).await?),
        false => None,
    };
    if let Some((addr, _)) = &relay {
        let relayed = format!("nats://{addr}")
            .parse::<ServerAddr>()
            .map_err(|e| ConfigError::single("nats.url", e.to_string()))?;
        servers = vec![relayed];
    }
    let client = match opts.connect(servers).await {
        Ok(client) => client,
        Err(e) => {
            if let Some((_, task)) = relay {
                task.abort();
            }
            return Err(ConnectError::Unreachable(e.to_string()));
        }
    };
    // The initial `Connected` event may come before or after this returns; the state is
    // known now either way.
    if let Some(m) = &metrics {
        m.status().set_nats_connected(client.connection_state() == async_nats::connection::State::Connected);
    }
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_attempt_is_immediate_then_backoff_is_capped() {
        let max = Duration::from_secs(2);
        let ms: Vec<u128> = (1..=8).map(|a| reconnect_delay(a, max).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1600, 2000, 2000]);
    }
}
