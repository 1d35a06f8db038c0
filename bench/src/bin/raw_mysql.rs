//! The MySQL benchmark baseline: a hand-written JetStream → MySQL loop with no framework.
//! It pulls a batch, builds one row per message in the MySQL sink's default column layout
//! (its metadata object padded to the size of the sink's standard document, about 1.4 KB, so
//! both write the same number of bytes: MariaDB's JSON checks cost in proportion), writes the batch
//! with one prepared multi-row `INSERT … ON DUPLICATE KEY UPDATE` in one transaction, acks
//! every message, and repeats, one batch at a time.
//!
//! `raw_mysql NATS_URL STREAM CONSUMER COUNT BATCH MYSQL_PORT USER PASSWORD TABLE` creates
//! TABLE with the sink's own DDL, consumes COUNT messages, then idles until it is killed.
#![allow(clippy::print_stderr)]

#[path = "support/durable.rs"]
mod durable;

use std::time::Duration;

use futures::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{OptsBuilder, Params, TxOpts, Value};

/// Padding that brings the metadata object to about the size of the standard document.
const METADATA_PAD: usize = 1150;

const COLUMNS: [&str; 16] = [
    "STREAM_NAME",
    "STREAM_SEQUENCE",
    "SUBJECT",
    "MESSAGE_ID",
    "PRIORITY",
    "CLASSIFICATION",
    "LABELS",
    "MESSAGE_CREATED_AT_EPOCH_NS",
    "JETSTREAM_TIMESTAMP_EPOCH_NS",
    "RECEIVED_AT_EPOCH_NS",
    "STORED_AT_EPOCH_NS",
    "PAYLOAD_JSON",
    "HEADERS_JSON",
    "METADATA_JSON",
    "MISSION_METADATA_JSON",
    "SECURITY_LABELS_JSON",
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, stream, consumer, count, batch, port, user, password, table] = args.as_slice() else {
        eprintln!("usage: raw_mysql NATS_URL STREAM CONSUMER COUNT BATCH MYSQL_PORT USER PASSWORD TABLE");
        std::process::exit(2);
    };
    let (count, batch): (usize, usize) = (count.parse()?, batch.parse()?);
    let section = serde_json::json!({"database": "test", "user": user, "table": table});
    let serde_json::Value::Object(map) = section else { unreachable!() };
    let config = sink_mysql::MySqlSinkConfig::from_section(&sinks_runtime::config::SinkSection(map))?;
    let ddl = sink_mysql::MySqlSink::new(config)?.ddl().remove(0);
    let opts = OptsBuilder::default()
        .tcp_port(port.parse()?)
        .user(Some(user.clone()))
        .pass(Some(password.clone()).filter(|p| !p.is_empty()))
        .db_name(Some("test"));
    let mut db = mysql_async::Conn::new(opts).await?;
    db.query_drop(&ddl).await?;
    let quoted: Vec<String> = COLUMNS.iter().map(|c| format!("`{c}`")).collect();
    let updates: Vec<String> = quoted[2..].iter().map(|c| format!("{c} = VALUES({c})")).collect();
    let sql = |n: usize| {
        let one = format!("({})", vec!["?"; COLUMNS.len()].join(", "));
        format!(
            "INSERT INTO `{table}` ({}) VALUES {} ON DUPLICATE KEY UPDATE {}",
            quoted.join(", "),
            vec![one; n].join(", "),
            updates.join(", ")
        )
    };
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, None).await?;
    let mut done = 0;
    while done < count {
        let mut messages = consumer.fetch().max_messages(batch).expires(Duration::from_millis(100)).messages().await?;
        let mut rows: Vec<Value> = Vec::with_capacity(batch * COLUMNS.len());
        let mut acks = Vec::with_capacity(batch);
        while let Some(message) = messages.next().await {
            let message = message?;
            let info = message.info()?;
            let (seq, stream_name) = (info.stream_sequence, info.stream.to_owned());
            let ts = info.published.unix_timestamp_nanos() as i64;
            let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos() as i64;
            let id = message.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")).map(|v| v.as_str().to_owned());
            let metadata = serde_json::json!({"stream": stream_name, "stream_sequence": seq, "subject": message.subject.as_str(),
                                              "delivered": info.delivered, "timestamp_epoch_ns": ts, "pad": "p".repeat(METADATA_PAD)});
            let text = |s: String| Value::Bytes(s.into_bytes());
            rows.extend([
                text(stream_name),
                Value::UInt(seq),
                text(message.subject.to_string()),
                id.clone().map_or(Value::NULL, text),
                Value::NULL,
                Value::NULL,
                Value::NULL,
                Value::Int(ts),
                Value::Int(ts),
                Value::Int(now),
                Value::Int(now),
                Value::Bytes(message.payload.to_vec()),
                text(serde_json::json!({"Nats-Msg-Id": id}).to_string()),
                text(metadata.to_string()),
                text("null".into()),
                text("null".into()),
            ]);
            acks.push(message);
        }
        if acks.is_empty() {
            continue;
        }
        let mut tx = db.start_transaction(TxOpts::default()).await?;
        tx.exec_drop(sql(acks.len()), Params::Positional(rows)).await?;
        tx.commit().await?;
        for m in &acks {
            m.ack().await?;
        }
        done += acks.len();
    }
    js.client().flush().await?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
