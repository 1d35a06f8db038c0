//! The Coherence sink against the sink contract (docs/sink-contract.md), one test per
//! clause, each against a fresh cache on a real Coherence member (the run's shared member,
//! or a private one started for this test process); then every clause again over the
//! legacy gRPC protocol. The crash clauses K1 and K2 run the real `nats-sink`
//! (`sinks_testkit::crash`).

use sink_coherence::certify::CoherenceHarness;
use sinks_certify as certify;

async fn harness() -> CoherenceHarness {
    let address = sinks_testkit::shared_coherence().await.unwrap_or_else(|e| panic!("no Coherence member: {e}"));
    CoherenceHarness::new(address)
}

sinks_certify::certify_tests!(harness().await);
sinks_testkit::crash_tests!(harness().await);

/// Every clause again over the legacy gRPC protocol, one test per clause.
mod legacy {
    sinks_certify::certify_tests!(super::harness().await.with_protocol(sink_coherence::Protocol::Legacy));
}

#[tokio::test]
async fn crash_target_is_a_valid_sink_section_that_reads_back() {
    use sinks_certify::Harness;
    use sinks_contract::Sink;
    let harness = harness().await;
    let target = harness.crash_target().await.expect("crash target");
    assert_eq!(target.sink_section["type"], "coherence");
    let section: sinks_contract::config::SinkSection =
        serde_json::from_value(target.sink_section.clone()).expect("section");
    let config = sink_coherence::CoherenceSinkConfig::from_section(&section).expect("valid section");
    let sink = sink_coherence::CoherenceSink::new(config).expect("sink");
    sink.open().await.expect("open");
    certify::check_crash_target(&target, &sink).await.unwrap();
}
