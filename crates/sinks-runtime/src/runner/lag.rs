//! The background task that polls the consumer's lag (`num_pending`, `num_ack_pending`)
//! for the gauges and the summary line. Only reads.

use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::{GaugeId, Metrics};

/// Polls the consumer's `num_pending` and `num_ack_pending` every
/// `metrics.lag_poll_interval_seconds` until a stop is requested (for the lag gauges and the
/// summary line; kept with metrics disabled too). A failed poll keeps the last values.
pub(super) async fn poll_lag(
    mut consumer: async_nats::jetstream::consumer::PullConsumer,
    metrics: Metrics,
    config: crate::config::MetricsConfig,
    mut stop: watch::Receiver<bool>,
) {
    let every = Duration::from_secs(config.lag_poll_interval_seconds);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), consumer.info()).await {
            Ok(Ok(info)) => {
                let (pending, ack_pending) = (info.num_pending, info.num_ack_pending as u64);
                metrics.status().set_lag(pending, ack_pending);
                metrics.set(GaugeId::ConsumerNumPending, pending as f64);
                metrics.set(GaugeId::ConsumerNumAckPending, ack_pending as f64);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "consumer info poll failed"),
            Err(_) => tracing::debug!("consumer info poll timed out"),
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
