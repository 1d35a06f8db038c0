//! The per-run context every batch task shares: the sink, the gate policy, the DLQ and
//! ledger publishers, the metrics handle, the parking, the pending messages of a holding
//! sink (with what the runner keeps of each, [`Holder`]), the outage log and hold state, and
//! the timings derived from the consumer's AckWait. It names only the runner's leaf modules
//! (their states); the tasks that use it depend on it, never the other way round.

use std::sync::Arc;
use std::time::Duration;

use sinks_contract::envelope::Envelope;
use sinks_contract::sink::Sink;
use sinks_policy::Pipeline;

use sinks_toolkit::holding::Pending;

use super::evidence::Evidence;
use super::guard::Guard;
use super::handle::Handle;
use super::outage::{Holds, Outage};
use super::parking::Parking;
use crate::ack::GatePolicy;
use crate::config::Config;
use crate::dlq::DeadLetterPublisher;
use crate::freshness::Freshness;
use crate::ledger::LedgerPublisher;
use crate::metrics::{GaugeId, Metrics, OutcomeCounters, RunStats};

/// What the runner keeps of a pending message (one a holding sink took into an object not
/// committed yet), to settle it from its final outcome (see `pending`).
#[derive(Debug)]
pub(super) struct Holder {
    /// The envelope (without its payload unless it may need a dead-letter record).
    pub(super) envelope: Box<Envelope>,
    /// Its handle (a rescued message's is its advisory's).
    pub(super) handle: Handle,
    /// The envelope was kept without its payload and the headers settlement does not read:
    /// it cannot make a dead-letter record.
    pub(super) slim: bool,
}

/// The pending messages of a run (an empty set for a sink that holds nothing).
pub(super) type PendingSet = Pending<Holder>;

/// Shared, immutable per-run context of batch tasks.
#[derive(Debug)]
pub(super) struct Ctx {
    pub(super) sink: Arc<dyn Sink>,
    pub(super) policy: GatePolicy,
    pub(super) dlq: Option<DeadLetterPublisher>,
    pub(super) config: Config,
    pub(super) stats: Arc<RunStats>,
    /// The run's observability handle (records only; never read back to decide).
    pub(super) metrics: Metrics,
    /// The sink's outcome counters, resolved once.
    pub(super) outcomes: OutcomeCounters,
    /// Event freshness settings.
    pub(super) freshness: Freshness,
    /// The policy steps whose pass and reject counts the reference reports, in pipeline order.
    pub(super) policy_steps: Vec<&'static str>,
    /// The current destination outage, if any (for its log lines).
    pub(super) outage: std::sync::Mutex<Outage>,
    /// Messages held back behind a temporary failure of their key (see [`Parking`]).
    pub(super) parking: std::sync::Mutex<Parking<Handle>>,
    /// The consumer's effective AckWait (when an unacked message comes back).
    pub(super) ack_wait: Duration,
    /// Time a write may take, retries in place included (see [`write_budget`]).
    pub(super) write_budget: Duration,
    /// The policy steps (metadata, authenticity, encryption, size, pre-sink, custody,
    /// priority lanes), applied before the sink (and the DLQ) sees a message.
    pub(super) pipeline: Pipeline,
    /// Delivery receipts (`ledger` section), when enabled.
    pub(super) ledger: Option<LedgerPublisher>,
    /// Exhaustions are captured and rescued (`rescue`, with a `max_deliver`).
    pub(super) rescue: bool,
    /// One trace span per message (`opentelemetry.traces`); `None`: no work at all.
    pub(super) traces: Option<Arc<crate::otel::Traces>>,
    /// Messages a holding sink took into objects not committed yet (see `pending`).
    pub(super) pending: std::sync::Mutex<PendingSet>,
    /// Wakes the pending flusher after a write held something.
    pub(super) flush_wake: tokio::sync::Notify,
    /// The stream guard: the epoch in force, and whether fetching is paused.
    pub(super) guard: Arc<Guard>,
    /// JetStream, for binding the consumer again when it is gone.
    pub(super) js: async_nats::jetstream::Context,
    /// Batches holding their messages through a destination outage (see `hold`).
    pub(super) holds: Holds,
    /// What the destination has shown of itself (see `evidence`), for the holds.
    pub(super) evidence: Evidence,
    /// Where each event was first stored, for a mirror or a sourced stream (`None`: a plain
    /// stream outside any domain, nothing to resolve).
    pub(super) origins: Option<Arc<crate::origin::Resolver>>,
    /// Becomes true when a stop was requested.
    pub(super) stop: tokio::sync::watch::Receiver<bool>,
}

impl Ctx {
    /// True on the consumer's last allowed delivery of `envelope`.
    pub(super) fn is_last_delivery(&self, envelope: &Envelope) -> bool {
        self.policy.max_deliver.is_some_and(|max| envelope.jetstream().delivered >= max)
    }

    /// How often the runner heartbeats messages it holds without writing them (parked, or
    /// in a batch waiting its turn): a third of AckWait, at least 200 ms.
    pub(super) fn heartbeat_every(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_millis(200))
    }

    /// The parking, locked (held only for pure bookkeeping, never across an await).
    pub(super) fn lock_parking(&self) -> std::sync::MutexGuard<'_, Parking<Handle>> {
        self.parking.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The pending messages, locked (held only for bookkeeping, never across an await).
    pub(super) fn lock_pending(&self) -> std::sync::MutexGuard<'_, PendingSet> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Updates the held-back gauge from `parking` (called with the lock held).
    pub(super) fn note_parking(&self, parking: &Parking<Handle>) {
        self.metrics.set(GaugeId::HeldBackMessages, parking.kept() as f64);
    }
}

/// How long one write may take, in-place retries included: 80 % of the consumer's AckWait,
/// or, with in-progress heartbeats, as long as the heartbeats keep the batch alive; never
/// less than one second.
pub(super) fn write_budget(config: &Config, ack_wait: Duration) -> Duration {
    let ip = &config.delivery.in_progress;
    let budget = if ip.enabled {
        Duration::from_millis(ip.interval_ms).saturating_mul(ip.max_heartbeats) + ack_wait.mul_f64(0.8)
    } else {
        ack_wait.mul_f64(0.8)
    };
    budget.max(Duration::from_secs(1))
}
