//! Oracle Coherence CE cluster members for tests: `com.tangosol.net.Coherence` from the jars
//! `cargo xtask setup` resolves (Coherence CE 25.03.2, with the gRPC proxy and the JSON
//! serializer) into `.local/tools/coherence/lib`, run by the machine's Java 17.
//!
//! [`CoherenceMember::start`] runs a private, one-member cluster on free ports (gRPC proxy,
//! health HTTP, cluster discovery port), well-known address 127.0.0.1 (no multicast), a
//! unique cluster name, and **active persistence** under a temporary directory, so a member
//! killed with SIGKILL and restarted ([`CoherenceMember::restart`]) on the same ports and
//! directory recovers every entry. [`CoherenceMember::join`] starts a second member of the
//! same cluster (backups: a put is acknowledged once its backup copy is on the other
//! member). Readiness is the health endpoint's `/ready` (200 only once recovery has
//! finished). [`shared_coherence`] gives the member named by `NATS_SINKS_TEST_COHERENCE`
//! (started once per run by `cargo xtask test`, `certify` and `bench`), or else starts one
//! private member for the calling process. Tests make their own uniquely named caches.
//! Members start with a small heap and the client JIT only (fast start-up);
//! `NATS_SINKS_COHERENCE_JAVA_OPTS` appends JVM options (for example a flight recording
//! or the server JIT) for profiling and tuning experiments.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::process::{Readiness, await_ready, first_file, free_port, on_path, tools_dir};

/// Environment variable naming a running member's gRPC proxy (`127.0.0.1:PORT`).
pub const COHERENCE_ENV: &str = "NATS_SINKS_TEST_COHERENCE";
/// Environment variable with extra JVM options for the members started here (split on
/// whitespace, after the defaults, so they override them).
pub const JAVA_OPTS_ENV: &str = "NATS_SINKS_COHERENCE_JAVA_OPTS";

/// The directory of the Coherence jars (`COHERENCE_LIB`, else the tools directory).
pub fn coherence_lib() -> Result<PathBuf, String> {
    let lib = std::env::var_os("COHERENCE_LIB").map(PathBuf::from).unwrap_or_else(|| tools_dir().join("coherence/lib"));
    if lib.join("coherence-25.03.2.jar").is_file() {
        Ok(lib)
    } else {
        Err(format!("no Coherence CE jars in {}: run `cargo xtask setup` (or set COHERENCE_LIB)", lib.display()))
    }
}

/// Locates `java`: `JAVA_HOME/bin/java`, then `PATH`.
pub fn find_java() -> Result<PathBuf, String> {
    first_file([std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/java")), on_path("java")])
        .ok_or_else(|| "no `java` (Java 17): run `cargo xtask setup`".to_owned())
}

/// What the members of one test cluster share.
#[derive(Debug)]
struct Cluster {
    name: String,
    cluster_port: u16,
    /// Active-persistence base directory (shared by the members, as Coherence allows).
    dir: tempfile::TempDir,
    java: PathBuf,
    lib: PathBuf,
}

/// One member of a private test cluster: killed on drop, and by a watchdog when the owning
/// process ends.
#[derive(Debug)]
pub struct CoherenceMember {
    cluster: Arc<Cluster>,
    member: String,
    grpc_port: u16,
    health_port: u16,
    child: Option<Child>,
}

impl CoherenceMember {
    /// Starts the first member of a new private cluster and waits until it is ready.
    pub async fn start() -> Result<Self, String> {
        let java = find_java()?;
        let lib = coherence_lib()?;
        let dir = tempfile::Builder::new().prefix("coherence-").tempdir().map_err(|e| e.to_string())?;
        let name = format!("natssinks-{}-{:08x}", std::process::id(), rand::random::<u32>());
        let cluster = Arc::new(Cluster { name, cluster_port: free_port(), dir, java, lib });
        let mut member = Self::new_member(cluster, "m1");
        member.spawn().await?;
        Ok(member)
    }

    /// Starts another member of this member's cluster (same name, discovery port and
    /// persistence directory) and waits until it is ready.
    pub async fn join(&self) -> Result<Self, String> {
        let n = rand::random::<u16>();
        let mut member = Self::new_member(Arc::clone(&self.cluster), &format!("m{n}"));
        member.spawn().await?;
        Ok(member)
    }

    fn new_member(cluster: Arc<Cluster>, member: &str) -> Self {
        let grpc_port = free_port();
        let mut health_port = free_port();
        while health_port == grpc_port || health_port == cluster.cluster_port {
            health_port = free_port();
        }
        Self { cluster, member: member.to_owned(), grpc_port, health_port, child: None }
    }

    /// The gRPC proxy address, `127.0.0.1:PORT` (stable across restarts).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    /// The member's process id while it runs (the benchmark reads its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The member's log file.
    pub fn log(&self) -> PathBuf {
        self.cluster.dir.path().join(format!("{}.log", self.member))
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let c = &self.cluster;
        let persistence = c.dir.path().join("persistence");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .map_err(|e| format!("cannot open the member log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let props = [
            format!("-Dcoherence.cluster={}", c.name),
            format!("-Dcoherence.member={}", self.member),
            "-Dcoherence.wka=127.0.0.1".into(),
            "-Dcoherence.localhost=127.0.0.1".into(),
            "-Dcoherence.ttl=0".into(),
            format!("-Dcoherence.clusterport={}", c.cluster_port),
            "-Dcoherence.grpc.server.address=127.0.0.1".into(),
            format!("-Dcoherence.grpc.server.port={}", self.grpc_port),
            "-Dcoherence.health.http.address=127.0.0.1".into(),
            format!("-Dcoherence.health.http.port={}", self.health_port),
            "-Dcoherence.distributed.persistence.mode=active".into(),
            format!("-Dcoherence.distributed.persistence.base.dir={}", persistence.display()),
            "-Dcoherence.management=none".into(),
            "-Dcoherence.proxy.enabled=false".into(),
            "-Dcoherence.topic.enabled=false".into(),
            "-Dcoherence.distributed.partitioncount=31".into(),
            "-Dcoherence.join.timeout=1000".into(),
        ];
        let child = Command::new(&c.java)
            .args([
                "-Xms64m",
                "-Xmx512m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true",
            ])
            .args(props)
            // Extra JVM options, last so that they override the ones above (profiling,
            // tuning experiments); none by default.
            .args(std::env::var(JAVA_OPTS_ENV).unwrap_or_default().split_whitespace())
            .arg("-cp")
            .arg(format!("{}/*", c.lib.display()))
            .arg("com.tangosol.net.Coherence")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", c.java.display()))?;
        crate::process::watch(&child);
        self.child = Some(child);
        self.wait_ready().await
    }

    /// Waits until `/ready` on the health port answers 200 (the gRPC proxy is up and any
    /// recovery from persistence has finished).
    async fn wait_ready(&mut self) -> Result<(), String> {
        let url = format!("http://127.0.0.1:{}/ready", self.health_port);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().map_err(|e| e.to_string())?;
        let log = self.log();
        let tail = move || format!("log in {}", log.display());
        let how = Readiness::new("coherence member", Duration::from_secs(120), &tail);
        await_ready(&mut self.child, how, async || http.get(&url).send().await.is_ok_and(|r| r.status().is_success()))
            .await
    }

    /// Stops the member abruptly (SIGKILL) and waits until its gRPC port is closed.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
        crate::process::wait_closed(self.grpc_port);
    }

    /// Starts the member again on the same ports with the same persistence directory, and
    /// waits until it has recovered.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn().await
    }
}

impl Drop for CoherenceMember {
    fn drop(&mut self) {
        self.kill();
    }
}

static SHARED: tokio::sync::OnceCell<Result<String, String>> = tokio::sync::OnceCell::const_new();

/// The Coherence gRPC address tests share: the one named by [`COHERENCE_ENV`], else a
/// private member started once for this process (stopped when the process ends).
pub async fn shared_coherence() -> Result<String, String> {
    let shared = SHARED
        .get_or_init(|| async {
            if let Ok(address) = std::env::var(COHERENCE_ENV) {
                return Ok(address);
            }
            // Leaked on purpose: it serves the whole process, and its watchdog stops it when
            // the process ends.
            let member: &'static CoherenceMember = Box::leak(Box::new(CoherenceMember::start().await?));
            eprintln!("sinks-testkit: started a private Coherence member at {}", member.address());
            Ok(member.address())
        })
        .await;
    shared.clone()
}

/// Starts a member for a whole test run (used by `cargo xtask test`, `certify`, `bench`):
/// returns it with the environment variable that makes [`shared_coherence`] use it.
pub async fn start_coherence_for_run() -> Result<(CoherenceMember, crate::RunEnv), String> {
    let member = CoherenceMember::start().await?;
    let address = member.address();
    Ok((member, vec![(COHERENCE_ENV, address)]))
}
