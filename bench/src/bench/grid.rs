//! The grid suite (`--suite grid`): how the cost grows with the pipeline's settings. The
//! blackhole and the file sink (fsync off) at 1, 4 and 16 batches in flight (batch 500) and at
//! batch 50, 500 and 5,000 (4 in flight), then the default settings on a backlog four times as
//! long: messages/s and peak RSS, one row each. The RSS of a row must not depend on the
//! backlog, only on what is in flight.

use std::process::Command;

use anyhow::Result;
use async_nats::jetstream::Context as Js;
use serde_json::json;

use super::{Args, Measurement, Programs, Reset, Stream, config, measure, publish_stream, write};

/// `(batch_size, max_in_flight_batches)` of the grid, the default (500, 4) once.
const SETTINGS: [(usize, usize); 5] = [(500, 1), (500, 4), (500, 16), (50, 4), (5000, 4)];

/// One row of the grid.
#[derive(Debug)]
pub(super) struct Row {
    sink: &'static str,
    batch: usize,
    in_flight: usize,
    backlog: usize,
    measured: Measurement,
}

/// Runs the grid on its own streams (`args.messages`, and four times that for the backlog
/// rows).
pub(super) async fn run(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    work: &std::path::Path,
) -> Result<Vec<Row>> {
    let short = Stream { name: "BENCHGRID", subject_root: "benchgrid", total: args.messages, subjects: 8 };
    let long = Stream { name: "BENCHGRIDLONG", subject_root: "benchgridlong", total: args.messages * 4, subjects: 8 };
    publish_stream(js, short).await;
    publish_stream(js, long).await;
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let mut rows = Vec::new();
    let runs = SETTINGS.iter().map(|s| (short, *s)).chain([(long, (500, 4))]);
    for (stream, (batch, in_flight)) in runs {
        for sink in ["blackhole", "file"] {
            let section = match sink {
                "file" => json!({"type": "file", "directory": out, "fsync": false}),
                _ => json!({"type": "blackhole"}),
            };
            let mut cfg = config(url, stream, args, section);
            cfg["delivery"]["batch_size"] = batch.into();
            cfg["delivery"]["max_in_flight_batches"] = in_flight.into();
            // Room for every batch in flight and the one fetched ahead.
            cfg["consumer_management"] = json!({"max_ack_pending": batch * (in_flight + 2)});
            let id = format!("grid-{sink}-{batch}-{in_flight}-{}", stream.total);
            let path = write(&work.join(format!("{id}.json")), &cfg)?;
            let mut cmd = Command::new(&programs.nats_sink);
            cmd.arg("run").arg(&path);
            let name =
                format!("nats-sink, {sink} sink, batch {batch}, {in_flight} in flight, {} messages", stream.total);
            let reset = if sink == "file" { Reset::Dir(&out) } else { Reset::None };
            let measured = measure(&name, cmd, js, stream, &reset, &work.join(format!("{id}.log"))).await?;
            rows.push(Row { sink, batch, in_flight, backlog: stream.total, measured });
        }
    }
    Ok(rows)
}

/// The grid's section of the report.
pub(super) fn render(rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\n## Cost by pipeline setting (grid suite)\n\n| sink | batch | in flight | backlog | msgs/s | peak RSS MiB | CPU µs/msg |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.1} | {:.1} |\n",
            r.sink,
            r.batch,
            r.in_flight,
            r.backlog,
            r.measured.rate(),
            r.measured.peak_rss_mib(),
            r.measured.cpu_us_per_msg()
        ));
    }
    // The backlog check: the default settings on both backlogs, per sink.
    for sink in ["blackhole", "file"] {
        let at = |backlog: usize| {
            rows.iter().find(|r| r.sink == sink && r.batch == 500 && r.in_flight == 4 && r.backlog == backlog)
        };
        let (Some(short), Some(long)) =
            (rows.iter().map(|r| r.backlog).min().and_then(at), rows.iter().map(|r| r.backlog).max().and_then(at))
        else {
            continue;
        };
        md.push_str(&format!(
            "\n{sink}: peak RSS {:.1} MiB with a backlog of {} messages, {:.1} MiB with {} ({:+.1} MiB).",
            short.measured.peak_rss_mib(),
            short.backlog,
            long.measured.peak_rss_mib(),
            long.backlog,
            long.measured.peak_rss_mib() - short.measured.peak_rss_mib()
        ));
    }
    md.push('\n');
    md
}
