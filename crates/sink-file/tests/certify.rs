//! The file sink against the sink contract (docs/sink-contract.md), one test per clause, in
//! both modes: one file per message, and batch mode (NDJSON objects behind `Durable`).

use sink_file::certify::{FileBatchHarness, FileHarness};

sinks_certify::certify_tests!(FileHarness);

mod batch {
    use super::FileBatchHarness;

    sinks_certify::certify_tests!(FileBatchHarness);
}
