//! The spool sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh encrypted spool directory; then the crash clauses K1 and K2 with the
//! real `nats-sink` (`sinks_testkit::crash`).

use sink_spool::certify::SpoolHarness;

sinks_certify::certify_tests!(SpoolHarness);
sinks_testkit::crash_tests!(SpoolHarness);
