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

    /// Every lot as `(blocker, parked sequences)`, by blocker (for tests).
    #[cfg(test)]
    pub(super) fn lots(&self) -> Vec<(u64, Vec<u64>)> {
        let mut lots: Vec<(u64, Vec<u64>)> =
            self.lots.values().map(|lot| (lot.blocker, lot.parked.keys().copied().collect())).collect();
        lots.sort_unstable();
        lots
    }

    /// The kept (heartbeated) messages' sequences and handles, by sequence (for tests).
    #[cfg(test)]
    pub(super) fn kept_handles(&self) -> Vec<(u64, &H)> {
        let mut kept: Vec<(u64, &H)> = self.kept.iter().map(|(seq, h)| (*seq, h)).collect();
        kept.sort_unstable_by_key(|(seq, _)| *seq);
        kept
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use sinks_contract::testing::envelope;

    /// A message at `seq` with ordering key `key` (`None`: it has none, as on its last
    /// delivery), with the handle `h<seq>`.
    pub(in crate::runner) fn msg(seq: u64, key: Option<&str>) -> (Envelope, String) {
        let e = envelope("S", seq, &format!("s.{}", key.unwrap_or("none")), "{}");
        (e.with_order_key(key.map(OrderKey::subject)), format!("h{seq}"))
    }

    pub(in crate::runner) fn batch(msgs: &[(u64, Option<&str>)]) -> Batch<String> {
        msgs.iter().map(|(seq, key)| msg(*seq, *key)).collect()
    }

    pub(in crate::runner) fn seqs<H>(batch: &Batch<H>) -> Vec<u64> {
        batch.envelopes.iter().map(|e| e.jetstream().stream_sequence).collect()
    }

    fn kept(parking: &Parking<String>) -> Vec<u64> {
        parking.kept_handles().into_iter().map(|(seq, _)| seq).collect()
    }

    /// A lot for key `a` behind the failed message 10 (due at `t0 + 1 s`), with 11 and 12
    /// of key `a` parked in it.
    fn parked(t0: Instant) -> Parking<String> {
        let mut p = Parking::default();
        p.block(OrderKey::subject("a"), 10, t0 + Duration::from_secs(1));
        for seq in [11, 12] {
            let (e, h) = msg(seq, Some("a"));
            assert!(p.park(e, h).is_none(), "{seq} parked");
        }
        p
    }

    #[test]
    fn admit_table() {
        type Row = (
            &'static str,
            &'static [(u64, Option<&'static str>)],
            &'static [u64],
            &'static [u64],
            &'static [(u64, &'static [u64])],
            &'static [u64],
        );
        #[rustfmt::skip]
        let table: &[Row] = &[
            // what, batch, gone, written (in order), lots after, kept (heartbeated) after
            ("a later message of the key joins its lot",
             &[(13, Some("a"))], &[], &[], &[(10, &[11, 12, 13])], &[11, 12, 13]),
            ("a message of another key is written",
             &[(20, Some("b"))], &[], &[20], &[(10, &[11, 12])], &[11, 12]),
            ("a message of the key older than its failed message is written",
             &[(5, Some("a"))], &[], &[5], &[(10, &[11, 12])], &[11, 12]),
            ("a later message without a key (its last delivery) is written",
             &[(14, None)], &[], &[14], &[(10, &[11, 12])], &[11, 12]),
            ("the failed message brings its lot, in stream order",
             &[(20, Some("b")), (10, Some("a"))], &[], &[10, 11, 12, 20], &[], &[11, 12]),
            ("the failed message back on its last delivery, without its key, still brings its lot",
             &[(10, None)], &[], &[10, 11, 12], &[], &[11, 12]),
            ("later messages in the same batch as the failed message follow it",
             &[(13, Some("a")), (10, Some("a"))], &[], &[10, 11, 12, 13], &[], &[11, 12, 13]),
            ("a failed message refused on its way back (gone) releases its lot",
             &[(20, Some("b"))], &[10], &[11, 12, 20], &[], &[11, 12]),
            ("a refused message that blocks nothing changes nothing",
             &[(20, Some("b"))], &[7], &[20], &[(10, &[11, 12])], &[11, 12]),
        ];
        let t0 = Instant::now();
        for (what, msgs, gone, written, lots, kept_after) in table {
            let mut p = parked(t0);
            let out = p.admit(batch(msgs), gone);
            assert_eq!(seqs(&out), *written, "{what}: written");
            let handles: Vec<String> = written.iter().map(|s| format!("h{s}")).collect();
            assert_eq!(out.handles, handles, "{what}: each envelope keeps its own handle");
            let want: Vec<(u64, Vec<u64>)> = lots.iter().map(|(b, parked)| (*b, parked.to_vec())).collect();
            assert_eq!(p.lots(), want, "{what}: lots");
            assert_eq!(kept(&p), *kept_after, "{what}: kept");
        }
    }

    #[test]
    fn a_second_copy_of_a_held_back_message_replaces_the_first() {
        let t0 = Instant::now();
        let mut p = parked(t0);
        let (e, _) = msg(11, Some("a"));
        let out = p.admit(std::iter::once((e, "h11-again".to_owned())).collect(), &[]);
        assert!(out.is_empty(), "the copy waits in the lot too");
        assert_eq!(p.lots(), [(10, vec![11, 12])], "one message 11, not two");
        let kept: Vec<(u64, &str)> = p.kept_handles().into_iter().map(|(s, h)| (s, h.as_str())).collect();
        assert_eq!(kept, [(11, "h11-again"), (12, "h12")], "the new copy is heartbeated");
        let out = p.admit(batch(&[(10, Some("a"))]), &[]);
        assert_eq!(seqs(&out), [10, 11, 12]);
        assert_eq!(out.handles, ["h10", "h11-again", "h12"], "the copy settles through its own handle");
    }

    #[test]
    fn block_park_and_settling() {
        let t0 = Instant::now();
        let mut p: Parking<String> = Parking::default();
        let (e, h) = msg(11, Some("a"));
        let (e, h) = p.park(e, h).expect("no lot: given back");
        assert_eq!((e.jetstream().stream_sequence, h.as_str()), (11, "h11"));
        p.block(OrderKey::subject("a"), 10, t0);
        // A key keeps its first lot: a later failure of the key does not replace its blocker.
        p.block(OrderKey::subject("a"), 30, t0);
        assert!(p.park(e, h).is_none());
        let (e, h) = msg(12, None);
        assert!(p.park(e, h).is_some(), "a message without a key has no lot");
        assert_eq!(p.lots(), [(10, vec![11])]);
        assert_eq!(p.handles(), ["h11"]);
        assert_eq!(p.kept(), 1);
        let out = p.admit(batch(&[(30, Some("a"))]), &[]);
        assert!(out.is_empty(), "30 blocks nothing: it joins the lot of 10");
        p.settling(11);
        assert_eq!(kept(&p), [30], "a message being settled is no longer heartbeated");
    }

    #[test]
    fn release_table() {
        let ack_wait = Duration::from_secs(1);
        let grace = ack_wait * 2;
        let ms = Duration::from_millis;
        // (what, fetches as (fetched sequences, started after t0), all, released)
        type Row = (&'static str, &'static [(&'static [u64], u64)], bool, &'static [u64]);
        #[rustfmt::skip]
        let table: &[Row] = &[
            ("no fetch yet: nothing is overdue", &[], false, &[]),
            ("due at 1 s: a fetch started at 3 s is not two AckWaits later", &[(&[], 3000)], false, &[]),
            ("a fetch started just after two AckWaits past due releases the lot", &[(&[], 3001)], false, &[11, 12]),
            ("a fetch loop that has not fetched since 0.5 s releases nothing", &[(&[], 500)], false, &[]),
            ("a failed message that came back is waited for, however late", &[(&[10], 500), (&[], 60_000)], false, &[]),
            ("on shutdown every lot is released", &[], true, &[11, 12]),
            ("on shutdown a lot whose failed message came back is released too", &[(&[10], 500)], true, &[11, 12]),
        ];
        for (what, fetches, all, released) in table {
            let t0 = Instant::now();
            let mut p = parked(t0);
            for (fetched, after) in *fetches {
                let envelopes: Vec<Envelope> = fetched.iter().map(|s| msg(*s, Some("a")).0).collect();
                p.note_fetch(&envelopes, t0 + ms(*after));
            }
            let out = p.release(*all, if *all { Duration::ZERO } else { grace });
            assert_eq!(seqs(&out), *released, "{what}");
            if released.is_empty() {
                assert_eq!(p.lots(), [(10, vec![11, 12])], "{what}: the lot stays");
                assert_eq!(kept(&p), [11, 12], "{what}: still heartbeated");
            } else {
                assert_eq!(out.handles, ["h11", "h12"], "{what}");
                assert!(p.lots().is_empty(), "{what}: the lot is gone");
                assert!(kept(&p).is_empty(), "{what}: no longer heartbeated");
                // The failed message coming back later is an ordinary message.
                let out = p.admit(batch(&[(10, Some("a")), (13, Some("a"))]), &[]);
                assert_eq!(seqs(&out), [10, 13], "{what}: nothing waits any more");
            }
        }
    }
}
