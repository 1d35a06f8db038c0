//! `cargo xtask bench --compare REV`: the core contenders of two builds of `nats-sink` (a
//! base revision and the work tree) in alternating pairs on one machine in one run, so that a
//! change to the forward path is measured against what it changes, not against a figure from
//! another day.
//!
//! xtask builds both file-only release binaries and the raw consume + ack ceiling, then runs
//! this with their paths. One private nats-server, one stream; each round runs the ceiling,
//! then every contender once per build, the build that goes first alternating from round to
//! round (the machine's drift then falls on both sides alike). A contender's figures are its
//! rate and CPU per message; each round gives the work/base ratio of both, and the ratio of
//! each build to the round's ceiling. The report prints the median of each ratio with its
//! spread (lowest and highest round) and writes it to `target/bench/compare.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};
use serde_json::json;
use sinks_testkit::NatsServer;

use super::{CONSUMER, Measurement, Reset, Stream, ceiling, measure, publish_stream, write};

/// Options of `sinks-bench compare` (xtask passes the binaries it built).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The base revision's `nats-sink` (file-only release build).
    #[arg(long)]
    base: PathBuf,
    /// The work tree's `nats-sink` (file-only release build).
    #[arg(long)]
    work: PathBuf,
    /// The raw consume + ack ceiling (`raw_consume`).
    #[arg(long)]
    raw: PathBuf,
    /// What the base is (the revision as given), for the report.
    #[arg(long, default_value = "base")]
    base_label: String,
    /// Rounds: each runs the ceiling once and every contender once per build.
    #[arg(long, default_value_t = 5)]
    pairs: usize,
    /// Messages of the blackhole stream (the framework's overhead).
    #[arg(long, default_value_t = 200_000)]
    blackhole_messages: usize,
    /// Messages of the file sink's stream (fsync off and on).
    #[arg(long, default_value_t = 50_000)]
    file_messages: usize,
    /// `delivery.batch_size`.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// Only the contenders whose id contains this (`blackhole`, `file-nofsync`, `file-fsync`,
    /// `file`).
    #[arg(long)]
    only: Option<String>,
    /// Record every measured process with `perf` (`target/bench/compare/<contender>-<side>.profile.txt`
    /// holds its top frames, as `cargo xtask bench --profile` writes them).
    #[arg(long)]
    profile: bool,
}

/// One contender: a name and the sink section it runs with.
struct Contender {
    id: &'static str,
    stream: Stream,
    sink: serde_json::Value,
}

/// One round's measurements of one contender: the round's ceiling, the base, the work tree.
struct Round {
    raw: Measurement,
    base: Measurement,
    work: Measurement,
}

/// Runs the comparison and prints (and writes) its table.
pub(crate) fn run(args: Args) -> Result<()> {
    for (what, path) in [("base", &args.base), ("work", &args.work), ("raw", &args.raw)] {
        if !path.exists() {
            bail!("the {what} program {} does not exist (cargo xtask bench --compare builds it)", path.display());
        }
    }
    if args.profile {
        super::profile::enable()?;
    }
    let root = sinks_testkit::workspace_root();
    let work_dir = root.join("target/bench/compare");
    std::fs::create_dir_all(&work_dir)?;
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    let blackhole = Stream { name: "CMPBH", subject_root: "cmpbh", total: args.blackhole_messages, subjects: 8 };
    let files = Stream { name: "CMPFILE", subject_root: "cmpfile", total: args.file_messages, subjects: 8 };
    let contenders = [
        Contender { id: "blackhole", stream: blackhole, sink: json!({"type": "blackhole"}) },
        Contender {
            id: "file-nofsync",
            stream: files,
            sink: json!({"type": "file", "directory": out, "fsync": false}),
        },
        Contender { id: "file-fsync", stream: files, sink: json!({"type": "file", "directory": out, "fsync": true}) },
    ];
    let contenders: Vec<Contender> =
        contenders.into_iter().filter(|c| args.only.as_deref().is_none_or(|o| c.id.contains(o))).collect();
    if contenders.is_empty() {
        bail!("--only {} names no contender (blackhole, file-nofsync, file-fsync)", args.only.as_deref().unwrap_or(""));
    }
    let rt = tokio::runtime::Runtime::new()?;
    let rounds = rt.block_on(async {
        let server = NatsServer::start();
        let js = server.js().await;
        let url = server.url();
        for stream in [blackhole, files] {
            if contenders.iter().any(|c| c.stream.name == stream.name) {
                publish_stream(&js, stream).await;
            }
        }
        let mut rounds: Vec<Vec<Round>> = contenders.iter().map(|_| Vec::new()).collect();
        for round in 0..args.pairs {
            for (c, contender) in contenders.iter().enumerate() {
                let path = write(&work_dir.join(format!("{}.json", contender.id)), &config(&url, contender, &args))?;
                let log = |side: &str| work_dir.join(format!("{}-{side}.log", contender.id));
                let reset = if contender.id.starts_with("file") { Reset::Dir(&out) } else { Reset::None };
                let mut raw = Command::new(&args.raw);
                raw.arg(&url).arg(contender.stream.name).arg(CONSUMER);
                raw.args([contender.stream.total.to_string(), args.batch.to_string()]);
                let raw = measure(ceiling::RAW_CONSUME, raw, &js, contender.stream, &Reset::None, &log("raw")).await?;
                let run = async |side: &str, program: &Path| {
                    let mut cmd = Command::new(program);
                    cmd.arg("run").arg(&path);
                    let name = format!("{} ({side}, round {})", contender.id, round + 1);
                    measure(&name, cmd, &js, contender.stream, &reset, &log(side)).await
                };
                // The build that goes first alternates, so that neither always runs on a
                // machine the other has just warmed (or dirtied).
                let (base, work) = if round % 2 == 0 {
                    let base = run("base", &args.base).await?;
                    (base, run("work", &args.work).await?)
                } else {
                    let work = run("work", &args.work).await?;
                    (run("base", &args.base).await?, work)
                };
                rounds[c].push(Round { raw, base, work });
            }
        }
        anyhow::Ok(rounds)
    })?;
    let report = render(&args.base_label, &contenders.iter().map(|c| c.id).collect::<Vec<_>>(), &rounds);
    println!("{report}");
    std::fs::write(work_dir.join("compare.md"), &report)?;
    eprintln!("compare: the table is in {}", work_dir.join("compare.md").display());
    Ok(())
}

/// The config of `contender` (only what the bench's other configs set).
fn config(url: &str, contender: &Contender, args: &Args) -> serde_json::Value {
    let stream = contender.stream;
    json!({
        "nats": {"url": url, "stream": stream.name, "consumer": CONSUMER, "subject": format!("{}.>", stream.subject_root)},
        "delivery": {"batch_size": args.batch, "batch_timeout_ms": 100, "max_in_flight_batches": 4},
        "logging": {"level": "WARNING"},
        "sink": contender.sink,
    })
}

/// The median of `values` with the lowest and the highest, as `m (lo–hi)`.
fn spread(values: &mut [f64]) -> String {
    if values.is_empty() {
        return "–".to_owned();
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    format!("{median:.3} ({:.3}–{:.3})", values[0], values[n - 1])
}

/// The report: per contender, the work/base ratios of rate and CPU per message, and each
/// build's rate against the round's ceiling.
fn render(base_label: &str, ids: &[&str], rounds: &[Vec<Round>]) -> String {
    let mut out = String::from(
        "| contender | rounds | rate work/base | CPU per message work/base | base/ceiling | work/ceiling |\n\
         |---|---:|---|---|---|---|\n",
    );
    for (id, rounds) in ids.iter().zip(rounds) {
        let ratio = |f: &dyn Fn(&Round) -> f64| spread(&mut rounds.iter().map(f).collect::<Vec<_>>());
        out.push_str(&format!(
            "| {id} | {} | {} | {} | {} | {} |\n",
            rounds.len(),
            ratio(&|r| r.work.rate() / r.base.rate()),
            ratio(&|r| r.work.cpu_us_per_msg() / r.base.cpu_us_per_msg()),
            ratio(&|r| r.base.rate() / r.raw.rate()),
            ratio(&|r| r.work.rate() / r.raw.rate()),
        ));
    }
    out.push_str(&format!(
        "\nbase: {base_label}; work: the work tree. Each cell: the median of the rounds (lowest–highest). \
         A rate ratio above 1 or a CPU ratio below 1 means the work tree is faster.\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(wall_ms: u64, cpu_ms: u64) -> Measurement {
        Measurement::of_1000("", wall_ms, cpu_ms)
    }

    #[test]
    fn the_spread_is_the_median_with_the_lowest_and_the_highest() {
        assert_eq!(spread(&mut [1.2, 0.9, 1.0]), "1.000 (0.900–1.200)");
        assert_eq!(spread(&mut [1.0, 2.0]), "1.500 (1.000–2.000)");
        assert_eq!(spread(&mut []), "–");
    }

    #[test]
    fn a_slower_work_tree_shows_as_a_rate_ratio_below_one() {
        // The work tree takes 1.25 times as long and 1.5 times the CPU in every round.
        let rounds =
            vec![(0..3).map(|_| Round { raw: m(800, 400), base: m(1000, 800), work: m(1250, 1200) }).collect()];
        let table = render("HEAD~1", &["blackhole"], &rounds);
        let row = table.lines().find(|l| l.starts_with("| blackhole")).unwrap();
        assert_eq!(
            row,
            "| blackhole | 3 | 0.800 (0.800–0.800) | 1.500 (1.500–1.500) | 0.800 (0.800–0.800) | 0.640 (0.640–0.640) |"
        );
    }
}
