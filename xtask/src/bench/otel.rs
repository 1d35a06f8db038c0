//! The OpenTelemetry variants of the blackhole benchmark (`cargo xtask bench --suite core
//! --only blackhole`, or `--only otel`), measured like metrics on / off: each variant side by
//! side with its baseline, ten pairs, start order alternating; the median rate ratio (scaled
//! by the encryption control of the same run) and the median ratio of the sink's CPU per
//! message count.
//!
//! | pair | baseline | variant |
//! |---|---|---|
//! | off | no `opentelemetry` section | the section with an endpoint and everything disabled |
//! | traces | metrics off | `traces.enabled`, every message sampled (`sample_ratio` 1.0) |
//! | OTLP metrics | metrics on | metrics on and exported over OTLP/HTTP every second |
//!
//! The exports go to a loopback OTLP/HTTP endpoint in this process that reads each request
//! and answers 200 with an empty body: what a remote Collector costs the sink, without a
//! Collector's own CPU on the same two cores.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use async_nats::jetstream::Context as Js;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::{Measurement, Stream, quantile, side_by_side, write};

/// Pairs per variant.
const PAIRS: usize = 10;

/// `(title, baseline label, variant label, target)`.
const VARIANTS: [(&str, &str, &str, &str); 3] = [
    ("opentelemetry section present, everything disabled / absent", "otel absent", "otel disabled", "≥ 0.97"),
    ("traces on at 100 % sampling / off", "traces off", "traces on", "≥ 0.90"),
    ("OTLP metrics on / off (metrics on in both)", "metrics on, OTLP off", "metrics on, OTLP on", "≥ 0.97"),
];

/// Requests and bytes the loopback endpoint received.
#[derive(Debug, Default)]
struct Received {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// Serves OTLP/HTTP on a free loopback port: every request is read and answered 200.
async fn endpoint() -> Result<(String, Arc<Received>)> {
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

/// Runs the pairs of every variant; `off` is the blackhole config of the metrics-off side.
/// The measurements go into `results`, named by [`side_by_side`].
pub(super) async fn run(
    program: &Path,
    off: &Value,
    js: &Js,
    stream: Stream,
    work: &Path,
    results: &mut Vec<Measurement>,
) -> Result<()> {
    let (url, received) = endpoint().await?;
    let mut disabled = off.clone();
    disabled["opentelemetry"] = json!({"endpoint": url, "metrics": {"enabled": false}, "traces": {"enabled": false}});
    let mut traced = off.clone();
    traced["opentelemetry"] = json!({"endpoint": url, "traces": {"enabled": true, "sample_ratio": 1.0}});
    let mut metrics_on = off.clone();
    metrics_on["metrics"] = json!({"enabled": true});
    let mut exported = metrics_on.clone();
    exported["opentelemetry"] = json!({"endpoint": url, "metrics": {"enabled": true, "interval_ms": 1000}});
    // The variants read through the other durable consumer of the pair.
    for variant in [&mut disabled, &mut traced, &mut exported] {
        variant["nats"]["consumer"] = json!(super::SIDE_VARIANT);
    }
    let configs = [(off, &disabled), (off, &traced), (&metrics_on, &exported)];
    for (i, ((base, variant), (_, base_label, variant_label, _))) in configs.iter().zip(VARIANTS).enumerate() {
        let base_path = write(&work.join(format!("blackhole-otel-{i}-base.json")), base)?;
        let variant_path = write(&work.join(format!("blackhole-otel-{i}-variant.json")), variant)?;
        for round in 0..PAIRS {
            let sides = [(base_label, base_path.as_path()), (variant_label, variant_path.as_path())];
            let (a, b) = side_by_side(program, sides, js, stream, round, work).await?;
            results.extend([a, b]);
        }
    }
    let (requests, bytes) = (received.requests.load(Ordering::Relaxed), received.bytes.load(Ordering::Relaxed));
    eprintln!("bench: the OTLP endpoint received {requests} requests, {:.1} MiB", bytes as f64 / 1048576.0);
    Ok(())
}

/// The OpenTelemetry section of the report: per variant, the median rate ratio side by side,
/// scaled by the encryption control (`control`: its side-by-side ratios; its ratio alone comes
/// from the median runs in `results`), and the median CPU bound.
pub(super) fn render(results: &[Measurement], control: &[f64]) -> String {
    let control_side = quantile(control, 0.5);
    let rate_of = |prefix: &str| results.iter().find(|m| m.name.starts_with(prefix)).map(Measurement::rate);
    let control_alone = rate_of("nats-sink, blackhole sink, encrypted (median")
        .zip(rate_of("nats-sink, blackhole sink (median"))
        .map(|(encrypted, plain)| encrypted / plain);
    let find = |label: &str, round: usize| {
        let name = format!("nats-sink, blackhole sink, side by side, {label} (round {})", round + 1);
        results.iter().find(|m| m.name == name)
    };
    let mut md = String::from(
        "\n## OpenTelemetry overhead (blackhole, side by side)\n\n| variant / baseline | pairs | rate ratio (median) | range | scaled by the control | sink CPU baseline / variant (median) | target |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (title, base, variant, target) in VARIANTS {
        let pairs: Vec<(f64, f64)> = (0..PAIRS)
            .filter_map(|r| find(base, r).zip(find(variant, r)))
            .map(|(a, b)| (b.rate() / a.rate(), a.cpu_us_per_msg() / b.cpu_us_per_msg()))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let rates: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let cpu: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let median = quantile(&rates, 0.5).unwrap_or(f64::NAN);
        let scaled = match (control_side, control_alone) {
            (Some(side), Some(alone)) if side < 1.0 && alone < 1.0 => {
                format!("{:.3}", median.powf(alone.ln() / side.ln()))
            }
            _ => "—".to_owned(),
        };
        md.push_str(&format!(
            "| {title} | {} | {median:.3} | {:.3}–{:.3} | {scaled} | {:.3} | {target} |\n",
            pairs.len(),
            quantile(&rates, 0.0).unwrap_or(f64::NAN),
            quantile(&rates, 1.0).unwrap_or(f64::NAN),
            quantile(&cpu, 0.5).unwrap_or(f64::NAN),
        ));
    }
    md
}
