//! `nats-sink run` with `metrics.listen`: `/metrics` scraped during and after a run and
//! parsed with a Prometheus text-format parser (counters equal the messages published,
//! dead-lettered and acknowledged, as JetStream itself reports them); `/readyz` answers 503
//! before the consumer is bound and while NATS is down, 200 otherwise; `/healthz` answers
//! 200 throughout; OpenMetrics on request; JetStream advisories counted; and the Python
//! reference's `nats-sink-metrics show` reads the snapshot file this build writes.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use sinks_testkit::{free_port, read_stream, reference_python, stream_with_subjects, unique, wait_until};
use support::{Sink, env, json, records};

const MESSAGES: usize = 3000;
/// Messages that are not JSON (dead-lettered by `payload_mode: json_only`).
const POISON: [usize; 3] = [17, 1500, 2999];

/// `(status, content type, body)` of a GET, or `None` while nothing listens.
async fn get(url: &str, accept: Option<&str>) -> Option<(u16, String, String)> {
    let client = reqwest::Client::new();
    let mut request = client.get(url).timeout(Duration::from_secs(5));
    if let Some(a) = accept {
        request = request.header("Accept", a);
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    Some((status, content_type, response.text().await.ok()?))
}

/// The samples of a scrape, by name and sorted labels, parsed with `prometheus-parse`.
#[derive(Debug)]
struct Scrape(HashMap<String, f64>);

impl Scrape {
    fn parse(text: &str) -> Self {
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        let mut out = HashMap::new();
        for s in scrape.samples {
            let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(buckets) => {
                    // Buckets come back as one sample; expose the +Inf count.
                    buckets.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                prometheus_parse::Value::Summary(_) => continue,
            };
            let key = if labels.is_empty() { s.metric } else { format!("{}{{{}}}", s.metric, labels.join(",")) };
            out.insert(key, value);
        }
        Self(out)
    }

    fn get(&self, key: &str) -> f64 {
        *self.0.get(key).unwrap_or_else(|| panic!("no sample `{key}` in {:#?}", self.0.keys()))
    }
}

#[tokio::test]
async fn metrics_count_what_happened_and_probes_follow_the_run() {
    let mut e = env().await;
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    e.publish(MESSAGES, |i| if POISON.contains(&i) { Bytes::from_static(b"not json") } else { json(i) }).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let snapshot = e.dir.path().join("state/metrics.json");
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out(), "payload_mode": "json_only"}),
        serde_json::json!({
            "delivery": {"batch_size": 20, "max_in_flight_batches": 2},
            "dead_letter": {"enabled": true, "subject": dlq_subject, "ack_term_after_publish": true},
            "logging": {"level": "INFO"},
            "metrics": {
                "enabled": true,
                "listen": format!("127.0.0.1:{port}"),
                "snapshot_file": snapshot,
                "snapshot_interval_seconds": 1,
                "lag_poll_interval_seconds": 1,
                "health_check_interval_seconds": 1,
            },
            "advisories": {"enabled": true},
        }),
    );

    // NATS is down at start: the process is alive, but not ready (the consumer is not bound).
    e.server.kill();
    let sink = Sink::start(&config, e.dir.path(), &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let before = loop {
        if let Some(answer) = get(&format!("{base}/readyz"), None).await {
            break answer;
        }
        assert!(std::time::Instant::now() < deadline, "the listener never answered; log:\n{}", sink.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (status, _, body) = before;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("consumer not bound"), "{body}");
    assert_eq!(get(&format!("{base}/healthz"), None).await.unwrap().0, 200);

    e.server.restart();
    let ready = || async { get(&format!("{base}/readyz"), None).await.is_some_and(|(s, _, _)| s == 200) };
    assert!(wait_until(Duration::from_secs(60), ready).await, "never ready; log:\n{}", sink.logs());

    // During the run: counters are consistent with each other and never ahead of reality.
    assert!(wait_until(Duration::from_secs(60), || async { records(&e.out()).len() >= 300 }).await);
    let (status, content_type, text) = get(&format!("{base}/metrics"), None).await.unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let during = Scrape::parse(&text);
    let fetched = during.get("nats_sinks_messages_fetched_total");
    let acked = during.get("nats_sinks_messages_acked_total");
    assert!(acked <= fetched && fetched <= MESSAGES as f64, "acked {acked}, fetched {fetched}");
    assert!(during.get("nats_sinks_batches_fetched_total") >= 1.0);

    // After: every message is settled; the counters equal what JetStream reports.
    let done =
        wait_until(Duration::from_secs(120), || async { records(&e.out()).len() >= MESSAGES - 3 && e.settled().await })
            .await;
    assert!(done, "not everything was settled; log:\n{}", sink.logs());
    let dlq = read_stream(&e.js, &dlq_stream).await;
    assert_eq!(dlq.len(), POISON.len());
    let info = e.js.get_stream(&e.stream).await.unwrap().consumer_info(&e.consumer).await.unwrap().clone();
    assert_eq!(info.ack_floor.stream_sequence, MESSAGES as u64, "JetStream saw every message acknowledged");
    // The lag gauges and the advisories catch up within their poll interval.
    let settled_metrics = || async {
        let s = Scrape::parse(&get(&format!("{base}/metrics"), None).await.unwrap().2);
        s.get("nats_sinks_consumer_num_pending") == 0.0
            && s.get("nats_sinks_consumer_num_ack_pending") == 0.0
            && s.get("nats_sinks_jetstream_advisory_terminated_total") >= POISON.len() as f64
    };
    assert!(wait_until(Duration::from_secs(30), settled_metrics).await, "lag or advisories never caught up");
    let after = Scrape::parse(&get(&format!("{base}/metrics"), None).await.unwrap().2);
    let written = (MESSAGES - POISON.len()) as f64;
    assert_eq!(after.get("nats_sinks_messages_fetched_total"), MESSAGES as f64);
    assert_eq!(after.get("nats_sinks_messages_acked_total"), written, "acks after a durable write");
    assert_eq!(after.get("nats_sinks_messages_terminated_total"), POISON.len() as f64, "AckTerm after the DLQ");
    assert_eq!(after.get("nats_sinks_messages_dlq_total"), dlq.len() as f64);
    assert_eq!(after.get("nats_sinks_dlq_records_total{reason=sink_permanent}"), dlq.len() as f64);
    assert_eq!(after.get("nats_sinks_messages_written_total"), written);
    assert_eq!(after.get("nats_sinks_messages_nacked_total"), 0.0);
    assert_eq!(after.get("nats_sinks_outcomes_total{class=committed,sink=file}"), written);
    assert_eq!(after.get("nats_sinks_outcomes_total{class=failed_permanent,sink=file}"), POISON.len() as f64);
    assert_eq!(after.get("nats_sinks_end_to_end_latency_seconds_count"), written);
    assert_eq!(after.get("nats_sinks_event_age_at_store_seconds_count"), written);
    assert_eq!(after.get("nats_sinks_batches_in_flight"), 0.0);
    assert!(after.get("nats_sinks_sink_batch_write_seconds_count") >= (MESSAGES / 20) as f64);
    assert!(after.get("nats_sinks_last_sink_success_epoch_seconds") > 1.7e9);
    assert_eq!(after.get("nats_sinks_ready"), 1.0);
    assert_eq!(after.get("nats_sinks_nats_connected"), 1.0);
    assert!(after.get("nats_sinks_nats_connection_reconnected_total") == 0.0, "one connection, never lost yet");

    // OpenMetrics on request.
    let (_, content_type, open) = get(&format!("{base}/metrics"), Some("application/openmetrics-text")).await.unwrap();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    assert!(open.ends_with("# EOF\n"));

    // NATS goes away: not ready while it is down, ready again after, alive throughout.
    e.server.kill();
    let not_ready = || async {
        get(&format!("{base}/readyz"), None).await.is_some_and(|(s, _, b)| s == 503 && b.contains("nats disconnected"))
    };
    assert!(wait_until(Duration::from_secs(30), not_ready).await, "still ready with NATS down; log:\n{}", sink.logs());
    assert_eq!(get(&format!("{base}/healthz"), None).await.unwrap().0, 200);
    e.server.restart();
    assert!(wait_until(Duration::from_secs(60), ready).await, "not ready after NATS came back; log:\n{}", sink.logs());
    let again = Scrape::parse(&get(&format!("{base}/metrics"), None).await.unwrap().2);
    assert!(again.get("nats_sinks_nats_connection_disconnected_total") >= 1.0);
    assert!(again.get("nats_sinks_nats_connection_reconnected_total") >= 1.0);

    assert_eq!(sink.terminate(), Some(0));

    // The reference's own tool reads the final snapshot.
    let python = reference_python().unwrap_or_else(|e| panic!("{e}"));
    let tool = python.with_file_name("nats-sink-metrics");
    let out = std::process::Command::new(&tool).arg("show").arg(&snapshot).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let value = |name: &str| {
        shown["metrics"].as_array().unwrap().iter().find(|m| m["name"] == name).map(|m| m["value"].as_f64().unwrap())
    };
    assert_eq!(value("messages_acked_total"), Some(written));
    assert_eq!(value("messages_dlq_total"), Some(POISON.len() as f64));
    assert_eq!(value("sink_batch_write_seconds.count"), Some(after.get("nats_sinks_sink_batch_write_seconds_count")));
    assert_eq!(value("messages_received_total"), None, "legacy names are hidden unless asked for");
    let table = std::process::Command::new(&tool).arg("show").arg(&snapshot).output().unwrap();
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    // With --include-legacy the tool finds the reference's old names, with the current values.
    let out = std::process::Command::new(&tool)
        .arg("show")
        .arg(&snapshot)
        .args(["--format", "json", "--include-legacy"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let legacy: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let old = |name: &str| {
        legacy["metrics"].as_array().unwrap().iter().find(|m| m["name"] == name).map(|m| m["value"].as_f64().unwrap())
    };
    assert_eq!(old("messages_received_total"), value("messages_prepared_total"));
    assert_eq!(old("batches_written_total"), value("sink_batches_written_total"));
    assert_eq!(old("batch_write_seconds.count"), value("sink_batch_write_seconds.count"));
}
