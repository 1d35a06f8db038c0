//! Batch mode of the file and S3 sinks: many messages per object, NDJSON or Parquet,
//! exactly once by naming. Everything both sinks need lives here once; a sink supplies its
//! destination's I/O ([`ObjectLog`]) and forwards its `Sink` methods to a [`BatchWriter`].
//!
//! - [`config`]: `sink.mode` and the `sink.batch` section;
//! - [`partition`]: the partition template, evaluated per message;
//! - [`naming`]: object names from the sequences they hold, manifest names;
//! - [`seqset`]: sets of stream sequences;
//! - [`manifest`]: what an object holds, and the commit protocol;
//! - [`row`]: a message as a row; [`encode`]: rows into files and back (NDJSON, and
//!   [`parquet`] behind the cargo feature `parquet`);
//! - [`index`]: the committed manifests a writer knows, bounded;
//! - [`engine`]: the [`BatchWriter`] itself.

pub mod config;
pub mod encode;
pub mod engine;
pub mod index;
pub mod manifest;
pub mod naming;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod partition;
pub mod row;
pub mod seqset;

pub use config::{BatchCompression, BatchConfig, ColumnConfig, ColumnType, Format, WriteMode};
pub use engine::{BatchWriter, ObjectLog, Settings, TempObject};
