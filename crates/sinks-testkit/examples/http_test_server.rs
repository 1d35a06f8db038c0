//! A standalone ingestion endpoint for benchmarks and manual runs: the testkit's
//! [`HttpTestServer`] on a fixed or free loopback port, without request log or stored bodies,
//! so long runs stay small in memory.
//!
//! ```text
//! cargo run -p sinks-testkit --release --example http_test_server -- \
//!     [--port 8088] [--delay-ms 0] [--keep-bodies] [--flaky-every N [--retry-after S]]
//!
//! `--flaky-every N` answers 503 to the first request of every N-th key (by stream
//! sequence), with `Retry-After: S` when given.
//! ```
//!
//! Prints the ingest URL, then the record count every 5 seconds, until Ctrl-C.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::time::Duration;

use sinks_testkit::HttpTestServer;

fn arg_value(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1).map(|v| v.parse::<u64>()) {
        Some(Ok(v)) => Some(v),
        _ => {
            eprintln!("{name} needs a number");
            std::process::exit(2);
        }
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = u16::try_from(arg_value(&args, "--port").unwrap_or(0)).unwrap_or(0);
    let delay = Duration::from_millis(arg_value(&args, "--delay-ms").unwrap_or(0));
    let server = HttpTestServer::start_at(SocketAddr::from(([127, 0, 0, 1], port)), None).await?;
    server.set_request_log(false);
    server.set_keep_bodies(args.iter().any(|a| a == "--keep-bodies"));
    server.set_delay(delay);
    let retry_after = arg_value(&args, "--retry-after").map(|s| s.to_string());
    server.set_flaky_every(arg_value(&args, "--flaky-every"), retry_after.as_deref());
    println!("{}", server.url());
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => println!("records: {}", server.record_count()),
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    println!("records: {}", server.record_count());
    Ok(())
}
