//! A private nats-server for the binary's tests, as a sink written outside nats-sinks starts
//! one: the `nats-server` that `NATS_SERVER_BIN` names (else the one on the `PATH`), with
//! JetStream, on a port it picks itself (`-p -1`, read back from its ports file), its store
//! in a temporary directory; killed when dropped. Plus unique names and waiting.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, Context};

/// A running nats-server of one test.
pub struct NatsServer {
    child: Child,
    url: String,
    _store: tempfile::TempDir,
}

impl NatsServer {
    /// Starts the server and waits until it says where clients connect.
    pub fn start() -> Self {
        let bin = std::env::var_os("NATS_SERVER_BIN").map_or_else(|| PathBuf::from("nats-server"), PathBuf::from);
        let store = tempfile::tempdir().expect("a temporary directory");
        let ports = store.path().join("ports");
        std::fs::create_dir(&ports).expect("the ports directory");
        let child = Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", "-1", "-sd"])
            .arg(store.path().join("jetstream"))
            .arg("-ports_file_dir")
            .arg(&ports)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {} (NATS_SERVER_BIN, or nats-server on PATH): {e}", bin.display())
            });
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = loop {
            let file = std::fs::read_dir(&ports).ok().and_then(|mut d| d.next()).and_then(Result::ok);
            let client = file
                .and_then(|f| std::fs::read(f.path()).ok())
                .and_then(|text| serde_json::from_slice::<serde_json::Value>(&text).ok())
                .and_then(|ports| ports["nats"][0].as_str().map(str::to_owned));
            if let Some(url) = client {
                break url;
            }
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Self { child, url, _store: store }
    }

    /// Where clients connect (`nats://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A JetStream context on a new connection.
    pub async fn js(&self) -> Context {
        jetstream::new(async_nats::connect(&self.url).await.expect("connect to nats-server"))
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A name no other test of any process uses: `prefix`, the process id and a counter.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates stream `name` over `subjects`.
pub async fn stream_with_subjects(js: &Context, name: &str, subjects: &[&str]) {
    let config = jetstream::stream::Config {
        name: name.to_owned(),
        subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    };
    js.create_stream(config).await.expect("create the stream");
}

/// Polls `check` every 100 ms until it holds (true) or `timeout` passes (false).
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
