//! The review package sink against the sink contract (docs/sink-contract.md), one test per
//! clause; then the crash clauses K1 and K2 with the real `nats-sink` (`sinks_testkit::crash`).

use sink_review_package::certify::ReviewPackageHarness;

sinks_certify::certify_tests!(ReviewPackageHarness);
sinks_testkit::crash_tests!(ReviewPackageHarness);
