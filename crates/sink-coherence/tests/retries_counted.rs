//! The Coherence sink's in-place retries are counted for `retries_in_place_total`
//! (`sinks_toolkit::retry::note_retry_in_place`): with no member listening, a put is tried
//! once and retried `max_retries` times within the write's budget, each retry counted, and
//! the failure goes back temporary. Before the sink used the contract's one retry loop it
//! retried without counting. One test in its own process, so the process-wide count is this
//! test's alone.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use sink_coherence::{CoherenceSink, CoherenceSinkConfig};
use sinks_contract::testing::{classes, envelope};
use sinks_contract::{OutcomeClass, Sink};
use sinks_toolkit::retry::{Jitter, retries_in_place};

#[tokio::test]
async fn retries_in_place_are_counted() {
    // A port nothing listens on: every put is refused (UNAVAILABLE, temporary).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = CoherenceSinkConfig::new(format!("127.0.0.1:{closed}"), "c");
    config.max_retries = 3;
    config.retry_backoff_ms = 20;
    config.retry_max_backoff_ms = 20;
    config.retry_jitter = Jitter::None;
    let sink = CoherenceSink::new(config).unwrap();
    let before = retries_in_place();
    let outcomes = sink.write(&[envelope("RC", 1, "rc.x", "{}")], Duration::from_secs(20)).await.unwrap();
    assert_eq!(classes(&outcomes), [OutcomeClass::FailedTemporary]);
    assert_eq!(retries_in_place() - before, 3, "max_retries retries, each counted");
}
