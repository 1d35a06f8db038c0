//! The HTTP sink against the sink contract (docs/sink-contract.md), one test per clause, each
//! against a fresh namespace of the test process's HTTP test server; then the crash clauses
//! K1 and K2 with the real `nats-sink` (`sinks_testkit::crash`).

use sink_http::certify::HttpHarness;
use sinks_certify as certify;

fn harness() -> HttpHarness {
    HttpHarness::new(sinks_testkit::shared_http().base_url())
}

sinks_certify::certify_tests!(harness());
sinks_testkit::crash_tests!(harness());

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    use sinks_certify::Harness;
    use sinks_contract::Sink;
    let target = harness().crash_target().await.expect("crash target");
    assert_eq!(target.sink_section["type"], "http");
    let section: sinks_contract::config::SinkSection =
        serde_json::from_value(target.sink_section.clone()).expect("section");
    let config = sink_http::HttpSinkConfig::from_section(&section).expect("valid section");
    let sink = sink_http::HttpSink::new(config).expect("sink");
    sink.open().await.expect("open");
    certify::check_crash_target(&target, &sink).await.unwrap();
}
