//! `cargo xtask bench --suite nosql`: the Oracle NoSQL sink against its raw ceiling on the
//! real Oracle NoSQL Database.
//!
//! One private KVLite 25.3.21 store and HTTP proxy (`sinks_testkit::KvLite`, with the server
//! JIT; the proxy on its default durability, the puts asking for COMMIT_SYNC themselves) for
//! every contender, each on a fresh table (a second run's rows would all exist already),
//! counted and dropped after its run. Rounds alternate the raw SDK loop (`raw_nosql`: the
//! same put-if-absent calls with the existing row asked back and COMMIT_SYNC, the sink's
//! concurrency, batch and batches in flight) and `nats-sink` with `ordering_key: none` (the
//! raw loop orders nothing either; both poll the table's DDL every 100 ms); each row is the median round, and the ratio of the two
//! is the one held to its target (≥ 0.8). Then `nats-sink` on the default config (ordered by
//! subject: one put in flight per subject of the 8) and, with `--reference`, the Python
//! reference. The report adds the store's and the proxy's peak RSS.

use std::path::Path;

use anyhow::{Result, bail};
use async_nats::jetstream::Context as Js;
use serde_json::json;
use sink_nosql::certify::{NoSqlHarness, unique_table};

use super::ceiling::RAW_NOSQL;
use super::proc::proc_stats;
use super::{Args, CONSUMER, Measurement, Programs, Reset, Stream, config, measure, median, publish_stream, write};

/// The NoSQL sink's default `max_concurrent_requests` (puts in flight per batch).
const CONCURRENCY: usize = 16;
/// Rounds of the raw loop against the unordered sink.
const ROUNDS: usize = 3;

/// The store's and the proxy's peak RSS (MiB) over the suite.
#[derive(Debug, Default)]
pub(super) struct StoreMemory {
    kvlite_mib: f64,
    proxy_mib: f64,
    document_bytes: usize,
}

/// Runs the suite; measurements are appended to `results`.
pub(super) async fn run(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    work: &Path,
    results: &mut Vec<Measurement>,
) -> Result<StoreMemory> {
    let stream = Stream { name: "BENCHNOSQL", subject_root: "benchnosql", total: args.nosql_messages, subjects: 8 };
    publish_stream(js, stream).await;
    let log = |name: &str| work.join(format!("{name}.log"));
    let kv = sinks_testkit::KvLite::start_with(&["-XX:TieredStopAtLevel=4"]).await.map_err(anyhow::Error::msg)?;
    let harness = NoSqlHarness::live(kv.endpoint());
    let endpoint = kv.endpoint().trim_start_matches("http://").to_owned();
    // Runs `cmd` on a fresh table, checks that it holds one row per message, drops it.
    let counted = |table: String| {
        let harness = harness.clone();
        async move {
            let rows = harness.rows(&table).await.map_err(anyhow::Error::msg)?;
            let _ = harness.drop_table(&table).await;
            anyhow::Ok(rows)
        }
    };
    let sink_config = |id: &str, table: &str, ordered: bool| {
        // The table's DDL is polled every 100 ms, as the raw loop polls it (the default, the
        // reference's 3 s, would add up to 3 s of start-up to a run of a few seconds).
        let sink = json!({"type": "oracle_nosql", "endpoint": endpoint, "table_name": table, "auto_create": true,
                          "table_poll_interval_ms": 100});
        let mut c = config(url, stream, args, sink);
        if !ordered {
            c["delivery"]["ordering_key"] = "none".into();
        }
        write(&work.join(format!("{id}.json")), &c)
    };
    // A first sink run (not counted) warms the store's JIT and gives the size of the sink's
    // event document, which the raw loop's documents are padded to.
    let table = unique_table("bench_warm_up");
    let path = sink_config("nosql-warm-up", &table, false)?;
    let mut cmd = std::process::Command::new(&programs.nats_sink);
    cmd.arg("run").arg(&path);
    measure("warm-up (not counted)", cmd, js, stream, &Reset::None, &log("nosql-warm-up")).await?;
    let rows = counted(table).await?;
    let document_bytes = rows.iter().map(|r| r["event_json"].to_string().len()).sum::<usize>() / rows.len().max(1);
    let mut raw_runs = Vec::new();
    let mut sink_runs = Vec::new();
    for round in 0..ROUNDS {
        let table = unique_table("bench_raw");
        let mut raw = std::process::Command::new(&programs.raw_nosql);
        raw.args([url, stream.name, CONSUMER])
            .args([stream.total, args.batch, args.in_flight, CONCURRENCY, document_bytes].map(|n| n.to_string()))
            .args([&kv.endpoint(), &table]);
        let name = format!("{RAW_NOSQL} (no framework)");
        raw_runs.push(measure(&name, raw, js, stream, &Reset::None, &log(&format!("raw-nosql-{round}"))).await?);
        check(&name, counted(table).await?.len(), stream)?;
        let table = unique_table("bench_none");
        let path = sink_config("nosql-none", &table, false)?;
        let mut cmd = std::process::Command::new(&programs.nats_sink);
        cmd.arg("run").arg(&path);
        let name = "nats-sink, nosql sink, ordering none";
        sink_runs.push(measure(name, cmd, js, stream, &Reset::None, &log(&format!("nosql-none-{round}"))).await?);
        check(name, counted(table).await?.len(), stream)?;
    }
    // The default contender's row comes first (the report finds rows by name prefix).
    let medians = [
        median(raw_runs, &format!("{RAW_NOSQL} (no framework)")),
        median(sink_runs, "nats-sink, nosql sink, ordering none"),
    ];
    let mut contenders = vec![("nosql", "nats-sink, nosql sink".to_owned(), programs.nats_sink.clone())];
    if let Some(py) = &programs.reference {
        contenders.push(("reference-nosql", "Python reference 0.4.3, nosql sink".to_owned(), py.clone()));
    }
    for (id, name, program) in contenders {
        let table = unique_table(&format!("bench_{}", id.replace('-', "_")));
        let path = sink_config(id, &table, true)?;
        let mut cmd = std::process::Command::new(program);
        cmd.arg("run").arg(&path);
        results.push(measure(&name, cmd, js, stream, &Reset::None, &log(id)).await?);
        check(&name, counted(table).await?.len(), stream)?;
    }
    results.extend(medians);
    let rss = |pid: Option<u32>| pid.map_or(0.0, |p| proc_stats(p).0 as f64 / 1024.0);
    let memory = StoreMemory { kvlite_mib: rss(kv.store_pid()), proxy_mib: rss(kv.proxy_pid()), document_bytes };
    drop(kv);
    Ok(memory)
}

fn check(name: &str, rows: usize, stream: Stream) -> Result<()> {
    if rows != stream.total {
        bail!("{name}: {rows} rows stored for {} messages", stream.total);
    }
    Ok(())
}

/// The suite's own lines of the report (the rows are in the main table and in the table of
/// contenders against their ceilings).
pub(super) fn render(memory: Option<&StoreMemory>) -> String {
    match memory {
        Some(m) => format!(
            "\n## NoSQL: the store\n\nKVLite 25.3.21 peak RSS {:.0} MiB, HTTP proxy peak RSS {:.0} MiB (server JIT; \
             `-Xmx256m` / `-Xmx128m`); the sink's event document averaged {} bytes, the raw loop's documents are padded \
             to it; every put is put if absent with the existing row asked back and COMMIT_SYNC, {CONCURRENCY} in flight \
             per batch.\n",
            m.kvlite_mib, m.proxy_mib, m.document_bytes
        ),
        None => String::new(),
    }
}
