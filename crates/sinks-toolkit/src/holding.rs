//! Holding sinks: matching a holding sink's late outcomes to whoever waits for them
//! ([`Pending`]), and [`Durable`], a sink that writes through a holding sink and returns
//! only final outcomes.
//!
//! A holding sink (see [`Sink::holding`]) reports a message [`MessageOutcome::Pending`] when
//! it takes it into an open record, and its final outcome later, from [`Holding::flush`], named
//! by stream and stream sequence ([`Settled`]). Whoever writes through it keeps something
//! per pending message until then: the runner its ack handle (and the envelope, for the
//! settlement), [`Durable`] a channel to the write that waits. [`Pending`] is that
//! bookkeeping, once: a flush may report a message before the write that took it has
//! returned to its caller (another write filled the record meanwhile), so an outcome that
//! finds no holder is kept until its holder comes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;

use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{
    BatchResult, Capabilities, Destinations, FlushScope, Holding, MessageOutcome, ReadBack, Settled, Sink,
};

/// What names a pending message: its stream and stream sequence.
pub type PendingKey = (String, u64);

/// Most outcomes kept for holders that have not come yet; beyond it the oldest are dropped
/// (a holder that never comes is a bug of the caller, and its message comes back anyway).
const MAX_EARLY: usize = 1 << 20;

/// The key of `envelope` as a pending message.
pub fn key_of(envelope: &Envelope) -> PendingKey {
    (envelope.jetstream().stream.clone(), envelope.jetstream().stream_sequence)
}

/// Pending messages with what each one's waiter keeps (`H`), and final outcomes that came
/// before their message was registered. Pure bookkeeping: no clock, no I/O.
#[derive(Debug)]
pub struct Pending<H> {
    held: HashMap<PendingKey, H>,
    early: HashMap<PendingKey, MessageOutcome>,
    early_order: VecDeque<PendingKey>,
}

impl<H> Default for Pending<H> {
    fn default() -> Self {
        Self { held: HashMap::new(), early: HashMap::new(), early_order: VecDeque::new() }
    }
}

/// What registering a pending message found.
#[derive(Debug)]
pub enum Hold<H> {
    /// Its outcome had already come: settle it now (the holder is given back).
    Settled(H, MessageOutcome),
    /// Kept; a second registration of the same message replaced this earlier holder (a
    /// redelivery of a message still pending: the newest delivery settles it).
    Kept(Option<H>),
}

impl<H> Pending<H> {
    /// Registers `holder` for the pending message `key`.
    pub fn hold(&mut self, key: PendingKey, holder: H) -> Hold<H> {
        if let Some(outcome) = self.early.remove(&key) {
            self.early_order.retain(|k| *k != key);
            return Hold::Settled(holder, outcome);
        }
        Hold::Kept(self.held.insert(key, holder))
    }

    /// Matches a final outcome with its holder; an outcome without one is kept for it.
    pub fn settle(&mut self, settled: Settled) -> Option<(H, MessageOutcome)> {
        let key = (settled.stream, settled.sequence);
        if let Some(holder) = self.held.remove(&key) {
            return Some((holder, settled.outcome));
        }
        if self.early.insert(key.clone(), settled.outcome).is_none() {
            self.early_order.push_back(key);
        }
        while self.early_order.len() > MAX_EARLY {
            if let Some(old) = self.early_order.pop_front() {
                self.early.remove(&old);
            }
        }
        None
    }

    /// The holder of the pending message `key`, when one is registered.
    pub fn held_mut(&mut self, key: &PendingKey) -> Option<&mut H> {
        self.held.get_mut(key)
    }

    /// Takes the holder of `key` out without an outcome (its waiter gave up on it).
    pub fn release(&mut self, key: &PendingKey) -> Option<H> {
        self.held.remove(key)
    }

    /// How many messages wait for their outcome.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The holders of every waiting message.
    pub fn holders(&self) -> impl Iterator<Item = &H> {
        self.held.values()
    }

    /// Takes every waiting message out (shutdown: what no flush settled is released).
    pub fn drain(&mut self) -> Vec<(PendingKey, H)> {
        self.held.drain().collect()
    }
}

/// A sink that writes through a holding sink and returns only final outcomes: each write
/// flushes the inner sink ([`FlushScope::All`]) and waits for the outcomes of its own
/// pending messages, which a concurrent write's flush may deliver. Every record is then as
/// large as one write, so a holding sink loses its batching behind it; it is for callers
/// that need an answer per write (fan-out targets, spool replay, the certification suite).
/// A sink that does not hold messages passes through unchanged.
#[derive(Debug)]
pub struct Durable {
    inner: Arc<dyn Sink>,
    /// Every write waiting for a message (concurrent writes may carry the same one).
    waiting: Mutex<Pending<Vec<oneshot::Sender<MessageOutcome>>>>,
}

impl Durable {
    /// `inner` behind a write that returns only final outcomes.
    pub fn new(inner: Arc<dyn Sink>) -> Self {
        Self { inner, waiting: Mutex::new(Pending::default()) }
    }

    /// `sink` itself when it never holds messages, else `sink` behind a [`Durable`].
    pub fn wrap(sink: Arc<dyn Sink>) -> Arc<dyn Sink> {
        if sink.holding().is_some() { Arc::new(Self::new(sink)) } else { sink }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending<Vec<oneshot::Sender<MessageOutcome>>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the waiters of `batch`'s messages whose receivers are gone (the message was not
    /// pending for that write, or the write failed), and a message's entry when none is left.
    fn release(&self, batch: &[Envelope]) {
        let mut waiting = self.lock();
        for envelope in batch {
            let key = key_of(envelope);
            if let Some(waiters) = waiting.held_mut(&key) {
                waiters.retain(|tx| !tx.is_closed());
                if waiters.is_empty() {
                    waiting.release(&key);
                }
            }
        }
    }

    fn route(&self, settled: Vec<Settled>) {
        let mut waiting = self.lock();
        for s in settled {
            if let Some((waiters, outcome)) = waiting.settle(s) {
                for tx in waiters {
                    let _ = tx.send(outcome.copied());
                }
            }
        }
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl Sink for Durable {
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
        // Every message has a waiter before the inner sink sees it. A message that is already
        // in an open record (a concurrent write carries it too) is pending for this write as
        // well, and the flush that closes that record may run and route before this write
        // returns from the inner sink: a waiter registered only afterwards would find neither
        // a holder nor an early outcome, and wait out its budget for nothing.
        let mut waits: Vec<oneshot::Receiver<MessageOutcome>> = Vec::with_capacity(batch.len());
        {
            let mut waiting = self.lock();
            for envelope in batch {
                let (tx, rx) = oneshot::channel();
                let key = key_of(envelope);
                if let Some(waiters) = waiting.held_mut(&key) {
                    waiters.push(tx);
                } else if let Hold::Settled(waiters, outcome) = waiting.hold(key, vec![tx]) {
                    for tx in waiters {
                        let _ = tx.send(outcome.copied());
                    }
                }
                waits.push(rx);
            }
        }
        let outcomes = match self.inner.write(batch, budget).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                drop(waits);
                self.release(batch);
                return Err(e);
            }
        };
        let pending = outcomes.iter().any(|o| matches!(o, MessageOutcome::Pending));
        let mut outcomes: Vec<Option<MessageOutcome>> = outcomes.into_iter().map(Some).collect();
        let mut waits: Vec<Option<oneshot::Receiver<MessageOutcome>>> = waits.into_iter().map(Some).collect();
        for (slot, wait) in outcomes.iter_mut().zip(waits.iter_mut()) {
            if !matches!(slot, Some(MessageOutcome::Pending)) {
                *wait = None;
            }
        }
        self.release(batch);
        if pending && let Some(holding) = self.inner.holding() {
            let settled = holding.flush(FlushScope::All).await;
            self.route(settled);
        }
        for (slot, wait) in outcomes.iter_mut().zip(waits) {
            let Some(rx) = wait else { continue };
            // Not settled by this flush: a concurrent write's flush is closing its record and
            // routes the outcome here.
            *slot = Some(match tokio::time::timeout(budget, rx).await {
                Ok(Ok(outcome)) => outcome,
                _ => MessageOutcome::temporary("the record holding this message was not committed in time"),
            });
        }
        Ok(outcomes.into_iter().map(|o| o.unwrap_or_else(|| MessageOutcome::temporary("no outcome"))).collect())
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        self.inner.health_check().await
    }

    async fn close(&self) -> Result<(), SinkError> {
        if let Some(holding) = self.inner.holding() {
            let settled = holding.flush(FlushScope::All).await;
            self.route(settled);
        }
        self.inner.close().await
    }

    /// None: behind this wrapper nothing is pending when a write returns.
    fn holding(&self) -> Option<&dyn Holding> {
        None
    }

    fn read_back(&self) -> Option<&dyn ReadBack> {
        self.inner.read_back()
    }

    fn destinations(&self) -> Option<&dyn Destinations> {
        self.inner.destinations()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::HoldingSettings;

    fn settled(seq: u64, outcome: MessageOutcome) -> Settled {
        Settled::new("S", seq, outcome)
    }

    #[test]
    fn an_outcome_finds_its_holder_whichever_comes_first() {
        let mut p: Pending<&str> = Pending::default();
        assert!(matches!(p.hold(("S".into(), 1), "h1"), Hold::Kept(None)));
        let (holder, outcome) = p.settle(settled(1, MessageOutcome::Committed)).expect("holder waiting");
        assert_eq!((holder, outcome.class()), ("h1", sinks_contract::OutcomeClass::Committed));
        assert!(p.is_empty());
        // The outcome comes first: kept until the holder registers, then handed over at once.
        assert!(p.settle(settled(2, MessageOutcome::Duplicate)).is_none());
        match p.hold(("S".into(), 2), "h2") {
            Hold::Settled(h, o) => assert_eq!((h, o.class()), ("h2", sinks_contract::OutcomeClass::Duplicate)),
            other => panic!("expected the early outcome, got {other:?}"),
        }
        assert!(p.is_empty() && p.early.is_empty() && p.early_order.is_empty());
        // Another stream with the same sequence is another message.
        p.hold(("T".into(), 3), "t3");
        assert!(p.settle(settled(3, MessageOutcome::Committed)).is_none(), "S:3 is not T:3");
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn a_redelivery_replaces_the_holder_and_drain_takes_the_rest() {
        let mut p: Pending<&str> = Pending::default();
        p.hold(("S".into(), 1), "first");
        assert!(matches!(p.hold(("S".into(), 1), "second"), Hold::Kept(Some("first"))));
        p.hold(("S".into(), 2), "other");
        let (holder, _) = p.settle(settled(1, MessageOutcome::Committed)).unwrap();
        assert_eq!(holder, "second", "the newest delivery settles");
        let left: Vec<&str> = p.drain().into_iter().map(|(_, h)| h).collect();
        assert_eq!(left, ["other"]);
        assert!(p.is_empty());
    }

    /// A holding sink like the batch writers: takes every message pending (one already in
    /// the open record is not taken twice, only reported pending again) and commits the open
    /// record on the next flush. The first `gates.len()` writes each wait at their own gate
    /// after taking their messages, so a test can order writes and flushes exactly.
    #[derive(Debug, Default)]
    struct Holds {
        open: Mutex<Vec<(String, u64)>>,
        calls: std::sync::atomic::AtomicUsize,
        gates: Vec<tokio::sync::Notify>,
    }

    #[async_trait]
    impl Sink for Holds {
        fn name(&self) -> &str {
            "holds"
        }
        async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
            {
                let mut open = self.open.lock().unwrap();
                for key in batch.iter().map(key_of) {
                    if !open.contains(&key) {
                        open.push(key);
                    }
                }
            }
            let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(gate) = self.gates.get(call) {
                gate.notified().await;
            }
            Ok(batch.iter().map(|_| MessageOutcome::Pending).collect())
        }
        async fn health_check(&self) -> Result<(), SinkError> {
            Ok(())
        }
        fn holding(&self) -> Option<&dyn Holding> {
            Some(self)
        }
    }

    #[async_trait]
    impl Holding for Holds {
        fn settings(&self) -> HoldingSettings {
            HoldingSettings::new(Duration::from_secs(1), Duration::from_millis(100))
        }
        async fn flush(&self, _scope: FlushScope) -> Vec<Settled> {
            let open = std::mem::take(&mut *self.open.lock().unwrap());
            open.into_iter()
                .map(|(stream, sequence)| Settled::new(stream, sequence, MessageOutcome::Committed))
                .collect()
        }
    }

    #[tokio::test]
    async fn durable_returns_final_outcomes_even_when_another_write_flushed_them() {
        let inner: Arc<dyn Sink> = Arc::new(Holds::default());
        assert!(inner.holding().is_some());
        let durable = Arc::new(Durable::new(Arc::clone(&inner)));
        assert!(durable.holding().is_none(), "the wrapper holds nothing");
        let writes: Vec<_> = (0..8u64)
            .map(|w| {
                let durable = Arc::clone(&durable);
                tokio::spawn(async move {
                    let batch: Vec<Envelope> =
                        (0..25).map(|i| sinks_contract::testing::envelope("S", w * 25 + i + 1, "s.x", "{}")).collect();
                    durable.write(&batch, sinks_contract::DEFAULT_BUDGET).await.unwrap()
                })
            })
            .collect();
        for w in writes {
            let outcomes = w.await.unwrap();
            assert_eq!(outcomes.len(), 25);
            assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");
        }
        let plain: Arc<dyn Sink> = Arc::new(sinks_certify::MemorySink::new());
        assert!(Arc::ptr_eq(&Durable::wrap(Arc::clone(&plain)), &plain), "a sink that holds nothing is not wrapped");
    }

    /// Write B carries a message that write A has in the open record; A's flush commits and
    /// routes it while B is still inside the inner sink. B must get that outcome, not wait
    /// out its budget (sink-file's C9 in batch mode once failed so: 5 messages x 30 s).
    #[tokio::test]
    async fn a_message_flushed_by_another_write_before_this_one_returns_is_not_lost() {
        let inner =
            Arc::new(Holds { gates: vec![tokio::sync::Notify::new(), tokio::sync::Notify::new()], ..Holds::default() });
        let durable = Arc::new(Durable::new(Arc::clone(&inner) as Arc<dyn Sink>));
        let shared = sinks_contract::testing::envelope("S", 1, "s.x", "{}");
        let write = |batch: Vec<Envelope>| {
            let durable = Arc::clone(&durable);
            tokio::spawn(async move { durable.write(&batch, Duration::from_secs(2)).await.unwrap() })
        };
        let a = write(vec![shared.clone()]);
        while inner.calls.load(std::sync::atomic::Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        let b = write(vec![shared.clone(), sinks_contract::testing::envelope("S", 2, "s.x", "{}")]);
        while inner.calls.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        // A returns from the inner sink, flushes (committing 1 and 2) and routes; then B returns.
        inner.gates[0].notify_one();
        let a = a.await.unwrap();
        assert!(matches!(a.as_slice(), [MessageOutcome::Committed]), "{a:?}");
        inner.gates[1].notify_one();
        let started = std::time::Instant::now();
        let b = b.await.unwrap();
        assert!(b.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{b:?}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "B waited {:?} for outcomes already routed",
            started.elapsed()
        );
        assert!(durable.lock().is_empty(), "no waiter is left behind");
    }
}
