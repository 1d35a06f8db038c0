//! The toolkit of nats-sinks: the mechanics more than one sink needs, each once and with
//! its own tests. A sink opts into what it uses; none of it is part of the contract
//! (`sinks-contract`), and none of it talks to NATS.
//!
//! - [`in_order`]: writing concurrently while keeping the contract's ordering rule;
//!   [`lanes`]: the same rule for placements made with blocking calls.
//! - [`retry`]: backoff and retries inside a write, within the write's budget, and the
//!   retry fields of a sink section; [`rate`]: pacing writes under a rate limit.
//! - [`checks`]: checks of config values several sinks share (bounded text, tokens,
//!   seconds).
//! - [`metadata`]: the standard metadata document stored next to a payload.
//! - [`encryption`]: payload encryption and its `encryption` section.
//! - [`relational`] and [`columns`]: key settings, table routes, neutral row cells and the
//!   column mapping of relational sinks.
//! - [`batch`]: the batch mode of the object sinks (partitions, naming, manifests, NDJSON
//!   and Parquet encoders, the writer), and [`holding`]: what a holding sink and whoever
//!   writes through one need.
//! - [`files`] (create-if-absent placement) and [`fs_errors`] (filesystem errors in the
//!   contract's classes), [`compression`], [`blocking`] work, and NATS [`subject`] patterns.

pub mod batch;
pub mod blocking;
pub mod checks;
pub mod columns;
pub mod compression;
pub mod encryption;
mod existing;
pub mod files;
pub mod fs_errors;
pub mod holding;
pub mod in_order;
pub mod lanes;
pub mod metadata;
pub mod pyfloat;
pub mod rate;
pub mod relational;
pub mod retry;
pub mod sink_root;
pub mod subject;
