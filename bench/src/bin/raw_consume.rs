//! The benchmark ceiling: a plain async-nats pull consumer that acks every message and does
//! nothing else. `raw_consume URL STREAM CONSUMER COUNT BATCH` binds (or creates) the durable
//! explicit-ack consumer, consumes COUNT messages with continuous pulls of BATCH, then idles
//! until it is killed (so its peak RSS and CPU time can still be read).
#![allow(clippy::print_stderr)]

#[path = "support/durable.rs"]
mod durable;

use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), async_nats::Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, stream, consumer, count, batch] = args.as_slice() else {
        eprintln!("usage: raw_consume URL STREAM CONSUMER COUNT BATCH");
        std::process::exit(2);
    };
    let (count, batch): (usize, usize) = (count.parse()?, batch.parse()?);
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, None).await?;
    let mut messages = consumer.stream().max_messages_per_batch(batch).messages().await?;
    let mut seen = 0;
    while let Some(message) = messages.next().await {
        message?.ack().await?;
        seen += 1;
        if seen == count {
            break;
        }
    }
    js.client().flush().await?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
