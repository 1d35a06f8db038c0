//! The soak's servers and the faults it injects into them: the NATS topology (one server, or
//! a three-node cluster), each sink's destination with its outage, and the fault plan.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use async_nats::jetstream::Context as Js;
use rand::Rng;
use rand::rngs::StdRng;
use sinks_certify::{CrashTarget, Harness, Record, Records};
use sinks_testkit::{HttpTestServer, MariaDb, NatsCluster, NatsServer, SeaweedFs};

use super::Topology;

/// The sinks the soak knows.
pub(crate) const SINKS: [&str; 4] = ["file", "http", "mysql", "s3"];

/// One fault of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `kill -9` of the sink, then a restart.
    SinkKill,
    /// SIGTERM of the sink (it must exit 0), then a restart.
    SinkTerm,
    /// The nats-server (or one node of the cluster) killed, then restarted on its store.
    NatsKill,
    /// HTTP: every request answered 503 for the outage.
    Http503,
    /// HTTP: the next requests stall for 3 s, then 503 (nothing stored).
    HttpStall,
    /// MariaDB killed, then restarted on its data.
    MySqlDown,
    /// SeaweedFS killed, then restarted on its data.
    S3Down,
    /// The file sink's disk full (`ENOSPC`), then space again.
    DiskFull,
    /// The source stream deleted and created again mid-run (the publisher paused and the
    /// sink drained first), then the operator's decision applied (`nats-sink stream-identity
    /// --accept new-epoch`). Once per phase, at its middle.
    StreamRecreate,
    /// The nats-server (or one cluster node) killed while the sink is idle (the publisher
    /// paused and everything settled), then traffic resumes: the sink must consume again.
    /// Once per phase, at a quarter of it.
    NatsIdleKill,
}

impl Fault {
    /// The kind's name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::SinkKill => "sink kill -9",
            Self::SinkTerm => "sink SIGTERM",
            Self::NatsKill => "nats kill",
            Self::Http503 => "http 503 burst",
            Self::HttpStall => "http stalls",
            Self::MySqlDown => "mariadb kill",
            Self::S3Down => "seaweedfs kill",
            Self::DiskFull => "disk full",
            Self::StreamRecreate => "stream re-created",
            Self::NatsIdleKill => "nats kill while idle",
        }
    }

    /// A fault for `sink`, drawn from `rng`: the sink, NATS and the destination alike.
    pub(crate) fn pick(rng: &mut StdRng, sink: &str) -> Self {
        let destination: &[Self] = match sink {
            "http" => &[Self::Http503, Self::HttpStall],
            "mysql" => &[Self::MySqlDown],
            "s3" => &[Self::S3Down],
            _ => &[Self::DiskFull],
        };
        match rng.random_range(0..6) {
            0 | 1 => Self::SinkKill,
            2 => Self::SinkTerm,
            3 => Self::NatsKill,
            _ => destination[rng.random_range(0..destination.len())],
        }
    }
}

/// The NATS servers of a phase.
pub(crate) enum Nats {
    Single(Box<NatsServer>),
    Cluster(Box<NatsCluster>),
}

impl Nats {
    pub(crate) async fn start(topology: Topology) -> Self {
        match topology {
            Topology::Single => Self::Single(Box::new(NatsServer::start())),
            Topology::Cluster => Self::Cluster(Box::new(NatsCluster::start().await)),
        }
    }

    pub(crate) async fn js(&self) -> Js {
        match self {
            Self::Single(s) => s.js().await,
            Self::Cluster(c) => c.js().await,
        }
    }

    /// Every server's URL (the sink is seeded with all of them).
    pub(crate) fn urls(&self) -> Vec<String> {
        match self {
            Self::Single(s) => vec![s.url()],
            Self::Cluster(c) => c.urls(),
        }
    }

    /// A stream of one subject pattern (R3 on the cluster).
    pub(crate) async fn create_stream(&self, js: &Js, name: &str, subject: &str) {
        match self {
            Self::Single(_) => {
                sinks_testkit::stream_with_subjects(js, name, &[subject]).await;
            }
            Self::Cluster(c) => {
                c.create_stream(js, name, &[subject], 3).await;
            }
        }
    }

    /// Kills the server (or a random node) for `outage`, then restarts it.
    pub(crate) async fn outage(&mut self, rng: &mut StdRng, outage: Duration) {
        match self {
            Self::Single(s) => {
                s.kill();
                tokio::time::sleep(outage).await;
                s.restart();
            }
            Self::Cluster(c) => {
                let node = rng.random_range(0..sinks_testkit::CLUSTER_NODES);
                c.kill(node);
                tokio::time::sleep(outage).await;
                c.restart(node);
            }
        }
    }
}

/// A sink's destination: where the sink writes (its crash target: a section keyed by stream
/// sequence, and a reader), and what its outage does.
pub(crate) struct Destination {
    pub(crate) target: CrashTarget,
    kind: Kind,
}

enum Kind {
    File { mount: PathBuf },
    Http(std::sync::Arc<HttpTestServer>),
    MySql(MariaDb),
    S3(SeaweedFs),
}

/// Reads a file sink's records.
struct FileRecords(PathBuf);

#[async_trait::async_trait]
impl Records for FileRecords {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        sink_file::certify::read_records(&self.0)
    }
}

/// Reads an HTTP test server's records.
struct HttpRecords(std::sync::Arc<HttpTestServer>);

#[async_trait::async_trait]
impl Records for HttpRecords {
    async fn read_all(&self) -> Result<Vec<Record>, String> {
        self.0.read_records()
    }
}

impl Destination {
    pub(crate) async fn start(sink: &str, dir: &Path) -> Result<Self> {
        Ok(match sink {
            "file" => {
                // A real tmpfs, so that the disk can really be full. Large enough for every
                // record of a long phase (a record takes a 4 KiB page: 128 MiB held only 32,768
                // of them, which a 30-minute run's file phase, dead-lettering nothing through
                // its outages, outgrew: the disk stayed full after the fault and nothing
                // drained); tmpfs takes memory only as it fills, and the fault fills it all.
                let mount = dir.join("out");
                std::fs::create_dir_all(&mount)?;
                let mounted = std::process::Command::new("mount")
                    .args(["-t", "tmpfs", "-o", "size=1g,mode=0755", "tmpfs"])
                    .arg(&mount)
                    .status()
                    .is_ok_and(|s| s.success());
                if !mounted {
                    bail!("the file sink's disk-full fault needs a tmpfs: `mount -t tmpfs` failed (run as root)");
                }
                let sink_section = serde_json::json!({"type": "file", "directory": mount, "fsync": true});
                let target =
                    CrashTarget { sink_section, records: Box::new(FileRecords(mount.clone())), env: Vec::new() };
                Self { target, kind: Kind::File { mount } }
            }
            "http" => {
                let server = HttpTestServer::start().await.context("http test server")?;
                server.set_request_log(false);
                let sink_section = serde_json::json!({
                    "type": "http", "url": server.url(), "allow_http_for_local_testing": true,
                    "inquiry_url": server.inquiry_url(),
                    "inquiry_fingerprint_header": sinks_testkit::FINGERPRINT_HEADER,
                    "request_timeout_seconds": 2.0,
                });
                let server = std::sync::Arc::new(server);
                let target = CrashTarget {
                    sink_section,
                    records: Box::new(HttpRecords(std::sync::Arc::clone(&server))),
                    env: Vec::new(),
                };
                Self { target, kind: Kind::Http(server) }
            }
            "mysql" => {
                let db = MariaDb::try_start().map_err(anyhow::Error::msg)?;
                let addr = db.addr();
                let harness =
                    sink_mysql::certify::MySqlHarness::new(sink_mysql::certify::TestServer::new(addr.host, addr.port));
                let target = harness.crash_target().await.map_err(anyhow::Error::msg)?;
                Self { target, kind: Kind::MySql(db) }
            }
            "s3" => {
                let weed = SeaweedFs::start().await.map_err(anyhow::Error::msg)?;
                let endpoint = weed.endpoint();
                let harness = sink_s3::certify::S3Harness::new(
                    endpoint.endpoint,
                    endpoint.filer,
                    sinks_testkit::S3_ACCESS_KEY_ID,
                    sinks_testkit::S3_SECRET_ACCESS_KEY,
                );
                let target = harness.crash_target().await.map_err(anyhow::Error::msg)?;
                Self { target, kind: Kind::S3(weed) }
            }
            other => bail!("no soak destination for {other}"),
        })
    }

    /// Makes the destination fail as `fault` says, for `outage`.
    pub(crate) async fn outage(&mut self, fault: Fault, outage: Duration) -> Result<()> {
        match (&mut self.kind, fault) {
            (Kind::Http(server), Fault::Http503) => {
                server.set_refuse_every(Some(1));
                tokio::time::sleep(outage).await;
                server.set_refuse_every(None);
            }
            (Kind::Http(server), Fault::HttpStall) => {
                server.push_n(20, sinks_testkit::HttpFault::Stall(Duration::from_secs(3)));
                tokio::time::sleep(outage).await;
            }
            (Kind::MySql(db), Fault::MySqlDown) => {
                db.kill();
                tokio::time::sleep(outage).await;
                db.restart();
            }
            (Kind::S3(weed), Fault::S3Down) => {
                weed.kill();
                tokio::time::sleep(outage).await;
                weed.restart().await.map_err(anyhow::Error::msg)?;
            }
            (Kind::File { mount }, Fault::DiskFull) => {
                let ballast = mount.join(".ballast");
                fill(&ballast);
                tokio::time::sleep(outage).await;
                std::fs::remove_file(&ballast).with_context(|| format!("removing {}", ballast.display()))?;
            }
            (_, other) => bail!("fault {} does not apply to this destination", other.name()),
        }
        Ok(())
    }
}

/// Writes zeros to `path` until the disk is full.
fn fill(path: &Path) {
    use std::io::Write as _;
    let Ok(mut file) = std::fs::File::create(path) else { return };
    let chunk = vec![0u8; 1 << 20];
    while file.write_all(&chunk).is_ok() {}
    let _ = file.sync_all();
}

impl Drop for Destination {
    fn drop(&mut self) {
        if let Kind::File { mount } = &self.kind {
            let _ = std::process::Command::new("umount").arg("-l").arg(mount).status();
        }
    }
}
