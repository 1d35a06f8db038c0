//! [`S3Log`]: the batch mode's I/O in the bucket (the `sinks_toolkit::batch::ObjectLog` of
//! the S3 sink).
//!
//! - an object is built in an unnamed temporary file (`spill_directory`, default the
//!   system's temporary directory): nothing of it is in memory but the encoder's buffers,
//!   and a crash leaves no file behind;
//! - **stage**: the file is uploaded as the parts of a multipart upload to the object's
//!   final key, `multipart_part_bytes` at a time, one part in memory and in flight (each
//!   retried in place). An upload is invisible until completed; the manifest records its upload id and
//!   part ETags, which is all completing it needs;
//! - **create** (a manifest): a conditional put (`If-None-Match: *`), which the store
//!   decides atomically;
//! - **complete**: `CompleteMultipartUpload`. When the upload is gone (completed by another
//!   process, or aborted) the object's presence decides.
//!
//! A crash between the parts and the manifest leaves an incomplete multipart upload that no
//! manifest names: an `AbortIncompleteMultipartUpload` lifecycle rule removes it.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use object_store::multipart::{MultipartStore, PartId};
use object_store::{
    Attribute, AttributeValue, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions,
    PutOptions, PutPayload,
};
use sinks_contract::{DestinationRef, SinkError};
use sinks_toolkit::batch::{ObjectLog, TempObject};
use sinks_toolkit::blocking::blocking;
use sinks_toolkit::retry::Budget;

use crate::error::{Failure, classify, failure_of};
use crate::store::Client;

/// The batch mode's I/O in the bucket.
#[derive(Debug, Clone)]
pub(crate) struct S3Log {
    client: Arc<Client>,
}

impl S3Log {
    /// Over `client`'s bucket and prefix.
    pub(crate) fn new(client: Arc<Client>) -> Self {
        Self { client }
    }

    fn spill_file(&self) -> Result<File, SinkError> {
        let dir = self.client.config().spill_directory.clone().unwrap_or_else(std::env::temp_dir);
        tempfile::tempfile_in(&dir)
            .map_err(|e| SinkError::temporary("cannot create a spill file in sink.spill_directory").with_source(e))
    }

    /// The content type of a batch object, by its name.
    fn content_type(key: &str) -> &'static str {
        if key.ends_with(".parquet") {
            "application/vnd.apache.parquet"
        } else if key.ends_with(".gz") {
            "application/gzip"
        } else if key.ends_with(".zst") {
            "application/zstd"
        } else {
            "application/x-ndjson"
        }
    }

    async fn retried<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T, SinkError>
    where
        F: FnMut(sinks_toolkit::retry::Attempt) -> Fut,
        Fut: Future<Output = Result<T, SinkError>>,
    {
        self.client.config().in_place().run(what, Budget::Unbounded, attempt).await
    }
}

/// Reads the next part of `file` (blocking).
fn read_part(mut file: File, size: usize) -> Result<(File, Vec<u8>), SinkError> {
    let mut part = Vec::with_capacity(size);
    (&mut file)
        .take(size as u64)
        .read_to_end(&mut part)
        .map_err(|e| SinkError::temporary("cannot read a spill file").with_source(e))?;
    Ok((file, part))
}

#[async_trait]
impl ObjectLog for S3Log {
    async fn list(&self, dir: &str) -> Result<Vec<String>, SinkError> {
        let store = self.client.get()?;
        let prefix = self.client.path(dir)?;
        let listed = store.list_with_delimiter(Some(&prefix)).await.map_err(|e| classify("list", &e))?;
        let mut names: Vec<String> =
            listed.objects.iter().filter_map(|o| o.location.filename().map(str::to_owned)).collect();
        names.extend(listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)));
        Ok(names)
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        self.retried("s3 manifest read", |_| async {
            match store.get(&path).await {
                Ok(got) => Ok(Some(got.bytes().await.map_err(|e| classify("get", &e))?.to_vec())),
                Err(e) if matches!(failure_of(&e), Failure::NotFound) => Ok(None),
                Err(e) => Err(classify("get", &e)),
            }
        })
        .await
    }

    async fn create(&self, key: &str, body: Vec<u8>) -> Result<bool, SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, AttributeValue::from("application/json"));
        let options = PutOptions { mode: PutMode::Create, attributes, ..Default::default() };
        match store.put_opts(&path, PutPayload::from(body), options).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(classify("manifest put", &e)),
        }
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        // A plain PUT replaces the object atomically: readers see it whole. Not retried here:
        // its caller (a checkpoint) tries again later.
        store.put_opts(&path, PutPayload::from(body), PutOptions::default()).await.map_err(|e| classify("put", &e))?;
        Ok(())
    }

    fn temp(&self, _partition: &str) -> Result<TempObject, SinkError> {
        Ok(TempObject { file: self.spill_file()?, path: None })
    }

    async fn stage(&self, key: &str, temp: TempObject, size: u64) -> Result<serde_json::Value, SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, AttributeValue::from(Self::content_type(key)));
        attributes.insert(
            Attribute::Metadata("nats-sinks-schema".into()),
            AttributeValue::from(sinks_toolkit::batch::row::ROW_SCHEMA),
        );
        let id = self
            .retried("s3 multipart start", |_| async {
                store
                    .create_multipart_opts(&path, PutMultipartOptions::from(attributes.clone()))
                    .await
                    .map_err(|e| classify("multipart start", &e))
            })
            .await?;
        let part_bytes = usize::try_from(self.client.config().multipart_part_bytes).unwrap_or(usize::MAX);
        let parts = usize::try_from(size.div_ceil(part_bytes as u64).max(1)).unwrap_or(usize::MAX);
        let upload = async {
            let mut file = temp.file;
            file.rewind().map_err(|e| SinkError::temporary("cannot read a spill file").with_source(e))?;
            // One part in memory at a time: read, uploaded (retried in place), then
            // the next. Reading a part back from the spill file takes a few
            // milliseconds against the upload's tens, and a second part in flight would
            // double what an upload holds.
            let mut etags = Vec::with_capacity(parts);
            for index in 0..parts {
                let (f, part) = blocking(move || read_part(file, part_bytes)).await?;
                file = f;
                let payload = PutPayload::from(bytes::Bytes::from(part));
                let done = self
                    .retried("s3 multipart part", |_| {
                        let payload = payload.clone();
                        let (path, id) = (&path, &id);
                        async move {
                            store.put_part(path, id, index, payload).await.map_err(|e| classify("multipart part", &e))
                        }
                    })
                    .await?;
                etags.push(done.content_id);
            }
            Ok::<Vec<String>, SinkError>(etags)
        };
        let etags = match upload.await {
            Ok(etags) => etags,
            Err(e) => {
                if let Err(abort) = store.abort_multipart(&path, &id).await {
                    tracing::warn!(
                        error_type = classify("abort", &abort).error_type(),
                        "s3 multipart upload not aborted"
                    );
                }
                return Err(e);
            }
        };
        Ok(serde_json::json!({ "upload_id": id, "parts": etags }))
    }

    async fn complete(&self, key: &str, staging: &serde_json::Value) -> Result<bool, SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        let id = staging["upload_id"].as_str().ok_or_else(|| SinkError::permanent("manifest names no upload"))?;
        let parts: Vec<PartId> = staging["parts"]
            .as_array()
            .ok_or_else(|| SinkError::permanent("manifest names no parts"))?
            .iter()
            .filter_map(|p| p.as_str().map(|c| PartId { content_id: c.to_owned() }))
            .collect();
        let id = id.to_owned();
        let completed = self
            .retried("s3 multipart complete", |_| {
                let parts = parts.clone();
                let id = id.clone();
                let path = path.clone();
                async move {
                    match store.complete_multipart(&path, &id, parts).await {
                        Ok(_) => Ok(true),
                        // The upload is gone: completed already, or aborted.
                        Err(e) if matches!(failure_of(&e), Failure::NotFound) => Ok(false),
                        Err(e) => Err(classify("multipart complete", &e)),
                    }
                }
            })
            .await?;
        if completed {
            return Ok(true);
        }
        match store.get_opts(&path, GetOptions { head: true, ..Default::default() }).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(failure_of(&e), Failure::NotFound) => Ok(false),
            Err(e) => Err(classify("head", &e)),
        }
    }

    async fn discard(&self, key: &str, staging: &serde_json::Value) {
        let (Ok(store), Ok(path), Some(id)) = (self.client.get(), self.client.path(key), staging["upload_id"].as_str())
        else {
            return;
        };
        if let Err(e) = store.abort_multipart(&path, &id.to_owned()).await {
            tracing::warn!(error_type = classify("abort", &e).error_type(), "s3 multipart upload not aborted");
        }
    }

    async fn fetch(&self, key: &str) -> Result<Option<File>, SinkError> {
        let store = self.client.get()?;
        let path = self.client.path(key)?;
        let got = match store.get(&path).await {
            Ok(got) => got,
            Err(e) if matches!(failure_of(&e), Failure::NotFound) => return Ok(None),
            Err(e) => return Err(classify("get", &e)),
        };
        let mut file = self.spill_file()?;
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| classify("get", &e))?;
            file.write_all(&chunk).map_err(|e| SinkError::temporary("cannot write a spill file").with_source(e))?;
        }
        file.rewind().map_err(|e| SinkError::temporary("cannot read a spill file").with_source(e))?;
        Ok(Some(file))
    }

    fn destination(&self, key: &str) -> DestinationRef {
        DestinationRef::Object { bucket: self.client.config().bucket.clone(), key: self.client.under_prefix(key) }
    }
}
