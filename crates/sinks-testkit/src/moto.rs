//! A second S3 implementation for tests: moto's server (`moto_server`, PyPI `moto[server]`,
//! installed by `cargo xtask setup` into its own venv, `.local/tools/moto`), so what the S3
//! sink relies on is checked against more than SeaweedFS.
//!
//! [`Moto::start`] runs a private server on a free port, killed on drop and by a watchdog when
//! the owning process ends. It keeps everything in memory, accepts any credentials (a test
//! signs with [`crate::S3_ACCESS_KEY_ID`] / [`crate::S3_SECRET_ACCESS_KEY`] like on SeaweedFS)
//! and answers path-style requests; [`Moto::bucket`] creates a bucket (an unsigned
//! `PUT /<bucket>`, which moto takes). moto 5.2.6 refuses a second conditional create of a key
//! (`If-None-Match: *`) with 412 `PreconditionFailed`, which `object_store` reports as
//! `AlreadyExists`; `crates/sink-s3/tests/moto.rs` checks that, sequential and concurrent.
//!
//! moto checks the condition and then stores the body in two Python steps, not under one lock,
//! and `moto_server` serves each request on a thread of its own: on a loaded machine two racing
//! creates of one key both pass the check and both answer 200 (a CI run saw it: two winners in
//! one of 20 rounds of 16 racers; a script of 300 such rounds beside three busy loops, 2). A
//! Delta log commit won twice loses the first writer's commit. So the server is started through
//! moto's own entry point with werkzeug's threads turned off ([`LAUNCHER`]): requests are
//! served one at a time, a conditional create is then atomic as on S3 (the same script: 0 of
//! 300), and connections close after each response (werkzeug speaks HTTP/1.0 without threads).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::process::{Readiness, await_ready, first_file, free_port, on_path, tools_dir};

/// Environment variable naming a `moto_server` to use instead of the tools venv's: moto's
/// Python console script, whose `#!` interpreter the server is started with.
pub const MOTO_BIN_ENV: &str = "MOTO_SERVER_BIN";

/// The pinned moto release (`cargo xtask setup` installs `moto[server]` at this version).
pub const MOTO_VERSION: &str = "5.2.6";

/// Locates `moto_server`: [`MOTO_BIN_ENV`], the tools' moto venv, then `PATH`.
pub fn find_moto() -> Option<PathBuf> {
    first_file([
        std::env::var_os(MOTO_BIN_ENV).map(PathBuf::from),
        Some(tools_dir().join("moto/bin/moto_server")),
        on_path("moto_server"),
    ])
}

/// Runs `moto_server`'s own `main` (its arguments, signals and application) with werkzeug's
/// `run_simple` told `threaded=False`: one request at a time, so a check-then-store in moto
/// cannot interleave with another request's.
const LAUNCHER: &str = "import sys\n\
import moto.server as server\n\
from werkzeug.serving import run_simple\n\
server.run_simple = lambda *a, **k: run_simple(*a, **dict(k, threaded=False))\n\
server.main(sys.argv[1:])\n";

/// The interpreter line of a `moto_server` console script (`#!/path/to/venv/bin/python`, or
/// `#!/usr/bin/env python3`): the command that runs [`LAUNCHER`] in moto's environment.
fn interpreter(bin: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read(bin).map_err(|e| format!("cannot read {}: {e}", bin.display()))?;
    let first = text.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = std::str::from_utf8(first).ok().and_then(|l| l.strip_prefix("#!")).ok_or_else(|| {
        format!("{} is not a Python console script (no `#!` line): moto_server must be one", bin.display())
    })?;
    let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    if words.is_empty() {
        return Err(format!("{} has an empty `#!` line", bin.display()));
    }
    Ok(words)
}

/// How many times a start that dies before it is ready is retried on a fresh port.
const START_ATTEMPTS: u32 = 3;

/// A private `moto_server` process.
#[derive(Debug)]
pub struct Moto {
    port: u16,
    child: Option<Child>,
    log: tempfile::NamedTempFile,
}

impl Moto {
    /// Starts a private server on a free port and waits until it answers.
    pub async fn start() -> Result<Self, String> {
        let bin = find_moto().ok_or_else(|| {
            format!("no `moto_server`: run `cargo xtask setup` (installs PyPI moto[server]=={MOTO_VERSION}) or set {MOTO_BIN_ENV}")
        })?;
        let mut failures = Vec::new();
        for attempt in 1..=START_ATTEMPTS {
            match Self::spawn(&bin).await {
                Ok(server) => return Ok(server),
                Err(e) => {
                    eprintln!("sinks-testkit: moto start {attempt} of {START_ATTEMPTS} failed: {e}");
                    failures.push(e);
                }
            }
        }
        Err(format!("moto did not start in {START_ATTEMPTS} attempts: {}", failures.join(" | ")))
    }

    async fn spawn(bin: &std::path::Path) -> Result<Self, String> {
        let port = free_port();
        let log = tempfile::Builder::new().prefix("moto-").suffix(".log").tempfile().map_err(|e| e.to_string())?;
        let err = log.reopen().map_err(|e| e.to_string())?;
        let python = interpreter(bin)?;
        let child = Command::new(&python[0])
            .args(&python[1..])
            .args(["-c", LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start moto_server through {}: {e}", python.join(" ")))?;
        crate::process::watch(&child);
        let mut server = Self { port, child: Some(child), log };
        server.wait_ready().await?;
        Ok(server)
    }

    /// Waits until the server lists buckets.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(|e| e.to_string())?;
        let (endpoint, log) = (self.endpoint(), self.log.path().to_path_buf());
        // The last lines of the server's log.
        let tail = move || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().rev().take(5).collect();
            lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
        };
        let how = Readiness::new("moto_server", Duration::from_secs(60), &tail);
        await_ready(&mut self.child, how, async || {
            http.get(&endpoint).send().await.is_ok_and(|r| r.status().is_success())
        })
        .await
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT` (path-style requests).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a new, uniquely named bucket and returns its name.
    pub async fn bucket(&self) -> Result<String, String> {
        let name = format!("t-{}-{:016x}", std::process::id(), rand::random::<u64>());
        let url = format!("{}/{name}", self.endpoint());
        let response =
            reqwest::Client::new().put(&url).send().await.map_err(|e| format!("create bucket {name}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("create bucket {name}: moto answered {}", response.status()));
        }
        Ok(name)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        crate::process::kill_child(&mut self.child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(first_line: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), [first_line, b"\nimport sys\n"].concat()).unwrap();
        file
    }

    #[test]
    fn the_interpreter_is_the_console_scripts_hash_bang_line() {
        let venv = script(b"#!/opt/tools/moto/bin/python");
        assert_eq!(interpreter(venv.path()).unwrap(), ["/opt/tools/moto/bin/python"]);
        let env = script(b"#!/usr/bin/env python3");
        assert_eq!(interpreter(env.path()).unwrap(), ["/usr/bin/env", "python3"]);
    }

    #[test]
    fn a_file_that_is_not_a_console_script_is_refused_by_name() {
        for first in [&b"\x7fELF\x02\x01"[..], b"#!", b"#!   "] {
            let file = script(first);
            let e = interpreter(file.path()).unwrap_err();
            assert!(e.contains(&file.path().display().to_string()), "{e}");
        }
        let e = interpreter(std::path::Path::new("/nonexistent/moto_server")).unwrap_err();
        assert!(e.starts_with("cannot read /nonexistent/moto_server"), "{e}");
    }
}
