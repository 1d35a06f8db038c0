//! The fault harness as tests of the run (`cargo xtask test` runs them in nextest's slots
//! beside the other tests), with the `nats-sink` this test build made:
//!
//! - a CI-sized run of the file sink: every fault kind at least once (the plan's first pass),
//!   for `NATS_SINKS_JEPSEN_MINUTES` of faults (1.5 by default; `cargo xtask test --full`
//!   asks for 10); it fails on any sink violation;
//! - the deliberate break: the same harness with the workers acknowledging before they write
//!   (`--break-ack-before-write`, built into the test build through `sinks-bench`'s
//!   `fault-injection` feature); it passes only when the checker counts acked-unstored events,
//!   so a checker that cannot see a sink's loss fails it.
//!
//! Both need root for the network namespaces (CI runs as root). The table of each is in the
//! output and in `target/jepsen/report.md`. `cargo xtask jepsen` runs longer ones
//! (docs/reliability.md).

#![allow(clippy::print_stderr)]

use std::process::Command;

fn harness(args: &[&str]) -> (std::process::ExitStatus, String) {
    let bin = sinks_testkit::debug_nats_sink();
    assert!(bin.is_file(), "no nats-sink binary at {} (build it: cargo build -p sinks-bin)", bin.display());
    let out = Command::new(env!("CARGO_BIN_EXE_sinks-bench"))
        .arg("jepsen")
        .args(args)
        .arg("--bin")
        .arg(&bin)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run sinks-bench: {e}"));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{table}");
    (out.status, table)
}

#[test]
fn a_ci_sized_fault_run_of_the_file_sink_has_no_sink_violation() {
    let minutes = match std::env::var(sinks_testkit::JEPSEN_MINUTES_ENV) {
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{}={text:?} is not a number of minutes", sinks_testkit::JEPSEN_MINUTES_ENV)),
        Err(_) => sinks_testkit::JEPSEN_CI_MINUTES,
    };
    let (status, table) = harness(&[&format!("--minutes={minutes}"), "--seed=1", "--sinks=file"]);
    assert!(status.success(), "the fault harness failed ({status}): its table above names each violation");
    assert!(table.contains("no sink violation"), "no verdict in the harness's output:\n{table}");
}

#[test]
fn the_harness_catches_a_sink_that_acknowledges_before_it_writes() {
    // A short run of two kinds (a paused worker, a step-down); one event in 7 never written.
    let (status, table) = harness(&[
        "--minutes=0.1",
        "--seed=2",
        "--sinks=file",
        "--faults=sink-pause,step-down",
        "--break-ack-before-write=7",
    ]);
    assert!(status.success(), "the harness did not catch the deliberate break ({status}):\n{table}");
    assert!(table.contains("the deliberate break was caught: acked-unstored"), "{table}");
}
