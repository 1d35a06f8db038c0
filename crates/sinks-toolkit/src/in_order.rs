//! Writing in order inside a sink: [`run_in_order`] runs units of work at most `limit` at a
//! time while units that share an [`OrderKey`] run one after another in batch order, and
//! [`write_each`] is the write of a sink that writes each message to its own record.
//!
//! The rule itself ([`OrderKey`], held-back messages) is the contract's
//! (`sinks_contract::ordering`); this module is its one executor, used by every sink that
//! writes messages concurrently.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sinks_contract::OrderKey;

/// What became of one unit of [`run_in_order`].
#[derive(Debug)]
pub enum Ran<R> {
    /// The unit ran; its result.
    Done(R),
    /// Not attempted: an earlier unit sharing one of its keys failed temporarily (or was
    /// itself held back).
    HeldBack,
}

/// A unit's result and whether it failed temporarily (which holds back later units that
/// share one of its keys).
#[derive(Debug)]
pub struct Finished<R> {
    /// The result.
    pub result: R,
    /// True when the unit failed temporarily.
    pub failed_temporarily: bool,
}

/// Runs `units` (each with its keys) at most `limit` at a time. A unit starts only after
/// every earlier unit sharing one of its keys has finished, and is held back instead when
/// one of those failed temporarily or was held back. Results come back in unit order.
///
/// Of the units ready to start, the earliest starts first. Only running units hold a future
/// of `run`: a batch of 500 messages with 16 requests in flight keeps 16 write futures, not
/// 500 (a write future holds a whole request and its retries, several KB).
pub async fn run_in_order<T, R, F, Fut>(units: Vec<(Vec<OrderKey>, T)>, limit: usize, run: F) -> Vec<Ran<R>>
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Finished<R>>,
{
    let count = units.len();
    // Each unit waits for the last earlier unit of each of its keys (a chain per key).
    let mut last: HashMap<OrderKey, usize> = HashMap::with_capacity(count.min(64));
    let mut waiting = vec![0usize; count];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut work = Vec::with_capacity(count);
    for (u, (keys, unit)) in units.into_iter().enumerate() {
        for key in keys {
            if let Some(d) = last.insert(key, u)
                && d != u
                && dependents[d].last() != Some(&u)
            {
                dependents[d].push(u);
                waiting[u] += 1;
            }
        }
        work.push(Some(unit));
    }
    let mut results: Vec<Option<Ran<R>>> = (0..count).map(|_| None).collect();
    // Held back: an earlier unit sharing a key failed temporarily or was held back.
    let mut blocked = vec![false; count];
    let mut ready: BinaryHeap<Reverse<usize>> = (0..count).filter(|&u| waiting[u] == 0).map(Reverse).collect();
    let mut running = FuturesUnordered::new();
    let limit = limit.max(1);
    // Marks `u` finished (`clear`: it ran without a temporary failure) and readies the units
    // that waited only for it.
    let finish = |u: usize, clear: bool, blocked: &mut [bool], waiting: &mut [usize], ready: &mut BinaryHeap<_>| {
        for &d in &dependents[u] {
            blocked[d] |= !clear;
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    };
    loop {
        while let Some(&Reverse(u)) = ready.peek() {
            if blocked[u] {
                ready.pop();
                results[u] = Some(Ran::HeldBack);
                finish(u, false, &mut blocked, &mut waiting, &mut ready);
            } else if running.len() < limit {
                ready.pop();
                let Some(unit) = work[u].take() else { continue };
                let future = run(unit);
                running.push(async move { (u, future.await) });
            } else {
                break;
            }
        }
        let Some((u, finished)) = running.next().await else { break };
        finish(u, !finished.failed_temporarily, &mut blocked, &mut waiting, &mut ready);
        results[u] = Some(Ran::Done(finished.result));
    }
    // Every unit is ready once the units it waits for are finished, and every ready unit
    // is run or held back: none is left without a result.
    results.into_iter().map(|r| r.unwrap_or(Ran::HeldBack)).collect()
}

/// One write per message, for sinks that write each message to its own destination record
/// (an object, a row, a cache entry). Returns one outcome per message, in batch order.
///
/// `prepare` builds a message's write and names the destination record it writes (its
/// [`OrderKey`]); an error fails that message alone, permanently, and is logged with the
/// message's subject and stream sequence (`what` names the record in the log: "s3 object").
/// Messages sharing their envelope's ordering key or a record key are written one after
/// another through [`run_in_order`], at most `limit` at a time; a message behind a temporary
/// failure is [held back](sinks_contract::MessageOutcome::HeldBack).
pub async fn write_each<'a, P, E, W, Fut>(
    what: &'static str,
    batch: &'a [sinks_contract::Envelope],
    limit: usize,
    prepare: impl Fn(&sinks_contract::Envelope) -> Result<(OrderKey, P), E>,
    write: W,
) -> Vec<sinks_contract::MessageOutcome>
where
    E: std::fmt::Display,
    W: Fn(&'a sinks_contract::Envelope, P) -> Fut,
    Fut: Future<Output = sinks_contract::MessageOutcome>,
{
    use sinks_contract::{MessageOutcome, SinkError};
    let mut outcomes: Vec<Option<MessageOutcome>> = batch.iter().map(|_| None).collect();
    let mut units = Vec::with_capacity(batch.len());
    for (index, envelope) in batch.iter().enumerate() {
        match prepare(envelope) {
            Ok((record, prepared)) => {
                let keys = envelope.order_key().into_iter().chain([record]).collect();
                units.push((keys, (index, prepared)));
            }
            Err(e) => {
                tracing::warn!(
                    subject = envelope.subject(),
                    stream_sequence = envelope.jetstream().stream_sequence,
                    error = %e,
                    "{what} cannot be built for this message"
                );
                outcomes[index] = Some(MessageOutcome::Failed(SinkError::permanent(e.to_string())));
            }
        }
    }
    let indices: Vec<usize> = units.iter().map(|(_, (index, _))| *index).collect();
    let write = &write;
    let ran = run_in_order(units, limit, |(index, prepared)| async move {
        let outcome = write(&batch[index], prepared).await;
        Finished { failed_temporarily: outcome.failed_temporarily(), result: outcome }
    })
    .await;
    for (index, ran) in indices.into_iter().zip(ran) {
        outcomes[index] = Some(match ran {
            Ran::Done(outcome) => outcome,
            Ran::HeldBack => MessageOutcome::HeldBack,
        });
    }
    // Every message got an outcome above: it was either prepared and run, or failed here.
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| MessageOutcome::temporary(format!("{what}: no outcome"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    fn k(name: &str) -> OrderKey {
        OrderKey::subject(name)
    }

    /// Runs units named by their keys; `fail` names the units that fail temporarily.
    /// Returns each unit's fate and the order in which units started.
    async fn check(units: &[(&str, &[&str])], fail: &[&str], limit: usize) -> (Vec<String>, Vec<String>) {
        let started = Mutex::new(Vec::new());
        let input: Vec<(Vec<OrderKey>, &str)> =
            units.iter().map(|(name, keys)| (keys.iter().map(|n| k(n)).collect(), *name)).collect();
        let ran = run_in_order(input, limit, |name| {
            let started = &started;
            async move {
                started.lock().unwrap().push(name.to_owned());
                // Later units finish first unless ordering makes them wait.
                tokio::time::sleep(Duration::from_millis(if name.ends_with('1') { 30 } else { 1 })).await;
                Finished { result: name.to_owned(), failed_temporarily: fail.contains(&name) }
            }
        })
        .await;
        let fates = ran
            .into_iter()
            .map(|r| match r {
                Ran::Done(n) => n,
                Ran::HeldBack => "held".to_owned(),
            })
            .collect();
        (fates, started.into_inner().unwrap())
    }

    /// An envelope on `subject` with stream sequence `seq` and `payload`.
    fn envelope(subject: &str, seq: u64, payload: &'static [u8]) -> sinks_contract::Envelope {
        let info = sinks_contract::JetStreamInfo {
            stream: "S".into(),
            consumer: "c".into(),
            stream_sequence: seq,
            consumer_sequence: seq,
            delivered: 1,
            pending: 0,
            timestamp: None,
            domain: None,
        };
        sinks_contract::Envelope::new(
            subject,
            bytes::Bytes::from_static(payload),
            sinks_contract::Headers::default(),
            info,
        )
    }

    #[tokio::test]
    async fn write_each_fails_the_unbuildable_alone_and_holds_back_by_subject_and_by_record() {
        use sinks_contract::MessageOutcome;
        // payload = the record key; "bad" cannot be built; "fail-*" records fail temporarily.
        let batch = [
            envelope("a", 1, b"fail-x"),
            envelope("a", 2, b"r1"),
            envelope("b", 3, b"bad"),
            envelope("c", 4, b"fail-y"),
            envelope("d", 5, b"fail-y"),
            envelope("e", 6, b"r2"),
        ];
        let written = Mutex::new(Vec::new());
        let prepare = |e: &sinks_contract::Envelope| {
            let record = std::str::from_utf8(e.payload()).unwrap().to_owned();
            if record == "bad" {
                return Err(format!("record {record} is malformed"));
            }
            Ok((OrderKey::of(&[b"record", record.as_bytes()]), record))
        };
        let write = |e: &sinks_contract::Envelope, record: String| {
            let written = &written;
            let seq = e.jetstream().stream_sequence;
            async move {
                written.lock().unwrap().push(seq);
                if record.starts_with("fail") { MessageOutcome::temporary("down") } else { MessageOutcome::Committed }
            }
        };
        let outcomes = write_each("test record", &batch, 8, prepare, write).await;
        let fates: Vec<String> = outcomes
            .iter()
            .map(|o| match o {
                MessageOutcome::Committed => "committed".to_owned(),
                MessageOutcome::HeldBack => "held".to_owned(),
                MessageOutcome::Failed(e) if e.is_permanent() => format!("permanent: {e}"),
                MessageOutcome::Failed(_) => "temporary".to_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        // 2 waits behind 1 (same subject); 5 behind 4 (same record, other subject); the
        // unbuildable 3 fails alone and 6 is independent of everything.
        assert_eq!(
            fates,
            ["temporary", "held", "permanent: record bad is malformed", "temporary", "held", "committed"]
        );
        let mut written = written.into_inner().unwrap();
        written.sort_unstable();
        assert_eq!(written, [1, 4, 6], "held-back and unbuildable messages are never written");
    }

    #[tokio::test]
    async fn same_key_runs_in_order_and_waits() {
        let (fates, started) = check(&[("a1", &["a"]), ("a2", &["a"]), ("b1", &["b"])], &[], 8).await;
        assert_eq!(fates, ["a1", "a2", "b1"]);
        let pos = |n: &str| started.iter().position(|s| s == n).unwrap();
        assert!(pos("a1") < pos("a2"), "{started:?}");
    }

    #[tokio::test]
    async fn a_temporary_failure_holds_back_only_its_key() {
        let units: &[(&str, &[&str])] =
            &[("a1", &["a"]), ("b1", &["b"]), ("a2", &["a"]), ("b2", &["b"]), ("a3", &["a"])];
        let (fates, _) = check(units, &["a1"], 8).await;
        assert_eq!(fates, ["a1", "b1", "held", "b2", "held"]);
    }

    #[tokio::test]
    async fn units_without_keys_are_independent() {
        let (fates, _) = check(&[("x1", &[]), ("x2", &[]), ("x3", &[])], &["x1"], 8).await;
        assert_eq!(fates, ["x1", "x2", "x3"]);
    }

    #[tokio::test]
    async fn a_unit_with_two_keys_waits_for_both() {
        let units: &[(&str, &[&str])] = &[("a1", &["a"]), ("b2", &["b"]), ("ab", &["a", "b"]), ("b3", &["b"])];
        let (fates, started) = check(units, &["b2"], 8).await;
        assert_eq!(fates, ["a1", "b2", "held", "held"]);
        assert!(!started.contains(&"ab".to_owned()));
    }

    #[tokio::test]
    async fn limit_one_is_sequential() {
        let (fates, started) = check(&[("x1", &[]), ("x2", &[]), ("x3", &[])], &[], 1).await;
        assert_eq!(fates, ["x1", "x2", "x3"]);
        assert_eq!(started, ["x1", "x2", "x3"]);
    }

    #[tokio::test]
    async fn never_more_than_the_limit_run_and_the_earliest_ready_unit_starts_first() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = Mutex::new(Vec::new());
        // u0 and u3 share a key; the rest are independent.
        let units: Vec<(Vec<OrderKey>, usize)> =
            (0..12).map(|u| (if u == 0 || u == 3 { vec![k("shared")] } else { Vec::new() }, u)).collect();
        let ran = run_in_order(units, 3, |u| {
            let (now, most, started) = (&now, &most, &started);
            async move {
                started.lock().unwrap().push(u);
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(if u == 0 { 40 } else { 5 })).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Finished { result: u, failed_temporarily: false }
            }
        })
        .await;
        assert_eq!(most.load(Ordering::SeqCst), 3, "the limit is reached and never passed");
        let done: Vec<usize> = ran.into_iter().map(|r| if let Ran::Done(u) = r { u } else { usize::MAX }).collect();
        assert_eq!(done, (0..12).collect::<Vec<_>>(), "results in unit order");
        let started = started.into_inner().unwrap();
        // u3 waits for u0 (40 ms), so the independent units pass it, each in stream order.
        let independent: Vec<usize> = started.iter().copied().filter(|&u| u != 0 && u != 3).collect();
        assert_eq!(independent, [1, 2, 4, 5, 6, 7, 8, 9, 10, 11], "{started:?}");
        assert!(started.iter().position(|&u| u == 3) > started.iter().position(|&u| u == 0), "{started:?}");
    }

    #[tokio::test]
    async fn a_hold_back_passes_down_a_chain_without_running_it() {
        let units: &[(&str, &[&str])] = &[("a1", &["a"]), ("a2", &["a", "b"]), ("b3", &["b", "c"]), ("c4", &["c"])];
        let (fates, started) = check(units, &["a1"], 1).await;
        assert_eq!(fates, ["a1", "held", "held", "held"]);
        assert_eq!(started, ["a1"]);
    }
}
