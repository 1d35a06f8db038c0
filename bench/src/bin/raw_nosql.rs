//! The NoSQL sink's benchmark ceiling: a hand-written JetStream → Oracle NoSQL loop on the
//! official SDK with no framework, making the same calls the sink makes for each message.
//!
//! One pull stream of the durable explicit-ack consumer feeds batches of up to BATCH
//! messages; IN_FLIGHT batches are written at a time (the sink's `max_in_flight_batches`),
//! each with CONCURRENCY puts in flight (the sink's `max_concurrent_requests`), then every
//! message of the batch is acked. Each message becomes one row in the sink's table layout
//! (`sink_key` STRING primary key, `event_json` JSON, `stored_at_epoch_ns` LONG): the key is
//! `stream-sequence:STREAM:SEQ`, the document holds the parsed payload, the subject, stream and
//! sequence, padded to about DOC_BYTES bytes (the size of the sink's event document), and the
//! put is the sink's: put if absent, the existing row asked back, durability COMMIT_SYNC, the
//! sink's request timeout, through a handle built the way the sink builds it.
//!
//! `raw_nosql NATS_URL STREAM CONSUMER COUNT BATCH IN_FLIGHT CONCURRENCY DOC_BYTES ENDPOINT
//! TABLE` creates TABLE with the sink's DDL, consumes COUNT messages, then idles until it is
//! killed (so that its peak RSS and CPU time can still be read).
#![allow(clippy::print_stderr)]

#[path = "support/batches.rs"]
mod batches;
#[path = "support/durable.rs"]
mod durable;

use std::time::Duration;

use async_nats::jetstream::Message;
use futures::{StreamExt, TryStreamExt};
use oracle_nosql_rust_sdk::types::{Durability, FieldValue, MapValue};
use oracle_nosql_rust_sdk::{Handle, HandleMode, PutRequest, TableRequest};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The sink's default request timeout.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The row one message becomes.
fn row(message: &Message, doc_bytes: usize, pad: &str) -> Result<MapValue, Error> {
    let info = message.info()?;
    let payload: serde_json::Value = serde_json::from_slice(&message.payload)?;
    let base = message.payload.len() + message.subject.len() + info.stream.len() + 80;
    let doc = serde_json::json!({
        "stream": info.stream,
        "stream_sequence": info.stream_sequence,
        "subject": message.subject.as_str(),
        "payload": payload,
        "pad": &pad[..doc_bytes.saturating_sub(base).min(pad.len())],
    });
    let stored_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let mut row = MapValue::new();
    row.put_str("sink_key", &format!("stream-sequence:{}:{}", info.stream, info.stream_sequence));
    row.put_field_value("event_json", FieldValue::Map(MapValue::from_json_object(&doc)?));
    row.put_i64("stored_at_epoch_ns", i64::try_from(stored_at)?);
    Ok(row)
}

async fn write(
    handle: &Handle,
    table: &str,
    batch: &[Message],
    concurrency: usize,
    doc: usize,
    pad: &str,
) -> Result<(), Error> {
    let rows: Vec<MapValue> = batch.iter().map(|m| row(m, doc, pad)).collect::<Result<_, _>>()?;
    futures::stream::iter(rows)
        .map(|row| async move {
            let result = PutRequest::new(table)
                .value(row)
                .if_absent()
                .return_row(true)
                .durability(Durability::COMMIT_SYNC)
                .timeout(&TIMEOUT)
                .execute(handle)
                .await?;
            // Written, or already there (a redelivery): either way the row is in the table.
            let _ = (result.version(), result.existing_value());
            Ok::<(), Error>(())
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await
}

fn usage() -> ! {
    eprintln!("usage: raw_nosql NATS_URL STREAM CONSUMER COUNT BATCH IN_FLIGHT CONCURRENCY DOC_BYTES ENDPOINT TABLE");
    std::process::exit(2);
}

/// The same multi-threaded Tokio runtime `nats-sink` runs on.
#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, stream, consumer, count, batch, in_flight, concurrency, doc_bytes, endpoint, table] = args.as_slice()
    else {
        usage()
    };
    let [count, batch, in_flight, concurrency, doc]: [usize; 5] =
        [count, batch, in_flight, concurrency, doc_bytes].map(|v| v.parse().unwrap_or_else(|_| usage()));
    let client = reqwest012::Client::builder().timeout(TIMEOUT).connect_timeout(TIMEOUT).build()?;
    let handle = Handle::builder()
        .endpoint(endpoint)?
        .timeout(TIMEOUT)?
        .reqwest_client(&client)?
        .mode(HandleMode::Onprem)?
        .build()
        .await?;
    let ddl = format!(
        "CREATE TABLE IF NOT EXISTS {table} (sink_key STRING, event_json JSON, stored_at_epoch_ns LONG, PRIMARY KEY(sink_key))"
    );
    TableRequest::new(table)
        .statement(&ddl)
        .execute(&handle)
        .await?
        .wait_for_completion_ms(&handle, 50_000, 100)
        .await?;
    let pad = "p".repeat(doc);
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, None).await?;
    let (handle, table, pad) = (&handle, table.as_str(), pad.as_str());
    batches::write_then_ack(&consumer, count, batch, in_flight, async |batch: &[Message]| {
        write(handle, table, batch, concurrency, doc, pad).await
    })
    .await?;
    js.client().flush().await?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
