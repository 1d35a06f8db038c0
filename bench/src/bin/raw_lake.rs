//! The batch-mode benchmark baselines: hand-written JetStream → object loops with no
//! framework, writing the same bytes as the file and S3 sinks' batch mode (one NDJSON row
//! per message, the sinks' row encoding, one object of `MAX_MESSAGES` rows at a time). It
//! pulls a batch, appends its rows, and when an object is full (or every message arrived)
//! commits it and acks the messages it holds:
//!
//! - `file`: rows appended to a temporary file, fsynced, renamed into place, the directory
//!   fsynced (the raw append-and-fsync loop);
//! - `s3`: rows gathered into 8 MiB parts, each uploaded as it fills (two in flight) as part
//!   of a multipart upload, completed when the object is full (the raw object_store
//!   multipart loop).
//!
//! `raw_lake file NATS_URL STREAM CONSUMER COUNT BATCH MAX_MESSAGES DIR` or
//! `raw_lake s3 NATS_URL STREAM CONSUMER COUNT BATCH MAX_MESSAGES ENDPOINT BUCKET KEY SECRET`
//! consumes COUNT messages, then idles until it is killed.
#![allow(clippy::print_stderr)]

#[path = "support/durable.rs"]
mod durable;

use std::io::Write;
use std::time::Duration;

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use sinks_contract::envelope::{Envelope, Headers, JetStreamInfo};

type Error = Box<dyn std::error::Error + Send + Sync>;

const PART_BYTES: usize = 8 * 1024 * 1024;

/// Where objects go.
enum Target {
    File { dir: std::path::PathBuf },
    S3 { store: object_store::aws::AmazonS3 },
}

/// One object being filled.
struct Object {
    name: String,
    rows: usize,
    file: Option<(tempfile::NamedTempFile, std::io::BufWriter<std::fs::File>)>,
    upload: Option<(Path, String)>,
    part: Vec<u8>,
    /// Uploaded parts, in order, and the (at most two) still in flight after them.
    uploaded: Vec<PartId>,
    in_flight: std::collections::VecDeque<tokio::task::JoinHandle<Result<PartId, object_store::Error>>>,
}

impl Target {
    async fn open(&self, name: String) -> Result<Object, Error> {
        let mut object = Object {
            name,
            rows: 0,
            file: None,
            upload: None,
            part: Vec::new(),
            uploaded: Vec::new(),
            in_flight: std::collections::VecDeque::new(),
        };
        match self {
            Self::File { dir } => {
                let temp = tempfile::Builder::new().prefix(".raw-").tempfile_in(dir)?;
                let writer = std::io::BufWriter::with_capacity(64 * 1024, temp.reopen()?);
                object.file = Some((temp, writer));
            }
            Self::S3 { store } => {
                let path = Path::parse(format!("raw/{}", object.name))?;
                let id = store.create_multipart(&path).await?;
                object.upload = Some((path, id));
            }
        }
        Ok(object)
    }

    async fn append(&self, object: &mut Object, line: &[u8]) -> Result<(), Error> {
        object.rows += 1;
        match self {
            Self::File { .. } => {
                if let Some((_, w)) = &mut object.file {
                    w.write_all(line)?;
                }
            }
            Self::S3 { store } => {
                object.part.extend_from_slice(line);
                if object.part.len() >= PART_BYTES {
                    self.send_part(store, object).await?;
                }
            }
        }
        Ok(())
    }

    async fn send_part(&self, store: &object_store::aws::AmazonS3, object: &mut Object) -> Result<(), Error> {
        if object.in_flight.len() >= 2
            && let Some(oldest) = object.in_flight.pop_front()
        {
            object.uploaded.push(oldest.await??);
        }
        let (path, id) = object.upload.clone().ok_or("no upload")?;
        let data = bytes::Bytes::from(std::mem::take(&mut object.part));
        let index = object.uploaded.len() + object.in_flight.len();
        let store = store.clone();
        object.in_flight.push_back(tokio::spawn(async move { store.put_part(&path, &id, index, data.into()).await }));
        Ok(())
    }

    async fn commit(&self, mut object: Object) -> Result<(), Error> {
        match self {
            Self::File { dir } => {
                let (temp, mut writer) = object.file.take().ok_or("no file")?;
                writer.flush()?;
                writer.get_ref().sync_all()?;
                temp.persist(dir.join(&object.name))?;
                std::fs::File::open(dir)?.sync_all()?;
            }
            Self::S3 { store } => {
                if !object.part.is_empty() || (object.uploaded.is_empty() && object.in_flight.is_empty()) {
                    self.send_part(store, &mut object).await?;
                }
                let mut parts = std::mem::take(&mut object.uploaded);
                for handle in object.in_flight.drain(..) {
                    parts.push(handle.await??);
                }
                let (path, id) = object.upload.take().ok_or("no upload")?;
                store.complete_multipart(&path, &id, parts).await?;
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let (target, rest) = match args.get(1).map(String::as_str) {
        Some("file") if args.len() == 9 => (Target::File { dir: args[8].clone().into() }, &args[2..8]),
        Some("s3") if args.len() == 12 => {
            let store = AmazonS3Builder::new()
                .with_endpoint(&args[8])
                .with_bucket_name(&args[9])
                .with_access_key_id(&args[10])
                .with_secret_access_key(&args[11])
                .with_region("us-east-1")
                .with_allow_http(true)
                .with_virtual_hosted_style_request(false)
                .build()?;
            (Target::S3 { store }, &args[2..8])
        }
        _ => {
            eprintln!(
                "usage: raw_lake file NATS_URL STREAM CONSUMER COUNT BATCH MAX_MESSAGES DIR\n       raw_lake s3 NATS_URL STREAM CONSUMER COUNT BATCH MAX_MESSAGES ENDPOINT BUCKET KEY SECRET"
            );
            std::process::exit(2);
        }
    };
    let [url, stream, consumer, count, batch, max_messages] = rest else { unreachable!() };
    let (count, batch, max_messages): (usize, usize, usize) = (count.parse()?, batch.parse()?, max_messages.parse()?);
    let js = async_nats::jetstream::new(async_nats::connect(url).await?);
    let consumer = durable::bind(&js, stream, consumer, Some(1_000_000)).await?;
    let mut done = 0;
    let mut held = Vec::with_capacity(max_messages);
    let mut object: Option<Object> = None;
    while done < count {
        let mut messages = consumer.fetch().max_messages(batch).expires(Duration::from_millis(100)).messages().await?;
        while let Some(message) = messages.next().await {
            let message = message?;
            let info = message.info()?;
            let mut headers = Headers::new();
            if let Some(h) = &message.headers {
                for (name, values) in h.iter() {
                    for v in values {
                        headers.append(name.as_ref(), v.as_str());
                    }
                }
            }
            let js_info = JetStreamInfo {
                stream: info.stream.to_owned(),
                consumer: info.consumer.to_owned(),
                stream_sequence: info.stream_sequence,
                consumer_sequence: info.consumer_sequence,
                delivered: info.delivered as u64,
                pending: info.pending,
                timestamp: Some(info.published),
                domain: None,
            };
            let envelope = Envelope::new(message.subject.to_string(), message.payload.clone(), headers, js_info);
            let row = sinks_toolkit::batch::row::Row::of(&envelope, sinks_contract::PayloadMode::JsonOrEnvelope, &[])?;
            if object.is_none() {
                let name = format!("{stream}-{:020}.ndjson", info.stream_sequence);
                object = Some(target.open(name).await?);
            }
            if let Some(o) = &mut object {
                target.append(o, &row.ndjson_line()).await?;
            }
            held.push(message);
            done += 1;
            if held.len() >= max_messages || done >= count {
                if let Some(o) = object.take() {
                    target.commit(o).await?;
                }
                for m in held.drain(..) {
                    m.ack().await?;
                }
            }
        }
    }
    js.client().flush().await?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
