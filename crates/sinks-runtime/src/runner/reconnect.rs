//! Retries of start-up steps (sink open, NATS connect, consumer setup) with a capped
//! backoff, until they succeed, fail for a configuration reason, or a stop is requested.

use std::future::Future;
use std::time::Duration;

use sinks_contract::retry::{Backoff, BackoffMode, Jitter};
use tokio::sync::watch;

use crate::config::ConfigError;
use crate::metrics::Metrics;

/// Retries `attempt` with backoff until it succeeds, fails for a configuration reason, or a
/// stop is requested (then `None`).
pub(super) async fn retry_until<T, E: std::fmt::Display, F: Future<Output = Result<T, Retry<E>>>>(
    what: &str,
    stop: &watch::Receiver<bool>,
    metrics: &Metrics,
    mut attempt: impl FnMut() -> F,
) -> Result<Option<T>, ConfigError> {
    let backoff = reconnect_backoff();
    let mut failures = 0u64;
    loop {
        metrics.status().progress();
        match attempt().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(what, failures, "recovered");
                }
                return Ok(Some(v));
            }
            Err(Retry::Fatal(e)) => return Err(e),
            Err(Retry::Again(e)) => {
                failures += 1;
                let delay = backoff.delay(failures, 0.5);
                tracing::warn!(what, error = %e, attempt = failures, retry_in_ms = delay.as_millis() as u64, "not ready; retrying");
                if sleep_or_stop(delay, stop).await {
                    return Ok(None);
                }
            }
        }
    }
}

pub(super) enum Retry<E> {
    Fatal(ConfigError),
    Again(E),
}

pub(super) fn reconnect_backoff() -> Backoff {
    Backoff {
        base: Duration::from_millis(200),
        max: Duration::from_secs(5),
        mode: BackoffMode::Exponential,
        multiplier: 2.0,
        jitter: Jitter::Equal,
    }
}

/// Sleeps `d`; returns true when a stop was requested meanwhile.
pub(super) async fn sleep_or_stop(d: Duration, stop: &watch::Receiver<bool>) -> bool {
    let mut watcher = stop.clone();
    tokio::select! {
        () = tokio::time::sleep(d) => *stop.borrow(),
        _ = watcher.wait_for(|s| *s) => true,
    }
}
