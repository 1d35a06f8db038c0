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
