//! The NoSQL sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh table on the testkit's NoSQL test server; and the same clauses
//! against a real proxy when `NATS_SINKS_TEST_NOSQL_ENDPOINT` names one (without one, every
//! clause of `live` is an allow-listed skip, `oracle-nosql-proxy`).

use sink_nosql::certify::NoSqlHarness;
use sinks_certify as certify;

fn harness() -> NoSqlHarness {
    NoSqlHarness::test_server(sinks_testkit::shared_nosql().endpoint())
}

sinks_certify::certify_tests!(harness());

mod live {
    sinks_certify::certify_tests!(sink_nosql::certify::NoSqlHarness::live_from_env());
}

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    use sinks_certify::Harness;
    use sinks_contract::Sink;
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

#[test]
fn the_live_proxy_variable_is_the_testkit_s() {
    assert_eq!(sink_nosql::certify::LIVE_ENV, sinks_testkit::NOSQL_LIVE_ENV);
}
