//! Consumer setup with many workers starting at once, against a private JetStream server:
//! workers with the same config all end up on one consumer; workers with two different
//! configs racing to create it never overwrite each other (the losers report the drift);
//! reconciling updates the consumer in place instead of recreating it. (A unit test: setup
//! is private to the runtime, whose public API holds no NATS client.)
#![allow(clippy::unwrap_used)]

use super::{SetupError, ensure_consumer, ensure_streams};
use crate::Config;
use async_nats::jetstream::Context;
use serde_json::json;
use sinks_testkit::{NatsServer, stream_with_subjects, unique};

struct Env {
    server: NatsServer,
    js: Context,
    stream: String,
    consumer: String,
}

async fn env() -> Env {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("SETUP");
    stream_with_subjects(&js, &stream, &[&format!("{}.>", stream.to_lowercase())]).await;
    Env { server, js, consumer: unique("workers"), stream }
}

impl Env {
    fn config(&self, consumer_management: serde_json::Value) -> Config {
        Config::from_value(json!({
            "nats": {"url": self.server.url(), "stream": self.stream, "consumer": self.consumer,
                     "subject": format!("{}.>", self.stream.to_lowercase())},
            "consumer_management": consumer_management,
            "sink": {"type": "memory"},
        }))
        .unwrap()
    }

    /// Runs setup for every config at once; returns each result as the action or the error.
    async fn race(&self, configs: Vec<Config>) -> Vec<Result<&'static str, SetupError>> {
        let tasks: Vec<_> = configs
            .into_iter()
            .map(|config| {
                let js = self.js.clone();
                tokio::spawn(async move {
                    let stream = ensure_streams(&js, &config).await?;
                    ensure_consumer(&stream, &config).await.map(|b| b.action)
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_workers_starting_together_share_one_consumer() {
    let e = env().await;
    let config = e.config(json!({"ack_wait_seconds": 7}));
    let results = e.race(vec![config.clone(); 8]).await;
    for r in &results {
        assert!(matches!(r, Ok("created" | "bound")), "every worker gets the consumer: {r:?}");
    }
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let info = stream.consumer_info(&e.consumer).await.unwrap();
    assert_eq!(info.config.ack_wait.as_secs(), 7);
    // A worker starting now binds.
    let later = e.race(vec![config]).await;
    assert!(matches!(later[0], Ok("bound")), "{:?}", later[0]);
    assert_eq!(stream.consumer_info(&e.consumer).await.unwrap().created, info.created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_workers_with_different_configs_never_overwrite_each_other() {
    let e = env().await;
    // Two versions of a deployment starting at once, alternating.
    let (a, b) = (e.config(json!({"ack_wait_seconds": 11})), e.config(json!({"ack_wait_seconds": 13})));
    let configs: Vec<Config> = (0..12).map(|i| if i % 2 == 0 { a.clone() } else { b.clone() }).collect();
    let results = e.race(configs).await;
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let winner = stream.consumer_info(&e.consumer).await.unwrap().config.ack_wait.as_secs();
    assert!(winner == 11 || winner == 13, "the consumer has one of the two configs: {winner}");
    for (i, r) in results.iter().enumerate() {
        let mine = if i % 2 == 0 { 11 } else { 13 };
        match r {
            Ok(action) => {
                assert_eq!(mine, winner, "worker {i} ({mine} s) got the consumer ({action}) but it has {winner} s")
            }
            Err(SetupError::Config(err)) => {
                assert_ne!(mine, winner, "worker {i} matches the consumer but was refused: {err}");
                assert_eq!(err.issues[0].path, "consumer_management.ack_wait_seconds");
            }
            Err(other) => panic!("worker {i}: unexpected error {other}"),
        }
    }
}

#[tokio::test]
async fn reconcile_updates_the_consumer_in_place() {
    let e = env().await;
    let first = e.race(vec![e.config(json!({"ack_wait_seconds": 5}))]).await;
    assert!(matches!(first[0], Ok("created")), "{:?}", first[0]);
    let stream = e.js.get_stream(&e.stream).await.unwrap();
    let created = stream.consumer_info(&e.consumer).await.unwrap().created;
    let changed = e.config(json!({"ack_wait_seconds": 9, "mode": "reconcile"}));
    let second = e.race(vec![changed.clone(), changed]).await;
    for r in &second {
        assert!(matches!(r, Ok("reconciled" | "bound")), "{r:?}");
    }
    let info = stream.consumer_info(&e.consumer).await.unwrap();
    assert_eq!(info.config.ack_wait.as_secs(), 9);
    assert_eq!(info.created, created, "reconciling must not recreate the consumer");
}
