//! `nats-sink replay`: re-delivers a range of the source stream to the configured sink
//! through a temporary (ephemeral) consumer, with the runner's whole discipline (policies,
//! ACK gate, DLQ, ledger). The production consumer is never touched; messages already in
//! the destination come back as duplicates.
//!
//! The range ends at `--to-seq`: a later message is not written, only released (NAKed) on
//! the temporary consumer, which the server removes after the run. The replay stops once
//! every message of the range is settled, or on SIGTERM/SIGINT (exit 1: incomplete).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use sinks_contract::{
    BatchResult, Capabilities, Destinations, Envelope, Holding, MessageOutcome, ReadBack, Sink, SinkError,
};
use sinks_runtime::inspect::Connection;
use sinks_runtime::{RunError, RunOptions, StartAt};
use time::OffsetDateTime;

use crate::{Registry, exit};

/// The range to replay.
#[derive(Debug, Clone)]
pub(crate) struct ReplayRange {
    pub(crate) from_seq: Option<u64>,
    pub(crate) to_seq: Option<u64>,
    pub(crate) since: Option<OffsetDateTime>,
}

/// The configured sink, restricted to sequences up to `to`.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn Sink>,
    to: Option<u64>,
    /// A message past the range was delivered: every message of the range was delivered.
    beyond: AtomicBool,
    /// Highest sequence of the range delivered so far.
    highest: AtomicU64,
}

/// Every method forwards to the configured sink (the lint fails the build on a forgotten
/// one: a replay into a batch-mode sink once never flushed, because `holding` was dropped).
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl Sink for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn open(&self) -> Result<(), SinkError> {
        self.inner.open().await
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        let in_range = |e: &Envelope| self.to.is_none_or(|to| e.jetstream().stream_sequence <= to);
        let inside: Vec<Envelope> = batch.iter().filter(|e| in_range(e)).cloned().collect();
        if inside.len() < batch.len() {
            self.beyond.store(true, Ordering::Relaxed);
        }
        if let Some(max) = inside.iter().map(|e| e.jetstream().stream_sequence).max() {
            self.highest.fetch_max(max, Ordering::Relaxed);
        }
        let mut written = if inside.is_empty() {
            Vec::new().into_iter()
        } else {
            sinks_contract::sink::write_isolating(self.inner.as_ref(), &inside, budget).await.into_iter()
        };
        Ok(batch
            .iter()
            .map(|e| {
                if in_range(e) {
                    written.next().unwrap_or_else(|| MessageOutcome::temporary("missing outcome"))
                } else {
                    MessageOutcome::Failed(
                        SinkError::temporary("beyond the replay range; not written").with_reason("beyond_replay_range"),
                    )
                }
            })
            .collect())
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        self.inner.health_check().await
    }

    async fn close(&self) -> Result<(), SinkError> {
        self.inner.close().await
    }

    /// The inner sink's: a batch-mode sink keeps holding the range's messages, and the
    /// runner flushes them through this.
    fn holding(&self) -> Option<&dyn Holding> {
        self.inner.holding()
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        self.inner.read_back()
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        self.inner.destinations()
    }
}

/// Runs the replay; returns the exit code.
#[allow(clippy::print_stdout)]
pub(crate) async fn run(
    registry: &Registry,
    config_path: &std::path::Path,
    range: ReplayRange,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let (mut config, built) = match registry.load(config_path) {
        Ok(v) => v,
        Err(e) => return exit::config_failure(&e),
    };
    let _ = crate::init_logging(&config, None);
    let start = match (range.from_seq, range.since) {
        (Some(seq), _) => StartAt::Sequence(seq.max(1)),
        (None, Some(t)) => StartAt::Time(t),
        (None, None) => {
            exit::report("replay needs where to start: --from-seq N or --since RFC3339-TIME");
            return ExitCode::from(2);
        }
    };
    if let (Some(from), Some(to)) = (range.from_seq, range.to_seq)
        && to < from
    {
        exit::report("--to-seq is before --from-seq");
        return ExitCode::from(2);
    }
    let name = format!("nats-sinks-replay-{}-{}", std::process::id(), OffsetDateTime::now_utc().unix_timestamp());
    config.nats.durable = false;
    config.delivery.in_progress.enabled = false;
    let bounded = Arc::new(Bounded {
        inner: Arc::clone(&built.sink),
        to: range.to_seq,
        beyond: AtomicBool::new(false),
        highest: AtomicU64::new(0),
    });
    let options = RunOptions { start: Some(start), consumer_name: Some(name.clone()) };
    let finished = Arc::new(AtomicBool::new(false));
    let done = {
        let (config, bounded, finished, name) =
            (config.clone(), Arc::clone(&bounded), Arc::clone(&finished), name.clone());
        async move {
            tokio::select! {
                () = replay_done(&config, &bounded, &name) => {
                    tracing::info!(consumer = %name, "the replay range is settled; stopping");
                    finished.store(true, Ordering::Relaxed);
                }
                () = crate::run::shutdown_signal() => {}
            }
        }
    };
    tracing::info!(consumer = %name, from_seq = ?range.from_seq, to_seq = ?range.to_seq, "replay starting");
    let stats = match sinks_runtime::run_with(config, bounded, options, done).await {
        Ok(stats) => stats,
        Err(RunError::Config(e)) => return exit::config_failure(&e),
        Err(e) => {
            exit::report(&e.to_string());
            return ExitCode::from(1);
        }
    };
    let counts: std::collections::BTreeMap<&str, u64> = stats.snapshot().into_iter().collect();
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    let acked = get("acked");
    let committed = acked.saturating_sub(get("duplicates") + get("conflicts") + get("dead_lettered"));
    let complete = finished.load(Ordering::Relaxed);
    if complete {
        tracing::info!(consumer = %name, acked, "replay finished");
    } else {
        tracing::warn!(consumer = %name, acked, "replay stopped before the range was settled");
    }
    println!(
        "replay {}: settled {acked} messages: committed={committed} duplicate={} conflict={} dead_lettered={}",
        if complete { "complete" } else { "INCOMPLETE (stopped before the range was settled)" },
        get("duplicates"),
        get("conflicts"),
        get("dead_lettered"),
    );
    if complete { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Resolves once every message of the range is settled on the temporary consumer.
async fn replay_done(config: &sinks_runtime::Config, bounded: &Bounded, name: &str) {
    let Ok(connection) = Connection::open(&config.nats).await else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let Some(progress) = connection.consumer_progress(&config.nats.stream, name).await else { continue };
        let delivered = progress.delivered_consumer_sequence;
        // Everything delivered and settled (the range reaches past the end of the stream).
        if progress.pending == 0 && progress.ack_pending == 0 && delivered > 0 {
            return;
        }
        // A message past the range was delivered, so the whole range was; done once the
        // acks reach the highest sequence of the range.
        let highest = bounded.highest.load(Ordering::Relaxed);
        if bounded.beyond.load(Ordering::Relaxed) && progress.ack_floor_stream_sequence >= highest {
            return;
        }
        if progress.pending == 0 && progress.ack_pending == 0 && delivered == 0 {
            // Nothing in the range at all.
            return;
        }
    }
}
