//! `nats-sink run` reaching NATS over WebSocket: a private nats-server with its websocket
//! listener, plain (`ws://`) and TLS with a private CA (`wss://`). The consumer is created,
//! every message written once and acknowledged, and a server killed and restarted mid-run is
//! reconnected to over WebSocket, as over TCP.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use sinks_testkit::{NatsServer, TestPki, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, sequences};

async fn ws_env(tls: Option<&TestPki>) -> Env {
    let server = NatsServer::start_websocket(tls.map(|p| (p.cert_file.clone(), p.key_file.clone())));
    let js = server.js().await;
    let stream = unique("WS");
    let subject_root = stream.to_lowercase();
    stream_with_subjects(&js, &stream, &[&format!("{subject_root}.>")]).await;
    Env { server, js, dir: tempfile::tempdir().unwrap(), stream, consumer: unique("ws_sink"), subject_root }
}

/// Runs the sink over `url` (with `nats` merged into the `nats` section): 300 messages, a
/// server restart, 200 more; every one written once and acknowledged.
async fn run_over(e: &mut Env, nats: serde_json::Value) {
    let url = e.server.ws_url().unwrap();
    let mut nats_section = serde_json::json!({"url": url, "reconnect_time_wait_seconds": 1});
    nats_section.as_object_mut().unwrap().extend(nats.as_object().unwrap().clone());
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": nats_section, "logging": {"level": "INFO"}}),
    );
    e.publish(300, support::json).await;
    let sink = Sink::start(&config, e.dir.path(), &[]);
    let first =
        wait_until(Duration::from_secs(60), || async { e.settled().await && sequences(&e.out()).len() == 300 }).await;
    assert!(first, "not written over {url}; log:\n{}", sink.logs());
    assert!(sink.logs().contains("nats connection established"), "{}", sink.logs());
    // The server goes away and comes back: the sink reconnects over WebSocket.
    e.server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    e.server.restart();
    e.publish_range(300, 500, support::json).await;
    let again =
        wait_until(Duration::from_secs(90), || async { e.settled().await && sequences(&e.out()).len() == 500 }).await;
    assert!(again, "not written after the restart; log:\n{}", sink.logs());
    assert!(sequences(&e.out()).values().all(|n| *n == 1), "a duplicate record");
    assert!(sink.logs().contains("nats connection lost"), "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
}

#[tokio::test]
async fn plain_websocket_consumes_acks_and_reconnects() {
    let mut e = ws_env(None).await;
    assert!(e.server.ws_url().unwrap().starts_with("ws://"));
    run_over(&mut e, serde_json::json!({})).await;
}

#[tokio::test]
async fn websocket_over_tls_with_a_private_ca_consumes_acks_and_reconnects() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(certs.path());
    let mut e = ws_env(Some(&pki)).await;
    assert!(e.server.ws_url().unwrap().starts_with("wss://"));
    run_over(&mut e, serde_json::json!({"tls_ca_file": pki.ca_file})).await;
}

#[tokio::test]
async fn websocket_tls_without_the_ca_is_refused_and_never_reaches_the_server() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(certs.path());
    let e = ws_env(Some(&pki)).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": {"url": e.server.ws_url().unwrap()}, "logging": {"level": "INFO"}}),
    );
    e.publish(10, support::json).await;
    let sink = Sink::start(&config, e.dir.path(), &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(sequences(&e.out()).is_empty(), "an unverified server got messages written");
    assert!(!sink.logs().contains("consumer ready"), "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
}
