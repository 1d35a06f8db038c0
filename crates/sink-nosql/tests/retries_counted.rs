//! The NoSQL sink's in-place retries are counted for `retries_in_place_total`
//! (`sinks_toolkit::retry::note_retry_in_place`): a throttled put retried twice is two
//! retries, and so is a throttled read-back. Before the sink used the contract's one retry
//! loop it retried without counting, and the metric undercounted. One test in its own
//! process, so the process-wide count is this test's alone.
#![allow(clippy::unwrap_used)]

use sink_nosql::certify::{NoSqlHarness, unique_table};
use sinks_contract::testing::SinkExt as _;
use sinks_contract::testing::{classes, envelope, opened, write};
use sinks_contract::{OutcomeClass, Presence};
use sinks_testkit::NoSqlTestServer;
use sinks_toolkit::retry::retries_in_place;

#[tokio::test]
async fn throttled_puts_and_reads_retried_in_place_are_counted() {
    let server = NoSqlTestServer::start().unwrap();
    let h = NoSqlHarness::test_server(server.endpoint());
    let sink = opened(h.sink(h.config(&unique_table("rc"))).unwrap()).await;
    let batch = [envelope("RC", 1, "rc.x", "{}")];

    let before = retries_in_place();
    server.fail_next(51, 2); // WRITE_LIMIT_EXCEEDED twice
    assert_eq!(classes(&write(&sink, &batch).await), [OutcomeClass::Committed]);
    assert_eq!(retries_in_place() - before, 2, "two throttled puts retried in place");

    let before = retries_in_place();
    server.fail_next(50, 2); // READ_LIMIT_EXCEEDED twice
    assert_eq!(sink.read_back_batch(&batch).await.unwrap(), [Presence::Equal]);
    assert_eq!(retries_in_place() - before, 2, "two throttled reads retried in place");
}
