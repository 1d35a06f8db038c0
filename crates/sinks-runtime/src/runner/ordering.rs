//! The ordering gate: which batches wait for which. Every envelope gets its ordering key
//! (`delivery.ordering_key`), and a batch waits until every earlier batch sharing one of its
//! keys has finished writing.

use std::collections::HashMap;

use sinks_contract::envelope::Envelope;
use sinks_contract::ordering::OrderKey;
use tokio::sync::watch;

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
        let mut waits = Vec::new();
        for key in keys {
            if let Some(prev) = self.last_writer.insert(key, rx.clone())
                && !*prev.borrow()
            {
                waits.push(prev);
            }
        }
        (waits, tx)
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
