//! Each fault the fault harness injects into a [`NetCluster`] takes effect: a partition cuts
//! the minority off (its routes go, a write through it is never acknowledged) while the
//! majority keeps accepting writes; a one-way cut stops one direction only; a bridge node
//! keeps both sides that no longer see each other; a paused node answers nothing until it
//! is resumed; a step-down moves the stream leader; and a test that fails leaves no
//! namespace, link or node behind. A harness whose faults did nothing cannot pass these.
//!
//! They need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to make network namespaces; CI runs
//! as root. Without it they fail, saying so.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::time::{Duration, Instant};

use async_nats::jetstream;
use sinks_testkit::{HOST, NetCluster, cannot_run};

/// How long a check that traffic does NOT pass waits (the test's time goes with it).
const QUICK: Duration = Duration::from_millis(500);
/// How long a check that traffic passes may wait: it answers at once on an idle machine; the
/// margin is for one busy with other tests, and costs nothing when the check holds.
const SURE: Duration = Duration::from_secs(5);
/// How long a cut may take to show in a node's routes (three missed pings of a second, and
/// the reconnect attempts that fail).
const NOTICED: Duration = Duration::from_secs(20);

async fn start(test: &str, extra: &[&str]) -> NetCluster {
    NetCluster::start(extra, "").await.unwrap_or_else(|e| cannot_run(test, e))
}

/// A JetStream context on a client connected to node `i` alone, with a short request timeout.
async fn js_on(nc: &NetCluster, i: usize) -> jetstream::Context {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(nc.cluster().url(i))
        .await
        .unwrap();
    jetstream::ContextBuilder::new().timeout(Duration::from_secs(2)).build(client)
}

/// Publishes one message and waits for its acknowledgement, within `within`.
async fn acknowledged(js: &jetstream::Context, subject: &str, within: Duration) -> bool {
    let publish = async { js.publish(subject.to_owned(), "x".into()).await?.await.map_err(Into::into) };
    matches!(tokio::time::timeout(within, publish).await, Ok(Ok::<_, Box<dyn std::error::Error + Send + Sync>>(_)))
}

/// Retries [`acknowledged`] until one succeeds or `timeout` passes (the majority may be
/// electing a leader).
async fn acknowledged_within(js: &jetstream::Context, subject: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if acknowledged(js, subject, Duration::from_secs(3)).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

fn peers(view: Option<Vec<String>>) -> Vec<String> {
    view.unwrap_or_else(|| vec!["<no answer>".into()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_cuts_the_minority_off_and_the_majority_keeps_accepting_writes() {
    let nc = start("a_partition_cuts_the_minority_off", &[]).await;
    let js = nc.cluster().js().await;
    nc.cluster().create_stream(&js, "PART", &["part.>"], 3).await;
    let (route0, route1) = (nc.cluster().addrs(0).1, nc.cluster().addrs(1).1);
    assert!(nc.net().connects("n0", route1, SURE) && nc.net().connects("n1", route0, SURE));
    assert_eq!(peers(nc.wait_route_peers(0, &["n1", "n2"], NOTICED).await), ["n1", "n2"]);

    nc.net().partition(&["n0"], &["n1", "n2"]).unwrap();
    assert!(!nc.net().connects("n0", route1, QUICK), "n0 reaches n1's route port through the partition");
    assert!(!nc.net().connects("n1", route0, QUICK), "n1 reaches n0's route port through the partition");
    assert!(nc.answers(HOST, 0, SURE), "the host lost n0, which only the nodes were cut from");
    assert_eq!(peers(nc.wait_route_peers(0, &[], NOTICED).await), Vec::<String>::new(), "n0 kept a route");
    assert_eq!(peers(nc.wait_route_peers(1, &["n2"], NOTICED).await), ["n2"], "n1 kept its route to n0");
    let minority = js_on(&nc, 0).await;
    assert!(
        !acknowledged(&minority, "part.a", Duration::from_secs(4)).await,
        "a write through the cut-off minority was acknowledged"
    );
    let majority = js_on(&nc, 1).await;
    assert!(acknowledged_within(&majority, "part.b", NOTICED).await, "the majority stopped accepting writes");

    nc.net().heal().unwrap();
    assert_eq!(peers(nc.wait_route_peers(0, &["n1", "n2"], NOTICED).await), ["n1", "n2"], "the heal left n0 alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_way_cut_stops_one_direction_and_the_route_across_it() {
    let nc = start("a_one_way_cut_stops_one_direction", &[]).await;
    assert!(nc.net().datagram_arrives("n0", "n1", SURE) && nc.net().datagram_arrives("n1", "n0", SURE));
    assert_eq!(peers(nc.wait_route_peers(0, &["n1", "n2"], NOTICED).await), ["n1", "n2"]);

    nc.net().cut("n0", "n1").unwrap();
    assert!(!nc.net().datagram_arrives("n0", "n1", QUICK), "n0's datagram crossed the one-way cut");
    assert!(nc.net().datagram_arrives("n1", "n0", SURE), "the one-way cut stopped the other direction");
    // A TCP route needs both directions: it goes on both sides, n2 keeps both.
    assert_eq!(peers(nc.wait_route_peers(0, &["n2"], NOTICED).await), ["n2"], "n0 kept its route to n1");
    assert_eq!(peers(nc.wait_route_peers(1, &["n2"], NOTICED).await), ["n2"], "n1 kept its route to n0");
    assert_eq!(peers(nc.route_peers(2).await), ["n0", "n1"], "n2 lost a route it was not cut from");

    nc.net().heal().unwrap();
    assert!(nc.net().datagram_arrives("n0", "n1", SURE), "the heal left the cut");
    assert_eq!(peers(nc.wait_route_peers(0, &["n1", "n2"], NOTICED).await), ["n1", "n2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_node_keeps_both_sides_that_no_longer_see_each_other() {
    let nc = start("a_bridge_node_keeps_both_sides", &[]).await;
    assert_eq!(peers(nc.wait_route_peers(1, &["n0", "n2"], NOTICED).await), ["n0", "n2"]);

    nc.net().cut_both("n0", "n2").unwrap();
    let (route0, route1, route2) = (nc.cluster().addrs(0).1, nc.cluster().addrs(1).1, nc.cluster().addrs(2).1);
    assert!(!nc.net().connects("n0", route2, QUICK) && !nc.net().connects("n2", route0, QUICK));
    assert!(nc.net().connects("n0", route1, SURE) && nc.net().connects("n2", route1, SURE));
    assert_eq!(peers(nc.wait_route_peers(0, &["n1"], NOTICED).await), ["n1"], "n0 still routes to n2");
    assert_eq!(peers(nc.wait_route_peers(2, &["n1"], NOTICED).await), ["n1"], "n2 still routes to n0");
    assert_eq!(peers(nc.route_peers(1).await), ["n0", "n2"], "the bridge lost a side");

    nc.net().heal().unwrap();
    assert_eq!(peers(nc.wait_route_peers(0, &["n1", "n2"], NOTICED).await), ["n1", "n2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_answers_nothing_until_it_is_resumed() {
    let nc = start("a_paused_node_answers_nothing", &[]).await;
    // A live node answers at once; the wait is long only for a machine busy with other tests.
    assert!(nc.answers(HOST, 0, Duration::from_secs(10)) && nc.answers("n1", 0, Duration::from_secs(10)));
    assert_eq!(peers(nc.wait_route_peers(1, &["n0", "n2"], NOTICED).await), ["n0", "n2"]);

    nc.cluster().pause(0);
    assert!(!nc.answers(HOST, 0, Duration::from_secs(2)), "a paused node sent its INFO to the host");
    assert!(!nc.answers("n1", 0, Duration::from_secs(2)), "a paused node sent its INFO to a peer");
    assert_eq!(peers(nc.wait_route_peers(1, &["n2"], NOTICED).await), ["n2"], "n1 kept its route to the paused n0");

    nc.cluster().resume(0);
    assert!(nc.answers(HOST, 0, Duration::from_secs(10)), "the resumed node does not answer");
    assert_eq!(peers(nc.wait_route_peers(1, &["n0", "n2"], NOTICED).await), ["n0", "n2"], "n0 did not rejoin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_moves_the_stream_leader() {
    let nc = start("a_step_down_moves_the_stream_leader", &[]).await;
    let js = nc.cluster().js().await;
    nc.cluster().create_stream(&js, "STEP", &["step.>"], 3).await;
    let before = nc.cluster().wait_stream_leader(&js, "STEP", NOTICED).await.unwrap();
    assert!(nc.cluster().step_down_stream(&js, "STEP").await, "the step-down was refused");
    let deadline = Instant::now() + NOTICED;
    let after = loop {
        let now = nc.cluster().stream_leader(&js, "STEP").await;
        if now.as_ref().is_some_and(|l| *l != before) || Instant::now() >= deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(after.as_ref().is_some_and(|l| *l != before), "the leader stayed {before} (now {after:?})");
    assert!(acknowledged_within(&js, "step.a", NOTICED).await, "the stream took no write under its new leader");
}

#[test]
fn a_failing_test_leaves_no_namespace_link_or_node_behind() {
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let nc = start("a_failing_test_leaves_nothing_behind", &["w0"]).await;
            nc.net().partition(&["n0"], &["n1", "n2"]).unwrap();
            tx.send((nc.net().slot(), nc.cluster().pids())).unwrap();
            panic!("a test failing while its nodes run and a cut is in force");
        })
    })
    .join();
    assert!(failed.is_err(), "the failing test did not fail");
    let (slot, pids) = rx.recv().unwrap();
    assert_eq!(pids.len(), 3, "the nodes did not run");
    assert_eq!(sinks_testkit::Net::leftovers(slot), Vec::<String>::new(), "the failed test left these behind");
    for pid in pids {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        assert!(rustix::process::test_kill_process(pid).is_err(), "node {pid:?} still runs");
    }
}
