//! Parking: the messages held back behind a temporary failure of their ordering key, kept
//! (and heartbeated) by the runner until the failed message comes back.
//!
//! When the failed message comes back, its lot is written after it in chunks of at most
//! `batch_size` messages, in stream order: the first chunk rides in the batch that brought
//! the failed message, the rest leave as batches of their own ([`Parking::take_ready`]),
//! each after the previous chunk settled. A lot is never one unbounded write (a lot can hold
//! `max_ack_pending` messages, and a write of a thousand messages to a slow destination
//! outlasted AckWait: the e2e_http stall).
//!
//! Pure bookkeeping: no clock, no I/O. Time is what the caller says (a failed message's due
//! time, the start of the latest fetch), and `H` is whatever handle the caller keeps with a
//! message (an ack handle in a run, a plain value in tests).

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The key of every message a draining lot handed out and that is not settled yet.
    out: HashMap<u64, OrderKey>,
}

impl<H> Default for Parking<H> {
    fn default() -> Self {
        Self {
            lots: HashMap::new(),
            blockers: HashMap::new(),
            kept: HashMap::new(),
            last_fetch: None,
            out: HashMap::new(),
        }
    }
}

/// The messages of one ordering key held back behind its failed message.
#[derive(Debug)]
struct Lot<H> {
    state: State,
    /// Parked messages by stream sequence.
    parked: BTreeMap<u64, (Envelope, H)>,
}

/// What a lot waits for.
#[derive(Debug)]
enum State {
    /// Its failed message.
    Blocked {
        /// Stream sequence of the failed message.
        blocker: u64,
        /// When the failed message is expected back.
        back: Instant,
        /// The failed message has been fetched again (its batch may still be waiting for an
        /// earlier one): the lot is never released as overdue.
        arrived: bool,
    },
    /// Nothing: its failed message came back, and the lot leaves in chunks. `out` are the
    /// sequences of the chunk being written (the next chunk leaves once it is empty).
    Draining {
        /// The chunk handed out and not settled yet.
        out: BTreeSet<u64>,
    },
}

impl<H> Lot<H> {
    /// True when a message of the lot's key at `seq` must wait in the lot.
    fn holds(&self, seq: u64) -> bool {
        match &self.state {
            State::Blocked { blocker, .. } => seq > *blocker,
            // A message handed out goes to its write; anything else of the key waits behind
            // what is still parked or being written.
            State::Draining { out } => !out.contains(&seq),
        }
    }

    /// The failed message the lot waits for, if any.
    fn blocker(&self) -> Option<u64> {
        match self.state {
            State::Blocked { blocker, .. } => Some(blocker),
            State::Draining { .. } => None,
        }
    }
}

impl<H: Clone> Parking<H> {
    /// Sorts a batch into what is written now and what joins a lot: a message of a key with
    /// a lot waits, unless it is the lot's failed message coming back (then the first chunk
    /// of the lot's messages, up to `max` messages in the batch, is written right after it),
    /// older than it, or a message the draining lot handed out. Lots whose failed message
    /// was settled otherwise (`gone`: refused by a policy on its way back) start draining as
    /// well. The result is in stream-sequence order, so a key's messages are written in
    /// order.
    pub(super) fn admit(&mut self, batch: Batch<H>, gone: &[u64], max: usize) -> Batch<H> {
        // Nothing parked or waited for, and the batch in order already (as fetched): it is
        // written as it is, without moving each message into a new batch.
        if self.blockers.is_empty()
            && self.lots.is_empty()
            && batch.envelopes.is_sorted_by_key(|e| e.jetstream().stream_sequence)
        {
            return batch;
        }
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
                Some(lot) if lot.holds(seq) => {
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
            let Some(key) = self.blockers.remove(&blocker) else { continue };
            if let Some(lot) = self.lots.get_mut(&key) {
                tracing::debug!(
                    stream_sequence = blocker,
                    held_back = lot.parked.len(),
                    "failed message came back; the messages held back behind it follow"
                );
                lot.state = State::Draining { out: BTreeSet::new() };
            }
            let room = max.saturating_sub(work.len()).max(1);
            work.extend(self.hand_out(key, room));
        }
        work.sort_by_key(|(e, _)| e.jetstream().stream_sequence);
        work.into_iter().collect()
    }

    /// The next chunks of draining lots whose previous chunk has settled, at most `max`
    /// messages in all, each lot's in stream order: a batch of their own (the policies ran
    /// on them when they were first fetched).
    pub(super) fn take_ready(&mut self, max: usize) -> Batch<H> {
        let ready: Vec<OrderKey> = self
            .lots
            .iter()
            .filter(|(_, lot)| matches!(&lot.state, State::Draining { out } if out.is_empty()))
            .map(|(key, _)| *key)
            .collect();
        let mut work: Vec<(Envelope, H)> = Vec::new();
        for key in ready {
            let room = max.saturating_sub(work.len());
            if room == 0 {
                break;
            }
            work.extend(self.hand_out(key, room));
        }
        work.sort_by_key(|(e, _)| e.jetstream().stream_sequence);
        work.into_iter().collect()
    }

    /// Hands out up to `room` of the draining lot `key`'s first parked messages (they stay
    /// heartbeated until settled), and forgets the lot once nothing is parked or out.
    fn hand_out(&mut self, key: OrderKey, room: usize) -> Vec<(Envelope, H)> {
        let Some(lot) = self.lots.get_mut(&key) else { return Vec::new() };
        let State::Draining { out } = &mut lot.state else { return Vec::new() };
        let mut chunk = Vec::with_capacity(room.min(lot.parked.len()));
        while chunk.len() < room {
            let Some((seq, message)) = lot.parked.pop_first() else { break };
            out.insert(seq);
            self.out.insert(seq, key);
            chunk.push(message);
        }
        if lot.parked.is_empty() && out.is_empty() {
            self.lots.remove(&key);
        }
        chunk
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
    /// (a key whose lot waits for a failed message keeps it; a draining lot waits for this
    /// one from now on: what it still holds is later than `blocker`, which it handed out).
    pub(super) fn block(&mut self, key: OrderKey, blocker: u64, back: Instant) {
        match self.lots.entry(key) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(Lot { state: State::Blocked { blocker, back, arrived: false }, parked: BTreeMap::new() });
            }
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                let lot = slot.get_mut();
                let State::Draining { out } = &lot.state else { return };
                for seq in out {
                    self.out.remove(seq);
                }
                lot.state = State::Blocked { blocker, back, arrived: false };
            }
        }
        self.blockers.insert(blocker, key);
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
            if let Some(lot) = self.blockers.get(&e.jetstream().stream_sequence).and_then(|k| self.lots.get_mut(k))
                && let State::Blocked { arrived, .. } = &mut lot.state
            {
                *arrived = true;
            }
        }
    }

    /// Stops heartbeating the message at `sequence`: it is about to be settled. A message a
    /// draining lot handed out no longer holds back its lot's next chunk.
    pub(super) fn settling(&mut self, sequence: u64) {
        self.kept.remove(&sequence);
        if let Some(key) = self.out.remove(&sequence)
            && let Some(lot) = self.lots.get_mut(&key)
            && let State::Draining { out } = &mut lot.state
        {
            out.remove(&sequence);
            if out.is_empty() && lot.parked.is_empty() {
                self.lots.remove(&key);
            }
        }
    }

    /// True when a draining lot has a chunk ready to leave ([`Parking::take_ready`]).
    pub(super) fn has_ready(&self) -> bool {
        self.lots.values().any(|lot| matches!(&lot.state, State::Draining { out } if out.is_empty()))
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
            .filter(|(_, lot)| match lot.state {
                _ if all => true,
                State::Blocked { back, arrived, .. } => !arrived && fetched.is_some_and(|f| back + grace < f),
                // Waits for nothing: its chunks leave on their own.
                State::Draining { .. } => false,
            })
            .map(|(k, _)| *k)
            .collect();
        let mut released = Batch::default();
        for key in overdue {
            if let Some(lot) = self.lots.remove(&key) {
                if let Some(blocker) = lot.blocker() {
                    self.blockers.remove(&blocker);
                }
                released.extend(lot.parked.into_values());
            }
        }
        for e in &released.envelopes {
            self.kept.remove(&e.jetstream().stream_sequence);
        }
        released
    }

    /// Every lot as `(blocker, parked sequences)`, by blocker (0 for a draining lot; for
    /// tests).
    #[cfg(test)]
    pub(super) fn lots(&self) -> Vec<(u64, Vec<u64>)> {
        let mut lots: Vec<(u64, Vec<u64>)> =
            self.lots.values().map(|lot| (lot.blocker().unwrap_or(0), lot.parked.keys().copied().collect())).collect();
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
            // (A lot that comes back drains: it stays, with nothing parked, until what it
            // handed out is settled; `0` is a draining lot.)
            ("the failed message brings its lot, in stream order",
             &[(20, Some("b")), (10, Some("a"))], &[], &[10, 11, 12, 20], &[(0, &[])], &[11, 12]),
            ("the failed message back on its last delivery, without its key, still brings its lot",
             &[(10, None)], &[], &[10, 11, 12], &[(0, &[])], &[11, 12]),
            ("later messages in the same batch as the failed message follow it",
             &[(13, Some("a")), (10, Some("a"))], &[], &[10, 11, 12, 13], &[(0, &[])], &[11, 12, 13]),
            ("a failed message refused on its way back (gone) releases its lot",
             &[(20, Some("b"))], &[10], &[11, 12, 20], &[(0, &[])], &[11, 12]),
            ("a refused message that blocks nothing changes nothing",
             &[(20, Some("b"))], &[7], &[20], &[(10, &[11, 12])], &[11, 12]),
        ];
        let t0 = Instant::now();
        for (what, msgs, gone, written, lots, kept_after) in table {
            let mut p = parked(t0);
            let out = p.admit(batch(msgs), gone, 100);
            assert_eq!(seqs(&out), *written, "{what}: written");
            let handles: Vec<String> = written.iter().map(|s| format!("h{s}")).collect();
            assert_eq!(out.handles, handles, "{what}: each envelope keeps its own handle");
            let want: Vec<(u64, Vec<u64>)> = lots.iter().map(|(b, parked)| (*b, parked.to_vec())).collect();
            assert_eq!(p.lots(), want, "{what}: lots");
            assert_eq!(kept(&p), *kept_after, "{what}: kept");
        }
    }

    #[test]
    fn with_nothing_parked_a_batch_is_written_as_it_is_in_stream_order() {
        let mut p: Parking<String> = Parking::default();
        let out = p.admit(batch(&[(3, Some("a")), (4, Some("b")), (4, None), (9, Some("a"))]), &[], 100);
        assert_eq!(
            (seqs(&out), out.handles),
            (vec![3, 4, 4, 9], vec!["h3".into(), "h4".into(), "h4".into(), "h9".into()])
        );
        // A redelivery can come before later messages: the batch is put in order all the same.
        let out = p.admit(batch(&[(7, Some("a")), (2, Some("b")), (5, None)]), &[7], 100);
        assert_eq!((seqs(&out), out.handles), (vec![2, 5, 7], vec!["h2".into(), "h5".into(), "h7".into()]));
        assert!(p.lots().is_empty() && kept(&p).is_empty());
    }

    #[test]
    fn a_second_copy_of_a_held_back_message_replaces_the_first() {
        let t0 = Instant::now();
        let mut p = parked(t0);
        let (e, _) = msg(11, Some("a"));
        let out = p.admit(std::iter::once((e, "h11-again".to_owned())).collect(), &[], 100);
        assert!(out.is_empty(), "the copy waits in the lot too");
        assert_eq!(p.lots(), [(10, vec![11, 12])], "one message 11, not two");
        let kept: Vec<(u64, &str)> = p.kept_handles().into_iter().map(|(s, h)| (s, h.as_str())).collect();
        assert_eq!(kept, [(11, "h11-again"), (12, "h12")], "the new copy is heartbeated");
        let out = p.admit(batch(&[(10, Some("a"))]), &[], 100);
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
        let out = p.admit(batch(&[(30, Some("a"))]), &[], 100);
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
                let out = p.admit(batch(&[(10, Some("a")), (13, Some("a"))]), &[], 100);
                assert_eq!(seqs(&out), [10, 13], "{what}: nothing waits any more");
            }
        }
    }

    /// A lot of `n` messages (11 ..= 10 + n, key `a`) behind the failed message 10.
    fn big_lot(n: u64) -> Parking<String> {
        let mut p = Parking::default();
        p.block(OrderKey::subject("a"), 10, Instant::now());
        for seq in 11..=10 + n {
            let (e, h) = msg(seq, Some("a"));
            assert!(p.park(e, h).is_none());
        }
        p
    }

    #[test]
    fn a_returning_lot_leaves_in_chunks_of_the_batch_size_each_after_the_last_settled() {
        let mut p = big_lot(10);
        // The failed message and a message of another key come back in a batch of 4 at most:
        // the lot's first two follow them, nothing more.
        let out = p.admit(batch(&[(10, None), (30, Some("b"))]), &[], 4);
        assert_eq!(seqs(&out), [10, 11, 12, 30]);
        assert!(!p.has_ready(), "the next chunk waits until this one is settled");
        assert!(p.take_ready(4).is_empty());
        // A newer message of the key, fetched meanwhile, waits behind the lot.
        assert!(p.admit(batch(&[(40, Some("a"))]), &[], 4).is_empty());
        for seq in [10, 11, 30] {
            p.settling(seq);
        }
        assert!(!p.has_ready(), "12 is not settled yet");
        p.settling(12);
        assert!(p.has_ready());
        let chunk = p.take_ready(4);
        assert_eq!(seqs(&chunk), [13, 14, 15, 16]);
        assert_eq!(chunk.handles, ["h13", "h14", "h15", "h16"]);
        // Handed out, the chunk goes to its write when its batch is admitted.
        assert_eq!(seqs(&p.admit(chunk, &[], 4)), [13, 14, 15, 16]);
        for seq in 13..=16 {
            p.settling(seq);
        }
        assert_eq!(seqs(&p.take_ready(100)), [17, 18, 19, 20, 40], "the last chunk, the newer message at its end");
        for seq in [17, 18, 19, 20, 40] {
            p.settling(seq);
        }
        assert!(p.lots().is_empty(), "a drained lot is forgotten");
        assert!(kept(&p).is_empty());
        assert_eq!(seqs(&p.admit(batch(&[(41, Some("a"))]), &[], 4)), [41], "the key flows freely again");
    }

    #[test]
    fn a_failure_in_a_chunk_blocks_the_rest_of_the_lot_behind_it() {
        let mut p = big_lot(6);
        let out = p.admit(batch(&[(10, Some("a"))]), &[], 3);
        assert_eq!(seqs(&out), [10, 11, 12]);
        // 11 fails again: the lot waits for it; 12 (held back in the write) parks again.
        p.settling(10);
        p.block(OrderKey::subject("a"), 11, Instant::now());
        let (e, h) = msg(12, Some("a"));
        assert!(p.park(e, h).is_none());
        assert_eq!(p.lots(), [(11, vec![12, 13, 14, 15, 16])]);
        assert!(!p.has_ready(), "a blocked lot hands out nothing");
        let out = p.admit(batch(&[(11, Some("a"))]), &[], 3);
        assert_eq!(seqs(&out), [11, 12, 13]);
    }

    #[test]
    fn on_shutdown_a_draining_lot_is_released_and_overdue_never() {
        let mut p = big_lot(5);
        let _ = p.admit(batch(&[(10, Some("a"))]), &[], 3);
        p.note_fetch(&[], Instant::now() + Duration::from_secs(3600));
        assert!(p.release(false, Duration::ZERO).is_empty(), "a draining lot waits for nothing");
        assert_eq!(seqs(&p.release(true, Duration::ZERO)), [13, 14, 15]);
    }
}
