//! Process and port helpers.

use std::net::TcpListener;
use std::path::PathBuf;

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

/// Kills `child` (SIGKILL) if there is one and waits for it to exit.
pub(crate) fn kill_child(child: &mut Option<std::process::Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}
