//! The loopback OTLP/HTTP endpoint of the OpenTelemetry rows of the feature costs
//! (`features.rs`): every request is read and answered 200 with an empty body, which is what
//! a remote Collector costs the sink, without a Collector's own CPU on the same two cores.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Requests and bytes the loopback endpoint received.
#[derive(Debug, Default)]
pub(super) struct Received {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// Serves OTLP/HTTP on a free loopback port: every request is read and answered 200.
pub(super) async fn endpoint() -> Result<(String, Arc<Received>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let received = Arc::new(Received::default());
    let counts = Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if read.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    counts.requests.fetch_add(1, Ordering::Relaxed);
                    counts.bytes.fetch_add(length as u64, Ordering::Relaxed);
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if write.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((format!("http://{addr}"), received))
}

impl Received {
    /// Prints what the endpoint received.
    pub(super) fn log(&self) {
        let (requests, bytes) = (self.requests.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed));
        eprintln!("bench: the OTLP endpoint received {requests} requests, {:.1} MiB", bytes as f64 / 1048576.0);
    }
}
