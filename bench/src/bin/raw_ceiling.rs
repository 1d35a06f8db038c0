//! The benchmark ceilings of the HTTP, S3 and file sinks: a hand-written JetStream loop with
//! no framework, which writes each message the way the sink does and acks it after.
//!
//! One pull stream of the durable explicit-ack consumer feeds batches of up to BATCH
//! messages; IN_FLIGHT batches are written at a time (the sink's `max_in_flight_batches`),
//! each with the sink's own concurrency, then every message of the batch is acked. Each
//! message becomes a JSON document of about BODY_BYTES bytes (its payload, subject, stream
//! and sequence, padded to the size of the sink's document), built with `serde_json`:
//! - `http URL`: one POST per message (reqwest, one connection pool), CONCURRENCY requests
//!   in flight per batch, with an `Idempotency-Key` header; any 2xx counts;
//! - `s3 ENDPOINT BUCKET`: one conditional put (`object_store`, create-if-absent) per message,
//!   CONCURRENCY in flight per batch (credentials in `BENCH_S3_ACCESS_KEY_ID` and
//!   `BENCH_S3_SECRET_ACCESS_KEY`);
//! - `file DIRECTORY fsync|nofsync`: per message a temp file created and written, fsynced
//!   (64 at a time) and renamed to its final name (8 blocking tasks per batch), then the
//!   directory fsynced once per batch.
//!
//! `raw_ceiling NATS_URL STREAM CONSUMER COUNT BATCH IN_FLIGHT CONCURRENCY BODY_BYTES MODE
//! TARGET…` consumes COUNT messages, then idles until it is killed (so that its peak RSS and
//! CPU time can still be read).
//!
//! `raw_ceiling run CONFIG` is the latency ceiling of the file sink (`sinks-bench latency
//! --raw`): it takes the contenders' config file (`nats.url`, `nats.stream`,
//! `nats.consumer`, `delivery.batch_size`, `sink.directory`, `sink.fsync`) and writes each
//! message as above into a directory per subject (the file sink's default
//! `partition_by_subject`), fsyncing every directory a batch touched, **one batch at a time**:
//! what the sink's default ordering (by subject) makes of batches that each hold every
//! subject. It runs until it is killed.
#![allow(clippy::print_stderr)]

#[path = "support/batches.rs"]
mod batches;
#[path = "support/durable.rs"]
mod durable;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_nats::jetstream::Message;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use sinks_contract::SinkError;
use sinks_toolkit::blocking::run_parallel;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Blocking tasks per batch for creating and renaming files (the file sink's).
const FILE_TASKS: usize = 8;
/// Fsyncs in flight per batch (the file sink's).
const FSYNC_TASKS: usize = 64;
/// The document size of `raw_ceiling run`: the file sink's record of a 256-byte latency
/// message is 1,562 bytes.
const RECORD_BYTES: usize = 1562;

/// Where the messages go.
enum Target {
    Http {
        client: reqwest::Client,
        url: String,
    },
    S3(Arc<dyn ObjectStore>),
    File {
        dir: PathBuf,
        fsync: bool,
    },
    /// A directory per subject below `root` (made on first use, the root fsynced then).
    Partitioned {
        root: PathBuf,
        fsync: bool,
    },
}

/// The document one message becomes.
#[derive(serde::Serialize)]
struct Doc<'a> {
    stream: &'a str,
    stream_sequence: u64,
    subject: &'a str,
    payload: &'a serde_json::value::RawValue,
    pad: &'a str,
}

/// One message's document: its stream sequence and bytes.
fn body(message: &Message, size: usize, pad: &str) -> Result<(u64, Vec<u8>), Error> {
    let info = message.info()?;
    let payload: &serde_json::value::RawValue = serde_json::from_slice(&message.payload)?;
    let base = message.payload.len() + message.subject.len() + info.stream.len() + 80;
    let doc = Doc {
        stream: info.stream,
        stream_sequence: info.stream_sequence,
        subject: message.subject.as_str(),
        payload,
        pad: &pad[..size.saturating_sub(base).min(pad.len())],
    };
    Ok((info.stream_sequence, serde_json::to_vec(&doc)?))
}

impl Target {
    async fn write(&self, batch: &[Message], concurrency: usize, size: usize, pad: &str) -> Result<(), Error> {
        let docs: Vec<(u64, Vec<u8>)> = batch.iter().map(|m| body(m, size, pad)).collect::<Result<_, _>>()?;
        match self {
            Self::Http { client, url } => {
                futures::stream::iter(docs)
                    .map(|(seq, doc)| async move {
                        let response =
                            client.post(url).header("Idempotency-Key", seq.to_string()).body(doc).send().await?;
                        if !response.status().is_success() {
                            return Err(format!("status {}", response.status()).into());
                        }
                        response.bytes().await?;
                        Ok::<(), Error>(())
                    })
                    .buffer_unordered(concurrency)
                    .try_collect::<()>()
                    .await
            }
            Self::S3(store) => {
                futures::stream::iter(docs)
                    .map(|(seq, doc)| async move {
                        let path = object_store::path::Path::from(format!("raw/{seq:020}.json"));
                        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
                        match store.put_opts(&path, PutPayload::from(doc), options).await {
                            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
                            Err(e) => Err(Error::from(e)),
                        }
                    })
                    .buffer_unordered(concurrency)
                    .try_collect::<()>()
                    .await
            }
            Self::File { dir, fsync } => write_files(dir, docs, *fsync).await,
            Self::Partitioned { root, fsync } => {
                let mut by_dir: BTreeMap<PathBuf, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
                for (message, doc) in batch.iter().zip(docs) {
                    by_dir.entry(root.join(message.subject.as_str())).or_default().push(doc);
                }
                let mut made = false;
                for dir in by_dir.keys().filter(|dir| !dir.exists()) {
                    std::fs::create_dir(dir)?;
                    made = true;
                }
                let writes = by_dir.into_iter().map(async |(dir, docs)| write_files(&dir, docs, *fsync).await);
                futures::future::try_join_all(writes).await?;
                if made && *fsync {
                    sync_dir(root.clone()).await?;
                }
                Ok(())
            }
        }
    }
}

/// An I/O error as the blocking helper carries it.
fn failed(e: std::io::Error) -> SinkError {
    SinkError::temporary(e.to_string())
}

/// Temp file per document, fsynced when `fsync`, renamed into place; then the directory.
async fn write_files(dir: &Path, docs: Vec<(u64, Vec<u8>)>, fsync: bool) -> Result<(), Error> {
    let stage = {
        let dir = dir.to_path_buf();
        move |(seq, doc): (u64, Vec<u8>)| -> Result<(std::fs::File, PathBuf, PathBuf), SinkError> {
            let temp = dir.join(format!(".{seq:020}.json.tmp"));
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temp).map_err(failed)?;
            file.write_all(&doc).map_err(failed)?;
            Ok((file, temp, dir.join(format!("{seq:020}.json"))))
        }
    };
    let staged: Vec<_> = run_parallel(docs, FILE_TASKS, stage).await.into_iter().collect::<Result<_, _>>()?;
    let staged = if fsync {
        let sync = move |(file, temp, path): (std::fs::File, PathBuf, PathBuf)| {
            file.sync_all().map_err(failed)?;
            Ok((file, temp, path))
        };
        run_parallel(staged, FSYNC_TASKS, sync).await.into_iter().collect::<Result<_, SinkError>>()?
    } else {
        staged
    };
    let place = |(file, temp, path): (std::fs::File, PathBuf, PathBuf)| {
        drop(file);
        std::fs::rename(temp, path).map_err(failed)
    };
    run_parallel(staged, FILE_TASKS, place).await.into_iter().collect::<Result<(), _>>()?;
    if fsync {
        sync_dir(dir.to_path_buf()).await?;
    }
    Ok(())
}

/// Fsyncs directory `dir` on a blocking thread.
async fn sync_dir(dir: PathBuf) -> Result<(), Error> {
    tokio::task::spawn_blocking(move || std::fs::File::open(dir)?.sync_all()).await??;
    Ok(())
}

fn usage() -> ! {
    eprintln!(
        "usage: raw_ceiling NATS_URL STREAM CONSUMER COUNT BATCH IN_FLIGHT CONCURRENCY BODY_BYTES \
         (http URL | s3 ENDPOINT BUCKET | file DIRECTORY fsync|nofsync)\n       raw_ceiling run CONFIG"
    );
    std::process::exit(2);
}

fn target(mode: &[String]) -> Result<Target, Error> {
    Ok(match mode {
        [kind, url] if kind == "http" => Target::Http { client: reqwest::Client::new(), url: url.clone() },
        [kind, endpoint, bucket] if kind == "s3" => {
            let env = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
            let store = object_store::aws::AmazonS3Builder::new()
                .with_endpoint(endpoint)
                .with_allow_http(true)
                .with_region("us-east-1")
                .with_bucket_name(bucket)
                .with_access_key_id(env("BENCH_S3_ACCESS_KEY_ID")?)
                .with_secret_access_key(env("BENCH_S3_SECRET_ACCESS_KEY")?)
                .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
                .build()?;
            Target::S3(Arc::new(store))
        }
        [kind, dir, fsync] if kind == "file" => {
            std::fs::create_dir_all(dir)?;
            Target::File { dir: PathBuf::from(dir), fsync: fsync == "fsync" }
        }
        _ => usage(),
    })
}

/// The same multi-threaded Tokio runtime `nats-sink` runs on, so the ceiling pays what the
/// sink pays for its scheduler.
#[tokio::main]
async fn main() -> Result<(), Error> {
    run().await
}

async fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, run, config] = args.as_slice()
        && run == "run"
    {
        return ordered_file_loop(Path::new(config)).await;
    }
    let [_, url, stream, consumer, count, batch, in_flight, concurrency, body_bytes, mode @ ..] = args.as_slice()
    else {
        usage()
    };
    let [count, batch, in_flight, concurrency, size]: [usize; 5] =
        [count, batch, in_flight, concurrency, body_bytes].map(|v| v.parse().unwrap_or_else(|_| usage()));
    let target = target(mode)?;
    let pad = "p".repeat(size);
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, None).await?;
    let (target, pad) = (&target, pad.as_str());
    batches::write_then_ack(&consumer, count, batch, in_flight, async |batch: &[Message]| {
        target.write(batch, concurrency, size, pad).await
    })
    .await?;
    js.client().flush().await?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}

/// The ordered file loop of `raw_ceiling run CONFIG` (see the module documentation).
async fn ordered_file_loop(config: &Path) -> Result<(), Error> {
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(config)?)?;
    let text = |pointer: &str| {
        config.pointer(pointer).and_then(serde_json::Value::as_str).ok_or_else(|| format!("{pointer}: no string"))
    };
    let (url, stream, consumer, root) =
        (text("/nats/url")?, text("/nats/stream")?, text("/nats/consumer")?, text("/sink/directory")?);
    let batch = config.pointer("/delivery/batch_size").and_then(serde_json::Value::as_u64).unwrap_or(100) as usize;
    let fsync = config.pointer("/sink/fsync").and_then(serde_json::Value::as_bool).unwrap_or(false);
    std::fs::create_dir_all(root)?;
    let target = Target::Partitioned { root: PathBuf::from(root), fsync };
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, None).await?;
    let (size, pad) = (RECORD_BYTES, "p".repeat(RECORD_BYTES));
    let (target, pad) = (&target, pad.as_str());
    batches::write_then_ack(&consumer, usize::MAX, batch, 1, async |batch: &[Message]| {
        target.write(batch, 1, size, pad).await
    })
    .await
}
