//! The MySQL sink against the sink contract (docs/sink-contract.md) on the live server, one
//! test per clause. A clause that cannot run prints SKIPPED with the reason.

use sink_mysql::certify::MySqlHarness;

sinks_core::certify_tests!(MySqlHarness::default());
