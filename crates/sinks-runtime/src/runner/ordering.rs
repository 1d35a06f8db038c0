//! The ordering gate: which batches wait for which. Every envelope gets its ordering key
//! (`delivery.ordering_key`), and a batch waits until every earlier batch sharing one of its
//! keys has finished writing.
//!
//! A batch fetched while the one before it still waits at the gate joins it ([`Joinable`])
//! instead of queueing behind it: small batches of an open-loop flow, which would each wait
//! for the write before them and pay the sink's fixed cost of a write, travel as one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use sinks_contract::envelope::Envelope;
use sinks_contract::ordering::OrderKey;
use tokio::sync::{Notify, watch};

use crate::config::{Config, OrderingKey};

/// How many keys the gate remembers before it forgets those whose last write is over.
const PRUNE_ABOVE: usize = 4096;

/// Tracks, per ordering key, the write of the latest batch that contains it.
#[derive(Debug, Default)]
pub(super) struct OrderingGate {
    last_writer: HashMap<OrderKey, watch::Receiver<bool>>,
}

impl OrderingGate {
    /// Registers a batch with `keys`; returns the writes it must wait for and the sender
    /// it signals when its own write is done.
    pub(super) fn enter(&mut self, keys: Vec<OrderKey>) -> (Vec<watch::Receiver<bool>>, watch::Sender<bool>) {
        if self.last_writer.len() > PRUNE_ABOVE {
            self.last_writer.retain(|_, rx| !*rx.borrow());
        }
        let (tx, rx) = watch::channel(false);
        // A new batch is a batch joining its own write: nothing earlier shares its channel.
        let waits = self.join(keys, &rx);
        (waits, tx)
    }

    /// Registers a batch with `keys` that joins the waiting batch whose write `writer`
    /// signals: later batches sharing its keys wait for that write. Returns the writes it
    /// must wait for besides that one (the joined batch waits for them too).
    pub(super) fn join(&mut self, keys: Vec<OrderKey>, writer: &watch::Receiver<bool>) -> Vec<watch::Receiver<bool>> {
        let mut waits = Vec::new();
        for key in keys {
            if let Some(prev) = self.last_writer.insert(key, writer.clone())
                && !prev.same_channel(writer)
                && !*prev.borrow()
            {
                waits.push(prev);
            }
        }
        waits
    }
}

/// A batch waiting at the gate that batches fetched after it may join, until it starts its
/// write or holds `delivery.batch_size` messages. `J` is what joins (a batch and the writes it
/// must wait for); the fetch loop offers, the waiting batch's task takes, and closes it when
/// nothing more joined and its turn has come.
#[derive(Debug)]
pub(super) struct Joinable<J> {
    state: Mutex<JoinState<J>>,
    /// Wakes the waiting batch when something joined.
    joined: Notify,
}

#[derive(Debug)]
struct JoinState<J> {
    /// False once the batch started its write: nothing joins any more.
    open: bool,
    /// How many more messages may join.
    room: usize,
    /// What joined and was not taken yet.
    joined: Vec<J>,
}

impl<J> Joinable<J> {
    /// Open, with room for `room` more messages.
    pub(super) fn new(room: usize) -> Self {
        Self { state: Mutex::new(JoinState { open: true, room, joined: Vec::new() }), joined: Notify::new() }
    }

    /// Joins what `make` builds (`len` messages), if the batch is still waiting and has room
    /// for them; `make` runs only then, under the lock, so that nothing joins a batch already
    /// writing. Returns whether it joined.
    pub(super) fn offer(&self, len: usize, make: impl FnOnce() -> J) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.open || len > state.room {
            return false;
        }
        state.room -= len;
        state.joined.push(make());
        drop(state);
        self.joined.notify_one();
        true
    }

    /// What joined since the last take. With `close`, when nothing did, nothing can any more
    /// (the waiting batch's turn has come and it writes what it holds).
    pub(super) fn take(&self, close: bool) -> Vec<J> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let joined = std::mem::take(&mut state.joined);
        if close && joined.is_empty() {
            state.open = false;
        }
        joined
    }

    /// Resolves when something joined (at once if something did since the last wake-up).
    pub(super) async fn joined(&self) {
        self.joined.notified().await;
    }
}

/// `envelope` with its ordering key under `delivery.ordering_key`.
pub(super) fn with_order_key(envelope: Envelope, config: &Config) -> Envelope {
    let key = order_key_of(&envelope, config);
    envelope.with_order_key(key)
}

/// The ordering key of `envelope` under `delivery.ordering_key`.
fn order_key_of(envelope: &Envelope, config: &Config) -> Option<OrderKey> {
    match config.delivery.ordering_key {
        OrderingKey::None => None,
        OrderingKey::Subject => Some(OrderKey::subject(envelope.subject())),
        OrderingKey::PayloadField => {
            let path = config.delivery.ordering_payload_field.as_deref().unwrap_or_default();
            let field = std::str::from_utf8(envelope.payload())
                .ok()
                .and_then(|text| sinks_contract::json::parse_strict(text).ok())
                .and_then(|v| sinks_contract::idempotency::payload_field(&v, path).ok());
            // Messages without the field are ordered by subject.
            Some(field.map_or_else(|| OrderKey::subject(envelope.subject()), |f| OrderKey::field(&f)))
        }
    }
}

/// The distinct ordering keys of a batch.
pub(super) fn batch_keys(envelopes: &[Envelope]) -> Vec<OrderKey> {
    let mut keys: Vec<OrderKey> = envelopes.iter().filter_map(Envelope::order_key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(names: &str) -> Vec<OrderKey> {
        names.chars().map(|c| OrderKey::subject(&c.to_string())).collect()
    }

    #[test]
    fn a_batch_waits_for_the_latest_unfinished_writer_of_each_of_its_keys() {
        let mut gate = OrderingGate::default();
        let (w1, done1) = gate.enter(keys("ab"));
        assert!(w1.is_empty(), "the first batch waits for nothing");
        let (w2, done2) = gate.enter(keys("bc"));
        assert_eq!(w2.len(), 1, "b is being written by batch 1");
        let (w3, done3) = gate.enter(keys("ac"));
        assert_eq!(w3.len(), 2, "a by batch 1, c by batch 2");
        let (w4, _done4) = gate.enter(keys("d"));
        assert!(w4.is_empty(), "no shared key: no wait");
        done1.send(true).unwrap();
        assert!(*w2[0].borrow(), "batch 2 waited for batch 1's write");
        let (w5, _) = gate.enter(keys("b"));
        assert_eq!(w5.len(), 1, "b's latest writer is batch 2, not the finished batch 1");
        assert!(!*w5[0].borrow());
        done2.send(true).unwrap();
        assert!(*w5[0].borrow(), "... and batch 2 is what it waits for");
        done3.send(true).unwrap();
        let (w6, _) = gate.enter(keys("ac"));
        assert!(w6.is_empty(), "finished writers are not waited for");
        let (w7, _) = gate.enter(Vec::new());
        assert!(w7.is_empty(), "a batch without keys (ordering none) waits for nothing");
    }

    #[test]
    fn a_joining_batch_waits_for_the_writers_of_its_other_keys_and_later_ones_for_the_batch_it_joined() {
        let mut gate = OrderingGate::default();
        let (_, done1) = gate.enter(keys("ab"));
        let (_, done2) = gate.enter(keys("c"));
        let (w3, done3) = gate.enter(keys("a"));
        assert_eq!(w3.len(), 1, "batch 3 waits for batch 1 (a)");
        let writer3 = done3.subscribe();
        let joined = gate.join(keys("abc"), &writer3);
        assert_eq!(joined.len(), 2, "b by batch 1 and c by batch 2; a is batch 3's own");
        let (w4, done4) = gate.enter(keys("bc"));
        assert_eq!(w4.len(), 2, "b and c are now written by batch 3 (one channel per key)");
        assert!(w4.iter().all(|w| w.same_channel(&writer3)), "later batches wait for the batch joined");
        done1.send(true).unwrap();
        done2.send(true).unwrap();
        assert!(joined.iter().all(|w| *w.borrow()));
        done3.send(true).unwrap();
        done4.send(true).unwrap();
        let (w5, _) = gate.enter(keys("abc"));
        assert!(w5.is_empty(), "every writer finished");
    }

    #[test]
    fn a_joinable_batch_takes_what_fits_until_it_closes() {
        let join = Joinable::new(10);
        assert!(join.offer(4, || "first"), "room for 4");
        assert!(!join.offer(7, || unreachable!("no room: not built")), "4 + 7 > 10");
        assert!(join.offer(6, || "second"));
        assert!(!join.offer(1, || unreachable!("full")));
        assert_eq!(join.take(true), vec!["first", "second"], "taken in order; not closed while something joined");
        assert!(join.take(true).is_empty(), "nothing more joined: closed");
        let open = Joinable::new(10);
        assert!(open.take(false).is_empty());
        assert!(open.offer(1, || "after a take without closing"));
        assert_eq!(open.take(true).len(), 1);
        assert!(open.take(true).is_empty());
        assert!(!open.offer(1, || unreachable!("closed: the batch is writing")), "nothing joins a batch writing");
    }

    #[tokio::test]
    async fn joining_wakes_the_waiting_batch() {
        let join = std::sync::Arc::new(Joinable::new(10));
        let waiting = tokio::spawn({
            let join = std::sync::Arc::clone(&join);
            async move {
                join.joined().await;
                join.take(false)
            }
        });
        tokio::task::yield_now().await;
        assert!(join.offer(2, || 7));
        let taken = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert_eq!(taken, vec![7]);
    }

    #[test]
    fn finished_writers_are_forgotten_when_many_keys_were_seen() {
        let mut gate = OrderingGate::default();
        let (_, running) = gate.enter(vec![OrderKey::field("running")]);
        for i in 0..=PRUNE_ABOVE {
            let (_, done) = gate.enter(vec![OrderKey::field(&i.to_string())]);
            done.send(true).unwrap();
        }
        // The last entry found more than PRUNE_ABOVE keys: it kept the unfinished writer and
        // added its own key.
        assert_eq!(gate.last_writer.len(), 2, "finished writers were forgotten");
        let (waits, _) = gate.enter(vec![OrderKey::field("running")]);
        assert_eq!(waits.len(), 1, "an unfinished writer is never forgotten");
        drop(running);
    }

    #[test]
    fn order_keys_follow_delivery_ordering_key() {
        let config = |extra: serde_json::Value| {
            let mut value = json!({
                "nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
                "sink": {"type": "memory"},
            });
            value["delivery"] = extra;
            Config::from_value(value).unwrap()
        };
        let e = |subject: &str, payload: &'static str| sinks_contract::testing::envelope("S", 1, subject, payload);
        let by_subject = config(json!({}));
        assert_eq!(with_order_key(e("s.a", "{}"), &by_subject).order_key(), Some(OrderKey::subject("s.a")));
        let none = config(json!({"ordering_key": "none"}));
        assert_eq!(with_order_key(e("s.a", "{}"), &none).order_key(), None);
        let field = config(json!({"ordering_key": "payload_field", "ordering_payload_field": "order.id"}));
        let keyed = with_order_key(e("s.a", r#"{"order":{"id":"o-7"}}"#), &field);
        assert_eq!(keyed.order_key(), Some(OrderKey::field("o-7")));
        let other = with_order_key(e("s.b", r#"{"order":{"id":"o-7"}}"#), &field);
        assert_eq!(other.order_key(), keyed.order_key(), "the field orders, not the subject");
        let missing = with_order_key(e("s.a", "not json"), &field);
        assert_eq!(missing.order_key(), Some(OrderKey::subject("s.a")), "without the field: by subject");
    }
}
