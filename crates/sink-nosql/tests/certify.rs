//! The NoSQL sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh table on the testkit's NoSQL test server; and the same clauses
//! against a real proxy when `NATS_SINKS_TEST_NOSQL_ENDPOINT` names one (SKIPPED otherwise).
#![allow(clippy::print_stderr)]

use sink_nosql::certify::NoSqlHarness;
use sinks_contract::certify;

fn harness() -> NoSqlHarness {
    NoSqlHarness::test_server(sinks_testkit::shared_nosql().endpoint())
}

sinks_contract::certify_tests!(harness());

#[tokio::test]
async fn every_clause_passes_none_skipped() {
    let report = certify::run_all(&harness()).await;
    for case in &report.cases {
        assert_eq!(case.outcome, certify::Outcome::Pass, "{} ({})", case.id, case.title);
    }
}

#[tokio::test]
async fn every_clause_passes_against_a_live_proxy() {
    let endpoint = match sinks_testkit::live_nosql() {
        Ok(endpoint) => endpoint,
        Err(reason) => {
            eprintln!("SKIPPED every_clause_passes_against_a_live_proxy: {reason}");
            return;
        }
    };
    let report = certify::run_all(&NoSqlHarness::live(endpoint)).await;
    for case in &report.cases {
        assert_eq!(case.outcome, certify::Outcome::Pass, "{} ({})", case.id, case.title);
    }
}

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    use sinks_contract::Sink;
    use sinks_contract::certify::Harness;
    let harness = harness();
    let target = harness.crash_target().await.expect("crash target");
    assert_eq!(target.sink_section["type"], "oracle_nosql");
    let section: sinks_contract::config::SinkSection =
        serde_json::from_value(target.sink_section.clone()).expect("section");
    let config = sink_nosql::NoSqlSinkConfig::from_section(&section).expect("valid section");
    let sink = sink_nosql::NoSqlSink::new(config).expect("sink");
    sink.open().await.expect("open");
    certify::check_crash_target(&target, &sink).await.unwrap();
}
