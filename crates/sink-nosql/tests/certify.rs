//! The NoSQL sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh table on the real Oracle NoSQL Database: the KVLite store and proxy
//! of the run (`NATS_SINKS_TEST_NOSQL_ENDPOINT`, started by `cargo xtask test`), or one
//! started for this test process. Never skipped: without the store the clauses fail. Then
//! the crash clauses: K1 and K2 kill the real `nats-sink` (`sinks_testkit::crash`), D1 and D2
//! kill a private store under it (`certify/store_kills.rs`).

#[path = "certify/store_kills.rs"]
mod store_kills;

use sink_nosql::certify::NoSqlHarness;
use sinks_certify as certify;

/// The harness over the run's (or this process's) KVLite + proxy.
async fn harness() -> NoSqlHarness {
    let endpoint = sinks_testkit::shared_kvlite()
        .await
        .unwrap_or_else(|reason| sinks_testkit::cannot_run("the NoSQL certification", reason));
    NoSqlHarness::live(endpoint)
}

sinks_certify::certify_tests!(harness().await);
sinks_testkit::crash_tests!(harness().await);

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    use sinks_certify::Harness;
    use sinks_contract::Sink;
    let harness = harness().await;
    assert!(harness.is_live(), "the crash target is a real store");
    let target = harness.crash_target().await.expect("crash target");
    assert_eq!(target.sink_section["type"], "oracle_nosql");
    let section: sinks_contract::config::SinkSection =
        serde_json::from_value(target.sink_section.clone()).expect("section");
    let config = sink_nosql::NoSqlSinkConfig::from_section(&section).expect("valid section");
    let sink = sink_nosql::NoSqlSink::new(config).expect("sink");
    sink.open().await.expect("open");
    certify::check_crash_target(&target, &sink).await.unwrap();
}

/// D1 and D2: a private KVLite store and proxy killed under the real `nats-sink`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_d2_the_store_killed_under_the_sink() {
    let bin = sinks_testkit::debug_nats_sink();
    assert!(bin.is_file(), "no nats-sink binary at {} (build it: cargo build -p sinks-bin)", bin.display());
    let (cases, counts) = store_kills::certify(&bin).await;
    let counts = serde_json::json!({ "store_kills": counts });
    eprintln!("store-kill counts: {counts}");
    for case in &cases {
        certify::record_case("nosql", case, Some(&counts));
    }
    for case in &cases {
        certify::assert_case("nosql", case);
    }
}
