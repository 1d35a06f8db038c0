//! The spool sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh encrypted spool directory.

use sink_spool::certify::SpoolHarness;

sinks_certify::certify_tests!(SpoolHarness);
