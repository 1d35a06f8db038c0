//! The `fanout` sink: one consumer, several named sinks. A `Sink` made of sinks.
//!
//! Each message is routed ([`crate::config::routing`]) to one or more targets. Every target
//! gets its own sub-batch, and the sub-batches are written concurrently: required targets
//! directly, within the write's budget; optional targets through a bounded queue served by
//! the target's own worker, so a slow optional target never stalls the pipeline (a copy that
//! does not fit in the queue is dropped and counted). The write returns when every required
//! sub-batch is done and each optional one has had its wait (`minimum_wait_ms`, capped by
//! `timeout_ms` from the start of the write); an optional write still running then goes on
//! in the background.
//!
//! One outcome per message comes from its targets' outcomes through the per-target ACK rule
//! ([`crate::ack::fanout_outcome`]): a message is acknowledged when every required target it
//! was routed to holds it; a permanent failure in a required target dead-letters it, naming
//! the target; a temporary one redelivers it, and targets that already hold it report a
//! duplicate. When one batch routes a target both as required and as optional, the target
//! is written once, as required (the reference's merge).
//!
//! Children open in name order, close in reverse order, and are health-checked together.
//! A child that holds messages across writes (the file and S3 sinks' batch mode) is written
//! through `sinks_toolkit::holding::Durable`: each sub-batch becomes its own object, and
//! its outcomes are final when the write returns.
//!
//! **Reconcile.** A message is read back from every *required* target its route sent it to,
//! through that target's own read-back; optional copies are best effort and never checked.
//! It is equal only when every such target holds it equal; missing when one lacks it;
//! different when one holds other content; unchecked when a required target of it cannot
//! read back. A message routed nowhere (`no_match: ignore`) or to optional targets only owes
//! nothing and counts as equal; one rejected by routing (`no_match: reject`) was
//! dead-lettered and counts as missing (reconcile then finds it in the DLQ). Without any
//! required target that can read back, fan-out has no read-back (`Sink::read_back` is `None`).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};

use crate::ack::{TargetOutcome, TargetResult, fanout_outcome};
use crate::config::routing::{RoutingConfig, Selection};
use sinks_contract::envelope::Envelope;
use sinks_contract::error::SinkError;
use sinks_contract::sink::{
    BatchResult, Capabilities, Destinations, Holding, MessageOutcome, Presence, ReadBack, Sink, cannot_read_back,
    write_isolating,
};

/// The answer of an optional target's worker: one outcome per message of its sub-batch.
type Reply = oneshot::Receiver<Vec<MessageOutcome>>;

/// Sub-batches an optional target may have waiting before new copies are dropped.
pub const OPTIONAL_QUEUE_BATCHES: usize = 8;
/// How long closing waits for optional targets to finish what they were given.
pub const OPTIONAL_DRAIN: Duration = Duration::from_secs(5);
/// Time budget of a queued optional write.
const OPTIONAL_BUDGET: Duration = Duration::from_secs(30);

/// Counters of what fan-out did beyond the per-message outcomes.
#[derive(Debug, Default)]
pub struct FanoutStats {
    /// Messages no route matched, acknowledged unwritten (`no_match: ignore`).
    pub ignored: AtomicU64,
    /// Messages no route matched, dead-lettered (`no_match: reject`).
    pub rejected: AtomicU64,
    /// Optional copies dropped because the target's queue was full.
    pub optional_dropped: AtomicU64,
    /// Optional copies still being written when their wait ended.
    pub optional_timed_out: AtomicU64,
    /// Optional copies the target failed to write.
    pub optional_failed: AtomicU64,
}

impl FanoutStats {
    /// `(name, value)` of every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        [
            ("ignored", &self.ignored),
            ("rejected", &self.rejected),
            ("optional_dropped", &self.optional_dropped),
            ("optional_timed_out", &self.optional_timed_out),
            ("optional_failed", &self.optional_failed),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.load(Ordering::Relaxed)))
        .collect()
    }
}

type Job = (Vec<Envelope>, oneshot::Sender<Vec<MessageOutcome>>);

/// One named child.
#[derive(Debug)]
struct Child {
    name: String,
    sink: Arc<dyn Sink>,
}

/// The fan-out sink.
#[derive(Debug)]
pub struct FanoutSink {
    children: Vec<Child>,
    routing: RoutingConfig,
    stats: Arc<FanoutStats>,
    /// Optional-target queues, index for index with `children` (set by `open`).
    queues: Mutex<Vec<Option<mpsc::Sender<Job>>>>,
    workers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// How one child is written in one batch.
enum Plan {
    Required,
    Optional { wait: Duration, timeout: Duration },
}

impl FanoutSink {
    /// A fan-out over `children` (`name → sink`) routed by `routing`. Targets must name
    /// children (config validation checks this).
    pub fn new(children: Vec<(String, Arc<dyn Sink>)>, routing: RoutingConfig) -> Self {
        // A target that holds messages (batch mode) answers per write behind `Durable`: a
        // required target's outcome decides an ack, so it must be final.
        let mut children: Vec<Child> = children
            .into_iter()
            .map(|(name, sink)| Child { name, sink: sinks_toolkit::holding::Durable::wrap(sink) })
            .collect();
        children.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            children,
            routing,
            stats: Arc::new(FanoutStats::default()),
            queues: Mutex::new(Vec::new()),
            workers: Mutex::new(Vec::new()),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Arc<FanoutStats> {
        Arc::clone(&self.stats)
    }

    fn child_index(&self, name: &str) -> Option<usize> {
        self.children.binary_search_by(|c| c.name.as_str().cmp(name)).ok()
    }

    /// Each child that some route (or the default route) makes a required target, in name
    /// order, with its read-back.
    fn required_read_backs(&self) -> Vec<(usize, Option<&dyn ReadBack>)> {
        let routing = &self.routing;
        let required = |name: &str| {
            routing
                .routes
                .iter()
                .flat_map(|r| r.targets.iter())
                .chain(routing.default_targets.iter())
                .any(|t| t.required && t.sink == name)
        };
        self.children
            .iter()
            .enumerate()
            .filter(|(_, c)| required(&c.name))
            .map(|(i, c)| (i, c.sink.read_back()))
            .collect()
    }

    /// What reconcile checks through the required targets; `None` when no required target
    /// reads back (or there is none).
    fn read_back_plan(&self) -> Option<String> {
        let (mut checked, mut unchecked) = (Vec::new(), Vec::new());
        for (c, read_back) in self.required_read_backs() {
            let child = &self.children[c];
            match read_back {
                Some(reads) => checked.push(format!("`{}` ({})", child.name, reads.checks())),
                None => unchecked.push(format!("`{}` ({})", child.name, cannot_read_back(&child.sink))),
            }
        }
        if checked.is_empty() {
            return None;
        }
        let mut what = format!(
            "each message from every required target its route sent it to (equal only when all hold it equal): {}",
            checked.join("; ")
        );
        if !unchecked.is_empty() {
            what.push_str(&format!("; messages routed to these are unchecked: {}", unchecked.join("; ")));
        }
        Some(what)
    }

    fn queue(&self, child: usize) -> Option<mpsc::Sender<Job>> {
        self.queues.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(child).cloned().flatten()
    }

    async fn write_routed(&self, batch: &[Envelope], budget: Duration) -> Vec<MessageOutcome> {
        let started = Instant::now();
        // Route every message; collect each child's sub-batch (message indexes) and plan.
        let selections: Vec<Selection> = batch.iter().map(|e| self.routing.select(e)).collect();
        let (members, plans) = self.plan_targets(&selections);
        let sub = |c: usize| -> Vec<Envelope> { members[c].iter().map(|i| batch[*i].clone()).collect() };
        // Optional sub-batches go to their queues first, so they progress alongside.
        let mut optional: Vec<(usize, Duration, Duration, Option<Reply>)> = Vec::new();
        for (c, plan) in plans.iter().enumerate() {
            if let Some(Plan::Optional { wait, timeout }) = plan {
                let (tx, rx) = oneshot::channel();
                let queued = self.queue(c).is_some_and(|q| q.try_send((sub(c), tx)).is_ok());
                if !queued {
                    self.stats.optional_dropped.fetch_add(members[c].len() as u64, Ordering::Relaxed);
                    tracing::warn!(target_sink = %self.children[c].name, messages = members[c].len(), "optional target is behind: copies dropped");
                }
                optional.push((c, *wait, *timeout, queued.then_some(rx)));
            }
        }
        let required: Vec<usize> =
            plans.iter().enumerate().filter(|(_, p)| matches!(p, Some(Plan::Required))).map(|(c, _)| c).collect();
        let subs: Vec<Vec<Envelope>> = required.iter().map(|c| sub(*c)).collect();
        let writes = required
            .iter()
            .zip(&subs)
            .map(|(c, envelopes)| write_isolating(self.children[*c].sink.as_ref(), envelopes, budget));
        let required_results: Vec<Vec<MessageOutcome>> = join_all(writes).await;
        // Each optional target gets min(minimum_wait, timeout - elapsed) after that.
        let mut results: Vec<Option<Vec<TargetResult>>> = (0..self.children.len()).map(|_| None).collect();
        for (c, outcomes) in required.iter().zip(required_results) {
            // A required target whose whole sub-batch failed temporarily is down: its
            // failures are the destination's, and the runner may hold the messages that
            // need it through the outage while the other targets go on.
            let outcomes = mark_outage(outcomes);
            results[*c] = Some(outcomes.into_iter().map(TargetResult::Outcome).collect());
        }
        for (c, wait, timeout, rx) in optional {
            let left = wait.min(timeout.saturating_sub(started.elapsed()));
            results[c] = Some(self.optional_results(c, members[c].len(), rx, left).await);
        }
        self.combine(selections, &members, results)
    }

    /// Each child's sub-batch (the indexes of its messages in the batch) and its plan: required
    /// when any message's route requires it, else optional with the longest wait and timeout
    /// any route gives it.
    fn plan_targets(&self, selections: &[Selection]) -> (Vec<Vec<usize>>, Vec<Option<Plan>>) {
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); self.children.len()];
        let mut plans: Vec<Option<Plan>> = (0..self.children.len()).map(|_| None).collect();
        for (i, selection) in selections.iter().enumerate() {
            let Selection::Targets(targets) = selection else { continue };
            for t in targets {
                let Some(c) = self.child_index(&t.sink) else { continue };
                members[c].push(i);
                let wait = Duration::from_millis(t.minimum_wait_ms.unwrap_or(0));
                let timeout = Duration::from_millis(t.timeout_ms.unwrap_or(0));
                plans[c] = Some(match (plans[c].take(), t.required) {
                    (_, true) | (Some(Plan::Required), _) => Plan::Required,
                    (Some(Plan::Optional { wait: w, timeout: to }), false) => {
                        Plan::Optional { wait: w.max(wait), timeout: to.max(timeout) }
                    }
                    (None, false) => Plan::Optional { wait, timeout },
                });
            }
        }
        (members, plans)
    }

    /// The `n` results of optional child `c`'s sub-batch, waited for at most `left`: dropped
    /// when it was never queued (`rx` is `None`), timed out, or its outcomes.
    async fn optional_results(&self, c: usize, n: usize, rx: Option<Reply>, left: Duration) -> Vec<TargetResult> {
        let per_message: Vec<TargetResult> = match rx {
            None => (0..n).map(|_| TargetResult::Dropped).collect(),
            Some(rx) => match tokio::time::timeout(left, rx).await {
                Ok(Ok(outcomes)) if outcomes.len() == n => outcomes.into_iter().map(TargetResult::Outcome).collect(),
                Ok(_) => (0..n)
                    .map(|_| TargetResult::Outcome(MessageOutcome::temporary("optional target worker stopped")))
                    .collect(),
                Err(_) => {
                    self.stats.optional_timed_out.fetch_add(n as u64, Ordering::Relaxed);
                    (0..n).map(|_| TargetResult::TimedOut).collect()
                }
            },
        };
        let failed = per_message.iter().filter(|r| matches!(r, TargetResult::Outcome(o) if !o.is_durable())).count();
        if failed > 0 {
            self.stats.optional_failed.fetch_add(failed as u64, Ordering::Relaxed);
            tracing::debug!(target_sink = %self.children[c].name, messages = failed, "optional target did not write its copies");
        }
        per_message
    }

    /// One outcome per message from its own targets' `results` (per child, in the order of
    /// its `members`): ignored messages committed, unrouted ones refused, the rest decided by
    /// `fanout_outcome`.
    fn combine(
        &self,
        selections: Vec<Selection>,
        members: &[Vec<usize>],
        results: Vec<Option<Vec<TargetResult>>>,
    ) -> Vec<MessageOutcome> {
        let mut cursor = vec![0usize; self.children.len()];
        let mut by_child: Vec<std::vec::IntoIter<TargetResult>> =
            results.into_iter().map(|r| r.unwrap_or_default().into_iter()).collect();
        let mut outcomes = Vec::with_capacity(selections.len());
        for (i, selection) in selections.into_iter().enumerate() {
            let outcome = match selection {
                Selection::Ignore => {
                    self.stats.ignored.fetch_add(1, Ordering::Relaxed);
                    MessageOutcome::Committed
                }
                Selection::Reject => {
                    self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                    MessageOutcome::Failed(
                        SinkError::permanent("no route matched the message")
                            .with_error_type("RoutingError")
                            .with_reason("no_route_matched"),
                    )
                }
                Selection::Targets(targets) => {
                    let mut parts = Vec::with_capacity(targets.len());
                    for t in targets {
                        let Some(c) = self.child_index(&t.sink) else { continue };
                        debug_assert_eq!(members[c][cursor[c]], i);
                        cursor[c] += 1;
                        let result = by_child[c].next().unwrap_or(TargetResult::Dropped);
                        parts.push(TargetOutcome { target: t.sink, required: t.required, result });
                    }
                    fanout_outcome(parts)
                }
            };
            outcomes.push(outcome);
        }
        outcomes
    }
}

/// `outcomes` of one target's sub-batch, every temporary failure marked as an outage
/// ([`SinkError::with_outage`]) when every message of it failed temporarily (or was held back
/// behind such a failure).
fn mark_outage(outcomes: Vec<MessageOutcome>) -> Vec<MessageOutcome> {
    let down = outcomes.iter().any(MessageOutcome::failed_temporarily)
        && outcomes.iter().all(|o| o.failed_temporarily() || matches!(o, MessageOutcome::HeldBack));
    if !down {
        return outcomes;
    }
    outcomes
        .into_iter()
        .map(|o| match o {
            MessageOutcome::Failed(e) => MessageOutcome::Failed(e.with_outage()),
            other => other,
        })
        .collect()
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl Sink for FanoutSink {
    fn name(&self) -> &str {
        "fanout"
    }

    /// None of the facts: a batch goes to several destinations, each with its own.
    fn capabilities(&self) -> Capabilities {
        Capabilities::new().read_back_note("none of its required targets can read its destination back")
    }

    async fn open(&self) -> Result<(), SinkError> {
        for child in &self.children {
            child
                .sink
                .open()
                .await
                .map_err(|e| e.rephrased(format!("sink `{}`: {}", child.name, e.display_chain())))?;
            tracing::info!(target_sink = %child.name, kind = child.sink.name(), "fan-out target opened");
        }
        let mut queues = Vec::with_capacity(self.children.len());
        let mut workers = Vec::with_capacity(self.children.len());
        for child in &self.children {
            let (tx, mut rx) = mpsc::channel::<Job>(OPTIONAL_QUEUE_BATCHES);
            let sink = Arc::clone(&child.sink);
            workers.push(tokio::spawn(async move {
                while let Some((envelopes, reply)) = rx.recv().await {
                    let outcomes = write_isolating(sink.as_ref(), &envelopes, OPTIONAL_BUDGET).await;
                    let _ = reply.send(outcomes);
                }
            }));
            queues.push(Some(tx));
        }
        *self.queues.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = queues;
        *self.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = workers;
        Ok(())
    }

    async fn write(&self, batch: &[Envelope], budget: Duration) -> BatchResult {
        Ok(self.write_routed(batch, budget).await)
    }

    async fn health_check(&self) -> Result<(), SinkError> {
        let checks = join_all(self.children.iter().map(|c| c.sink.health_check())).await;
        for (child, result) in self.children.iter().zip(checks) {
            result.map_err(|e| e.rephrased(format!("sink `{}`: {}", child.name, e.display_chain())))?;
        }
        Ok(())
    }

    async fn close(&self) -> Result<(), SinkError> {
        // Stop taking optional copies, give the queued ones a bounded time, then close the
        // children in reverse order.
        self.queues.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        let workers: Vec<_> =
            std::mem::take(&mut *self.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let aborts: Vec<_> = workers.iter().map(tokio::task::JoinHandle::abort_handle).collect();
        if tokio::time::timeout(OPTIONAL_DRAIN, join_all(workers)).await.is_err() {
            tracing::warn!(
                timeout_s = OPTIONAL_DRAIN.as_secs(),
                "optional targets did not finish their queued copies in time"
            );
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        let counts: Vec<String> = self.stats.snapshot().iter().map(|(k, v)| format!("{k}={v}")).collect();
        tracing::info!(counts = %counts.join(" "), "fan-out closing");
        let mut first_error = None;
        for child in self.children.iter().rev() {
            if let Err(e) = child.sink.close().await {
                tracing::warn!(target_sink = %child.name, error = %e.display_chain(), "closing a fan-out target failed");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Some when a required target reads back (the others' messages are unchecked).
    fn read_back(&self) -> Option<&dyn ReadBack> {
        self.read_back_plan().map(|_| self as &dyn ReadBack)
    }

    /// None: every target that holds messages is behind `Durable` (see [`FanoutSink::new`]),
    /// so a fan-out write returns final outcomes only.
    fn holding(&self) -> Option<&dyn Holding> {
        None
    }

    /// None: a message of a fan-out is stored in as many places as its route has targets,
    /// and the ledger's receipt names one destination.
    fn destinations(&self) -> Option<&dyn Destinations> {
        None
    }
}

#[async_trait]
impl ReadBack for FanoutSink {
    fn checks(&self) -> String {
        self.read_back_plan().unwrap_or_else(|| cannot_read_back(self))
    }

    /// Each required target that can read back checks its own sub-batch (concurrently); the
    /// answers merge per message (missing, then different, then unchecked, then equal).
    async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
        let supported: Vec<bool> = {
            let mut supported = vec![false; self.children.len()];
            for (c, read_back) in self.required_read_backs() {
                supported[c] = read_back.is_some();
            }
            supported
        };
        let selections: Vec<Selection> = batch.iter().map(|e| self.routing.select(e)).collect();
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); self.children.len()];
        let mut found: Vec<Presence> = vec![Presence::Equal; batch.len()];
        for (i, selection) in selections.iter().enumerate() {
            match selection {
                // Routed nowhere on purpose: nothing is owed.
                Selection::Ignore => {}
                // Dead-lettered by routing: never written.
                Selection::Reject => found[i] = Presence::Missing,
                Selection::Targets(targets) => {
                    for t in targets.iter().filter(|t| t.required) {
                        let Some(c) = self.child_index(&t.sink) else { continue };
                        if supported[c] {
                            members[c].push(i);
                        } else {
                            found[i] = worse(found[i], Presence::Unchecked);
                        }
                    }
                }
            }
        }
        let checked: Vec<usize> = (0..self.children.len()).filter(|c| !members[*c].is_empty()).collect();
        let subs: Vec<Vec<Envelope>> =
            checked.iter().map(|c| members[*c].iter().map(|i| batch[*i].clone()).collect()).collect();
        let answers = join_all(checked.iter().zip(&subs).map(|(c, sub)| async move {
            match self.children[*c].sink.read_back() {
                Some(reads) => reads.read(sub).await,
                None => Err(SinkError::permanent(cannot_read_back(&self.children[*c].sink))),
            }
        }))
        .await;
        for ((c, sub), answer) in checked.iter().zip(&subs).zip(answers) {
            let name = &self.children[*c].name;
            let presences = answer.map_err(|e| e.rephrased(format!("sink `{name}`: {}", e.display_chain())))?;
            if presences.len() != sub.len() {
                return Err(SinkError::temporary(format!("sink `{name}` returned a misaligned read-back")));
            }
            for (i, presence) in members[*c].iter().zip(presences) {
                found[*i] = worse(found[*i], presence);
            }
        }
        Ok(found)
    }
}

/// The answer that counts for a message two targets answered differently about: missing
/// (a replay repairs it) over different over unchecked over equal.
fn worse(a: Presence, b: Presence) -> Presence {
    let rank = |p: Presence| match p {
        Presence::Equal => 0,
        Presence::Unchecked => 1,
        Presence::Different => 2,
        Presence::Missing => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sinks_contract::testing::SinkExt as _;

    use super::*;
    use bytes::Bytes;
    use sinks_certify::MemorySink;
    use sinks_contract::envelope::{AppMetadata, Headers};
    use sinks_contract::testing::envelope_with;

    fn msg(seq: u64, subject: &str, classification: Option<&str>) -> Envelope {
        envelope_with("S", seq, subject, format!("{{\"n\":{seq}}}"), Headers::new(), 1).with_app_metadata(AppMetadata {
            classification: classification.map(str::to_owned),
            ..AppMetadata::default()
        })
    }

    fn routing(v: serde_json::Value) -> RoutingConfig {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn routes_write_sub_batches_and_merge_outcomes() {
        let (db, audit, hook) = (Arc::new(MemorySink::new()), Arc::new(MemorySink::new()), Arc::new(MemorySink::new()));
        let sink = FanoutSink::new(
            vec![
                ("db".into(), Arc::clone(&db) as Arc<dyn Sink>),
                ("audit".into(), Arc::clone(&audit) as Arc<dyn Sink>),
                ("hook".into(), Arc::clone(&hook) as Arc<dyn Sink>),
            ],
            routing(json!({"enabled": true, "mode": "all", "no_match": "ignore", "routes": [
                {"name": "secret", "match": {"classification": ["SECRET"]}, "targets": ["db", "audit"]},
                {"name": "orders", "match": {"subject": "orders.>"},
                 "targets": ["db", {"sink": "hook", "required": false, "minimum_wait_ms": 500, "timeout_ms": 1000}]}
            ]})),
        );
        sink.open().await.unwrap();
        let batch = vec![
            msg(1, "orders.a", None),
            msg(2, "orders.b", Some("SECRET")),
            msg(3, "misc", None),
            msg(4, "misc", Some("SECRET")),
        ];
        let outcomes = sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await.unwrap();
        assert!(outcomes.iter().all(|o| matches!(o, MessageOutcome::Committed)), "{outcomes:?}");
        let seqs = |m: &MemorySink| {
            let mut s: Vec<u64> = m.commits().into_iter().map(|(seq, _)| seq).collect();
            s.sort_unstable();
            s
        };
        assert_eq!(seqs(&db), [1, 2, 4]);
        assert_eq!(seqs(&audit), [2, 4]);
        assert_eq!(seqs(&hook), [1, 2]);
        assert_eq!(sink.stats().ignored.load(Ordering::Relaxed), 1);
        sink.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_required_permanent_failure_names_the_target_and_optional_failures_do_not_count() {
        let (db, hook) = (Arc::new(MemorySink::new()), Arc::new(MemorySink::new()));
        *db.faults.poison_payload.lock().unwrap() = Some(msg(2, "a", None).payload().clone());
        *hook.faults.poison_payload.lock().unwrap() = Some(msg(1, "a", None).payload().clone());
        let sink = FanoutSink::new(
            vec![("db".into(), Arc::clone(&db) as Arc<dyn Sink>), ("hook".into(), Arc::clone(&hook) as Arc<dyn Sink>)],
            routing(json!({"enabled": true, "routes": [{"name": "all", "match": {"subject": ">"},
                "targets": ["db", {"sink": "hook", "required": false, "minimum_wait_ms": 500, "timeout_ms": 500}]}]})),
        );
        sink.open().await.unwrap();
        let outcomes =
            sink.write(&[msg(1, "a", None), msg(2, "a", None)], sinks_contract::DEFAULT_BUDGET).await.unwrap();
        assert!(matches!(outcomes[0], MessageOutcome::Committed), "optional failure ignored: {:?}", outcomes[0]);
        let MessageOutcome::Failed(e) = &outcomes[1] else { panic!("{:?}", outcomes[1]) };
        assert!(e.is_permanent());
        assert_eq!(e.target(), Some("db"));
        assert_eq!(sink.stats().optional_failed.load(Ordering::Relaxed), 1);
    }

    /// A [`MemorySink`] that reads back (its records by idempotency key), or not.
    #[derive(Debug)]
    struct Readable {
        memory: Arc<MemorySink>,
        reads: bool,
    }

    #[async_trait]
    impl Sink for Readable {
        fn name(&self) -> &str {
            "readable"
        }

        async fn write(&self, batch: &[Envelope], _budget: std::time::Duration) -> BatchResult {
            self.memory.write(batch, sinks_contract::DEFAULT_BUDGET).await
        }

        async fn health_check(&self) -> Result<(), SinkError> {
            Ok(())
        }

        fn read_back(&self) -> Option<&dyn ReadBack> {
            self.reads.then_some(self as &dyn ReadBack)
        }
    }

    #[async_trait]
    impl ReadBack for Readable {
        fn checks(&self) -> String {
            "record by key".into()
        }

        async fn read(&self, batch: &[Envelope]) -> Result<Vec<Presence>, SinkError> {
            assert!(self.reads, "never asked when it cannot read back");
            Ok(batch
                .iter()
                .map(|e| match self.memory.get(&e.idempotency_key().unwrap().to_string()) {
                    None => Presence::Missing,
                    Some(p) if p == *e.payload() => Presence::Equal,
                    Some(_) => Presence::Different,
                })
                .collect())
        }
    }

    fn readable(reads: bool) -> (Arc<MemorySink>, Arc<dyn Sink>) {
        let memory = Arc::new(MemorySink::new());
        (Arc::clone(&memory), Arc::new(Readable { memory, reads }))
    }

    #[tokio::test]
    async fn reconcile_reads_every_required_target_a_message_was_routed_to() {
        let ((db, db_sink), (audit, audit_sink), (_, plain_sink), (_, opt_sink)) =
            (readable(true), readable(true), readable(false), readable(true));
        let sink = FanoutSink::new(
            vec![
                ("db".into(), db_sink),
                ("audit".into(), audit_sink),
                ("plain".into(), plain_sink),
                ("opt".into(), opt_sink),
            ],
            routing(json!({"enabled": true, "mode": "all", "no_match": "reject", "routes": [
                {"name": "orders", "match": {"subject": "orders.>"}, "targets": ["db", {"sink": "opt", "required": false}]},
                {"name": "secret", "match": {"classification": ["SECRET"]}, "targets": ["audit"]},
                {"name": "legacy", "match": {"subject": "legacy.>"}, "targets": ["plain"]},
                {"name": "hint", "match": {"subject": "hint.>"}, "targets": [{"sink": "opt", "required": false}]}
            ]})),
        );
        sink.open().await.unwrap();
        let reads = sink.read_back().expect("a required target reads back");
        let what = reads.checks();
        assert!(what.contains("`audit` (record by key)") && what.contains("`db` (record by key)"), "{what}");
        assert!(what.contains("unchecked: `plain` (the `readable` sink cannot read its destination back)"), "{what}");
        assert!(!what.contains("`opt`"), "optional targets are never checked: {what}");
        let batch = vec![
            msg(1, "orders.a", None),           // db
            msg(2, "orders.b", Some("SECRET")), // db + audit
            msg(3, "orders.c", Some("SECRET")), // db + audit
            msg(4, "orders.d", Some("SECRET")), // db + audit
            msg(5, "legacy.x", None),           // plain only (cannot read back)
            msg(6, "legacy.y", Some("SECRET")), // plain + audit
            msg(7, "hint.z", None),             // optional only
            msg(8, "misc", None),               // no route: rejected
        ];
        let outcomes = sink.write(&batch, sinks_contract::DEFAULT_BUDGET).await.unwrap();
        assert_eq!(outcomes.iter().filter(|o| o.is_durable()).count(), 7, "{outcomes:?}");
        use Presence::{Different, Equal, Missing, Unchecked};
        assert_eq!(
            sink.read_back_batch(&batch).await.unwrap(),
            [Equal, Equal, Equal, Equal, Unchecked, Unchecked, Equal, Missing]
        );
        let key = |seq: u64| format!("stream-sequence:S:{seq}");
        db.set(&key(1), None);
        audit.set(&key(2), None);
        audit.set(&key(3), Some(Bytes::from_static(b"{\"n\":-3}")));
        db.set(&key(4), Some(Bytes::from_static(b"{\"n\":-4}")));
        audit.set(&key(4), None);
        audit.set(&key(6), Some(Bytes::from_static(b"{}")));
        assert_eq!(
            sink.read_back_batch(&batch).await.unwrap(),
            // 4: missing in one target beats different in the other (a replay repairs it);
            // 6: what a readable target says beats the unreadable one's silence.
            [Missing, Missing, Different, Missing, Unchecked, Different, Equal, Missing]
        );
        sink.close().await.unwrap();
    }

    #[tokio::test]
    async fn reconcile_is_unsupported_when_no_required_target_reads_back() {
        let ((_, a), (_, b)) = (readable(false), readable(true));
        let sink = FanoutSink::new(
            vec![("a".into(), a), ("b".into(), b)],
            routing(json!({"enabled": true, "routes": [{"name": "all", "match": {"subject": ">"},
                "targets": ["a", {"sink": "b", "required": false}]}]})),
        );
        assert!(sink.read_back().is_none(), "{:?}", sink.read_back());
        assert_eq!(
            sink.read_back_text(),
            "the `fanout` sink cannot read its destination back: none of its required targets can read its destination back"
        );
    }

    #[tokio::test]
    async fn a_slow_optional_target_costs_its_window_only_and_drops_when_behind() {
        let (db, slow) = (Arc::new(MemorySink::new()), Arc::new(MemorySink::new()));
        slow.faults.write_delay_ms.store(5000, Ordering::Relaxed);
        let sink = FanoutSink::new(
            vec![("db".into(), Arc::clone(&db) as Arc<dyn Sink>), ("slow".into(), Arc::clone(&slow) as Arc<dyn Sink>)],
            routing(json!({"enabled": true, "routes": [{"name": "all", "match": {"subject": ">"},
                "targets": ["db", {"sink": "slow", "required": false, "minimum_wait_ms": 50, "timeout_ms": 100}]}]})),
        );
        sink.open().await.unwrap();
        let started = Instant::now();
        for round in 0..(OPTIONAL_QUEUE_BATCHES as u64 + 3) {
            let outcomes = sink.write(&[msg(round, "a", None)], sinks_contract::DEFAULT_BUDGET).await.unwrap();
            assert!(matches!(outcomes[0], MessageOutcome::Committed));
        }
        // Each write waited at most its 50 ms window, never the 5 s of the slow target.
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        let stats = sink.stats();
        assert!(stats.optional_timed_out.load(Ordering::Relaxed) >= 1);
        assert!(stats.optional_dropped.load(Ordering::Relaxed) >= 1, "the bounded queue dropped copies");
        assert_eq!(db.commits().len(), OPTIONAL_QUEUE_BATCHES + 3);
    }
}
