//! The background task that runs the sink's health check for `/readyz`. Only reads: a failed
//! check changes no delivery.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::context::Ctx;

/// Runs the sink's health check every `metrics.health_check_interval_seconds` for
/// `/readyz`, until a stop is requested. Only reads: a failed check changes no delivery.
pub(super) async fn probe_sink(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    let every = Duration::from_secs(ctx.config.metrics.health_check_interval_seconds);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let healthy = match tokio::time::timeout(every.min(Duration::from_secs(10)), ctx.sink.health_check()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(sink = ctx.sink.name(), error = %e.display_chain(), "sink health check failed");
                false
            }
            Err(_) => {
                tracing::debug!(sink = ctx.sink.name(), "sink health check timed out");
                false
            }
        };
        if ctx.metrics.status().set_sink_healthy(healthy) != healthy {
            if healthy {
                tracing::info!(sink = ctx.sink.name(), "sink health check passes again");
            } else {
                tracing::warn!(sink = ctx.sink.name(), "sink health check fails; /readyz reports not ready");
            }
        }
    }
}
