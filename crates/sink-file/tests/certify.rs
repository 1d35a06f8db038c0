//! The file sink against the sink contract (docs/sink-contract.md), one test per clause.

use sink_file::certify::FileHarness;

sinks_contract::certify_tests!(FileHarness);
