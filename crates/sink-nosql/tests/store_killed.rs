//! The NoSQL sink while the real store dies under it: a private KVLite + proxy
//! (`sinks_testkit::KvLite`, the proxy on its default durability, `COMMIT_NO_SYNC`) that each
//! test kills with SIGKILL and starts again on the same store.
//!
//! - A burst of puts, every one acknowledged, then KVLite killed at once: with the sink's
//!   default `durability: commit_sync` every acknowledged row is there after the restart. The
//!   same burst with `operator_confirmed` (the proxy's default applies) lost 1,480 and 1,611
//!   of 2,000 acknowledged rows in two runs when this test was written (see
//!   docs/nosql-sink.md): the check does catch a sink that acknowledges what the store has
//!   not made durable.
//! - KVLite and the proxy killed together: writes fail temporarily, never permanently, the
//!   health check fails, and after the restart nothing is lost or doubled.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::time::Instant;

use sink_nosql::NoSqlSinkConfig;
use sink_nosql::certify::{NoSqlHarness, TableReadBack, unique_table};
use sinks_certify::Records;
use sinks_contract::testing::{classes, envelope, opened, write};
use sinks_contract::{OutcomeClass, Sink};
use sinks_testkit::KvLite;

async fn store(test: &str) -> KvLite {
    KvLite::start().await.unwrap_or_else(|reason| sinks_testkit::cannot_run(test, reason))
}

async fn fixture(kv: &KvLite, adjust: impl FnOnce(&mut NoSqlSinkConfig)) -> (sink_nosql::NoSqlSink, TableReadBack) {
    let h = NoSqlHarness::live(kv.endpoint());
    let mut config = h.config(&unique_table("killed"));
    adjust(&mut config);
    let read_back = h.read_back(&config);
    (opened(h.sink(config).unwrap()).await, read_back)
}

#[tokio::test]
async fn kvlite_killed_right_after_a_burst_of_acknowledgements_loses_none() {
    const BURST: u64 = 2_000;
    let mut kv = store("kvlite_killed_right_after_a_burst_of_acknowledgements_loses_none").await;
    let (sink, rb) = fixture(&kv, |_| {}).await;
    let started = Instant::now();
    for from in (1..=BURST).step_by(200) {
        let batch: Vec<_> = (from..from + 200)
            .map(|s| envelope("KB", s, &format!("kb.k{}", s % 16), format!("{{\"s\":{s}}}")))
            .collect();
        let outcomes = write(&sink, &batch).await;
        assert!(classes(&outcomes).iter().all(|c| *c == OutcomeClass::Committed), "{outcomes:?}");
    }
    let acknowledged = started.elapsed();
    // Every put was acknowledged: the store dies now, with whatever it had not flushed.
    kv.kill_store();
    eprintln!(
        "{BURST} puts acknowledged in {acknowledged:?}; KVLite killed {:?} after the last",
        started.elapsed() - acknowledged
    );
    kv.start_store().await.unwrap();
    let records = rb.read_all().await.unwrap();
    assert_eq!(records.len() as u64, BURST, "acknowledged rows lost with the store's process");
    drop(rb);
    drop(kv);
}

#[tokio::test]
async fn kvlite_and_the_proxy_killed_and_restarted_lose_nothing() {
    let mut kv = store("kvlite_and_the_proxy_killed_and_restarted_lose_nothing").await;
    let (sink, rb) = fixture(&kv, |c| {
        c.request_timeout_seconds = 2.0;
        c.max_retries = 0;
    })
    .await;
    assert_eq!(classes(&write(&sink, &[envelope("KP", 1, "kp.x", "{}")]).await), [OutcomeClass::Committed]);
    kv.kill();
    let during = write(&sink, &[envelope("KP", 2, "kp.x", "{}"), envelope("KP", 3, "kp.y", "{}")]).await;
    assert!(during.iter().all(|o| o.class() != OutcomeClass::FailedPermanent), "{during:?}");
    assert!(during.iter().all(|o| o.failed_temporarily()), "{during:?}");
    assert!(sink.health_check().await.is_err());
    kv.restart().await.unwrap();
    assert!(sink.health_check().await.is_ok());
    let batch: Vec<_> = (1..=3).map(|s| envelope("KP", s, if s == 3 { "kp.y" } else { "kp.x" }, "{}")).collect();
    let after = write(&sink, &batch).await;
    assert_eq!(classes(&after), [OutcomeClass::Duplicate, OutcomeClass::Committed, OutcomeClass::Committed]);
    let mut keys: Vec<String> = rb.read_all().await.unwrap().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(keys, ["stream-sequence:KP:1", "stream-sequence:KP:2", "stream-sequence:KP:3"]);
    drop(rb);
    drop(kv);
}
