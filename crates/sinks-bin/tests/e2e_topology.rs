//! JetStream topologies through the binary: one event reached through a mirror, a source, a
//! chain of them, a subject transform or a leaf node is one record under `origin_sequence`,
//! and the same runs under `stream_sequence` show the second copies docs/topology.md warns
//! about.
//!
//! - Disaster recovery: a sink on stream TP, then (TP lost) a sink on its mirror TPDR writing
//!   into the same destination: 800 records for 800 events (1,200 under `stream_sequence`).
//! - Aggregation: EU and US sourced into HUB, a sink on EU and one on HUB into one
//!   destination: each event once.
//! - A chain (A sourced into B, B into C, B mirrored into MB) and a subject transform: each
//!   event once, filed under the subject it was published on.
//! - Edge to core: a stream on a leaf node with its own JetStream domain, sourced into the
//!   hub over the leaf link, the link cut for 10 s under traffic: each event once, nothing
//!   lost.
//! - The same failover and aggregation into MySQL, S3 and an HTTP endpoint that fingerprints
//!   whole bodies (the IETF Idempotency-Key draft's 422 for a second body under one key):
//!   one record per event, and never a second body for one key whatever the path.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::Context;
use async_nats::jetstream::stream::{Config as StreamConfig, External, Source, SubjectTransform};
use bytes::Bytes;
use serde_json::{Value, json};
use sinks_testkit::{HttpTestServer, NatsServer, Strict, TcpProxy, unique, wait_until};
use support::{Sink, records};

/// A private server (with `extra` configuration) and a directory for the test.
struct Net {
    server: NatsServer,
    js: Context,
    dir: tempfile::TempDir,
}

async fn net(extra: Option<&str>) -> Net {
    let server = match extra {
        Some(config) => NatsServer::start_with_config(config),
        None => NatsServer::start(),
    };
    let js = server.js().await;
    Net { server, js, dir: tempfile::tempdir().unwrap() }
}

async fn plain(js: &Context, name: &str, subjects: &[&str]) {
    let subjects = subjects.iter().map(|s| (*s).to_owned()).collect();
    js.create_stream(StreamConfig { name: name.into(), subjects, ..Default::default() }).await.unwrap();
}

fn source(name: &str) -> Source {
    Source { name: name.into(), ..Default::default() }
}

async fn sourced(js: &Context, name: &str, sources: Vec<Source>) {
    js.create_stream(StreamConfig { name: name.into(), sources: Some(sources), ..Default::default() }).await.unwrap();
}

async fn mirror(js: &Context, name: &str, of: &str) {
    js.create_stream(StreamConfig { name: name.into(), mirror: Some(source(of)), ..Default::default() }).await.unwrap();
}

/// Publishes `n` events on `{root}.k{i % 3}` (no message ids: keys come from the streams).
async fn publish(js: &Context, root: &str, from: usize, n: usize) {
    for i in from..from + n {
        js.publish(format!("{root}.k{}", i % 3), Bytes::from(format!("{{\"{root}\":{i}}}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

/// Waits until `stream` holds `n` messages (a mirror or source has caught up). Up to 60 s: a
/// source whose leaf link was cut retries on nats-server's own backoff, which under a loaded
/// machine's test run has taken more than 30 s to resume.
async fn holds(js: &Context, stream: &str, n: u64) {
    let caught_up = wait_until(Duration::from_secs(60), || async {
        let mut s = js.get_stream(stream).await.unwrap();
        s.info().await.unwrap().state.messages >= n
    })
    .await;
    assert!(caught_up, "{stream} did not reach {n} messages");
}

/// A file-sink config consuming `stream` through a new consumer, into `out`, naming files by
/// `strategy`.
fn file_config(dir: &Path, url: &str, stream: &str, out: &Path, strategy: &str) -> PathBuf {
    let consumer = unique("topo");
    let config = json!({
        "nats": {"url": url, "stream": stream, "consumer": consumer, "subject": ">"},
        "delivery": {"batch_timeout_ms": 200},
        "consumer_management": {"ack_wait_seconds": 5},
        "logging": {"level": "INFO"},
        "sink": {"type": "file", "directory": out, "filename_strategy": strategy},
    });
    let path = dir.join(format!("{consumer}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    path
}

/// Runs `nats-sink` on `config` until the consumer of `stream` settled every message.
async fn drain(js: &Context, dir: &Path, config: &Path) -> String {
    let consumer: Value = serde_json::from_slice(&std::fs::read(config).unwrap()).unwrap();
    let (stream, name) = (
        consumer["nats"]["stream"].as_str().unwrap().to_owned(),
        consumer["nats"]["consumer"].as_str().unwrap().to_owned(),
    );
    let run = Sink::start(config, dir, &[]);
    let done = wait_until(Duration::from_secs(90), || sinks_testkit::consumer_settled_on(js, &stream, &name)).await;
    let (code, logs) = run.stop();
    assert!(done, "{stream} not drained; log:\n{logs}");
    assert_eq!(code, Some(0), "{logs}");
    logs
}

/// The file records under `out` by the event they hold (its payload), with how many files
/// each has.
fn events_in(out: &Path) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for record in records(out) {
        *seen.entry(record["payload"].to_string()).or_insert(0) += 1;
    }
    seen
}

/// Every one of `n` events once, and nothing else.
fn once_each(out: &Path, n: usize, what: &str) {
    let seen = events_in(out);
    let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).take(5).collect();
    assert!(twice.is_empty(), "{what}: events written twice: {twice:?}");
    assert_eq!(seen.len(), n, "{what}: {} events for {n}", seen.len());
}

/// The disaster-recovery failover: a sink on TP, its mirror TPDR taking over.
async fn failover(strategy: &str) -> usize {
    let n = net(None).await;
    plain(&n.js, "TP", &["tp.>"]).await;
    mirror(&n.js, "TPDR", "TP").await;
    let out = n.dir.path().join("out");
    publish(&n.js, "tp", 0, 400).await;
    drain(&n.js, n.dir.path(), &file_config(n.dir.path(), &n.server.url(), "TP", &out, strategy)).await;
    publish(&n.js, "tp", 400, 400).await;
    holds(&n.js, "TPDR", 800).await;
    // TP is lost: the sink is pointed at the mirror, a new consumer into the same directory.
    drain(&n.js, n.dir.path(), &file_config(n.dir.path(), &n.server.url(), "TPDR", &out, strategy)).await;
    records(&out).len()
}

#[tokio::test]
async fn a_failover_to_the_mirror_writes_each_event_once() {
    let files = failover("origin_sequence").await;
    assert_eq!(files, 800, "origin_sequence: one file per event across the failover");
    let control = failover("stream_sequence").await;
    assert_eq!(control, 1_200, "stream_sequence: every event the primary stored is written again");
}

/// Regions EU and US sourced into HUB; a sink on EU and one on HUB into one directory.
async fn aggregation(strategy: &str) -> (usize, BTreeMap<String, usize>) {
    let n = net(None).await;
    plain(&n.js, "EU", &["eu.>"]).await;
    plain(&n.js, "US", &["us.>"]).await;
    sourced(&n.js, "HUB", vec![source("EU"), source("US")]).await;
    let out = n.dir.path().join("out");
    publish(&n.js, "eu", 0, 300).await;
    publish(&n.js, "us", 0, 300).await;
    holds(&n.js, "HUB", 600).await;
    drain(&n.js, n.dir.path(), &file_config(n.dir.path(), &n.server.url(), "EU", &out, strategy)).await;
    drain(&n.js, n.dir.path(), &file_config(n.dir.path(), &n.server.url(), "HUB", &out, strategy)).await;
    (records(&out).len(), events_in(&out))
}

#[tokio::test]
async fn a_hub_sourcing_regions_writes_each_event_once() {
    let (files, events) = aggregation("origin_sequence").await;
    assert_eq!((files, events.len()), (600, 600), "origin_sequence: one file per event");
    let (files, _) = aggregation("stream_sequence").await;
    assert_eq!(files, 900, "stream_sequence: the EU events a second time, under the hub's name");
}

#[tokio::test]
async fn a_chain_and_a_subject_transform_lead_back_to_the_first_origin() {
    let n = net(None).await;
    plain(&n.js, "A", &["a.>"]).await;
    sourced(&n.js, "B", vec![source("A")]).await;
    sourced(&n.js, "C", vec![source("B")]).await;
    mirror(&n.js, "MB", "B").await;
    let transform = SubjectTransform { source: "a.>".into(), destination: "t.>".into() };
    sourced(&n.js, "T", vec![Source { subject_transforms: vec![transform], ..source("A") }]).await;
    publish(&n.js, "a", 0, 120).await;
    for stream in ["B", "C", "MB", "T"] {
        holds(&n.js, stream, 120).await;
    }
    let out = n.dir.path().join("out");
    for stream in ["A", "C", "MB", "T"] {
        drain(&n.js, n.dir.path(), &file_config(n.dir.path(), &n.server.url(), stream, &out, "origin_sequence")).await;
    }
    once_each(&out, 120, "A, C (a source of a source), MB (a mirror of a source) and T (a transform)");
    // Written as A stored each event (A's name, sequence and the subject it was published on),
    // whatever the path: one content, no trace of the path.
    for record in records(&out) {
        assert_eq!(record["stream"], "A", "{record}");
        assert_eq!(record["metadata"]["jetstream"]["stream"], "A", "{record}");
        assert!(record["metadata"]["jetstream"]["origin"].is_null(), "{record}");
        assert!(record["subject"].as_str().unwrap().starts_with("a."), "{record}");
    }
    let dirs: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(dirs.iter().all(|d| d.starts_with("a.")), "partitioned by the published subject: {dirs:?}");
}

/// An edge server (a leaf node with JetStream domain `edge`) holding stream E, sourced into
/// the hub's HUB (domain `hub`) over the leaf link through a proxy; a sink on HUB (at the hub)
/// started while the link is cut holds what it cannot resolve and writes every event once the
/// link is back; a sink on E (at the edge) into the same directory then adds nothing.
#[tokio::test]
async fn an_edge_stream_over_a_leaf_node_writes_each_event_once_through_a_cut_link() {
    let leaf_port = sinks_testkit::free_port();
    // `no_advertise`: the hub would otherwise tell the edge its own leaf address, and the edge
    // would reconnect there around the proxy (the cut would cut nothing).
    let hub = net(Some(&format!(
        "jetstream {{ domain: hub }}\nleafnodes {{ listen: \"127.0.0.1:{leaf_port}\", no_advertise: true }}\n"
    )))
    .await;
    let link = TcpProxy::start(([127, 0, 0, 1], leaf_port).into()).await.unwrap();
    let edge = net(Some(&format!(
        "jetstream {{ domain: edge }}\nleafnodes {{ remotes: [ {{ url: \"nats://{}\" }} ] }}\n",
        link.addr()
    )))
    .await;
    plain(&edge.js, "E", &["e.>"]).await;
    let from_edge =
        Source { external: Some(External { api_prefix: "$JS.edge.API".into(), delivery_prefix: None }), ..source("E") };
    // The hub may not see the edge's domain until the leaf link is up.
    let made = wait_until(Duration::from_secs(30), || async {
        let config = StreamConfig { name: "HUB".into(), sources: Some(vec![from_edge.clone()]), ..Default::default() };
        hub.js.create_stream(config).await.is_ok()
    })
    .await;
    assert!(made, "the hub's stream sourcing the edge");
    let out = hub.dir.path().join("out");
    publish(&edge.js, "e", 0, 200).await;
    holds(&hub.js, "HUB", 200).await;
    // The link is cut before the hub's sink starts, so it cannot read E's config (is E
    // itself a mirror or sourced?): it must hold the 200 messages HUB has, not refuse them
    // and not guess. Traffic at the edge meanwhile; the link restored after 10 s.
    link.set_cut(true);
    let hub_config = file_config(hub.dir.path(), &hub.server.url(), "HUB", &out, "origin_sequence");
    let hub_sink = Sink::start(&hub_config, hub.dir.path(), &[]);
    let traffic = {
        let js = edge.js.clone();
        tokio::spawn(async move {
            for i in 200..400 {
                publish(&js, "e", i, 1).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    let early = records(&out);
    assert!(
        early.is_empty(),
        "nothing written while the origin's stream cannot be read: {} {:?}\n{}",
        early.len(),
        early.first(),
        hub_sink.stop().1
    );
    link.set_cut(false);
    traffic.await.unwrap();
    holds(&hub.js, "HUB", 400).await;
    let hub_consumer: Value = serde_json::from_slice(&std::fs::read(&hub_config).unwrap()).unwrap();
    let name = hub_consumer["nats"]["consumer"].as_str().unwrap().to_owned();
    let settled =
        wait_until(Duration::from_secs(60), || sinks_testkit::consumer_settled_on(&hub.js, "HUB", &name)).await;
    let (code, logs) = hub_sink.stop();
    assert!(settled && code == Some(0), "the hub's sink drained; log:\n{logs}");
    assert!(logs.contains("does not answer") && !logs.contains("cannot be told"), "held, never refused:\n{logs}");
    once_each(&out, 400, "the edge's events through the hub");
    let edge_config = file_config(edge.dir.path(), &edge.server.url(), "E", &out, "origin_sequence");
    drain(&edge.js, edge.dir.path(), &edge_config).await;
    once_each(&out, 400, "the edge's events from the edge and from the hub");
    // Written as the edge stored each event: the stream's name qualified by its domain.
    let names: Vec<String> = records(&out).iter().map(|r| r["stream"].to_string()).collect();
    assert!(names.iter().all(|n| n == "\"E@edge\""), "the origin names its domain: {:?}", &names[..3]);
}

/// A MySQL, S3 or fingerprinting HTTP destination (the certification's crash targets) keyed
/// by `origin_sequence`: its `sink` section, reader and environment, and the endpoint.
async fn destination(
    kind: &str,
) -> (Value, Box<dyn sinks_certify::Records>, Vec<(String, String)>, Option<std::sync::Arc<HttpTestServer>>) {
    use sinks_certify::Harness;
    let mut endpoint = None;
    let target = match kind {
        "mysql" => {
            let server = sinks_testkit::shared_mysql().unwrap_or_else(|e| sinks_testkit::cannot_run("e2e_topology", e));
            sink_mysql::certify::MySqlHarness::new(sink_mysql::certify::TestServer::new(server.host, server.port))
                .crash_target()
                .await
        }
        "http" => {
            let server = std::sync::Arc::new(HttpTestServer::start().await.unwrap());
            server.set_request_log(false);
            server.set_strict(Strict { fingerprint_bodies: true, replay_first_answer: true, ..Strict::default() });
            endpoint = Some(server.clone());
            sink_http::certify::HttpHarness::new(server.base_url()).crash_target().await
        }
        _ => {
            let weed =
                sinks_testkit::shared_s3().await.unwrap_or_else(|e| sinks_testkit::cannot_run("e2e_topology", e));
            let harness = sink_s3::certify::S3Harness::new(
                weed.endpoint,
                weed.filer,
                sinks_testkit::S3_ACCESS_KEY_ID,
                sinks_testkit::S3_SECRET_ACCESS_KEY,
            );
            harness.crash_target().await
        }
    }
    .unwrap();
    let mut section = target.sink_section;
    match kind {
        "s3" => section["key_strategy"] = json!("origin_sequence"),
        _ => section["idempotency"] = json!({"strategy": "origin_sequence"}),
    }
    (section, target.records, target.env, endpoint)
}

#[tokio::test]
async fn mysql_s3_and_http_keep_one_record_per_event_across_a_failover_and_a_hub() {
    for kind in ["mysql", "s3", "http"] {
        let n = net(None).await;
        plain(&n.js, "TP", &["tp.>"]).await;
        mirror(&n.js, "TPDR", "TP").await;
        sourced(&n.js, "HUB", vec![source("TP")]).await;
        let (section, read_back, env, endpoint) = destination(kind).await;
        let envs: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let run = |stream: &str| {
            let consumer = unique("topo");
            let config = json!({
                "nats": {"url": n.server.url(), "stream": stream, "consumer": consumer, "subject": ">"},
                "delivery": {"batch_timeout_ms": 200}, "logging": {"level": "INFO"}, "sink": section.clone(),
            });
            let path = n.dir.path().join(format!("{consumer}.json"));
            std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
            (path, stream.to_owned(), consumer)
        };
        publish(&n.js, "tp", 0, 300).await;
        holds(&n.js, "TPDR", 300).await;
        holds(&n.js, "HUB", 300).await;
        // The primary, its mirror after a failover and a hub that sources it, in turn.
        for stream in ["TP", "TPDR", "HUB"] {
            let (path, stream, consumer) = run(stream);
            let sink = Sink::start(&path, n.dir.path(), &envs);
            let done =
                wait_until(Duration::from_secs(90), || sinks_testkit::consumer_settled_on(&n.js, &stream, &consumer))
                    .await;
            let (code, logs) = sink.stop();
            assert!(done && code == Some(0), "{kind} {stream}; log:\n{logs}");
        }
        let records = read_back.read_all().await.unwrap();
        let keys: std::collections::BTreeSet<&String> = records.iter().map(|(k, _)| k).collect();
        assert_eq!((records.len(), keys.len()), (300, 300), "{kind}: one record per event");
        assert!(keys.iter().all(|k| k.starts_with("stream-sequence:TP:")), "{kind}: keyed by the origin: {keys:?}");
        if let Some(endpoint) = endpoint {
            let answers = endpoint.answers();
            assert_eq!(answers.get(&422), None, "never a second body for one key: {answers:?}");
            assert!(answers.get(&201).or(answers.get(&200)).is_some_and(|n| *n >= 900), "three paths: {answers:?}");
        }
    }
}

/// A re-created origin behind a hub: the new stream numbers its events from 1 again, the hub
/// sources them (nats-server starts a source again from the new stream's first sequence), and
/// their origin keys name the earlier events' records. Origin keys cannot tell the two apart:
/// the sink refuses each reused one as `sequence_reused` (dead-lettered with that reason, the
/// earlier record kept) and writes the rest. docs/topology.md says what to key by when origins
/// may be re-created.
#[tokio::test]
async fn a_re_created_origin_behind_a_hub_has_its_reused_sequences_refused_never_overwritten() {
    let n = net(None).await;
    plain(&n.js, "TP", &["tp.>"]).await;
    sourced(&n.js, "HUB", vec![source("TP")]).await;
    plain(&n.js, "TOPODLQ", &["topo.dead"]).await;
    publish(&n.js, "tp", 0, 5).await;
    holds(&n.js, "HUB", 5).await;
    n.js.delete_stream("TP").await.unwrap();
    plain(&n.js, "TP", &["tp.>"]).await;
    // On the same subjects as the earlier events of the same sequences (files are filed by
    // subject).
    publish(&n.js, "tp", 99, 8).await;
    // The hub's source notices the new stream after its retry interval.
    let resumed = wait_until(Duration::from_secs(90), || async {
        n.js.get_stream("HUB").await.unwrap().info().await.unwrap().state.messages >= 13
    })
    .await;
    assert!(resumed, "the hub sourced the re-created stream");
    let out = n.dir.path().join("out");
    let config = file_config(n.dir.path(), &n.server.url(), "HUB", &out, "origin_sequence");
    let mut top: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    top["dead_letter"] = json!({"enabled": true, "subject": "topo.dead"});
    top["nats"]["subject"] = json!("tp.>");
    std::fs::write(&config, serde_json::to_vec(&top).unwrap()).unwrap();
    drain(&n.js, n.dir.path(), &config).await;
    // Five earlier events and the three new ones whose sequences were not used before.
    let held: Vec<String> = events_in(&out).into_keys().collect();
    let want: Vec<String> =
        [0, 1, 2, 3, 4, 104, 105, 106].iter().map(|i| json!({"tp": i}).to_string()).collect::<Vec<_>>();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(held, want_sorted, "the earlier records kept, the new sequences written");
    let dead = sinks_testkit::read_stream(&n.js, "TOPODLQ").await;
    let reasons: Vec<(u64, String)> = dead
        .iter()
        .map(|(_, _, _, body)| {
            let record: Value = serde_json::from_slice(body).unwrap();
            (record["origin"]["sequence"].as_u64().unwrap_or(0), record["reason"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let expected: Vec<(u64, String)> = (1..=5).map(|s| (s, "sequence_reused".to_owned())).collect();
    assert_eq!(reasons, expected, "each reused origin sequence refused with its reason");
}
