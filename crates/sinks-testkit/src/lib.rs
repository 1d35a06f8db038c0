//! Test support shared by the workspace's integration tests, certification and benchmarks:
//! a private `nats-server` per test (which a test may kill and restart), a private MariaDB
//! server for outage tests, a real S3-compatible server (SeaweedFS), unique names, and small
//! JetStream helpers. Not published.
#![allow(clippy::print_stderr, clippy::unwrap_used)]

mod mariadb;
mod names;
mod nats;
mod process;
mod seaweedfs;

pub use mariadb::MariaDb;
pub use names::unique;
pub use nats::{NatsServer, find_nats_server, js_publish_all, read_stream, stream_with_subjects, wait_until};
pub use process::{free_port, workspace_root};
pub use seaweedfs::{
    ENDPOINT_ENV, FILER_ENV, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3Endpoint, SeaweedFs, find_weed, shared_s3,
    start_for_run,
};
