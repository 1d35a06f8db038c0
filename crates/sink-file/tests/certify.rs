//! The file sink against the sink contract (docs/sink-contract.md), one test per clause.

use sink_file::certify::FileHarness;
use sinks_contract::certify;

sinks_contract::certify_tests!(FileHarness);

#[tokio::test]
async fn every_clause_passes_none_skipped() {
    let report = certify::run_all(&FileHarness).await;
    for case in &report.cases {
        assert_eq!(case.outcome, certify::Outcome::Pass, "{} ({})", case.id, case.title);
    }
}
