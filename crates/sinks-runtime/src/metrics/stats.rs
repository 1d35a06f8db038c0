//! The run's counters ([`RunStats`]): what the runner did, for logs and tests. A leaf below
//! the runner and the metrics: every task of the runner counts here, the metrics read it, and
//! this module depends on none of them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of what the runner did, for logs and tests.
#[derive(Debug, Default)]
pub struct RunStats {
    /// Messages fetched.
    pub fetched: AtomicU64,
    /// Messages acked after a durable outcome.
    pub acked: AtomicU64,
    /// Messages NAKed.
    pub nacked: AtomicU64,
    /// Messages left for AckWait.
    pub left_unacked: AtomicU64,
    /// DLQ records stored.
    pub dead_lettered: AtomicU64,
    /// DLQ publishes that failed (original NAKed).
    pub dead_letter_failures: AtomicU64,
    /// Ack, nak or term sends that failed (message will be redelivered).
    pub ack_failures: AtomicU64,
    /// Fetches that failed.
    pub fetch_failures: AtomicU64,
    /// Conflicting redeliveries reported by the sink.
    pub conflicts: AtomicU64,
    /// Duplicates reported by the sink.
    pub duplicates: AtomicU64,
    /// Messages held back behind a temporary failure of their ordering key (released).
    pub held_back: AtomicU64,
    /// Messages refused by a policy step (authenticity, size, pre-sink, …) and
    /// dead-lettered without reaching the sink.
    pub rejected_by_policy: AtomicU64,
    /// Exhausted messages the rescue made durable.
    pub rescued: AtomicU64,
    /// Exhausted messages the rescue dead-lettered (`max_deliver_exhausted`).
    pub rescue_dead_lettered: AtomicU64,
    /// Exhausted messages already gone from the stream when the rescue came.
    pub rescue_gone: AtomicU64,
    /// Rescue attempts that failed and will be retried.
    pub rescue_failures: AtomicU64,
}

impl RunStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A plain snapshot `(name, value)` of every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        [
            ("fetched", &self.fetched),
            ("acked", &self.acked),
            ("nacked", &self.nacked),
            ("left_unacked", &self.left_unacked),
            ("dead_lettered", &self.dead_lettered),
            ("dead_letter_failures", &self.dead_letter_failures),
            ("ack_failures", &self.ack_failures),
            ("fetch_failures", &self.fetch_failures),
            ("conflicts", &self.conflicts),
            ("duplicates", &self.duplicates),
            ("held_back", &self.held_back),
            ("rejected_by_policy", &self.rejected_by_policy),
            ("rescued", &self.rescued),
            ("rescue_dead_lettered", &self.rescue_dead_lettered),
            ("rescue_gone", &self.rescue_gone),
            ("rescue_failures", &self.rescue_failures),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.load(Ordering::Relaxed)))
        .collect()
    }
}
