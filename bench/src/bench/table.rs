//! `--suite table` (only when named): batch mode's Delta table commits against the same
//! Parquet objects written without a table (issue 66's goal: ≥ 0.8× the plain rate), and
//! the files a long run leaves.
//!
//! The suite's stream (`--table-messages`, 256-byte JSON over 8 subjects) goes through the
//! file sink (fsync on) and the S3 sink (a private SeaweedFS, a fresh bucket each run) in
//! batch mode at the batch defaults (10,000 messages per object), into one partition
//! (`stream_name={stream}`, a template a table accepts, so both write the same objects): plain
//! and with `table: {format: delta}` (a checkpoint every 10 commits), in alternating rounds
//! (`--table-rounds`; which goes first alternates). Each round's table/plain rate ratio is
//! reported with the median and the spread. Then one file-sink table run of
//! `--table-long-messages` counts what the table directory holds by kind: data objects, log
//! entries, checkpoints, and the batch engine's own files (manifests).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::Result;
use serde_json::json;

use super::lake::{batch, lake_config, s3_section, seaweed_harness};
use super::{Bench, Measurement, Reset, S3_KEY_ENV, S3_SECRET_ENV, Stream, measure, publish_stream, quantile, write};

/// The table section every table contender writes.
fn with_table(mut sink: serde_json::Value) -> serde_json::Value {
    sink["batch"]["table"] = json!({"format": "delta", "checkpoint_interval": 10});
    sink
}

/// The sink section of a batch contender: Parquet into the one partition a table accepts.
fn parquet(sink: serde_json::Value) -> serde_json::Value {
    let mut sink = batch(sink, "parquet");
    sink["batch"]["partition_template"] = json!("stream_name={stream}");
    sink
}

/// One round of a destination: the plain run and the table run.
#[derive(Debug, Clone)]
pub(super) struct Round {
    /// `file` or `s3`.
    destination: &'static str,
    plain: Measurement,
    table: Measurement,
}

impl Round {
    fn ratio(&self) -> f64 {
        self.table.rate() / self.plain.rate()
    }
}

/// What a table directory holds, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FileCount {
    /// Events of the run.
    events: usize,
    /// Parquet objects outside `_delta_log/` (the table's data files).
    data: usize,
    /// `_delta_log/*.json` (one per table commit).
    log_entries: usize,
    /// `_delta_log/*.checkpoint.parquet`.
    checkpoints: usize,
    /// The batch engine's manifests (`*.manifest`, one per object).
    manifests: usize,
    /// Anything else (`_last_checkpoint`, a temporary file), by the first directory of its
    /// path (`.` for the root).
    other: BTreeMap<String, usize>,
}

impl FileCount {
    /// Counts `paths` (relative to the table's root, `/`-separated).
    fn of<'a>(events: usize, paths: impl IntoIterator<Item = &'a str>) -> Self {
        let mut c = Self { events, ..Self::default() };
        for path in paths {
            let name = path.rsplit('/').next().unwrap_or(path);
            if path.starts_with("_delta_log/") && name.ends_with(".checkpoint.parquet") {
                c.checkpoints += 1;
            } else if path.starts_with("_delta_log/") && name.len() == 25 && name.ends_with(".json") {
                c.log_entries += 1;
            } else if name.ends_with(".manifest") {
                c.manifests += 1;
            } else if !path.starts_with("_delta_log/") && !name.starts_with('.') && name.ends_with(".parquet") {
                c.data += 1;
            } else {
                let first = path.split_once('/').map_or(".", |(dir, _)| dir);
                *c.other.entry(first.to_owned()).or_default() += 1;
            }
        }
        c
    }

    /// Every file under `root`, counted.
    fn of_dir(events: usize, root: &Path) -> Result<Self> {
        let mut paths = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    dirs.push(entry.path());
                } else if let Ok(rel) = entry.path().strip_prefix(root) {
                    paths.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        Ok(Self::of(events, paths.iter().map(String::as_str)))
    }
}

/// Results of the table suite.
#[derive(Debug, Default)]
pub(super) struct Table {
    rounds: Vec<Round>,
    /// The long run's count, and the rounds' last table runs' (file, S3).
    counts: Vec<(String, FileCount)>,
}

/// Runs the suite (see the module docs).
pub(super) async fn run(b: &Bench<'_>) -> Result<Table> {
    let (args, js) = (b.args, b.js);
    let stream = Stream { name: "BENCHTBL", subject_root: "benchtbl", total: args.table_messages, subjects: 8 };
    publish_stream(js, stream).await;
    let mut out = Table::default();
    let scratch = tempfile::tempdir()?;
    let (s3, endpoint, harness) = seaweed_harness().await?;
    for round in 0..args.table_rounds {
        // The file sink, fsync on, each kind in a directory of its own (moved aside first).
        let dirs = [scratch.path().join("plain"), scratch.path().join("table")];
        let sections = |dir: &Path| parquet(json!({"type": "file", "directory": dir, "fsync": true}));
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        let mut runs: [Option<Measurement>; 2] = [None, None];
        for table in order {
            let dir = &dirs[usize::from(table)];
            let sink = if table { with_table(sections(dir)) } else { sections(dir) };
            let id = format!("file-{}-{}", if table { "table" } else { "plain" }, round + 1);
            runs[usize::from(table)] = Some(run_one(b, &id, sink, &Reset::Dir(dir), stream).await?);
            if table && round + 1 == args.table_rounds {
                out.counts.push(("file sink, last round".to_owned(), FileCount::of_dir(stream.total, dir)?));
            }
        }
        if let [Some(plain), Some(table)] = runs {
            out.rounds.push(Round { destination: "file", plain, table });
        }
        // The S3 sink, a fresh bucket each run.
        let mut runs: [Option<Measurement>; 2] = [None, None];
        for table in order {
            let bucket = harness.bucket().await.map_err(anyhow::Error::msg)?;
            let section = parquet(s3_section(&endpoint.endpoint, bucket.name()));
            let sink = if table { with_table(section) } else { section };
            let id = format!("s3-{}-{}", if table { "table" } else { "plain" }, round + 1);
            runs[usize::from(table)] = Some(run_one(b, &id, sink, &Reset::None, stream).await?);
            if table && round + 1 == args.table_rounds {
                let config = harness.config(&bucket);
                let keys = harness.read_back(&config, bucket).map_err(anyhow::Error::msg)?;
                let keys = keys.keys().await.map_err(anyhow::Error::msg)?;
                out.counts.push((
                    "S3 sink, last round".to_owned(),
                    FileCount::of(stream.total, keys.iter().map(String::as_str)),
                ));
            }
        }
        if let [Some(plain), Some(table)] = runs {
            out.rounds.push(Round { destination: "s3", plain, table });
        }
    }
    // The long run: one table, file sink.
    let long =
        Stream { name: "BENCHTBLLONG", subject_root: "benchtbllong", total: args.table_long_messages, subjects: 8 };
    if long.total > 0 {
        publish_stream(js, long).await;
        let dir = scratch.path().join("long");
        let sink = with_table(parquet(json!({"type": "file", "directory": &dir, "fsync": true})));
        let m = run_one(b, "file-table-long", sink, &Reset::Dir(&dir), long).await?;
        let count = FileCount::of_dir(long.total, &dir)?;
        out.counts.push((format!("file sink, long run ({:.0} msgs/s)", m.rate()), count));
        let _ = js.delete_stream(long.name).await;
    }
    let _ = js.delete_stream(stream.name).await;
    drop(s3);
    Ok(out)
}

/// One run of nats-sink on the config `{id}.json` (`sink` in batch mode's consumer
/// settings), the S3 credentials in its environment.
async fn run_one(
    b: &Bench<'_>,
    id: &str,
    sink: serde_json::Value,
    reset: &Reset<'_>,
    stream: Stream,
) -> Result<Measurement> {
    let config = lake_config(b.url, stream, b.args, sink, 20_000);
    let path = write(&b.work.join(format!("{id}.json")), &config)?;
    let mut cmd = Command::new(&b.programs.nats_sink);
    cmd.arg("run").arg(path);
    cmd.env(S3_KEY_ENV, sinks_testkit::S3_ACCESS_KEY_ID).env(S3_SECRET_ENV, sinks_testkit::S3_SECRET_ACCESS_KEY);
    measure(&format!("nats-sink, {id}"), cmd, b.js, stream, reset, &b.log(id)).await
}

/// The suite's part of the report.
pub(super) fn render(t: &Table) -> String {
    if t.rounds.is_empty() && t.counts.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\n## Delta table commits against plain Parquet objects (`--suite table`)\n\n\
         | destination | round | plain msgs/s | table msgs/s | table/plain | plain CPU µs/msg | table CPU µs/msg | table peak RSS MiB |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (i, r) in t.rounds.iter().enumerate() {
        let round = t.rounds[..i].iter().filter(|x| x.destination == r.destination).count() + 1;
        md.push_str(&format!(
            "| {} | {round} | {:.0} | {:.0} | {:.3} | {:.1} | {:.1} | {:.1} |\n",
            r.destination,
            r.plain.rate(),
            r.table.rate(),
            r.ratio(),
            r.plain.cpu_us_per_msg(),
            r.table.cpu_us_per_msg(),
            r.table.peak_rss_mib()
        ));
    }
    md.push_str("\n| destination | table/plain, median (lowest–highest) | goal |\n|---|---|---|\n");
    for destination in ["file", "s3"] {
        let ratios: Vec<f64> = t.rounds.iter().filter(|r| r.destination == destination).map(Round::ratio).collect();
        if let (Some(mid), Some(lo), Some(hi)) =
            (quantile(&ratios, 0.5), quantile(&ratios, 0.0), quantile(&ratios, 1.0))
        {
            let met = if mid >= 0.8 { "met" } else { "missed" };
            md.push_str(&format!("| {destination} | {mid:.3} ({lo:.3}–{hi:.3}) | ≥ 0.8: {met} |\n"));
        }
    }
    if !t.counts.is_empty() {
        md.push_str(
            "\n| table | events | data objects | manifests | log entries | checkpoints | other files |\n|---|---:|---:|---:|---:|---:|---|\n",
        );
        for (name, c) in &t.counts {
            let other: Vec<String> = c.other.iter().map(|(dir, n)| format!("{dir}: {n}")).collect();
            md.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {} | {} |\n",
                c.events,
                c.data,
                c.manifests,
                c.log_entries,
                c.checkpoints,
                other.join(", ")
            ));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_files_are_counted_by_kind() {
        let paths = [
            "_delta_log/00000000000000000000.json",
            "_delta_log/00000000000000000001.json",
            "_delta_log/00000000000000000010.checkpoint.parquet",
            "_delta_log/_last_checkpoint",
            "stream_name=BENCHTBL/part-0001.parquet",
            "stream_name=BENCHTBL/part-0002.parquet",
            "stream_name=BENCHTBL/_nats-sinks/BENCHTBL/00000000000000000001.manifest",
            "stream_name=BENCHTBL/.part-0003.parquet.tmp",
            "stream_name=BENCHTBL/.part-0004.parquet",
        ];
        let c = FileCount::of(20_000, paths);
        assert_eq!((c.data, c.log_entries, c.checkpoints, c.manifests), (2, 2, 1, 1));
        let other: Vec<(&str, usize)> = c.other.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(other, [("_delta_log", 1), ("stream_name=BENCHTBL", 2)]);
    }

    #[test]
    fn the_report_gives_each_destinations_median_ratio() {
        let m = |name: &str, wall_ms| Measurement::of_1000(name, wall_ms, 10);
        let rounds = vec![
            Round { destination: "file", plain: m("p", 100), table: m("t", 110) },
            Round { destination: "file", plain: m("p", 100), table: m("t", 200) },
            Round { destination: "file", plain: m("p", 100), table: m("t", 125) },
        ];
        let md = render(&Table { rounds, counts: Vec::new() });
        assert!(md.contains("| file | 0.800 (0.500–0.909) | ≥ 0.8: met |"), "{md}");
        assert!(!md.contains("| s3 |"), "{md}");
    }
}
