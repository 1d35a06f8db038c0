//! The spool sink against the sink contract (docs/sink-contract.md), one test per clause,
//! each against a fresh encrypted spool directory.

use sink_spool::certify::SpoolHarness;
use sinks_contract::certify;

sinks_contract::certify_tests!(SpoolHarness);

#[tokio::test]
async fn every_clause_passes_none_skipped() {
    let report = certify::run_all(&SpoolHarness).await;
    for case in &report.cases {
        assert_eq!(case.outcome, certify::Outcome::Pass, "{} ({})", case.id, case.title);
    }
}
