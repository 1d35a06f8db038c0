//! The batch mode's benchmarks: part of `--suite s3`, and `--suite lake-memory` (only when
//! named).
//!
//! **`s3`**: on the S3 suite's stream (20,000 messages of 256 bytes over 8 subjects), into
//! one partition (`{stream}`) at the batch defaults (10,000 messages, 64 MiB, 60 s per
//! object) with a consumer that lets 20,000 messages be unacknowledged: nats-sink's S3 batch
//! mode (NDJSON, and Parquet) against one object per message (measured by the S3 suite) and
//! against the raw JetStream → object_store multipart loop (`raw_lake s3`, the same bytes);
//! the file sink's batch mode against one file per message and against the raw
//! append-and-fsync loop (`raw_lake file`), fsync on everywhere. Every S3 contender runs a
//! second time through a counting proxy (`FaultProxy::requests`): the requests per 1,000
//! messages, by kind (PUT, POST and LIST are what S3 bills as write requests).
//!
//! **`lake-memory`**: 1,000,000 messages of 1 KB on one subject into one partition at the
//! batch defaults, file (NDJSON) and S3 (NDJSON, Parquet): the peak RSS (VmHWM) of
//! nats-sink, which the open object must not drive (goal ≤ 64 MiB).

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::Result;
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use bytes::Bytes;
use serde_json::json;

use super::{
    Args, CONSUMER, Measurement, Programs, Reset, S3_KEY_ENV, S3_SECRET_ENV, Stream, ceiling, config, measure, write,
};

/// What one S3 contender's count pass sent, per 1,000 messages.
#[derive(Debug, Clone)]
pub(super) struct Requests {
    /// Contender name.
    name: String,
    /// Requests by S3 operation.
    by_operation: BTreeMap<&'static str, usize>,
    /// Messages of the pass.
    messages: usize,
}

impl Requests {
    fn per_1000(&self, ops: &[&str]) -> f64 {
        let n: usize = self.by_operation.iter().filter(|(op, _)| ops.contains(op)).map(|(_, n)| n).sum();
        n as f64 * 1000.0 / self.messages as f64
    }
}

/// The write requests S3 bills as such (PUT, COPY, POST, LIST).
const WRITES: &[&str] =
    &["PutObject", "UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload", "CopyObject", "ListObjects"];

/// Results of the batch benchmarks.
#[derive(Debug, Default)]
pub(super) struct Lake {
    /// Throughput runs.
    pub(super) runs: Vec<Measurement>,
    /// Count passes.
    pub(super) requests: Vec<Requests>,
    /// The memory suite's runs.
    pub(super) memory: Vec<Measurement>,
}

/// The sink section of a batch contender: one partition, defaults otherwise.
pub(super) fn batch(mut sink: serde_json::Value, format: &str) -> serde_json::Value {
    sink["mode"] = json!("batch");
    sink["batch"] = json!({"format": format, "partition_template": "{stream}"});
    sink
}

/// `config` with a consumer that lets `max_ack_pending` messages be unacknowledged (objects
/// of 10,000 need it) and logs at warn.
pub(super) fn lake_config(
    url: &str,
    stream: Stream,
    args: &Args,
    sink: serde_json::Value,
    max_ack_pending: usize,
) -> serde_json::Value {
    let mut c = config(url, stream, args, sink);
    c["consumer_management"] = json!({"max_ack_pending": max_ack_pending});
    c
}

/// The S3 sink section for `bucket` at `endpoint`.
pub(super) fn s3_section(endpoint: &str, bucket: &str) -> serde_json::Value {
    json!({"type": "s3", "bucket": bucket, "endpoint_url": endpoint, "allow_http_for_local_testing": true,
           "region_name": "us-east-1", "credential_mode": "environment", "aws_access_key_id_env": S3_KEY_ENV,
           "aws_secret_access_key_env": S3_SECRET_ENV})
}

/// A private SeaweedFS (7 volumes per bucket, its default), its endpoint and a harness that
/// makes buckets on it: what the S3 suite and the table suite run against.
pub(super) async fn seaweed_harness()
-> Result<(sinks_testkit::SeaweedFs, sinks_testkit::S3Endpoint, sink_s3::certify::S3Harness)> {
    let s3 = sinks_testkit::SeaweedFs::start_with_volumes(7).await.map_err(anyhow::Error::msg)?;
    let endpoint = s3.endpoint();
    let harness = sink_s3::certify::S3Harness::new(
        endpoint.endpoint.clone(),
        endpoint.filer.clone(),
        sinks_testkit::S3_ACCESS_KEY_ID,
        sinks_testkit::S3_SECRET_ACCESS_KEY,
    );
    Ok((s3, endpoint, harness))
}

/// The S3 suite: one object per message (nats-sink, and the reference with
/// `--reference`), returned as the suite's results, then the batch contenders into `lake`
/// (see the module docs). One SeaweedFS (with its default of 7 volumes per bucket) for
/// every contender; a fresh bucket each (a second run's objects would all exist already).
pub(super) async fn per_message(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    stream: Stream,
    work: &std::path::Path,
    lake: &mut Lake,
) -> Result<Vec<Measurement>> {
    let (s3, endpoint, harness) = seaweed_harness().await?;
    let envs = [(S3_KEY_ENV, sinks_testkit::S3_ACCESS_KEY_ID), (S3_SECRET_ENV, sinks_testkit::S3_SECRET_ACCESS_KEY)];
    let mut results = Vec::new();
    // The ceiling: the same puts (create-if-absent, the sink's concurrency) from a plain loop.
    let bucket = harness.bucket().await.map_err(anyhow::Error::msg)?;
    let target = ["s3", endpoint.endpoint.as_str(), bucket.name()];
    let mut raw = ceiling::raw_command(&programs.raw_ceiling, url, stream, args, ceiling::S3_CONCURRENCY, &target);
    raw.envs(envs);
    let name = format!("{} (no framework)", ceiling::RAW_S3);
    results.push(measure(&name, raw, js, stream, &Reset::None, &work.join("raw-s3.log")).await?);
    // nats-sink on the default config (ordered by subject: one put in flight per subject) and
    // with `ordering_key: none` (the ceiling's order: none), and the reference.
    let mut contenders = vec![
        ("s3", "nats-sink, s3 sink".to_owned(), programs.nats_sink.clone(), true),
        ("s3-none", "nats-sink, s3 sink, ordering none".to_owned(), programs.nats_sink.clone(), false),
    ];
    if let Some(py) = &programs.reference {
        contenders.push(("reference-s3", "Python reference 0.4.3, s3 sink".to_owned(), py.clone(), true));
    }
    for (id, name, program, ordered) in contenders {
        let bucket = harness.bucket().await.map_err(anyhow::Error::msg)?;
        let sink = s3_section(&endpoint.endpoint, bucket.name());
        let mut config = config(url, stream, args, sink);
        if !ordered {
            config["delivery"]["ordering_key"] = "none".into();
        }
        let path = write(&work.join(format!("{id}.json")), &config)?;
        let mut cmd = Command::new(program);
        cmd.arg("run").arg(path).envs(envs);
        results.push(measure(&name, cmd, js, stream, &Reset::None, &work.join(format!("{id}.log"))).await?);
    }
    if !args.ceilings {
        *lake = batched(args, programs, js, url, stream, &harness, &endpoint.endpoint, work).await?;
    }
    drop(s3);
    Ok(results)
}

/// The batch contenders of the S3 suite (see the module docs). `harness` makes the buckets
/// on the suite's SeaweedFS at `endpoint`.
#[allow(clippy::too_many_arguments)]
async fn batched(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    stream: Stream,
    harness: &sink_s3::certify::S3Harness,
    endpoint: &str,
    work: &std::path::Path,
) -> Result<Lake> {
    let mut lake = Lake::default();
    let envs = [(S3_KEY_ENV, sinks_testkit::S3_ACCESS_KEY_ID), (S3_SECRET_ENV, sinks_testkit::S3_SECRET_ACCESS_KEY)];
    let log = |name: &str| work.join(format!("{name}.log"));
    let sink_cmd = |path: &std::path::Path| {
        let mut cmd = Command::new(&programs.nats_sink);
        cmd.arg("run").arg(path).envs(envs);
        cmd
    };
    let raw_s3 = |endpoint: &str, bucket: &str| {
        let mut cmd = Command::new(&programs.raw_lake);
        cmd.args(["s3", url, stream.name, CONSUMER, &stream.total.to_string(), &args.batch.to_string(), "10000"]);
        cmd.args([endpoint, bucket, sinks_testkit::S3_ACCESS_KEY_ID, sinks_testkit::S3_SECRET_ACCESS_KEY]);
        cmd
    };
    let total = stream.total;
    // Throughput first (straight to the server), then the count passes through the proxy.
    for pass in ["rate", "count"] {
        let proxy = sinks_testkit::FaultProxy::start(endpoint, 0, None).await.map_err(anyhow::Error::msg)?;
        let target = if pass == "rate" { endpoint.to_owned() } else { proxy.url() };
        let mut contenders: Vec<(&str, String, serde_json::Value)> = vec![
            ("s3-batch-ndjson", "nats-sink, s3 sink, batch ndjson".into(), json!("ndjson")),
            ("s3-batch-parquet", "nats-sink, s3 sink, batch parquet".into(), json!("parquet")),
            ("s3-raw-multipart", "raw JetStream → object_store multipart loop".into(), json!(null)),
        ];
        if pass == "count" {
            contenders.insert(0, ("s3-per-message", "nats-sink, s3 sink".into(), json!(null)));
        }
        for (id, name, format) in contenders {
            let bucket = harness.bucket().await.map_err(anyhow::Error::msg)?;
            let before = proxy.requests();
            let cmd = match (id, format.as_str()) {
                ("s3-raw-multipart", _) => raw_s3(&target, bucket.name()),
                (_, Some(format)) => {
                    let sink = batch(s3_section(&target, bucket.name()), format);
                    sink_cmd(&write(&work.join(format!("{id}.json")), &lake_config(url, stream, args, sink, total))?)
                }
                _ => {
                    let sink = s3_section(&target, bucket.name());
                    sink_cmd(&write(&work.join(format!("{id}.json")), &config(url, stream, args, sink))?)
                }
            };
            let m = measure(&name, cmd, js, stream, &Reset::None, &log(&format!("{id}-{pass}"))).await?;
            if pass == "rate" {
                lake.runs.push(m);
            } else {
                let mut by_operation = proxy.requests();
                for (op, n) in before {
                    if let Some(v) = by_operation.get_mut(op) {
                        *v -= n;
                    }
                }
                eprintln!("{name}: {by_operation:?} for {total} messages");
                lake.requests.push(Requests { name, by_operation, messages: total });
            }
        }
    }
    // The file sink, fsync on: one file per message, batch mode, and the raw loop.
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let per_message = json!({"type": "file", "directory": out, "fsync": true});
    let path = write(&work.join("lake-file-per-message.json"), &config(url, stream, args, per_message))?;
    let name = "nats-sink, file sink, one file per message, fsync on";
    lake.runs.push(measure(name, sink_cmd(&path), js, stream, &Reset::Dir(&out), &log("lake-file-per-message")).await?);
    let batched = batch(json!({"type": "file", "directory": out, "fsync": true}), "ndjson");
    let path = write(&work.join("lake-file-batch.json"), &lake_config(url, stream, args, batched, total))?;
    let name = "nats-sink, file sink, batch ndjson, fsync on";
    lake.runs.push(measure(name, sink_cmd(&path), js, stream, &Reset::Dir(&out), &log("lake-file-batch")).await?);
    let raw_out = scratch.path().join("raw");
    std::fs::create_dir_all(&raw_out)?;
    let mut raw = Command::new(&programs.raw_lake);
    raw.args(["file", url, stream.name, CONSUMER, &total.to_string(), &args.batch.to_string(), "10000"]);
    raw.arg(&raw_out);
    let name = "raw JetStream → append-and-fsync loop";
    lake.runs.push(measure(name, raw, js, stream, &Reset::None, &log("lake-file-raw")).await?);
    Ok(lake)
}

/// A 1 KB JSON payload.
fn kilobyte(i: usize) -> Bytes {
    let head = format!(r#"{{"order_id":{i},"customer":"c-{:06}","note":""#, i % 997);
    Bytes::from(format!("{head}{}\"}}", "x".repeat(1024 - head.len() - 2)))
}

/// The memory suite (see the module docs).
pub(super) async fn memory_suite(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    work: &std::path::Path,
) -> Result<Vec<Measurement>> {
    let total = args.lake_memory_messages;
    let stream = Stream { name: "BENCHMEM", subject_root: "benchmem", total, subjects: 1 };
    sinks_testkit::stream_with_subjects(js, stream.name, &[&format!("{}.>", stream.subject_root)]).await;
    for chunk in (0..total).collect::<Vec<_>>().chunks(50_000) {
        let msgs = chunk
            .iter()
            .map(|&i| {
                let mut h = HeaderMap::new();
                h.insert("Nats-Msg-Id", format!("mem-{i}").as_str());
                (format!("{}.orders", stream.subject_root), h, kilobyte(i))
            })
            .collect();
        sinks_testkit::js_publish_all(js, msgs).await;
    }
    let (s3, endpoint, harness) = seaweed_harness().await?;
    let envs = [(S3_KEY_ENV, sinks_testkit::S3_ACCESS_KEY_ID), (S3_SECRET_ENV, sinks_testkit::S3_SECRET_ACCESS_KEY)];
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let mut runs = Vec::new();
    // The every-sink build, then the S3-only build an operator deploys for an S3 sink (the
    // full binary maps the code of every sink).
    for (id, kind, program) in [
        ("mem-file-ndjson", "file sink, batch ndjson", &programs.nats_sink),
        ("mem-s3-ndjson", "s3 sink, batch ndjson", &programs.nats_sink),
        ("mem-s3-parquet", "s3 sink, batch parquet", &programs.nats_sink),
        ("mem-s3-ndjson-slim", "s3 sink (s3-only build), batch ndjson", &programs.nats_sink_s3),
        ("mem-s3-parquet-slim", "s3 sink (s3-only build), batch parquet", &programs.nats_sink_s3),
    ] {
        let name = format!("nats-sink, {kind}, 1 KB × {total}");
        let bucket = harness.bucket().await.map_err(anyhow::Error::msg)?;
        let format = if id.contains("parquet") { "parquet" } else { "ndjson" };
        let sink = match id {
            "mem-file-ndjson" => batch(json!({"type": "file", "directory": out, "fsync": true}), "ndjson"),
            _ => batch(s3_section(&endpoint.endpoint, bucket.name()), format),
        };
        let path = write(&work.join(format!("{id}.json")), &lake_config(url, stream, args, sink, 20_000))?;
        let mut cmd = Command::new(program);
        cmd.arg("run").arg(&path).envs(envs);
        runs.push(measure(&name, cmd, js, stream, &Reset::Dir(&out), &work.join(format!("{id}.log"))).await?);
    }
    drop(s3);
    Ok(runs)
}

/// The report section of the batch benchmarks.
pub(super) fn render(lake: &Lake, per_message_s3: Option<&Measurement>) -> String {
    if lake.runs.is_empty() && lake.memory.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n## Batch mode (data-lake objects)\n\n");
    let row = |m: &Measurement| {
        format!(
            "| {} | {:.0} | {:.2} | {} | {:.1} | {:.1} |\n",
            m.name,
            m.rate(),
            m.wall.as_secs_f64(),
            m.first_ack.as_millis(),
            m.peak_rss_mib(),
            m.cpu_us_per_msg()
        )
    };
    md.push_str(
        "| contender | msgs/s | wall s | first ack ms | peak RSS MiB | CPU µs/msg |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for m in per_message_s3.into_iter().chain(&lake.runs) {
        md.push_str(&row(m));
    }
    if !lake.requests.is_empty() {
        md.push_str("\n| contender (count pass, through a counting proxy) | write requests / 1,000 msgs | all requests / 1,000 msgs | by operation |\n|---|---:|---:|---|\n");
        for r in &lake.requests {
            let ops: Vec<String> =
                r.by_operation.iter().filter(|(_, n)| **n > 0).map(|(op, n)| format!("{op} {n}")).collect();
            let all: Vec<&str> = r.by_operation.keys().copied().collect();
            md.push_str(&format!(
                "| {} | {:.2} | {:.2} | {} |\n",
                r.name,
                r.per_1000(WRITES),
                r.per_1000(&all),
                ops.join(", ")
            ));
        }
    }
    let find = |prefix: &str| per_message_s3.into_iter().chain(&lake.runs).find(|m| m.name.starts_with(prefix));
    let ratio = |a: &str, b: &str| find(a).zip(find(b)).map(|(a, b)| a.rate() / b.rate());
    let rows = [
        (
            "s3 batch ndjson / one object per message",
            ratio("nats-sink, s3 sink, batch ndjson", "nats-sink, s3 sink"),
            "≥ 20",
        ),
        (
            "s3 batch parquet / one object per message",
            ratio("nats-sink, s3 sink, batch parquet", "nats-sink, s3 sink"),
            "≥ 20",
        ),
        (
            "s3 batch ndjson / raw multipart loop",
            ratio("nats-sink, s3 sink, batch ndjson", "raw JetStream → object_store"),
            "≥ 0.8",
        ),
        (
            "s3 batch parquet / raw multipart loop",
            ratio("nats-sink, s3 sink, batch parquet", "raw JetStream → object_store"),
            "",
        ),
        (
            "file batch / one file per message (fsync on)",
            ratio("nats-sink, file sink, batch ndjson", "nats-sink, file sink, one file per message"),
            "≥ 20",
        ),
        (
            "file batch / raw append-and-fsync loop",
            ratio("nats-sink, file sink, batch ndjson", "raw JetStream → append"),
            "≥ 0.8",
        ),
    ];
    md.push_str("\n| ratio | measured | target |\n|---|---:|---:|\n");
    for (name, value, target) in rows {
        let shown = value.map_or("not measured".to_owned(), |v| format!("{v:.2}×"));
        md.push_str(&format!("| {name} | {shown} | {target} |\n"));
    }
    if !lake.memory.is_empty() {
        md.push_str("\n| memory run (one partition, batch defaults) | msgs/s | wall s | peak RSS MiB | target |\n|---|---:|---:|---:|---:|\n");
        for m in &lake.memory {
            md.push_str(&format!(
                "| {} | {:.0} | {:.1} | {:.1} | ≤ 64 |\n",
                m.name,
                m.rate(),
                m.wall.as_secs_f64(),
                m.peak_rss_mib()
            ));
        }
    }
    md
}
