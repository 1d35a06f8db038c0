//! `nats-sink run` reaching NATS over WebSocket: a private nats-server with its websocket
//! listener, plain (`ws://`) and TLS with a private CA (`wss://`). The consumer is created,
//! every message written once and acknowledged, and a server killed and restarted mid-run is
//! reconnected to over WebSocket, as over TCP. Handshake headers: a server that takes the
//! token only from a cookie of the handshake authenticates the sink whose
//! `websocket_headers_env` sends it (through the relay, over TLS too), refuses it without, and
//! the relay gives a connection from another process nothing.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use sinks_testkit::{NatsServer, TestPki, stream_with_subjects, unique, wait_until};
use support::{Env, Sink, sequences};

async fn ws_env(tls: Option<&TestPki>, token_cookie: Option<(&str, &str)>) -> Env {
    let server = NatsServer::start_websocket(tls.map(|p| (p.cert_file.clone(), p.key_file.clone())), token_cookie);
    let js = server.js().await;
    let stream = unique("WS");
    let subject_root = stream.to_lowercase();
    stream_with_subjects(&js, &stream, &[&format!("{subject_root}.>")]).await;
    Env { server, js, dir: tempfile::tempdir().unwrap(), stream, consumer: unique("ws_sink"), subject_root }
}

/// Runs the sink over `url` (with `nats` merged into the `nats` section): 300 messages, a
/// server restart, 200 more; every one written once and acknowledged.
async fn run_over(e: &mut Env, nats: serde_json::Value, envs: &[(&str, String)]) {
    let url = e.server.ws_url().unwrap();
    let mut nats_section = serde_json::json!({"url": url, "reconnect_time_wait_seconds": 1});
    nats_section.as_object_mut().unwrap().extend(nats.as_object().unwrap().clone());
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": nats_section, "logging": {"level": "INFO"}}),
    );
    e.publish(300, support::json).await;
    let sink = Sink::start(&config, e.dir.path(), envs);
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
    let (code, logs) = sink.stop();
    assert_eq!(code, Some(0));
    for (_, secret) in envs {
        assert!(!logs.contains(secret.as_str()), "a header value was logged");
    }
}

#[tokio::test]
async fn plain_websocket_consumes_acks_and_reconnects() {
    let mut e = ws_env(None, None).await;
    assert!(e.server.ws_url().unwrap().starts_with("ws://"));
    run_over(&mut e, serde_json::json!({}), &[]).await;
}

#[tokio::test]
async fn websocket_over_tls_with_a_private_ca_consumes_acks_and_reconnects() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(certs.path());
    let mut e = ws_env(Some(&pki), None).await;
    assert!(e.server.ws_url().unwrap().starts_with("wss://"));
    run_over(&mut e, serde_json::json!({"tls_ca_file": pki.ca_file}), &[]).await;
}

#[tokio::test]
async fn websocket_tls_without_the_ca_is_refused_and_never_reaches_the_server() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(certs.path());
    let e = ws_env(Some(&pki), None).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": {"url": e.server.ws_url().unwrap()}, "logging": {"level": "INFO"}}),
    );
    e.publish(10, support::json).await;
    let sink = Sink::start(&config, e.dir.path(), &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(sequences(&e.out()).is_empty(), "an unverified server got messages written");
    assert!(!sink.logs().contains("consuming servers="), "{}", sink.logs());
    assert_eq!(sink.terminate(), Some(0));
}

/// A cookie that carries the WebSocket token, and the token.
const COOKIE: (&str, &str) = ("nats_token", "ws-s3cr3t");

#[tokio::test]
async fn handshake_headers_carry_a_token_cookie_through_the_relay_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(certs.path());
    let mut e = ws_env(Some(&pki), Some(COOKIE)).await;
    let nats = serde_json::json!({
        "tls_ca_file": pki.ca_file,
        "websocket_headers": {"X-Edge-Site": "north-7"},
        "websocket_headers_env": {"Cookie": "NATS_WS_COOKIE"},
    });
    let cookie = format!("{}={}", COOKIE.0, COOKIE.1);
    run_over(&mut e, nats, &[("NATS_WS_COOKIE", cookie)]).await;
}

#[tokio::test]
async fn without_the_cookie_the_server_refuses_and_another_process_gets_nothing_from_the_relay() {
    let mut e = ws_env(None, Some(COOKIE)).await;
    // No cookie: the server refuses the connection; nothing is consumed.
    let url = e.server.ws_url().unwrap();
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({"nats": {"url": url, "websocket_headers": {"X-Edge-Site": "north-7"}}, "logging": {"level": "INFO"}}),
    );
    e.publish(10, support::json).await;
    let sink = Sink::start(&config, e.dir.path(), &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(sequences(&e.out()).is_empty(), "written without the token");
    assert!(!sink.logs().contains("consuming servers="), "{}", sink.logs());
    let logs = sink.logs();
    // The relay listens on loopback; a process other than the sink connecting to it gets no
    // byte (a relayed connection would show the server's INFO line).
    let relay = logs
        .lines()
        .find_map(|l| {
            l.split("address=").nth(1).map(|a| a.split_whitespace().next().unwrap().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("no relay address in the log:\n{logs}"));
    let (host, port) = relay.rsplit_once(':').unwrap();
    let script = format!("exec 3<>/dev/tcp/{host}/{port} && timeout 3 cat <&3");
    let foreign = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(foreign.stdout.is_empty(), "another process got {:?}", String::from_utf8_lossy(&foreign.stdout));
    assert_eq!(sink.terminate(), Some(0));
    e.server.kill();
}
