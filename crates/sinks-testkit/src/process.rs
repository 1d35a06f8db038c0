//! Process and port helpers: free ports, the workspace root, killing a child, and a
//! watchdog that kills a server when the process that started it ends (even by SIGKILL or a
//! test-runner timeout), so no test run leaves a server behind.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap()
}

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() && !dir.join(".git").exists() {
        if !dir.pop() {
            break;
        }
    }
    dir
}

/// Where `cargo xtask setup` puts the tools it installs (`.local/tools` of the workspace).
pub fn tools_dir() -> PathBuf {
    workspace_root().join(".local/tools")
}

/// The Python of the reference's venv (PyPI `nats-sinks[crypto]==0.4.3`, installed by
/// `cargo xtask setup`), or `NATS_SINKS_REFERENCE_PYTHON`; an error says what to run.
pub fn reference_python() -> Result<PathBuf, String> {
    first_file([
        std::env::var_os("NATS_SINKS_REFERENCE_PYTHON").map(PathBuf::from),
        Some(tools_dir().join("reference/bin/python")),
    ])
    .ok_or_else(|| "the Python reference is not installed: run `cargo xtask setup`".into())
}

/// The first of `candidates` that is a file.
pub(crate) fn first_file(candidates: impl IntoIterator<Item = Option<PathBuf>>) -> Option<PathBuf> {
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// `name` on `PATH`, if it is there.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// Kills `child` (SIGKILL) if there is one and waits for it to exit.
pub(crate) fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Starts a watchdog that SIGKILLs `child` once this process has ended, and ends by itself
/// when the child has. A server started for a test or a whole run thus never outlives its
/// owner, however the owner ends.
pub fn watch(child: &Child) {
    let script = "P=$1; C=$2; while kill -0 \"$P\" 2>/dev/null && kill -0 \"$C\" 2>/dev/null; do sleep 0.5; done; \
                  kill -9 \"$C\" 2>/dev/null";
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("watchdog")
        .arg(std::process::id().to_string())
        .arg(child.id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    // The watchdog is reaped by nobody while we run; a zombie `sh` costs nothing and goes
    // with this process. Without `sh` there is no watchdog, which only matters on a crash.
    drop(spawned);
}
