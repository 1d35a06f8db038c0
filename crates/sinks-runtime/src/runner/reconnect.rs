//! Retries of start-up steps (sink open, NATS connect, consumer setup) with a capped
//! backoff, until they succeed, fail for a configuration reason, or a stop is requested.

use std::future::Future;
use std::time::Duration;

use sinks_toolkit::retry::{Backoff, BackoffMode, Jitter};
use tokio::sync::watch;

use crate::config::ConfigError;
use crate::metrics::Metrics;

/// What a start-up step reaches: `target` (a server's `host:port`, a destination, never
/// credentials) and the config field to check when it keeps failing (`hint`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Reaching<'a> {
    /// What the step is, e.g. `nats connect`.
    pub(super) what: &'a str,
    /// What it talks to.
    pub(super) target: &'a str,
    /// The field that decides `target`.
    pub(super) hint: &'a str,
}

/// How long a step fails before its retry lines point at the field to check.
const HINT_AFTER: Duration = Duration::from_secs(60);

/// Retries `attempt` with backoff until it succeeds, fails for a configuration reason, or a
/// stop is requested (then `None`). Every retry line names what it reaches; after a minute
/// of failures, once, which field decides that.
pub(super) async fn retry_until<T, E: std::fmt::Display, F: Future<Output = Result<T, Retry<E>>>>(
    step: Reaching<'_>,
    stop: &watch::Receiver<bool>,
    metrics: &Metrics,
    mut attempt: impl FnMut() -> F,
) -> Result<Option<T>, ConfigError> {
    let backoff = reconnect_backoff();
    let (what, target) = (step.what, step.target);
    let mut failures = 0u64;
    let mut first_failure: Option<std::time::Instant> = None;
    let mut hinted = false;
    loop {
        metrics.status().progress();
        match attempt().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(what, target, failures, "recovered");
                }
                return Ok(Some(v));
            }
            Err(Retry::Fatal(e)) => return Err(e),
            Err(Retry::Again(e)) => {
                failures += 1;
                let since = *first_failure.get_or_insert_with(std::time::Instant::now);
                let delay = backoff.delay(failures, 0.5);
                tracing::warn!(what, target, error = %e, attempt = failures, retry_in_ms = delay.as_millis() as u64, "not ready; retrying");
                if !hinted && since.elapsed() >= HINT_AFTER {
                    hinted = true;
                    tracing::warn!(
                        what,
                        target,
                        seconds = since.elapsed().as_secs(),
                        "still failing after a minute: check {} (retrying, since this can heal by itself)",
                        step.hint
                    );
                }
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
