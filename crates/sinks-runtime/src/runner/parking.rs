//! Parking: the messages held back behind a temporary failure of their ordering key, kept
//! (and heartbeated) by the runner until the failed message comes back.
//!
//! Pure bookkeeping: no clock, no I/O. Time is what the caller says (a failed message's due
//! time, the start of the latest fetch), and `H` is whatever handle the caller keeps with a
//! message (an ack handle in a run, a plain value in tests).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use sinks_contract::envelope::Envelope;
use sinks_contract::ordering::OrderKey;

use super::batch::Batch;

/// How much later than the message it waits for a released held-back message comes back.
pub(super) const HELD_BACK_MARGIN: Duration = Duration::from_millis(50);

/// Messages held back behind a temporary failure of their ordering key. The runner keeps
/// them (with in-progress heartbeats, so AckWait does not redeliver them) instead of
/// releasing them to the server: they cost no delivery, and are written right after the
/// failed message when it comes back, in stream order. A lot whose failed message does not
/// come back in time (taken by another process on the same consumer, dropped by the
/// server) is released for redelivery; so are all lots on shutdown.
#[derive(Debug)]
pub(super) struct Parking<H> {
    lots: HashMap<OrderKey, Lot<H>>,
    /// The lot each failed message is waiting in, by its stream sequence. A failed message is
    /// recognised by its sequence when it comes back, not by its key: on its last allowed
    /// delivery it comes back without one.
    blockers: HashMap<u64, OrderKey>,
    /// Every message that was held back and is not settled yet, parked or back in a write
    /// behind its failed message: the keeper heartbeats all of them.
    kept: HashMap<u64, H>,
    /// When the latest completed fetch started: a failed message due before it that did not
    /// come in it (the server hands out redeliveries first) is not coming back to us.
    last_fetch: Option<Instant>,
}

impl<H> Default for Parking<H> {
    fn default() -> Self {
        Self { lots: HashMap::new(), blockers: HashMap::new(), kept: HashMap::new(), last_fetch: None }
    }
}

/// The messages of one ordering key waiting for its failed message.
#[derive(Debug)]
struct Lot<H> {
    /// Stream sequence of the failed message the lot waits for.
    blocker: u64,
    /// When the failed message is expected back.
    back: Instant,
    /// The failed message has been fetched again (its batch may still be waiting for an
    /// earlier one): the lot is never released as overdue.
    arrived: bool,
    /// Parked messages by stream sequence.
    parked: BTreeMap<u64, (Envelope, H)>,
}

impl<H: Clone> Parking<H> {
    /// Sorts a fetched batch into what is written now and what joins a lot: a message of a
    /// key with a lot waits, unless it is the lot's failed message coming back (then the
    /// lot's messages are written right after it) or older than it. Lots whose failed
    /// message was settled otherwise (`gone`: refused by a policy on its way back) are
    /// written now as well. The result is in stream-sequence order, so a key's messages are
    /// written in order.
    pub(super) fn admit(&mut self, batch: Batch<H>, gone: &[u64]) -> Batch<H> {
        let mut work: Vec<(Envelope, H)> = Vec::with_capacity(batch.len());
        let mut returning: Vec<u64> = gone.iter().copied().filter(|seq| self.blockers.contains_key(seq)).collect();
        for (e, handle) in batch {
            let seq = e.jetstream().stream_sequence;
            if self.blockers.contains_key(&seq) {
                returning.push(seq);
                work.push((e, handle));
                continue;
            }
            match e.order_key().and_then(|k| self.lots.get_mut(&k)) {
                Some(lot) if seq > lot.blocker => {
                    // A second copy (a heartbeat was lost) replaces the first.
                    self.kept.insert(seq, handle.clone());
                    if lot.parked.insert(seq, (e, handle)).is_some() {
                        tracing::debug!(stream_sequence = seq, "a held-back message was delivered again");
                    }
                }
                _ => work.push((e, handle)),
            }
        }
        for blocker in returning {
            if let Some(lot) = self.blockers.remove(&blocker).and_then(|key| self.lots.remove(&key)) {
                tracing::debug!(
                    stream_sequence = lot.blocker,
                    held_back = lot.parked.len(),
                    "failed message came back; the messages held back behind it follow"
                );
                work.extend(lot.parked.into_values());
            }
        }
        work.sort_by_key(|(e, _)| e.jetstream().stream_sequence);
        work.into_iter().collect()
    }

    /// Parks a held-back message in its key's lot; gives it back when there is no lot.
    pub(super) fn park(&mut self, envelope: Envelope, handle: H) -> Option<(Envelope, H)> {
        match envelope.order_key().and_then(|k| self.lots.get_mut(&k)) {
            Some(lot) => {
                let seq = envelope.jetstream().stream_sequence;
                self.kept.insert(seq, handle.clone());
                lot.parked.insert(seq, (envelope, handle));
                None
            }
            None => Some((envelope, handle)),
        }
    }

    /// The handles of every held-back message not settled yet (for heartbeats).
    pub(super) fn handles(&self) -> Vec<H> {
        self.kept.values().cloned().collect()
    }
}

impl<H> Parking<H> {
    /// Opens a lot for `key` behind the failed message at `blocker`, expected back at `back`
    /// (a key that has a lot keeps it, and the failed message it waits for).
    pub(super) fn block(&mut self, key: OrderKey, blocker: u64, back: Instant) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.lots.entry(key) {
            slot.insert(Lot { blocker, back, arrived: false, parked: BTreeMap::new() });
            self.blockers.insert(blocker, key);
        }
    }

    /// Notes a completed fetch that started at `started`, and the failed messages it brought
    /// back: a slow machine may take longer than AckWait to get to their batch, and their
    /// lots must wait for them, not be released.
    pub(super) fn note_fetch(&mut self, fetched: &[Envelope], started: Instant) {
        self.last_fetch = Some(started);
        if self.lots.is_empty() {
            return;
        }
        for e in fetched {
            if let Some(lot) = self.blockers.get(&e.jetstream().stream_sequence).and_then(|k| self.lots.get_mut(k)) {
                lot.arrived = true;
            }
        }
    }

    /// Stops heartbeating the message at `sequence`: it is about to be settled.
    pub(super) fn settling(&mut self, sequence: u64) {
        self.kept.remove(&sequence);
    }

    /// How many held-back messages are not settled yet (the held-back gauge).
    pub(super) fn kept(&self) -> usize {
        self.kept.len()
    }

    /// Removes and returns the parked messages of lots whose failed message was due `grace`
    /// before the latest fetch started and has not come back (every lot when `all`). Time
    /// is measured by fetches, so a fetch loop that waits for a slow batch releases nothing.
    pub(super) fn release(&mut self, all: bool, grace: Duration) -> Batch<H> {
        let fetched = self.last_fetch;
        let overdue: Vec<OrderKey> = self
            .lots
            .iter()
            .filter(|(_, lot)| all || (!lot.arrived && fetched.is_some_and(|f| lot.back + grace < f)))
            .map(|(k, _)| *k)
            .collect();
        let mut released = Batch::default();
        for key in overdue {
            if let Some(lot) = self.lots.remove(&key) {
                self.blockers.remove(&lot.blocker);
                released.extend(lot.parked.into_values());
            }
        }
        for e in &released.envelopes {
            self.kept.remove(&e.jetstream().stream_sequence);
        }
        released
    }
}
