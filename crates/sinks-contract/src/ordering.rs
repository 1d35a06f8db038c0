//! The one ordering rule: messages that share an [`OrderKey`] are written one after another
//! in stream order; messages with different keys (or none) may be written concurrently.
//!
//! The key comes from `delivery.ordering_key` (the subject by default, a payload field, or
//! none) and travels on each [`crate::Envelope`]; the runner applies it across batches and
//! [`run_in_order`] applies it inside a sink's write, so no sink invents an order of its
//! own. A sink may add keys only for what its destination requires (the S3 sink serializes
//! writes of one object key), never for order.
//!
//! When a write fails temporarily, the later writes that share one of its keys are not
//! attempted: they are *held back* ([`crate::MessageOutcome::HeldBack`]), which is not a
//! failure of theirs. The runner releases them for redelivery together with the message
//! they wait for.

use std::future::Future;
use std::hash::Hasher;

use tokio::sync::{Semaphore, watch};

/// What orders a message's write (a hash; a collision only adds a needless wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderKey(u64);

impl OrderKey {
    /// The key of messages ordered by subject.
    pub fn subject(subject: &str) -> Self {
        Self::of(&[b"subject", subject.as_bytes()])
    }

    /// The key of messages ordered by the value of a payload field.
    pub fn field(value: &str) -> Self {
        Self::of(&[b"field", value.as_bytes()])
    }

    /// A key from arbitrary parts (for a destination's own serialization, such as one
    /// object key); the parts are length-delimited, so `["ab", "c"]` ≠ `["a", "bc"]`.
    pub fn of(parts: &[&[u8]]) -> Self {
        // SipHash with fixed keys: the same key in every process and run.
        let mut h = std::hash::DefaultHasher::new();
        for part in parts {
            h.write_usize(part.len());
            h.write(part);
        }
        Self(h.finish())
    }
}

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
pub async fn run_in_order<T, R, F, Fut>(units: Vec<(Vec<OrderKey>, T)>, limit: usize, run: F) -> Vec<Ran<R>>
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Finished<R>>,
{
    let mut last: std::collections::HashMap<OrderKey, usize> = std::collections::HashMap::new();
    let deps: Vec<Vec<usize>> = units
        .iter()
        .enumerate()
        .map(|(u, (keys, _))| {
            let mut deps: Vec<usize> = keys.iter().filter_map(|k| last.insert(*k, u)).filter(|d| *d != u).collect();
            deps.sort_unstable();
            deps.dedup();
            deps
        })
        .collect();
    // `Some(true)`: finished and clear; `Some(false)`: failed temporarily or held back.
    let done: Vec<watch::Sender<Option<bool>>> = units.iter().map(|_| watch::channel(None).0).collect();
    let permits = Semaphore::new(limit.max(1));
    let run = &run;
    let tasks = units.into_iter().enumerate().map(|(u, (_, work))| {
        let waits: Vec<watch::Receiver<Option<bool>>> = deps[u].iter().map(|&d| done[d].subscribe()).collect();
        let done = &done[u];
        let permits = &permits;
        async move {
            let mut clear = true;
            for mut rx in waits {
                clear &= matches!(rx.wait_for(Option::is_some).await.as_deref(), Ok(Some(true)));
            }
            if clear {
                let _permit = permits.acquire().await;
                let finished = run(work).await;
                done.send_replace(Some(!finished.failed_temporarily));
                Ran::Done(finished.result)
            } else {
                done.send_replace(Some(false));
                Ran::HeldBack
            }
        }
    });
    futures::future::join_all(tasks).await
}

/// One write per message, for sinks that write each message to its own destination record
/// (an object, a row, a cache entry). Returns one outcome per message, in batch order.
///
/// `prepare` builds a message's write and names the destination record it writes (its
/// [`OrderKey`]); an error fails that message alone, permanently, and is logged with the
/// message's subject and stream sequence (`what` names the record in the log: "s3 object").
/// Messages sharing their envelope's ordering key or a record key are written one after
/// another through [`run_in_order`], at most `limit` at a time; a message behind a temporary
/// failure is [held back](crate::MessageOutcome::HeldBack).
pub async fn write_each<'a, P, E, W, Fut>(
    what: &'static str,
    batch: &'a [crate::Envelope],
    limit: usize,
    prepare: impl Fn(&crate::Envelope) -> Result<(OrderKey, P), E>,
    write: W,
) -> Vec<crate::MessageOutcome>
where
    E: std::fmt::Display,
    W: Fn(&'a crate::Envelope, P) -> Fut,
    Fut: Future<Output = crate::MessageOutcome>,
{
    use crate::{MessageOutcome, SinkError};
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
    fn envelope(subject: &str, seq: u64, payload: &'static [u8]) -> crate::Envelope {
        let info = crate::JetStreamInfo {
            stream: "S".into(),
            consumer: "c".into(),
            stream_sequence: seq,
            consumer_sequence: seq,
            delivered: 1,
            pending: 0,
            timestamp: None,
            domain: None,
        };
        crate::Envelope::new(subject, bytes::Bytes::from_static(payload), crate::Headers::default(), info)
    }

    #[tokio::test]
    async fn write_each_fails_the_unbuildable_alone_and_holds_back_by_subject_and_by_record() {
        use crate::MessageOutcome;
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
        let prepare = |e: &crate::Envelope| {
            let record = std::str::from_utf8(e.payload()).unwrap().to_owned();
            if record == "bad" {
                return Err(format!("record {record} is malformed"));
            }
            Ok((OrderKey::of(&[b"record", record.as_bytes()]), record))
        };
        let write = |e: &crate::Envelope, record: String| {
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

    #[test]
    fn keys_are_stable_and_delimited() {
        assert_eq!(OrderKey::subject("a.b"), OrderKey::subject("a.b"));
        assert_ne!(OrderKey::subject("a"), OrderKey::field("a"));
        assert_ne!(OrderKey::of(&[b"ab", b"c"]), OrderKey::of(&[b"a", b"bc"]));
    }
}
