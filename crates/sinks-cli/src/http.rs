//! The HTTP listener of `nats-sink run` (`metrics.listen`): `/metrics` in the Prometheus
//! text format (OpenMetrics when the `Accept` header asks for it), `/healthz` (the process
//! is alive and its loops are not wedged) and `/readyz` (connected to NATS, consumer bound,
//! sink opened and healthy). Probes only read the run's [`Metrics`] handle.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sinks_runtime::metrics::{Format, Metrics};
use tokio::net::TcpListener;

/// Binds `addr` (before the run starts, so a taken port is reported at once).
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the three endpoints on `listener` until `stop` resolves.
pub(crate) fn serve(
    listener: TcpListener,
    metrics: Metrics,
    stop: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(metrics);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
            tracing::warn!(error = %e, "the metrics listener stopped");
        }
    })
}

async fn scrape(State(metrics): State<Metrics>, headers: HeaderMap) -> Response {
    let format = Format::from_accept(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    match metrics.encode(format) {
        Some(body) => ([(header::CONTENT_TYPE, format.content_type())], body).into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are disabled\n").into_response(),
    }
}

async fn healthz(State(metrics): State<Metrics>) -> Response {
    let l = metrics.status().liveness();
    if l.alive {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        let body =
            format!("stalled: no progress for {} s (window {} s)\n", l.since_progress.as_secs(), l.window.as_secs());
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

async fn readyz(State(metrics): State<Metrics>) -> Response {
    let r = metrics.status().readiness();
    if r.ready {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {}\n", r.missing.join(", "))).into_response()
    }
}
