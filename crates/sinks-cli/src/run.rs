//! `nats-sink run`: consume and write until SIGTERM or SIGINT, then finish the batches in
//! flight and exit 0; meanwhile serve `/metrics`, `/healthz` and `/readyz` (`metrics.listen`)
//! and log a summary line every `logging.summary_interval_seconds`.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sinks_contract::ConfigError;
use sinks_runtime::RunError;
use sinks_runtime::metrics::Metrics;

use crate::{Registry, exit, http, init_logging};

/// Runs the sink `config` configures; returns the exit code.
pub(crate) async fn run(registry: &Registry, config: &Path, log_level: Option<&str>) -> ExitCode {
    let (c, built) = match registry.load(config) {
        Ok(v) => v,
        Err(e) => return exit::config_failure(&e),
    };
    if let Err(message) = init_logging(&c, log_level) {
        return exit::config_failure(&ConfigError::single("logging.level", message));
    }
    tracing::info!(
        program = sinks_runtime::program::name(),
        version = env!("CARGO_PKG_VERSION"),
        sink = built.sink.name(),
        "starting"
    );
    let metrics = Metrics::new(&c.metrics);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = match c.metrics.listen_addr() {
        Some(addr) => match http::bind(addr).await {
            Ok(listener) => {
                let bound = listener.local_addr().map_or_else(|_| addr.to_string(), |a| a.to_string());
                tracing::info!(address = %bound, "serving /metrics, /healthz and /readyz");
                let mut stop = stop_rx.clone();
                Some(http::serve(listener, metrics.clone(), async move {
                    let _ = stop.wait_for(|s| *s).await;
                }))
            }
            Err(e) => {
                tracing::error!(field = "metrics.listen", "configuration error: cannot listen on {addr}: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let every = Duration::from_secs(c.logging.summary_interval_seconds);
    let summary = (!every.is_zero()).then(|| tokio::spawn(log_summaries(metrics.clone(), every, stop_rx)));
    let result = sinks_runtime::runner::run_observed(
        c,
        built.sink,
        metrics,
        sinks_runtime::RunOptions::default(),
        shutdown_signal(),
    )
    .await;
    let _ = stop_tx.send(true);
    for task in [server, summary].into_iter().flatten() {
        let _ = task.await;
    }
    // Logging is on: each problem is one log line (not also a second copy on stderr).
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(RunError::Config(e)) => {
            for issue in &e.issues {
                tracing::error!(field = %issue.path, "configuration error: {issue}");
            }
            ExitCode::from(2)
        }
        Err(e) => {
            tracing::error!(error = %e, "stopped with an error");
            ExitCode::from(1)
        }
    }
}

/// Logs one info line every `every` (messages acked per second over the interval, totals,
/// consumer lag, dead letters), so a tailing operator sees progress without metrics.
async fn log_summaries(metrics: Metrics, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = std::sync::Arc::clone(metrics.stats());
    let mut last = (Instant::now(), stats.acked.load(Relaxed));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Instant::now();
        let acked = stats.acked.load(Relaxed);
        let rate = (acked - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-3);
        last = (now, acked);
        let messages_per_second = (rate * 10.0).round() / 10.0;
        let (fetched, nacked) = (stats.fetched.load(Relaxed), stats.nacked.load(Relaxed));
        let dead_lettered = stats.dead_lettered.load(Relaxed);
        let ready = metrics.status().readiness().ready;
        match metrics.status().lag() {
            Some((num_pending, num_ack_pending)) => tracing::info!(
                messages_per_second,
                fetched,
                acked,
                nacked,
                dead_lettered,
                num_pending,
                num_ack_pending,
                ready,
                "summary"
            ),
            None => tracing::info!(messages_per_second, fetched, acked, nacked, dead_lettered, ready, "summary"),
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL only");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("received SIGTERM"),
        _ = int.recv() => tracing::info!("received SIGINT"),
    }
}
