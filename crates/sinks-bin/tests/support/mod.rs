//! Shared helpers of the `nats-sink` end-to-end tests: the binary as a child process, a
//! private JetStream server with a stream, and reading the file sink's output back.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::clone_on_ref_ptr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use bytes::Bytes;
use sinks_testkit::{NatsServer, js_publish_all, stream_with_subjects, unique, wait_until};

/// A running `nats-sink` process; stderr goes to a log file shown on failure.
pub struct Sink {
    pub child: Child,
    pub log: PathBuf,
}

impl Sink {
    pub fn start(config: &Path, cwd: &Path, envs: &[(&str, String)]) -> Self {
        let log = cwd.join(format!("nats-sink-{}.log", unique("run")));
        let child = Command::new(env!("CARGO_BIN_EXE_nats-sink"))
            .args(["run", config.to_str().unwrap()])
            .current_dir(cwd)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self { child, log }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
    }

    pub fn kill9(mut self) {
        self.signal("-KILL");
        let _ = self.child.wait();
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn terminate(mut self) -> Option<i32> {
        self.signal("-TERM");
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nats-sink did not stop after SIGTERM; log:\n{}", self.logs());
    }

    /// SIGTERM and wait; returns the exit code and the whole log, including what the
    /// process wrote while it stopped (the run summary, close statistics).
    pub fn stop(self) -> (Option<i32>, String) {
        let log = self.log.clone();
        let code = self.terminate();
        (code, std::fs::read_to_string(log).unwrap_or_default())
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every record file under `dir` (skipping in-progress temp files), parsed.
pub fn records(dir: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if !name.starts_with('.') && name.ends_with(".json") {
                out.push(serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap());
            }
        }
    }
    out
}

pub fn sequences(dir: &Path) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    for r in records(dir) {
        *seen.entry(r["stream_sequence"].as_u64().unwrap()).or_insert(0) += 1;
    }
    seen
}

pub struct Env {
    pub server: NatsServer,
    pub js: Context,
    pub dir: tempfile::TempDir,
    pub stream: String,
    pub consumer: String,
    pub subject_root: String,
}

pub async fn env() -> Env {
    let server = NatsServer::start();
    let js = server.js().await;
    let stream = unique("FILES");
    let subject_root = stream.to_lowercase();
    stream_with_subjects(&js, &stream, &[&format!("{subject_root}.>")]).await;
    Env { server, js, dir: tempfile::tempdir().unwrap(), stream, consumer: unique("file_sink"), subject_root }
}

impl Env {
    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    pub fn write_config(&self, delivery: &str, dead_letter: &str, sink_extra: &str) -> PathBuf {
        let text = format!(
            r#"{{
              "nats": {{"url": "{url}", "stream": "{stream}", "consumer": "{consumer}", "subject": "{root}.>"}},
              "delivery": {{"batch_timeout_ms": 200, "retry_backoff_ms": 100, "retry_backoff_max_ms": 500 {delivery}}},
              "consumer_management": {{"ack_wait_seconds": 5}},
              "dead_letter": {{{dead_letter}}},
              "logging": {{"level": "DEBUG"}},
              "sink": {{"type": "file", "directory": "{out}" {sink_extra}}}
            }}"#,
            url = self.server.url(),
            stream = self.stream,
            consumer = self.consumer,
            root = self.subject_root,
            out = self.out().display(),
        );
        let path = self.dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes a config whose `sink` section is `sink` and whose other sections are merged
    /// over the defaults used by [`Env::write_config`].
    pub fn write_config_json(&self, sink: serde_json::Value, extra: serde_json::Value) -> PathBuf {
        self.write_config_json_as("config.json", sink, extra)
    }

    /// [`Env::write_config_json`] into file `name` of the test directory.
    pub fn write_config_json_as(&self, name: &str, sink: serde_json::Value, extra: serde_json::Value) -> PathBuf {
        let mut config = serde_json::json!({
            "nats": {"url": self.server.url(), "stream": self.stream, "consumer": self.consumer,
                     "subject": format!("{}.>", self.subject_root)},
            "delivery": {"batch_timeout_ms": 200, "retry_backoff_ms": 100, "retry_backoff_max_ms": 500},
            "consumer_management": {"ack_wait_seconds": 5},
            "logging": {"level": "DEBUG"},
            "sink": sink,
        });
        if let (Some(base), serde_json::Value::Object(extra)) = (config.as_object_mut(), extra) {
            for (k, v) in extra {
                match (base.get_mut(&k), v) {
                    (Some(serde_json::Value::Object(b)), serde_json::Value::Object(e)) => b.extend(e),
                    (_, v) => {
                        base.insert(k, v);
                    }
                }
            }
        }
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        path
    }

    /// Publishes messages `from..to` (ids `msg-{i}`, subjects `<root>.orders.k{i % 3}`).
    pub async fn publish_range(&self, from: usize, to: usize, payload: impl Fn(usize) -> Bytes) {
        let msgs = (from..to)
            .map(|i| {
                let mut h = HeaderMap::new();
                h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
                (format!("{}.orders.k{}", self.subject_root, i % 3), h, payload(i))
            })
            .collect();
        js_publish_all(&self.js, msgs).await;
    }

    pub async fn publish(&self, n: usize, payload: impl Fn(usize) -> Bytes) {
        self.publish_range(0, n, payload).await;
    }

    /// `(num_pending, num_ack_pending)` of the consumer, or `None` before it exists.
    pub async fn consumer_state(&self) -> Option<(u64, usize)> {
        let stream = self.js.get_stream(&self.stream).await.ok()?;
        let info = stream.consumer_info(&self.consumer).await.ok()?;
        Some((info.num_pending, info.num_ack_pending))
    }

    /// True once the consumer has delivered and settled everything
    /// ([`sinks_testkit::consumer_settled`]).
    pub async fn settled(&self) -> bool {
        sinks_testkit::consumer_settled_on(&self.js, &self.stream, &self.consumer).await
    }
}

/// A dead-letter stream for `e`: its name and the subject a config sends to.
pub async fn dlq_stream(e: &Env) -> (String, String) {
    let name = unique("DLQ");
    let subject = format!("{}.dead", name.to_lowercase());
    stream_with_subjects(&e.js, &name, &[&subject]).await;
    (name, subject)
}

/// The stream sequences the dead-letter stream `dlq` holds records of, in its order.
pub async fn dead_lettered(e: &Env, dlq: &str) -> Vec<u64> {
    sinks_testkit::read_stream(&e.js, dlq)
        .await
        .iter()
        .map(|(_, _, _, body)| {
            serde_json::from_slice::<serde_json::Value>(body).unwrap()["stream_sequence"].as_u64().unwrap()
        })
        .collect()
}

/// A JSON payload for message `i`.
pub fn json(i: usize) -> Bytes {
    Bytes::from(format!(r#"{{"order":{i},"note":"ünïcode"}}"#))
}

/// Publishes `n` messages on the single subject `<root>.orders`.
pub async fn publish_one_subject(e: &Env, n: usize) {
    let subject = format!("{}.orders", e.subject_root);
    let msgs = (0..n)
        .map(|i| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
            (subject.clone(), h, json(i))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
}

/// Messages the consumer has acknowledged so far.
pub async fn acked(e: &Env, total: usize) -> usize {
    match e.consumer_state().await {
        Some((pending, ack_pending)) => total.saturating_sub(pending as usize + ack_pending),
        None => 0,
    }
}

/// Runs the sink on `config` until every message is acknowledged, killing it (SIGKILL) at
/// a third and at two thirds of the way and restarting it at once. Returns the drain time
/// and the logs of the last process.
pub async fn drain_with_two_kills(e: &Env, config: &Path, total: usize, envs: &[(&str, String)]) -> (Duration, String) {
    let started = Instant::now();
    let mut run = Sink::start(config, e.dir.path(), envs);
    for third in 1..=2 {
        let reached =
            wait_until(Duration::from_secs(120), || async { acked(e, total).await >= total * third / 3 }).await;
        assert!(reached, "no progress to {third}/3; log:\n{}", run.logs());
        run.kill9();
        run = Sink::start(config, e.dir.path(), envs);
    }
    let done = wait_until(Duration::from_secs(300), || e.settled()).await;
    let took = started.elapsed();
    let logs = run.logs();
    assert!(done, "not drained; log:\n{logs}");
    assert_eq!(run.terminate(), Some(0));
    (took, logs)
}

/// Runs `nats-sink ARGS` in `cwd` with `envs` added to the environment, to completion.
pub fn nats_sink_with_env(args: &[&str], cwd: &Path, envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nats-sink"))
        .args(args)
        .current_dir(cwd)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// Runs `nats-sink ARGS` in `cwd` to completion.
pub fn nats_sink(args: &[&str], cwd: &Path) -> Output {
    nats_sink_with_env(args, cwd, &[])
}

/// A finished command's stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The findings of `nats-sink reconcile --format json` as (stream sequence, class).
pub fn findings(out: &Output) -> Vec<(u64, String)> {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["sequence"].as_u64().unwrap(), f["class"].as_str().unwrap().to_owned()))
        .collect()
}
