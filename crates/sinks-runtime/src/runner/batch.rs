//! The batch: messages that travel together, the envelopes the sink sees and, index for
//! index, the handles only the runner holds. A leaf of the runner (the parking, the planner
//! and the forward path all carry batches); what happens to a batch is in `forward`.

use sinks_contract::envelope::Envelope;

/// Messages that travel together: the envelopes the sink sees and, index for index, their
/// settlement handles (`H` is `handle::Handle` in a run; the pure parts are generic so that tests can
/// use plain values).
#[derive(Debug)]
pub(super) struct Batch<H> {
    /// What the sink writes.
    pub(super) envelopes: Vec<Envelope>,
    /// The right to settle each envelope, at the same index.
    pub(super) handles: Vec<H>,
}

impl<H> Default for Batch<H> {
    fn default() -> Self {
        Self { envelopes: Vec::new(), handles: Vec::new() }
    }
}

impl<H> Batch<H> {
    /// An empty batch with room for `n` messages.
    pub(super) fn with_capacity(n: usize) -> Self {
        Self { envelopes: Vec::with_capacity(n), handles: Vec::with_capacity(n) }
    }

    /// Adds one message.
    pub(super) fn push(&mut self, envelope: Envelope, handle: H) {
        self.envelopes.push(envelope);
        self.handles.push(handle);
    }

    /// How many messages it holds.
    pub(super) fn len(&self) -> usize {
        self.envelopes.len()
    }

    /// True when it holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.envelopes.is_empty()
    }
}

impl<H> IntoIterator for Batch<H> {
    type Item = (Envelope, H);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<Envelope>, std::vec::IntoIter<H>>;

    fn into_iter(self) -> Self::IntoIter {
        self.envelopes.into_iter().zip(self.handles)
    }
}

impl<H> FromIterator<(Envelope, H)> for Batch<H> {
    fn from_iter<I: IntoIterator<Item = (Envelope, H)>>(iter: I) -> Self {
        let (envelopes, handles) = iter.into_iter().unzip();
        Self { envelopes, handles }
    }
}

impl<H> Extend<(Envelope, H)> for Batch<H> {
    fn extend<I: IntoIterator<Item = (Envelope, H)>>(&mut self, iter: I) {
        for (envelope, handle) in iter {
            self.push(envelope, handle);
        }
    }
}
