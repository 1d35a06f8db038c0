//! `cargo xtask fuzz`: runs every cargo-fuzz target in `fuzz/` for a bounded time (not part
//! of CI). Needs a nightly toolchain (`rustup toolchain install nightly`); installs
//! `cargo-fuzz` when it is missing. Crashes are left in `fuzz/artifacts/<target>/` by
//! libFuzzer, and the run fails.

use std::process::Command;

use anyhow::{Context, Result, bail};

/// The fuzz targets (`fuzz/fuzz_targets/*.rs`).
const TARGETS: [&str; 2] = ["canonical_json", "verify_signature"];

/// Options of `cargo xtask fuzz`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Run only this target.
    #[arg(long)]
    target: Option<String>,
}

/// Runs the targets one after another, each for `--seconds`.
pub(crate) fn run(args: Args) -> Result<()> {
    let toolchains = Command::new("rustup").args(["toolchain", "list"]).output().context("running rustup")?;
    if !String::from_utf8_lossy(&toolchains.stdout).contains("nightly") {
        bail!("cargo fuzz needs a nightly toolchain: run `rustup toolchain install nightly`");
    }
    let installed = Command::new("cargo").args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if !installed {
        crate::cargo(&["install", "cargo-fuzz", "--locked"], &[])?;
    }
    let targets: Vec<&str> = match &args.target {
        Some(t) if TARGETS.contains(&t.as_str()) => vec![t.as_str()],
        Some(t) => bail!("unknown fuzz target `{t}` (targets: {})", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    let root = sinks_testkit::workspace_root();
    for target in targets {
        let max_time = format!("-max_total_time={}", args.seconds);
        eprintln!("$ cargo +nightly fuzz run {target} -- {max_time}");
        let status = Command::new("cargo")
            .args(["+nightly", "fuzz", "run", target, "--", &max_time, "-max_len=4096"])
            .current_dir(&root)
            .status()
            .context("running cargo fuzz")?;
        if !status.success() {
            bail!("fuzz target {target} failed (see fuzz/artifacts/{target}/)");
        }
    }
    Ok(())
}
