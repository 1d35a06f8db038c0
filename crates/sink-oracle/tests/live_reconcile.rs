//! Reconcile against a live Oracle Database (named by `NATS_SINKS_TEST_ORACLE_DSN` /
//! `_USER` / `_PASSWORD`, through Oracle Instant Client): 1,200 rows written, 2 deleted and 1
//! edited with SQL behind the sink's back, reconcile reports exactly those 3. Without a
//! database named it is an allow-listed skip (`oracle-database`; the scripted seam proves the
//! same logic in `scripted_sink.rs`); a database named but unusable fails.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use serde_json::json;
use sink_oracle::certify::LiveHarness;
use sinks_contract::testing::SinkExt as _;
use sinks_contract::testing::{classes, envelope};
use sinks_contract::{Envelope, OutcomeClass, Presence, Sink};

#[tokio::test]
async fn live_reconcile_reports_exactly_the_deleted_and_edited_rows() {
    let harness = LiveHarness::from_env().await;
    if !harness.runs("live_reconcile_reports_exactly_the_deleted_and_edited_rows") {
        return;
    }
    // CLOB columns, keep_first: a PAYLOAD_SHA256 column next to the payload text.
    let (sink, table) = harness.table_sink(json!({})).await.unwrap();
    let batch: Vec<Envelope> =
        (1..=1200u64).map(|q| envelope("LIVE", q, "live.a", format!(r#"{{"order":{q},"amount":2.50}}"#))).collect();
    for chunk in batch.chunks(300) {
        assert!(
            classes(&sink.write(chunk, sinks_contract::DEFAULT_BUDGET).await.unwrap())
                .iter()
                .all(|c| *c == OutcomeClass::Committed)
        );
    }
    assert!(sink.read_back().is_some());
    assert!(sink.read_back_batch(&batch).await.unwrap().iter().all(|p| *p == Presence::Equal));

    let name = table.name();
    let deleted = table.change(&format!("DELETE FROM \"{name}\" WHERE \"STREAM_SEQUENCE\" IN (17, 1100)")).await;
    assert_eq!(deleted.unwrap(), 2);
    let edit = format!(
        "UPDATE \"{name}\" SET \"PAYLOAD_JSON\" = '{{\"order\":651,\"amount\":3}}' WHERE \"STREAM_SEQUENCE\" = 651"
    );
    assert_eq!(table.change(&edit).await.unwrap(), 1);
    let found = sink.read_back_batch(&batch).await.unwrap();
    let reported: Vec<(u64, Presence)> = batch
        .iter()
        .zip(&found)
        .filter(|(_, p)| **p != Presence::Equal)
        .map(|(e, p)| (e.jetstream().stream_sequence, *p))
        .collect();
    assert_eq!(reported, [(17, Presence::Missing), (651, Presence::Different), (1100, Presence::Missing)]);
}
