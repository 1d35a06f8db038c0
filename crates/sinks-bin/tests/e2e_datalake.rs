//! `nats-sink run` with the file and S3 sinks in batch mode (many messages per object)
//! against a private JetStream server, a local directory and SeaweedFS: 20,000 messages over
//! 8 subjects with kill -9 five times and `max_messages` changed at every restart, every
//! message exactly once across all objects (each object parsed), no two objects sharing a
//! sequence, the DLQ holding only the planted poison messages; DuckDB reads the NDJSON and the
//! Parquet output and pyarrow its schema; SIGTERM commits the open objects and acknowledges
//! them with no redelivery, after they waited longer than AckWait; reconcile reads batch
//! objects back; encrypted payloads stay encrypted in the rows and decrypt line by line;
//! start-up refuses a `max_age_ms` the heartbeats cannot cover; `validate` prints the
//! partition template's example path.
#![allow(clippy::unwrap_used, clippy::clone_on_ref_ptr, clippy::print_stderr)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::json;
use sink_s3::certify::S3Harness;
use sinks_testkit::{
    S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, cannot_run, js_publish_all, read_stream, stream_with_subjects, unique,
    wait_until,
};
use sinks_toolkit::batch::naming;
use support::{Env, Sink, acked, env, nats_sink, text};

const TOTAL: usize = 20_000;
const SUBJECTS: usize = 8;
const KEY_ENV: &str = "E2E_LAKE_S3_ACCESS_KEY_ID";
const SECRET_ENV: &str = "E2E_LAKE_S3_SECRET_ACCESS_KEY";

/// The planted poison messages (by index): not JSON for NDJSON under `json_only`, an `n`
/// that is not an integer for Parquet's typed column.
fn poison(i: usize) -> bool {
    i % 1999 == 7
}

fn payload(i: usize, parquet: bool) -> Bytes {
    match (poison(i), parquet) {
        (true, false) => Bytes::from(format!("poison {i}, not json")),
        (true, true) => Bytes::from(format!(r#"{{"n":"poison {i}","region":"r{}"}}"#, i % 3)),
        (false, _) => Bytes::from(format!(r#"{{"n":{i},"region":"r{}","note":"ünïcode"}}"#, i % 3)),
    }
}

/// Publishes `n` messages from index `from` over 8 subjects (`<root>.orders.s<i % 8>`).
async fn publish(e: &Env, from: usize, n: usize, parquet: bool) {
    let msgs = (from..from + n)
        .map(|i| {
            let mut h = HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("lake-{i}").as_str());
            (format!("{}.orders.s{}", e.subject_root, i % SUBJECTS), h, payload(i, parquet))
        })
        .collect();
    js_publish_all(&e.js, msgs).await;
}

/// Delivery settings of the kill tests: AckWait 5 s, enough unacknowledged messages for
/// full objects on every subject, a DLQ.
fn extra(dlq_subject: &str) -> serde_json::Value {
    json!({
        "delivery": {"batch_size": 500, "max_in_flight_batches": 4},
        "consumer_management": {"ack_wait_seconds": 5, "max_ack_pending": 20000},
        "dead_letter": {"enabled": true, "subject": dlq_subject},
        "logging": {"level": "INFO"},
    })
}

/// `nats-sink run` on `configs[0]`, killed with SIGKILL five times as the acknowledgements
/// pass sixths of `total`, restarted on the next config each time; then drained and stopped.
async fn run_with_five_kills(e: &Env, configs: &[PathBuf], total: usize, envs: &[(&str, String)]) {
    let mut run = Sink::start(&configs[0], e.dir.path(), envs);
    let mut unacked_at_kills = 0;
    for kill in 1..=5 {
        let target = total * kill / 6;
        let reached = wait_until(Duration::from_secs(240), || async { acked(e, total).await >= target }).await;
        assert!(reached, "no progress to {target} acknowledgements; log:\n{}", run.logs());
        unacked_at_kills += e.consumer_state().await.map_or(0, |(_, ack_pending)| ack_pending);
        run.kill9();
        run = Sink::start(&configs[kill % configs.len()], e.dir.path(), envs);
    }
    let done = wait_until(Duration::from_secs(300), || e.settled()).await;
    assert!(done, "not drained; log:\n{}", run.logs());
    // The last process may have found nothing left to do: stop it once it is running (a
    // SIGTERM before its handler is installed would kill it).
    let ready = wait_until(Duration::from_secs(60), || async { run.logs().contains("consuming servers=") }).await;
    assert!(ready, "{}", run.logs());
    let (code, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    // The kills left messages delivered and unacknowledged (in open objects, or committed
    // ones not acknowledged yet): they came back, to be found stored or written again.
    eprintln!("messages delivered and unacknowledged at the five kills: {unacked_at_kills}");
    assert!(unacked_at_kills > 0, "the kills hit messages in flight");
}

/// What the objects hold: each object's name and the sequences of its rows.
type Objects = Vec<(String, Vec<u64>)>;

/// Every message exactly once across all objects, each object's name carrying the first and
/// last sequence it holds, and no poison message stored.
fn assert_exactly_once(objects: &Objects, poisoned: &BTreeSet<u64>, total: usize) {
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for (name, seqs) in objects {
        let file = name.rsplit('/').next().unwrap();
        let (_, first, last) = naming::parse_object_name(file).unwrap_or_else(|| panic!("{name} is not a batch name"));
        assert_eq!(
            (seqs.iter().min().copied(), seqs.iter().max().copied()),
            (Some(first), Some(last)),
            "{name} is named by its first and last sequence"
        );
        for seq in seqs {
            if let Some(other) = seen.insert(*seq, name) {
                panic!("sequence {seq} is in {other} and in {name}");
            }
        }
    }
    let want: BTreeSet<u64> = (1..=total as u64).filter(|s| !poisoned.contains(s)).collect();
    let got: BTreeSet<u64> = seen.keys().copied().collect();
    let missing: Vec<_> = want.difference(&got).take(10).collect();
    let extra: Vec<_> = got.difference(&want).take(10).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}, unexpected {extra:?}");
}

/// Objects hold many messages each (batching batches), and there are objects on every
/// subject's partition.
fn assert_batched(objects: &Objects) {
    let rows: usize = objects.iter().map(|(_, s)| s.len()).sum();
    eprintln!("{} objects, {} rows each on average", objects.len(), rows / objects.len().max(1));
    assert!(objects.len() >= SUBJECTS, "objects on every partition: {}", objects.len());
    assert!(rows / objects.len() >= 100, "many messages per object: {} objects for {rows} rows", objects.len());
}

/// The stream sequences of the planted poison messages (published in order from 1).
fn poisoned(total: usize) -> BTreeSet<u64> {
    (0..total).filter(|i| poison(*i)).map(|i| i as u64 + 1).collect()
}

/// The DLQ holds the planted poison messages and nothing else.
async fn assert_dlq_holds_the_poison(e: &Env, dlq_stream: &str, poisoned: &BTreeSet<u64>, error_type: &str) {
    let records = read_stream(&e.js, dlq_stream).await;
    let mut seqs = BTreeSet::new();
    for (_, _, _, body) in &records {
        let doc: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(doc["error_type"], error_type, "{doc}");
        seqs.insert(doc["stream_sequence"].as_u64().unwrap());
    }
    assert_eq!(&seqs, poisoned, "the DLQ holds the poison messages");
    assert_eq!(records.len(), poisoned.len(), "one record each (Nats-Msg-Id deduplicates a repeated one)");
}

/// The tools venv's Python, with DuckDB and pyarrow (`cargo xtask setup`); fails the test
/// when it is missing.
fn python(test: &str) -> PathBuf {
    let python = sinks_testkit::tools_dir().join("venv/bin/python");
    let probe = std::process::Command::new(&python).args(["-c", "import duckdb, pyarrow"]).output();
    match probe {
        Ok(o) if o.status.success() => python,
        Ok(o) => cannot_run(test, format!("duckdb/pyarrow missing: {} (run `cargo xtask setup`)", text(&o))),
        Err(e) => cannot_run(test, format!("no Python at {}: {e} (run `cargo xtask setup`)", python.display())),
    }
}

/// Runs `sql` in DuckDB; the rows as JSON values.
fn duckdb(python: &Path, sql: &str) -> Vec<Vec<serde_json::Value>> {
    let script = "import duckdb, json, sys\nrows = duckdb.connect().execute(sys.argv[1]).fetchall()\nprint(json.dumps([list(r) for r in rows], default=str))";
    let out = std::process::Command::new(python).args(["-c", script, sql]).output().unwrap();
    assert!(out.status.success(), "duckdb failed on {sql}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Per-subject partitions by hour; objects close after 2 s of waiting.
fn batch_section(max_messages: u64, format: &str, compression: &str) -> serde_json::Value {
    let mut batch = json!({
        "format": format,
        "compression": compression,
        "max_messages": max_messages,
        "max_age_ms": 2000,
        "partition_template": "{stream}/{subject_token[2]}/dt={yyyy}-{mm}-{dd}/{hh}",
    });
    if format == "parquet" {
        batch["columns"] = json!([{"name": "n", "path": "n", "type": "int64", "nullable": false},
                                  {"name": "region", "path": "region", "type": "string"}]);
    }
    batch
}

/// The rows of every batch file below `root`, per file.
fn file_objects(root: &Path) -> Objects {
    sink_file::certify::batch_objects(root)
        .unwrap()
        .into_iter()
        .map(|(path, format, compression)| {
            let mut seqs = Vec::new();
            let file = std::fs::File::open(&path).unwrap();
            sinks_toolkit::batch::encode::read_rows(file, format, compression, false, |r| seqs.push(r.stream_sequence))
                .unwrap();
            (path.strip_prefix(root).unwrap().display().to_string(), seqs)
        })
        .collect()
}

#[tokio::test]
async fn file_batch_mode_stores_every_message_exactly_once_through_five_kill_9() {
    let python = python("file_batch_mode_stores_every_message_exactly_once_through_five_kill_9");
    let e = env().await;
    let dlq_stream = unique("LAKEDLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    publish(&e, 0, TOTAL, false).await;
    let configs: Vec<PathBuf> = [500u64, 1300, 3000, 700, 2500, 1000]
        .iter()
        .enumerate()
        .map(|(k, max)| {
            let sink = json!({"type": "file", "directory": e.out(), "payload_mode": "json_only", "mode": "batch",
                              "batch": batch_section(*max, "ndjson", "gzip")});
            e.write_config_json_as(&format!("config-{k}.json"), sink, extra(&dlq_subject))
        })
        .collect();
    run_with_five_kills(&e, &configs, TOTAL, &[]).await;
    let poisoned = poisoned(TOTAL);
    let objects = file_objects(&e.out());
    assert_exactly_once(&objects, &poisoned, TOTAL);
    assert_batched(&objects);
    assert_dlq_holds_the_poison(&e, &dlq_stream, &poisoned, "SerializationError").await;
    let partitions: BTreeSet<String> = objects.iter().map(|(n, _)| n.split('/').nth(1).unwrap().to_owned()).collect();
    assert_eq!(partitions.len(), SUBJECTS, "one partition per subject: {partitions:?}");

    // DuckDB reads the NDJSON objects (gzip) as they are: the right rows, the right values.
    let glob = format!("{}/**/*.ndjson.gz", e.out().display());
    let want_rows = (TOTAL - poisoned.len()) as u64;
    let want_sum: u64 = (0..TOTAL as u64).filter(|i| !poisoned.contains(&(i + 1))).sum();
    let rows = duckdb(
        &python,
        &format!(
            "select count(*), count(distinct stream_sequence), sum(payload.n), min(stream_sequence) \
             from read_json('{glob}', format = 'newline_delimited')"
        ),
    );
    assert_eq!(rows, [vec![json!(want_rows), json!(want_rows), json!(want_sum), json!(1)]]);
    let one = duckdb(
        &python,
        &format!(
            "select subject, stream, message_id, payload.region, payload.note from read_json('{glob}', \
             format = 'newline_delimited') where stream_sequence = 42"
        ),
    );
    assert_eq!(
        one,
        [vec![
            json!(format!("{}.orders.s1", e.subject_root)),
            json!(e.stream),
            json!("lake-41"),
            json!("r2"),
            json!("ünïcode")
        ]]
    );
}

#[tokio::test]
async fn s3_batch_mode_writes_parquet_exactly_once_through_five_kill_9() {
    let python = python("s3_batch_mode_writes_parquet_exactly_once_through_five_kill_9");
    let server = sinks_testkit::shared_s3().await.unwrap_or_else(|e| cannot_run("s3 batch", e));
    let h = S3Harness::new(server.endpoint, server.filer, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY);
    let bucket = h.bucket().await.unwrap();
    let e = env().await;
    let dlq_stream = unique("LAKEDLQ");
    let dlq_subject = format!("{}.dead", dlq_stream.to_lowercase());
    stream_with_subjects(&e.js, &dlq_stream, &[&dlq_subject]).await;
    publish(&e, 0, TOTAL, true).await;
    let section = |max: u64| {
        json!({"type": "s3", "bucket": bucket.name(), "prefix": "lake", "endpoint_url": h.endpoint(),
               "allow_http_for_local_testing": true, "region_name": "us-east-1", "credential_mode": "environment",
               "aws_access_key_id_env": KEY_ENV, "aws_secret_access_key_env": SECRET_ENV, "mode": "batch",
               "batch": batch_section(max, "parquet", "zstd")})
    };
    let configs: Vec<PathBuf> = [400u64, 1700, 900, 3000, 600, 2000]
        .iter()
        .enumerate()
        .map(|(k, max)| e.write_config_json_as(&format!("config-{k}.json"), section(*max), extra(&dlq_subject)))
        .collect();
    let creds = [(KEY_ENV, S3_ACCESS_KEY_ID.to_owned()), (SECRET_ENV, S3_SECRET_ACCESS_KEY.to_owned())];
    run_with_five_kills(&e, &configs, TOTAL, &creds).await;

    let mut config: sink_s3::S3SinkConfig = serde_json::from_value({
        let mut s = section(400);
        s.as_object_mut().unwrap().remove("type");
        s
    })
    .unwrap();
    config.credential_mode = sink_s3::CredentialMode::DefaultChain;
    let read_back = h.read_back(&config, bucket).unwrap();
    let local = e.dir.path().join("downloaded");
    let mut objects: Objects = Vec::new();
    for key in read_back.batch_object_keys().await.unwrap() {
        assert!(key.ends_with(".parquet"), "{key}");
        let mut file = read_back.download(&key).await.unwrap();
        let path = local.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::io::copy(&mut file, &mut std::fs::File::create(&path).unwrap()).unwrap();
        let mut seqs = Vec::new();
        let opened = std::fs::File::open(&path).unwrap();
        sinks_toolkit::batch::encode::read_rows(
            opened,
            sinks_toolkit::batch::Format::Parquet,
            sinks_toolkit::batch::BatchCompression::Zstd,
            false,
            |r| seqs.push(r.stream_sequence),
        )
        .unwrap();
        objects.push((key, seqs));
    }
    let poisoned = poisoned(TOTAL);
    assert_exactly_once(&objects, &poisoned, TOTAL);
    assert_batched(&objects);
    assert_dlq_holds_the_poison(&e, &dlq_stream, &poisoned, "SerializationError").await;

    // pyarrow reads the stable schema; DuckDB the rows and values.
    let first = local.join(&objects[0].0);
    let script = "import pyarrow.parquet as pq, json, sys\ns = pq.read_schema(sys.argv[1])\nprint(json.dumps([[f.name, str(f.type), f.nullable] for f in s]))";
    let out = std::process::Command::new(&python).args(["-c", script, first.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema,
        json!([
            ["subject", "string", false],
            ["stream", "string", false],
            ["stream_sequence", "int64", false],
            ["message_id", "string", true],
            ["timestamp", "timestamp[ns, tz=UTC]", true],
            ["headers", "string", true],
            ["payload_sha256", "string", false],
            ["payload", "string", false],
            ["n", "int64", false],
            ["region", "string", true]
        ])
    );
    let glob = format!("{}/**/*.parquet", local.display());
    let want_rows = (TOTAL - poisoned.len()) as u64;
    let want_sum: u64 = (0..TOTAL as u64).filter(|i| !poisoned.contains(&(i + 1))).sum();
    let rows = duckdb(
        &python,
        &format!(
            "select count(*), count(distinct stream_sequence), sum(n), count(distinct region) from read_parquet('{glob}')"
        ),
    );
    assert_eq!(rows, [vec![json!(want_rows), json!(want_rows), json!(want_sum), json!(3)]]);
    let one = duckdb(
        &python,
        &format!(
            "select message_id, region, json_extract_string(payload, '$.note'), headers is not null \
             from read_parquet('{glob}') where stream_sequence = 42"
        ),
    );
    assert_eq!(one, [vec![json!("lake-41"), json!("r2"), json!("ünïcode"), json!(true)]]);
}

/// Objects that stay open (`max_age_ms` ten minutes) hold their messages unacknowledged and
/// heartbeated past AckWait; SIGTERM commits them and acknowledges every message, exit 0,
/// with no redelivery. Reconcile then finds every message in its object.
#[tokio::test]
async fn sigterm_commits_the_open_objects_and_acknowledges_them() {
    let e = env().await;
    publish(&e, 0, 300, false).await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch",
                      "batch": {"max_messages": 100000, "max_age_ms": 600000, "partition_template": "{subject_token[2]}"}});
    let config = e.write_config_json(
        sink,
        json!({"consumer_management": {"ack_wait_seconds": 2, "max_ack_pending": 5000},
               "nats": {"drain_timeout_seconds": 10}}),
    );
    let run = Sink::start(&config, e.dir.path(), &[]);
    let delivered = wait_until(Duration::from_secs(60), || async { e.consumer_state().await == Some((0, 300)) }).await;
    assert!(delivered, "every message delivered and held; log:\n{}", run.logs());
    // Three AckWaits: only the heartbeats keep them from coming back.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(e.consumer_state().await, Some((0, 300)), "held, not acknowledged: nothing is committed yet");
    assert!(file_objects(&e.out()).is_empty(), "no object is visible before it is committed");
    let (code, log) = run.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("committing the open objects before stopping"), "{log}");
    assert!(e.settled().await, "every message acknowledged at the stop; log:\n{log}");
    let info = e.js.get_stream(&e.stream).await.unwrap().consumer_info(&e.consumer).await.unwrap();
    assert_eq!(info.num_redelivered, 0, "no message was redelivered");
    let objects = file_objects(&e.out());
    assert_eq!(objects.len(), SUBJECTS, "one object per subject");
    assert_exactly_once(&objects, &BTreeSet::new(), 300);

    let out = nats_sink(&["reconcile", config.to_str().unwrap()], e.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("present_equal=300 missing=0 conflict=0"), "{}", text(&out));
}

#[tokio::test]
async fn encrypted_payloads_stay_encrypted_in_rows_and_decrypt_line_by_line() {
    use base64::Engine;
    const KEY_B64_ENV: &str = "E2E_LAKE_PAYLOAD_KEY_B64";
    let e = env().await;
    publish(&e, 0, 40, false).await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch",
                      "batch": {"max_age_ms": 500, "partition_template": "{stream}"}});
    let config = e.write_config_json(
        sink,
        json!({"encryption": {"enabled": true, "key_id": "lake-1", "key_b64_env": KEY_B64_ENV, "format_version": 2}}),
    );
    let key = base64::engine::general_purpose::STANDARD.encode([0x44u8; 32]);
    let envs = [(KEY_B64_ENV, key.clone())];
    let run = Sink::start(&config, e.dir.path(), &envs);
    assert!(wait_until(Duration::from_secs(60), || e.settled()).await, "{}", run.logs());
    assert_eq!(run.terminate(), Some(0));
    let objects = sink_file::certify::batch_objects(&e.out()).unwrap();
    let mut plain = Vec::new();
    for (path, _, _) in &objects {
        let stored = std::fs::read_to_string(path).unwrap();
        assert!(!stored.contains("ünïcode"), "no plaintext in {}", path.display());
        let out = support::nats_sink_with_env(
            &["decrypt", config.to_str().unwrap(), path.to_str().unwrap()],
            e.dir.path(),
            &[(KEY_B64_ENV, key.as_str())],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        plain.extend(String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned));
    }
    plain.sort();
    let mut want: Vec<String> = (0..40).map(|i| String::from_utf8(payload(i, false).to_vec()).unwrap()).collect();
    want.sort();
    assert_eq!(plain, want, "every row decrypts to its published payload");
}

#[tokio::test]
async fn start_up_refuses_a_max_age_the_heartbeats_cannot_cover() {
    let e = env().await;
    let sink = json!({"type": "file", "directory": e.out(), "mode": "batch", "batch": {"max_age_ms": 60000}});
    let config = e.write_config_json(
        sink,
        json!({"delivery": {"in_progress": {"enabled": true, "interval_ms": 1000, "max_heartbeats": 5}}}),
    );
    let mut run = Sink::start(&config, e.dir.path(), &[]);
    let mut status = None;
    for _ in 0..600 {
        status = run.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = run.logs();
    let status = status.unwrap_or_else(|| panic!("nats-sink did not stop; log:\n{log}"));
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("sink.batch.max_age_ms"), "{log}");
}

#[test]
fn validate_prints_the_partition_templates_example_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lake.json");
    let doc = json!({
        "nats": {"url": "nats://127.0.0.1:4222", "stream": "ORDERS", "consumer": "lake", "subject": "orders.*.>"},
        "sink": {"type": "s3", "bucket": "lake-1", "mode": "batch",
                 "batch": {"format": "ndjson", "compression": "zstd",
                           "partition_template": "{stream}/{subject_token[1]}/{field:region}/{yyyy}"}},
    });
    std::fs::write(&config, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = nats_sink(&["validate", config.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = text(&out);
    let year = time::OffsetDateTime::now_utc().year();
    let want = format!(
        "partition template `{{stream}}/{{subject_token[1]}}/{{field:region}}/{{yyyy}}`: \
         ORDERS/x/_missing/{year}/ORDERS-00000000000000000001-00000000000000000001.ndjson.zst"
    );
    assert!(printed.contains(&want), "{printed}");
    assert!(printed.contains("batch mode: ndjson objects (zstd) of at most 10000 messages"), "{printed}");
}
