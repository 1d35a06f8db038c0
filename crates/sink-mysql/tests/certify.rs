//! The MySQL sink against the sink contract (docs/sink-contract.md) on the live server, one
//! test per clause. A clause that cannot run prints SKIPPED with the reason.

use sink_mysql::certify::MySqlHarness;
use sinks_core::certify::{self, assert_case};

async fn case(id: &str) {
    assert_case(&certify::run_case(&MySqlHarness::default(), id).await);
}

#[tokio::test]
async fn c1_durable_before_success() {
    case("C1").await;
}
#[tokio::test]
async fn c2_outcomes_aligned() {
    case("C2").await;
}
#[tokio::test]
async fn c3_empty_batch() {
    case("C3").await;
}
#[tokio::test]
async fn c4_duplicate_is_harmless() {
    case("C4").await;
}
#[tokio::test]
async fn c5_conflict_is_detected() {
    case("C5").await;
}
#[tokio::test]
async fn c6_poison_is_isolated() {
    case("C6").await;
}
#[tokio::test]
async fn c7_unreachable_is_temporary() {
    case("C7").await;
}
#[tokio::test]
async fn c8_payload_edge_cases() {
    case("C8").await;
}
#[tokio::test]
async fn c9_concurrent_batches() {
    case("C9").await;
}
#[tokio::test]
async fn c10_health_check() {
    case("C10").await;
}
#[tokio::test]
async fn c11_no_secrets_or_payloads_in_logs() {
    case("C11").await;
}
