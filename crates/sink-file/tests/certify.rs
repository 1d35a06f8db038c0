//! The file sink against the sink contract (docs/sink-contract.md), one test per clause, in
//! both modes: one file per message, and batch mode (NDJSON objects behind `Durable`); then
//! the crash clauses K1 and K2 with the real `nats-sink` (`sinks_testkit::crash`). Table mode
//! (Parquet objects in a Delta table, read back through the table's log) gets every clause
//! and K1/K2 too.

use sink_file::certify::{FileBatchHarness, FileHarness};

sinks_certify::certify_tests!(FileHarness);
sinks_testkit::crash_tests!(FileHarness);

mod batch {
    use super::FileBatchHarness;

    sinks_certify::certify_tests!(FileBatchHarness);
}

mod table {
    use sink_file::certify::FileTableHarness;

    sinks_certify::certify_tests!(FileTableHarness);
    sinks_testkit::crash_tests!(FileTableHarness);
}
