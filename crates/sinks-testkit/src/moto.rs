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

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{first_file, free_port, on_path, tools_dir};

/// Environment variable naming a `moto_server` binary to use instead of the tools venv's.
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
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        crate::process::watch(&child);
        let mut server = Self { port, child: Some(child), log };
        server.wait_ready().await?;
        Ok(server)
    }

    /// The last lines of the server's log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
    }

    /// Waits until the server lists buckets.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(|e| e.to_string())?;
        loop {
            if http.get(self.endpoint()).send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("moto_server exited ({status}): {}", self.log_tail()));
            }
            if Instant::now() > deadline {
                crate::process::kill_child(&mut self.child);
                return Err(format!("moto_server not ready after 60 s: {}", self.log_tail()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
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
