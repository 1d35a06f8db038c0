//! `nats-sink run` exporting to a real OpenTelemetry Collector (built by `cargo xtask setup`:
//! the OTLP receiver and the file exporter, whose JSON lines these tests read back).
//!
//! - OTLP/HTTP: 1,000 messages with producers' `traceparent` headers (three of them not JSON,
//!   dead-lettered) through the file sink; the Collector holds the catalogue's metrics with
//!   the counts JetStream agrees with, and for a sample of messages a span whose parent is
//!   the producer's span in the producer's trace; the dead-lettered messages' spans say so,
//!   their DLQ records carry the trace id and the JSON log line of each dead letter its trace
//!   and span ids; the batch writes are spans linked to the message spans. Then the Collector
//!   is killed: 500 more messages are written exactly as before (no loss, no duplicate), the
//!   failures are a few log lines and a counter; restarted, it receives the new totals.
//! - OTLP/gRPC over TLS with a private CA, a header from an environment variable and an
//!   allow list: the allowed metrics arrive and no other.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::Value;
use sinks_testkit::{
    Collector, CollectorTls, TestPki, cannot_run, js_publish_all, read_stream, stream_with_subjects, unique, wait_until,
};
use support::{Env, Sink, env, json, sequences};

/// Messages of the first phase, and the ones that are not JSON (dead-lettered).
const MESSAGES: usize = 1000;
const POISON: [usize; 3] = [7, 500, 993];

/// The producer's trace and span id of message `i`.
fn producer(i: usize) -> (String, String) {
    (format!("{:032x}", 0x5eed_0000_0000_0000_u128 + i as u128 + 1), format!("{:016x}", 0xa11c_e000_u64 + i as u64))
}

async fn publish_traced(e: &Env, from: usize, to: usize) {
    let messages = (from..to)
        .map(|i| {
            let (trace, span) = producer(i);
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("msg-{i}").as_str());
            h.insert("traceparent", format!("00-{trace}-{span}-01").as_str());
            h.insert("tracestate", "vendor=x1");
            let payload = if POISON.contains(&i) { Bytes::from_static(b"not json") } else { json(i) };
            (format!("{}.orders.k{}", e.subject_root, i % 3), h, payload)
        })
        .collect();
    js_publish_all(&e.js, messages).await;
}

fn start_collector(test: &str, dir: &std::path::Path, tls: Option<&CollectorTls>) -> Collector {
    Collector::start(dir, tls).unwrap_or_else(|e| cannot_run(test, e))
}

/// Every item (span, metric) the Collector wrote for `signal`, flattened from its export
/// requests (`resource`, `scope` and `leaf` are the OTLP JSON keys of each level).
fn items(c: &Collector, signal: &str, [resource, scope, leaf]: [&str; 3]) -> Vec<Value> {
    let mut out = Vec::new();
    for request in c.exported(signal) {
        for r in request[resource].as_array().into_iter().flatten() {
            for s in r[scope].as_array().into_iter().flatten() {
                out.extend(s[leaf].as_array().into_iter().flatten().cloned());
            }
        }
    }
    out
}

/// Every span the Collector wrote.
fn spans(c: &Collector) -> Vec<Value> {
    items(c, "traces", ["resourceSpans", "scopeSpans", "spans"])
}

/// Every metric (one per export) the Collector wrote.
fn metrics(c: &Collector) -> Vec<Value> {
    items(c, "metrics", ["resourceMetrics", "scopeMetrics", "metrics"])
}

fn attribute<'a>(item: &'a Value, key: &str) -> Option<&'a Value> {
    let kv = item["attributes"].as_array()?.iter().find(|kv| kv["key"] == key)?;
    let v = &kv["value"];
    v.get("stringValue").or_else(|| v.get("intValue")).or_else(|| v.get("boolValue"))
}

/// The latest value the Collector received of metric `name` (a sum or gauge point with
/// exactly `labels`, or a histogram's count), by name.
fn latest(c: &Collector, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let number = |v: &Value| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_f64());
    let mut value = None;
    for m in metrics(c).iter().filter(|m| m["name"] == name) {
        let (points, histogram) = match (m.get("sum"), m.get("gauge"), m.get("histogram")) {
            (Some(s), _, _) => (&s["dataPoints"], false),
            (_, Some(g), _) => (&g["dataPoints"], false),
            (_, _, Some(h)) => (&h["dataPoints"], true),
            _ => continue,
        };
        for p in points.as_array().into_iter().flatten() {
            let attrs: BTreeMap<String, String> = p["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|kv| {
                    (
                        kv["key"].as_str().unwrap().to_owned(),
                        kv["value"]["stringValue"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            if attrs == want {
                value = if histogram {
                    number(&p["count"])
                } else {
                    number(&p["asInt"]).or_else(|| number(&p["asDouble"]))
                };
            }
        }
    }
    value
}

/// Every metric name the Collector received.
fn metric_names(c: &Collector) -> std::collections::BTreeSet<String> {
    metrics(c).iter().map(|m| m["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn metrics_and_one_span_per_message_reach_a_real_collector_and_a_dead_one_changes_nothing() {
    const TEST: &str = "metrics_and_one_span_per_message_reach_a_real_collector";
    let e = env().await;
    let collector_dir = e.dir.path().join("otelcol");
    std::fs::create_dir_all(&collector_dir).unwrap();
    let mut collector = start_collector(TEST, &collector_dir, None);
    let dlq_stream = unique("DLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    publish_traced(&e, 0, MESSAGES).await;
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out(), "payload_mode": "json_only"}),
        serde_json::json!({
            "delivery": {"batch_size": 50, "max_in_flight_batches": 2},
            "dead_letter": {"enabled": true, "subject": dlq_subject},
            "logging": {"level": "INFO", "format": "json"},
            "metrics": {"enabled": true},
            "opentelemetry": {
                "endpoint": format!("http://{}", collector.http_addr()),
                "resource_attributes": {"deployment.environment": "test"},
                "metrics": {"enabled": true, "interval_ms": 300},
                "traces": {"enabled": true},
            },
        }),
    );
    let sink = Sink::start(&config, e.dir.path(), &[]);
    let written = MESSAGES - POISON.len();
    let done =
        wait_until(Duration::from_secs(120), || async { e.settled().await && sequences(&e.out()).len() == written })
            .await;
    assert!(done, "not settled; log:\n{}", sink.logs());

    // Metrics: the catalogue's names, with the counts JetStream and the destination agree with.
    let exported = || async {
        // Acked: the written messages and the dead letters (acked once their record is stored).
        latest(&collector, "nats_sinks_messages_acked", &[]) == Some(MESSAGES as f64)
            && latest(&collector, "nats_sinks_messages_dlq", &[]) == Some(POISON.len() as f64)
    };
    assert!(
        wait_until(Duration::from_secs(30), exported).await,
        "metrics never caught up: acked {:?}; log:\n{}\ncollector:\n{}",
        latest(&collector, "nats_sinks_messages_acked", &[]),
        sink.logs(),
        collector.log()
    );
    assert_eq!(latest(&collector, "nats_sinks_messages_fetched", &[]), Some(MESSAGES as f64));
    assert_eq!(latest(&collector, "nats_sinks_messages_written", &[]), Some(written as f64));
    assert_eq!(latest(&collector, "nats_sinks_messages_nacked", &[]), Some(0.0));
    assert_eq!(
        latest(&collector, "nats_sinks_outcomes", &[("class", "committed"), ("sink", "file")]),
        Some(written as f64)
    );
    assert_eq!(
        latest(&collector, "nats_sinks_dlq_records", &[("reason", "sink_permanent")]),
        Some(POISON.len() as f64)
    );
    assert_eq!(
        latest(&collector, "nats_sinks_end_to_end_latency_seconds", &[]),
        Some(written as f64),
        "every observation"
    );
    assert!(latest(&collector, "nats_sinks_sink_batch_write_seconds", &[]).unwrap() >= (MESSAGES / 50) as f64);
    assert_eq!(latest(&collector, "nats_sinks_ready", &[]), Some(1.0));
    let names = metric_names(&collector);
    for id in sinks_runtime::metrics::CounterId::ALL {
        assert!(names.contains(&format!("nats_sinks_{}", id.name())), "{} not exported: {names:?}", id.name());
    }
    for id in sinks_runtime::metrics::GaugeId::ALL {
        assert!(names.contains(&format!("nats_sinks_{}", id.name())), "{} not exported", id.name());
    }
    // Histograms are exported from their first observation on (the SDK's rule).
    for name in
        ["nats_fetch_seconds", "message_ack_seconds", "event_age_at_receive_seconds", "event_age_at_store_seconds"]
    {
        assert!(latest(&collector, &format!("nats_sinks_{name}"), &[]).unwrap_or(0.0) >= 1.0, "{name} not exported");
    }

    // Traces: a span per message, the producer's span its parent, in the producer's trace.
    let all = || spans(&collector);
    let complete = || async { all().iter().filter(|s| s["name"] == "nats-sink process").count() >= MESSAGES };
    assert!(wait_until(Duration::from_secs(30), complete).await, "spans missing; log:\n{}", sink.logs());
    let all = all();
    let by_seq: HashMap<u64, &Value> = all
        .iter()
        .filter(|s| s["name"] == "nats-sink process")
        .map(|s| (attribute(s, "nats.stream_sequence").unwrap().as_str().unwrap().parse().unwrap(), s))
        .collect();
    assert_eq!(by_seq.len(), MESSAGES, "one span per message");
    for i in (0..MESSAGES).step_by(37).chain(POISON) {
        let span = by_seq[&(i as u64 + 1)];
        let (trace, parent) = producer(i);
        assert_eq!(span["traceId"], trace, "message {i}: the producer's trace");
        assert_eq!(span["parentSpanId"], parent, "message {i}: a child of the producer's span");
        assert_eq!(span["traceState"], "vendor=x1", "message {i}: tracestate carried on");
        assert_eq!(attribute(span, "nats.stream").unwrap(), &Value::from(e.stream.clone()));
        assert_eq!(attribute(span, "messaging.consumer.group.name").unwrap(), &Value::from(e.consumer.clone()));
        assert_eq!(
            attribute(span, "messaging.destination.name").unwrap(),
            &Value::from(format!("{}.orders.k{}", e.subject_root, i % 3))
        );
        assert_eq!(attribute(span, "nats.delivery_count").unwrap(), "1");
        assert_eq!(attribute(span, "nats_sinks.sink").unwrap(), "file");
        let (outcome, settlement) = if POISON.contains(&i) { ("dead_lettered", "ack") } else { ("committed", "ack") };
        assert_eq!(attribute(span, "nats_sinks.outcome").unwrap(), outcome, "message {i}");
        assert_eq!(attribute(span, "nats_sinks.settlement").unwrap(), settlement, "message {i}");
        let text = span.to_string();
        assert!(!text.contains("order\\\":") && !text.contains("not json"), "no payload in a span: {text}");
    }
    // The batch writes: spans of their own, linked to the message spans they wrote.
    let writes: Vec<&Value> = all.iter().filter(|s| s["name"] == "nats-sink write").collect();
    assert!(writes.len() >= MESSAGES / 50, "{} write spans", writes.len());
    let linked: usize = writes.iter().map(|w| w["links"].as_array().map_or(0, Vec::len)).sum();
    assert!(linked >= MESSAGES, "every message span is linked from a write: {linked}");
    let first = by_seq[&1];
    assert!(
        writes.iter().any(|w| w["links"].as_array().into_iter().flatten().any(|l| l["spanId"] == first["spanId"])),
        "the first message's write links to it"
    );

    // Dead letters: their records carry the trace, and so does the log line of each.
    let dlq = read_stream(&e.js, &dlq_stream).await;
    assert_eq!(dlq.len(), POISON.len());
    let logs = sink.logs();
    for (_, _, _, body) in &dlq {
        let record: Value = serde_json::from_slice(body).unwrap();
        let i = record["stream_sequence"].as_u64().unwrap() as usize - 1;
        assert_eq!(record["trace_id"], producer(i).0, "the DLQ record of message {i} names its trace");
        let span_id = by_seq[&(i as u64 + 1)]["spanId"].as_str().unwrap();
        let line = logs
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["message"] == "message dead-lettered" && l["stream_sequence"] == i + 1)
            .unwrap_or_else(|| panic!("no dead-letter line for message {i}:\n{logs}"));
        assert_eq!(
            (line["trace_id"].as_str(), line["span_id"].as_str()),
            (Some(producer(i).0.as_str()), Some(span_id))
        );
    }

    // The Collector dies: 500 more messages are written exactly as the first ones were.
    collector.kill();
    publish_traced(&e, MESSAGES, MESSAGES + 500).await;
    let total = MESSAGES + 500 - POISON.len();
    let done =
        wait_until(Duration::from_secs(120), || async { e.settled().await && sequences(&e.out()).len() == total })
            .await;
    assert!(done, "not settled with the collector down; log:\n{}", sink.logs());
    let seen = sequences(&e.out());
    assert!(seen.values().all(|n| *n == 1), "a duplicate record");
    let want: Vec<u64> = (1..=(MESSAGES + 500) as u64).filter(|s| !POISON.contains(&(*s as usize - 1))).collect();
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), want, "every message, once");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = sink.logs();
    let failures = logs.lines().filter(|l| l.contains("opentelemetry export failed")).count();
    assert!((1..=6).contains(&failures), "export failures are a few lines, not one per message: {failures}\n{logs}");

    // Back: the new totals arrive, with the failures counted.
    collector.restart().unwrap_or_else(|e| cannot_run(TEST, e));
    let caught_up = || async { latest(&collector, "nats_sinks_messages_acked", &[]) == Some((MESSAGES + 500) as f64) };
    assert!(wait_until(Duration::from_secs(30), caught_up).await, "no export after the restart; log:\n{}", sink.logs());
    assert!(latest(&collector, "nats_sinks_telemetry_export_errors", &[]).unwrap() >= 1.0);
    assert_eq!(sink.terminate(), Some(0));
}

#[tokio::test]
async fn grpc_over_tls_with_a_private_ca_headers_from_the_environment_and_an_allow_list() {
    const TEST: &str = "grpc_over_tls_with_a_private_ca";
    let e = env().await;
    let dir = e.dir.path().join("otelcol");
    std::fs::create_dir_all(&dir).unwrap();
    let pki = TestPki::generate(&dir);
    let tls = CollectorTls { cert_file: pki.cert_file.clone(), key_file: pki.key_file.clone() };
    let collector = start_collector(TEST, &dir, Some(&tls));
    support::publish_one_subject(&e, 200).await;
    let port = collector.grpc_addr().rsplit(':').next().unwrap().to_owned();
    let config = e.write_config_json(
        serde_json::json!({"type": "file", "directory": e.out()}),
        serde_json::json!({
            "logging": {"level": "INFO", "format": "json"},
            "metrics": {"enabled": true},
            "opentelemetry": {
                "endpoint": format!("https://localhost:{port}"),
                "protocol": "grpc",
                "tls_ca_file": pki.ca_file,
                "headers_env": {"x-tenant": "NATS_SINKS_TEST_OTLP_TENANT"},
                "metrics": {"enabled": true, "interval_ms": 300, "allowed_metrics": ["messages_*", "sink_batch_write_seconds"], "denied_metrics": ["messages_nacked_total"]},
                "traces": {"enabled": true, "sample_ratio": 1.0},
            },
        }),
    );
    let sink = Sink::start(&config, e.dir.path(), &[("NATS_SINKS_TEST_OTLP_TENANT", "tenant-secret-value".into())]);
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "not settled; log:\n{}", sink.logs());
    let exported = || async { latest(&collector, "nats_sinks_messages_acked", &[]) == Some(200.0) };
    assert!(
        wait_until(Duration::from_secs(30), exported).await,
        "no metrics over gRPC/TLS; log:\n{}\n{}",
        sink.logs(),
        collector.log()
    );
    let names = metric_names(&collector);
    assert!(names.contains("nats_sinks_sink_batch_write_seconds"), "{names:?}");
    assert!(!names.contains("nats_sinks_messages_nacked"), "denied: {names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("nats_sinks_messages_") || n == "nats_sinks_sink_batch_write_seconds"),
        "{names:?}"
    );
    let traced = || async { spans(&collector).iter().filter(|s| s["name"] == "nats-sink process").count() >= 200 };
    assert!(wait_until(Duration::from_secs(30), traced).await, "no spans over gRPC/TLS");
    // Messages without a trace context start traces of their own (sample_ratio 1.0).
    assert!(
        spans(&collector)
            .iter()
            .filter(|s| s["name"] == "nats-sink process")
            .all(|s| s.get("parentSpanId").is_none_or(|p| p == ""))
    );
    let (code, logs) = sink.stop();
    assert_eq!(code, Some(0));
    assert!(!logs.contains("tenant-secret-value"), "a header value was logged");
}
