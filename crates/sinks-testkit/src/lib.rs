//! Test support shared by the workspace's integration tests, certification and benchmarks:
//! a private `nats-server` per test (which a test may kill and restart), a private three-node
//! JetStream cluster (any node of which a test may kill and restart), private MariaDB
//! servers (one shared per run, or one per outage test), real S3-compatible servers
//! (SeaweedFS, and moto's server as a second implementation), Oracle Coherence CE cluster members (one shared per run, or private ones a
//! test kills, restarts from persistence or joins with a second member), a real Oracle NoSQL
//! Database (KVLite and its HTTP proxy, one shared per run or a private one a test kills and
//! restarts), an Oracle NoSQL fault-injection server speaking the proxy's protocol (in
//! process), an HTTP ingestion endpoint with fault injection and namespaces (in process), an OpenTelemetry Collector with the OTLP receiver and the file exporter, unique names, and small JetStream helpers. Every server runs on free ports
//! from the tools `cargo xtask setup` installs (KVLite from `../shared/oracle-nosql`), and dies with the process that started it;
//! nothing here uses a server the machine happens to run. A test that cannot run fails
//! ([`cannot_run`]) unless what it lacks is on the one allow-list (`allowed_skip`). Not
//! published. The HTTP test server and the skip helpers need the default `certify` feature
//! (they read the product's formats); without it nothing here depends on a product crate.
#![allow(clippy::print_stderr, clippy::unwrap_used)]

/// Environment variables that point a test run at servers started for it.
pub type RunEnv = Vec<(&'static str, String)>;

mod cluster;
mod coherence;
#[cfg(feature = "certify")]
pub mod crash;
mod delta;
mod fault_proxy;
#[cfg(feature = "certify")]
pub mod http;
mod json;
mod kvlite;
mod mariadb;
mod moto;
mod names;
mod nats;
mod net_cluster;
mod netns;
mod nosql;
mod otelcol;
mod pki;
mod process;
mod seaweedfs;
mod sizes;
mod skip;
mod tcp_proxy;

pub use cluster::{CLUSTER_NODES, ClusterSpec, NatsCluster};
pub use coherence::{
    COHERENCE_ENV, CoherenceMember, JAVA_OPTS_ENV, coherence_lib, find_java, shared_coherence, start_coherence_for_run,
};
pub use delta::{DeltaRead, Maintenance, maintain_delta, optimize_delta, read_delta};
pub use fault_proxy::FaultProxy;
#[cfg(feature = "certify")]
pub use http::{
    FINGERPRINT_HEADER, HealthAnswer, HttpFault, HttpServerTls, HttpTestServer, INGEST_PATH, LoggedRequest,
    RESPONSE_ID_HEADER, StoredRecord, Strict, Throttle, shared_http,
};
pub use json::merge_json;
pub use kvlite::{
    KVLITE_FREE_DISK_FLOOR, KVLITE_JAVA_OPTS_ENV, KvLite, NOSQL_LIVE_ENV, ORACLE_NOSQL_DIR_ENV, ORACLE_NOSQL_VERSION,
    kvlite_disk_note, nosql_admin, nosql_request, oracle_nosql_dir, shared_kvlite, start_kvlite_for_run,
};
pub use mariadb::{MYSQL_ENV, MariaDb, MySqlAddr, find_mariadb, shared_mysql, start_mysql_for_run};
pub use moto::{MOTO_BIN_ENV, MOTO_VERSION, Moto, find_moto};
pub use names::unique;
pub use nats::{
    NATSCLI_ENV, NatsServer, consumer_settled, consumer_settled_on, durable_pull_consumer, find_nats_server,
    find_natscli, js_publish_all, read_stream, stream_with_subjects, try_find_nats_server, wait_until,
};
pub use net_cluster::{NetCluster, QUICK_PINGS};
pub use netns::{HOST, MAX_MEMBERS, Member, Net};
pub use nosql::{NoSqlTestServer, Nson};
pub use otelcol::{Collector, CollectorTls, OTELCOL_ENV, find_collector};
pub use pki::TestPki;
pub use process::{
    cargo, debug_nats_sink, free_port, free_port_range, nginx_binary, process_state, reference_python, target_dir,
    tools_dir, watch, workspace_root,
};
pub use seaweedfs::{
    ENDPOINT_ENV, FILER_ENV, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3Endpoint, SeaweedFs, find_weed, shared_s3,
    start_for_run,
};
pub use sizes::{
    GRACEFUL_MESSAGES_ENV, JEPSEN_CI_MINUTES, JEPSEN_FULL_MINUTES, JEPSEN_MINUTES_ENV, KILLS_ENV, MESSAGES_ENV, Plan,
    ROUNDS_ENV, SOAK_CI_MINUTES, SOAK_FULL_MINUTES, SOAK_MINUTES_ENV, rounds,
};
pub use skip::cannot_run;
#[cfg(feature = "certify")]
pub use skip::{ALLOWED_SKIPS, ORACLE_DATABASE, SKIP_LOG_ENV, allowed_skip, env_or_allowed_skip};
pub use tcp_proxy::TcpProxy;
