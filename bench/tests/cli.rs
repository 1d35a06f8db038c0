//! The commands `cargo xtask` forwards to `sinks-bench` exist, with the options `cargo xtask
//! test` passes. This test also makes `cargo nextest run --workspace` build the binary
//! (`CARGO_BIN_EXE_sinks-bench`) with the test build's profile and features, which `cargo
//! xtask test` then runs instead of compiling the product again for `cargo run`.

use std::process::Command;

/// The help text of `sinks-bench ARGS… --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sinks-bench"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("cannot run sinks-bench: {e}"));
    assert!(out.status.success(), "sinks-bench {args:?} --help failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_forwarded_command_is_there_and_reads_as_cargo_xtask() {
    let top = help(&[]);
    for command in ["certify", "bench", "latency", "soak", "jepsen", "config-reference", "skips"] {
        assert!(top.contains(command), "`{command}` missing from:\n{top}");
    }
    assert!(top.contains("Usage: cargo xtask"), "{top}");
}

#[test]
fn the_options_cargo_xtask_test_passes_exist() {
    let certify = help(&["certify"]);
    for option in ["--sink", "--messages", "--kills", "--graceful-messages", "--results"] {
        assert!(certify.contains(option), "certify has no {option}:\n{certify}");
    }
    let soak = help(&["soak"]);
    for option in ["--minutes", "--seed", "--sinks", "--rate", "--bin"] {
        assert!(soak.contains(option), "soak has no {option}:\n{soak}");
    }
    let jepsen = help(&["jepsen"]);
    for option in ["--minutes", "--seed", "--sinks", "--faults", "--bin", "--break-ack-before-write"] {
        assert!(jepsen.contains(option), "jepsen has no {option}:\n{jepsen}");
    }
    assert!(help(&["config-reference"]).contains("--bless"));
    assert!(help(&["bench"]).contains("--suite"));
    let latency = help(&["latency"]);
    for option in ["--sinks", "--workers", "--loads", "--duration", "--reference", "--nats-sink", "--max-only"] {
        assert!(latency.contains(option), "latency has no {option}:\n{latency}");
    }
}
