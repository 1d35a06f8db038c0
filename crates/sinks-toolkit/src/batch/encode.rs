//! Writing batch objects into a local file, row by row, and reading their rows back.
//!
//! An [`Encoder`] (the trait every format implements, defined with the row in
//! [`super::row`]) streams rows into a file (a temporary file the sink later stages):
//! NDJSON through a 64 KiB buffer and, when configured, a streaming gzip or Zstandard
//! encoder; Parquet ([`super::parquet`]) through arrow-rs, one row group at a time. Nothing
//! keeps all of an object's rows in memory: an open object costs its encoder's buffers,
//! whatever it holds.
//!
//! [`read_rows`] reads an object's rows back from a file, one at a time (the content check
//! of a redelivery, reconcile, and the tests' read-back).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::config::{BatchCompression, BatchConfig, Format};
use super::row::Row;
pub use super::row::{Encoder, GZIP_LEVEL, StoredRow, ZSTD_LEVEL};

/// Buffer between an NDJSON encoder and its file.
const WRITE_BUFFER: usize = 64 * 1024;
/// An encoder for `config`'s format and compression, writing into `file`.
pub fn encoder(config: &BatchConfig, file: File) -> io::Result<Box<dyn Encoder>> {
    let buffered = BufWriter::with_capacity(WRITE_BUFFER, file);
    Ok(match (config.format, config.effective_compression()) {
        (Format::Ndjson, BatchCompression::Gzip) => {
            Box::new(Ndjson(flate2::GzBuilder::new().mtime(0).write(buffered, flate2::Compression::new(GZIP_LEVEL))))
        }
        (Format::Ndjson, BatchCompression::Zstd) => {
            Box::new(Ndjson(zstd::stream::write::Encoder::new(buffered, ZSTD_LEVEL)?))
        }
        (Format::Ndjson, _) => Box::new(Ndjson(buffered)),
        #[cfg(feature = "parquet")]
        (Format::Parquet, compression) => {
            let file = buffered.into_inner().map_err(io::IntoInnerError::into_error)?;
            Box::new(super::parquet::ParquetEncoder::new(file, compression, &config.columns, config.table.is_some())?)
        }
        #[cfg(not(feature = "parquet"))]
        (Format::Parquet, _) => {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "parquet is not built into this binary"));
        }
    })
}

/// NDJSON through `W` (plain, gzip or zstd over a buffered file).
struct Ndjson<W>(W);

/// How each NDJSON writer ends.
trait Finish: Write + Send {
    fn done(self) -> io::Result<File>;
}

impl Finish for BufWriter<File> {
    fn done(self) -> io::Result<File> {
        self.into_inner().map_err(io::IntoInnerError::into_error)
    }
}

impl Finish for flate2::write::GzEncoder<BufWriter<File>> {
    fn done(self) -> io::Result<File> {
        self.finish()?.done()
    }
}

impl Finish for zstd::stream::write::Encoder<'static, BufWriter<File>> {
    fn done(self) -> io::Result<File> {
        self.finish()?.done()
    }
}

impl<W: Finish> Encoder for Ndjson<W> {
    fn append(&mut self, row: &Row) -> io::Result<()> {
        self.0.write_all(&row.ndjson_line())
    }

    fn finish(self: Box<Self>) -> io::Result<File> {
        self.0.done()
    }
}

#[derive(Deserialize)]
struct LineRef<'a> {
    stream: String,
    stream_sequence: u64,
    payload_sha256: String,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// Reads every row of the object in `file` (of `format` and `compression`), calling `each`
/// once per row in stored order; `with_payload` also reads the payload text. Fails on the
/// first row that is not one of ours.
pub fn read_rows(
    file: File,
    format: Format,
    compression: BatchCompression,
    with_payload: bool,
    mut each: impl FnMut(StoredRow),
) -> Result<u64, String> {
    match format {
        Format::Ndjson => {
            let reader: Box<dyn BufRead> = match compression {
                BatchCompression::Gzip => Box::new(BufReader::new(flate2::read::GzDecoder::new(BufReader::new(file)))),
                BatchCompression::Zstd => {
                    Box::new(BufReader::new(zstd::stream::read::Decoder::new(file).map_err(|e| e.to_string())?))
                }
                _ => Box::new(BufReader::new(file)),
            };
            let mut rows = 0u64;
            for (i, line) in reader.split(b'\n').enumerate() {
                let line = line.map_err(|e| format!("cannot read line {}: {e}", i + 1))?;
                if line.is_empty() {
                    continue;
                }
                let row: LineRef<'_> =
                    serde_json::from_slice(&line).map_err(|e| format!("line {} is not a row: {e}", i + 1))?;
                each(StoredRow {
                    stream: row.stream,
                    stream_sequence: row.stream_sequence,
                    payload_sha256: row.payload_sha256,
                    payload: if with_payload { row.payload.get().to_owned() } else { String::new() },
                });
                rows += 1;
            }
            Ok(rows)
        }
        #[cfg(feature = "parquet")]
        Format::Parquet => super::parquet::read_rows(file, with_payload, each),
        #[cfg(not(feature = "parquet"))]
        Format::Parquet => Err("parquet is not built into this binary".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinks_contract::payload::PayloadMode;

    /// Every NDJSON compression streams rows to the file and reads them back in order.
    #[test]
    fn ndjson_round_trips_with_every_compression() {
        for compression in [BatchCompression::None, BatchCompression::Gzip, BatchCompression::Zstd] {
            let config = BatchConfig { compression: Some(compression), ..BatchConfig::default() };
            let mut enc = encoder(&config, tempfile::tempfile().unwrap()).unwrap();
            let mut written = Vec::new();
            for seq in 1..=300u64 {
                let payload = if seq % 3 == 0 { format!("text {seq}") } else { format!(r#"{{"seq":{seq}}}"#) };
                let e = sinks_contract::testing::envelope("S", seq, "s.x", payload);
                let row = Row::of(&e, PayloadMode::JsonOrEnvelope, &[]).unwrap();
                written.push((seq, row.payload.sha256.clone(), row.payload.value.get().to_owned()));
                enc.append(&row).unwrap();
            }
            let mut file = enc.finish().unwrap();
            io::Seek::rewind(&mut file).unwrap();
            let mut read = Vec::new();
            let n = read_rows(file, Format::Ndjson, compression, true, |r| {
                assert_eq!(r.stream, "S");
                read.push((r.stream_sequence, r.payload_sha256, r.payload));
            })
            .unwrap();
            assert_eq!(n, 300, "{compression:?}");
            assert_eq!(read, written, "{compression:?}");
        }
    }

    #[test]
    fn a_foreign_line_is_an_error_not_a_row() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"{\"hello\":1}\n").unwrap();
        io::Seek::rewind(&mut file).unwrap();
        let err = read_rows(file, Format::Ndjson, BatchCompression::None, false, |_| {}).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
    }
}
