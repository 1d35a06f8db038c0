//! A private OpenTelemetry Collector for one test: the OTLP receiver (gRPC and HTTP, on free
//! ports, optionally with TLS) and the file exporter, which writes what it receives as OTLP
//! JSON, one export request per line, to `traces.jsonl` and `metrics.jsonl`.
//!
//! The binary is `$OTELCOL_BIN`, else the small distribution `cargo xtask setup` builds into
//! `.local/tools/otelcol/bin/otelcol-nats-sinks`. A test can kill it (SIGKILL) and start it
//! again on the same ports; a watchdog kills it when the test process ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{first_file, free_port, tools_dir};

/// The variable naming the Collector binary.
pub const OTELCOL_ENV: &str = "OTELCOL_BIN";

/// Locates the Collector binary, or says what to run.
pub fn find_collector() -> Result<PathBuf, String> {
    first_file([
        std::env::var_os(OTELCOL_ENV).map(PathBuf::from),
        Some(tools_dir().join("otelcol/bin/otelcol-nats-sinks")),
    ])
    .ok_or_else(|| "no OpenTelemetry Collector: run `cargo xtask setup` (builds it) or set OTELCOL_BIN".into())
}

/// A receiver certificate and key (PEM files), for a Collector with TLS.
#[derive(Debug, Clone)]
pub struct CollectorTls {
    /// Server certificate chain.
    pub cert_file: PathBuf,
    /// Its private key.
    pub key_file: PathBuf,
}

/// A Collector process owned by a test. Killed on drop.
#[derive(Debug)]
pub struct Collector {
    dir: PathBuf,
    grpc: u16,
    http: u16,
    child: Option<Child>,
    bin: PathBuf,
}

impl Collector {
    /// Starts a Collector writing into `dir` (which must exist) and waits until both
    /// receivers accept connections.
    pub fn start(dir: &Path, tls: Option<&CollectorTls>) -> Result<Self, String> {
        let bin = find_collector()?;
        let (grpc, http) = (free_port(), free_port());
        let tls_block = tls.map_or_else(String::new, |t| {
            format!(
                "\n        tls:\n          cert_file: {}\n          key_file: {}",
                t.cert_file.display(),
                t.key_file.display()
            )
        });
        let config = format!(
            r#"receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}{tls_block}
      http:
        endpoint: 127.0.0.1:{http}{tls_block}
exporters:
  file/traces:
    path: {dir}/traces.jsonl
    format: json
    flush_interval: 100ms
  file/metrics:
    path: {dir}/metrics.jsonl
    format: json
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
"#,
            dir = dir.display()
        );
        std::fs::write(dir.join("otelcol.yaml"), config).map_err(|e| e.to_string())?;
        let mut collector = Self { dir: dir.to_path_buf(), grpc, http, child: None, bin };
        collector.spawn()?;
        Ok(collector)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("otelcol.log");
        let child = Command::new(&self.bin)
            .arg(format!("--config={}", self.dir.join("otelcol.yaml").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        crate::process::watch(&child);
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        for port in [self.grpc, self.http] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                if Instant::now() > deadline || !self.is_running() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    return Err(format!("the collector did not start; its log:\n{text}"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// `host:port` of the OTLP/gRPC receiver.
    pub fn grpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.grpc)
    }

    /// `host:port` of the OTLP/HTTP receiver.
    pub fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Kills the Collector with SIGKILL and waits for it to exit.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
    }

    /// Starts it again on the same ports.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }

    /// Every export request the file exporter wrote for `signal` (`traces` or `metrics`),
    /// parsed (a line still being written is skipped).
    pub fn exported(&self, signal: &str) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.join(format!("{signal}.jsonl"))).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The Collector's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("otelcol.log")).unwrap_or_default()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill();
    }
}
