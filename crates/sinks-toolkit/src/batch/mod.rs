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
//! - [`describe`]: what `nats-sink validate` says about a batch mode;
//! - [`crash_point`]: where the crash tests abort a commit (cargo feature `crash-points`);
//! - [`delta`]: the Delta Lake log table mode (`sink.batch.table`) writes and reads;
//!   committing objects into the table is private (`table.rs`); both behind the cargo
//!   feature `parquet`, as a table holds Parquet objects (without it the engine's table
//!   hooks are no-ops: a config with a table needs `format: parquet`, which such a build
//!   refuses); [`checkpoint`]: the table's state in one Parquet file, written every
//!   `checkpoint_interval` commits and read at start-up;
//! - [`object_log`]: what a sink supplies ([`ObjectLog`]) and how it configured the mode
//!   ([`Settings`]);
//! - [`engine`]: the [`BatchWriter`] itself: appending a write's messages, flushing,
//!   reading back; below it, private, the objects being filled (`groups.rs`), loading a
//!   partition's manifest log (`load.rs`), committing a closed object (`commit.rs`) and
//!   judging a redelivery against what is stored (`stored.rs`).

#[cfg(feature = "parquet")]
pub mod checkpoint;
pub mod config;
pub mod crash_point;
#[cfg(feature = "parquet")]
pub mod delta;
pub mod describe;
pub mod encode;
pub mod engine;
pub mod index;
pub mod manifest;
pub mod naming;
pub mod object_log;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod partition;
pub mod row;
pub mod seqset;

mod commit;
mod groups;
mod load;
mod stored;
#[cfg(feature = "parquet")]
mod table;

pub use config::{
    BatchCompression, BatchConfig, ColumnConfig, ColumnType, Format, TableConfig, TableFormat, WriteMode,
};
pub use engine::BatchWriter;
pub use object_log::{ObjectLog, Settings, TempObject};
#[cfg(feature = "parquet")]
pub use table::app_id;
