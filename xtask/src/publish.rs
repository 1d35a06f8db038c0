//! `cargo xtask publish`: publishes demo JSON messages to a running JetStream server (the
//! README's "against your own NATS server" section). Errors are one line.

use anyhow::{Context, Result};
use async_nats::HeaderMap;

/// Options of `cargo xtask publish`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// NATS server URL.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    url: String,
    /// Subject to publish on (a stream must capture it).
    #[arg(long, default_value = "demo.orders.created")]
    subject: String,
    /// Number of messages.
    #[arg(long, default_value_t = 5)]
    count: usize,
    /// Publish this exact payload instead of generated JSON.
    #[arg(long)]
    payload: Option<String>,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let client = async_nats::connect(&args.url).await.with_context(|| format!("connecting to {}", args.url))?;
        let js = async_nats::jetstream::new(client);
        for i in 0..args.count {
            let body = args
                .payload
                .clone()
                .unwrap_or_else(|| format!(r#"{{"order_id":{i},"item":"widget","quantity":{}}}"#, i % 5 + 1));
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("demo-{}-{i}", std::process::id()).as_str());
            let ack = js
                .publish_with_headers(args.subject.clone(), headers, body.into())
                .await
                .context("publishing")?
                .await
                .with_context(|| {
                    format!(
                        "no stream stored {} (start `nats-sink run examples/quickstart.toml` first: it creates the DEMO stream)",
                        args.subject
                    )
                })?;
            println!("published seq={} stream={}", ack.sequence, ack.stream);
        }
        Ok(())
    })
}
