//! A real Oracle NoSQL Database for tests: KVLite (one store, one replication node, the admin)
//! and the Oracle NoSQL HTTP proxy in front of it, Community Edition 25.3.21, from the jars in
//! the repository's sibling directory `../shared/oracle-nosql` (built from Oracle's Apache-2.0
//! source with Maven Central only; its `BUILD.md` says how), run by the machine's Java 17.
//!
//! [`KvLite::start`] creates a fresh, non-secure store under a temporary directory on reserved
//! ports (the registry port and two replication ports, consecutive: [`free_port_range`]) and
//! starts the proxy on another reserved port, with the proxy's own default write durability
//! (`COMMIT_NO_SYNC`, what an operator gets without `-kvDurability`). A test may SIGKILL the
//! store, the proxy or both ([`KvLite::kill_store`], [`KvLite::kill_proxy`]) and start them
//! again on the same ports and store ([`KvLite::start_store`], [`KvLite::start_proxy`]). Each
//! JVM runs with a small heap (`-Xmx256m` for the store, `-Xmx128m` for the proxy), the serial
//! collector and the client JIT only: a new store answers in about 6 s and a reopened one in
//! about 5 s on two cores, at about 160 MB + 85 MB RSS.
//! `NATS_SINKS_KVLITE_JAVA_OPTS` appends JVM options to both (the benchmark asks for the
//! server JIT). Both processes are killed on drop and by a watchdog when the owning process
//! ends.
//!
//! [`shared_kvlite`] gives the proxy named by `NATS_SINKS_TEST_NOSQL_ENDPOINT` (one store for a
//! whole `cargo xtask test`, `certify` or `bench` run: [`start_kvlite_for_run`]), or else
//! starts one store for the calling process. Tests make their own uniquely named tables.
//!
//! KVLite's storage engine (Berkeley DB JE) prohibits every write while the disk under the
//! store has less than `je.freeDisk` free (5 GiB, its default): a CREATE TABLE then fails with
//! `NoSQLException`, and a put or a DDL poll goes unanswered. [`KvLite::start`] refuses to
//! start a store on a disk within 1 GiB of that floor, and [`kvlite_disk_note`] says so in a
//! failing test's message: a full disk is named as the cause, never mistaken for a slow store.
//!
//! The directory is `NATS_SINKS_ORACLE_NOSQL_DIR`, else `<workspace>/../shared/oracle-nosql`.
//! Without it a test fails, saying where it looked: the real server is what the NoSQL tests
//! run against, never skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::nosql::{Nson, read_value, write_value};
use crate::process::{free_port, free_port_range, wait_closed, workspace_root};

/// The Oracle NoSQL Database release the jars are.
pub const ORACLE_NOSQL_VERSION: &str = "25.3.21";
/// Environment variable naming the directory with `lib/kvstore-25.3.21.jar` and
/// `lib/httpproxy-25.3.21.jar` (default: `../shared/oracle-nosql` next to the workspace).
pub const ORACLE_NOSQL_DIR_ENV: &str = "NATS_SINKS_ORACLE_NOSQL_DIR";
/// Environment variable naming a running proxy (`http://127.0.0.1:PORT`) that the tests of a
/// run share.
pub const NOSQL_LIVE_ENV: &str = "NATS_SINKS_TEST_NOSQL_ENDPOINT";
/// Environment variable with extra JVM options for KVLite and the proxy (split on
/// whitespace, after the defaults, so they override them).
pub const KVLITE_JAVA_OPTS_ENV: &str = "NATS_SINKS_KVLITE_JAVA_OPTS";

/// The store's name (the proxy's `-storeName`).
const STORE: &str = "kvstore";
/// How long a start may take before it is a failure.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// JVM options of both processes: quick start-up and small, fixed memory.
const JVM: [&str; 3] = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true"];

/// The free space KVLite's storage engine needs on its disk to accept writes: JE's
/// `je.freeDisk`, 5 GiB by default (below it KVLite logs "write operations are prohibited").
pub const KVLITE_FREE_DISK_FLOOR: u64 = 5 << 30;
/// The room above [`KVLITE_FREE_DISK_FLOOR`] a new store asks for: a test run writes build
/// output, logs and data while the store serves it.
const START_MARGIN: u64 = 1 << 30;

/// Bytes available to this user on the file system holding `path` (`statvfs`), if known.
fn available_bytes(path: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(path).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Why a store at `path` with `available` bytes free cannot be used: below `floor` +
/// `margin` (the margin is 0 for a running store, [`START_MARGIN`] for a new one); `None`
/// when it can.
fn disk_shortfall(path: &Path, available: u64, margin: u64) -> Option<String> {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    (available < KVLITE_FREE_DISK_FLOOR + margin).then(|| {
        let start = if margin > 0 {
            format!(
                " (a new store asks for {:.1} GiB: the run writes more while it serves)",
                gib(KVLITE_FREE_DISK_FLOOR + margin)
            )
        } else {
            String::new()
        };
        format!(
            "the disk under {} has {:.1} GiB free, and KVLite's storage engine (JE, je.freeDisk) prohibits every \
             write below {:.1} GiB free{start}: DDL then fails with NoSQLException and requests go unanswered; \
             free some space",
            path.display(),
            gib(available),
            gib(KVLITE_FREE_DISK_FLOOR),
        )
    })
}

/// A note for a failing NoSQL test's message: why the store refuses writes when the disk
/// under the temporary directory is below [`KVLITE_FREE_DISK_FLOOR`], else an empty string.
pub fn kvlite_disk_note() -> String {
    let dir = std::env::temp_dir();
    available_bytes(&dir)
        .and_then(|free| disk_shortfall(&dir, free, 0))
        .map(|why| format!("\n(note: {why})"))
        .unwrap_or_default()
}

/// The directory of the Oracle NoSQL jars (`lib/`), or why there is none.
pub fn oracle_nosql_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os(ORACLE_NOSQL_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/oracle-nosql"));
    with_jars(&dir)
}

/// `dir` (canonical) when its `lib/` holds the KVLite and proxy jars; else what is missing.
fn with_jars(dir: &Path) -> Result<PathBuf, String> {
    let lib = dir.join("lib");
    for jar in [format!("kvstore-{ORACLE_NOSQL_VERSION}.jar"), format!("httpproxy-{ORACLE_NOSQL_VERSION}.jar")] {
        if !lib.join(&jar).is_file() {
            return Err(format!(
                "no Oracle NoSQL Database {ORACLE_NOSQL_VERSION} (KVLite + proxy): {} is missing; the jars live in \
                 `../shared/oracle-nosql` next to the workspace (its BUILD.md says how they are built), or set \
                 {ORACLE_NOSQL_DIR_ENV}",
                lib.join(&jar).display()
            ));
        }
    }
    Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// A KVLite store and its HTTP proxy, owned by a test: killed on drop, and by a watchdog when
/// the owning process ends.
#[derive(Debug)]
pub struct KvLite {
    root: tempfile::TempDir,
    java: PathBuf,
    lib: PathBuf,
    /// The registry port; the two replication ports follow it.
    kv_port: u16,
    http_port: u16,
    store: Option<Child>,
    proxy: Option<Child>,
    /// JVM options after the defaults and [`KVLITE_JAVA_OPTS_ENV`]'s.
    java_opts: Vec<String>,
}

impl KvLite {
    /// Creates a new store and starts the proxy; returns once the proxy answers.
    pub async fn start() -> Result<Self, String> {
        Self::start_with(&[]).await
    }

    /// [`KvLite::start`] with extra JVM options for both processes (after the defaults, so
    /// they override them: the benchmark asks for the server JIT).
    pub async fn start_with(java_opts: &[&str]) -> Result<Self, String> {
        let java = crate::coherence::find_java()?;
        let lib = oracle_nosql_dir()?.join("lib");
        let root = crate::process::owned_tempdir(ROOT_PREFIX)?;
        if let Some(why) = available_bytes(root.path()).and_then(|free| disk_shortfall(root.path(), free, START_MARGIN))
        {
            return Err(format!("cannot start KVLite: {why}"));
        }
        let kv_port = free_port_range(3);
        let http_port = free_port();
        let java_opts = java_opts.iter().map(|o| (*o).to_owned()).collect();
        let mut kv = Self { root, java, lib, kv_port, http_port, store: None, proxy: None, java_opts };
        let started = match kv.start_store().await {
            Ok(()) => kv.start_proxy().await,
            Err(e) => Err(e),
        };
        match started {
            Ok(()) => Ok(kv),
            Err(e) => {
                // Keep the store's directory and logs for a look; the processes die on drop.
                kv.kill();
                let failed = std::env::temp_dir().join(format!("kvlite-failed-{}", rand::random::<u32>()));
                let logs = std::fs::create_dir_all(&failed).and_then(|()| {
                    for log in ["kvlite.log", "proxy.log"] {
                        if kv.log(log).exists() {
                            std::fs::copy(kv.log(log), failed.join(log))?;
                        }
                    }
                    Ok(())
                });
                Err(format!(
                    "{e}\n(logs {})",
                    if logs.is_ok() { format!("kept in {}", failed.display()) } else { "lost".into() }
                ))
            }
        }
    }

    /// The proxy's endpoint, `http://127.0.0.1:PORT` (stable across restarts).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The proxy's port.
    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// KVLite's process id while it runs.
    pub fn store_pid(&self) -> Option<u32> {
        self.store.as_ref().map(Child::id)
    }

    /// The proxy's process id while it runs.
    pub fn proxy_pid(&self) -> Option<u32> {
        self.proxy.as_ref().map(Child::id)
    }

    /// The directory holding the store (`kvroot`) and the two logs.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    fn log(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// The last lines of both logs (stack frames left out), for failure messages.
    pub fn log_tail(&self) -> String {
        let tail = |name: &str| {
            let text = std::fs::read_to_string(self.log(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("at ")).rev().take(15).collect();
            format!("--- {name}\n{}", lines.into_iter().rev().collect::<Vec<_>>().join("\n"))
        };
        format!("{}\n{}", tail("kvlite.log"), tail("proxy.log"))
    }

    fn java_command(&self, heap: [&str; 2]) -> Command {
        let mut command = Command::new(&self.java);
        command
            .args(heap)
            .args(JVM)
            // Extra JVM options, last so that they override the ones above.
            .args(std::env::var(KVLITE_JAVA_OPTS_ENV).unwrap_or_default().split_whitespace())
            .args(&self.java_opts)
            .stdin(Stdio::null());
        command
    }

    fn spawn(&self, mut command: Command, log: &str) -> Result<Child, String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(log))
            .map_err(|e| format!("cannot open {log}: {e}"))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = command
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.java.display()))?;
        crate::process::watch(&child);
        Ok(child)
    }

    /// Starts KVLite (creating the store the first time, reopening it after) and waits until
    /// it has opened the store; when the proxy runs, also until the proxy serves requests
    /// from it again.
    pub async fn start_store(&mut self) -> Result<(), String> {
        self.kill_store();
        let log_from = std::fs::metadata(self.log("kvlite.log")).map(|m| m.len()).unwrap_or(0);
        let (port, ha) = (self.kv_port, format!("{},{}", self.kv_port + 1, self.kv_port + 2));
        let mut command = self.java_command(["-Xms64m", "-Xmx256m"]);
        command.arg("-jar").arg(self.lib.join(format!("kvstore-{ORACLE_NOSQL_VERSION}.jar"))).arg("kvlite");
        command.arg("-root").arg(self.root.path().join("kvroot"));
        command.args(["-store", STORE, "-host", "127.0.0.1", "-port", &port.to_string(), "-harange", &ha]);
        command.args(["-secure-config", "disable"]);
        self.store = Some(self.spawn(command, "kvlite.log")?);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let log = std::fs::read(self.log("kvlite.log")).unwrap_or_default();
            let new = String::from_utf8_lossy(log.get(usize::try_from(log_from).unwrap_or(0)..).unwrap_or_default());
            if new.contains("Created new kvlite store") || new.contains("Opened existing store") {
                break;
            }
            if let Some(Ok(Some(status))) = self.store.as_mut().map(Child::try_wait) {
                return Err(format!("KVLite exited ({status})\n{}", self.log_tail()));
            }
            if Instant::now() > deadline {
                return Err(format!("KVLite did not open its store within {START_TIMEOUT:?}\n{}", self.log_tail()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if self.proxy.is_some() { self.wait_serving(deadline).await } else { Ok(()) }
    }

    /// Starts the proxy (with its default durability) and waits until it serves requests
    /// from the store. The proxy gives up when it cannot reach the store within about 10 s;
    /// it is started again until the deadline.
    pub async fn start_proxy(&mut self) -> Result<(), String> {
        self.kill_proxy();
        let deadline = Instant::now() + START_TIMEOUT;
        self.proxy = Some(self.spawn_proxy()?);
        loop {
            if self.proxy_answers().await {
                return self.wait_serving(deadline).await;
            }
            if let Some(Ok(Some(_))) = self.proxy.as_mut().map(Child::try_wait) {
                self.proxy = Some(self.spawn_proxy()?);
            }
            if Instant::now() > deadline {
                return Err(format!("the NoSQL proxy did not answer within {START_TIMEOUT:?}\n{}", self.log_tail()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn spawn_proxy(&self) -> Result<Child, String> {
        let mut command = self.java_command(["-Xms32m", "-Xmx128m"]);
        command.arg("-jar").arg(self.lib.join(format!("httpproxy-{ORACLE_NOSQL_VERSION}.jar")));
        command.args(["-storeName", STORE, "-helperHosts", &format!("127.0.0.1:{}", self.kv_port)]);
        command.args(["-httpPort", &self.http_port.to_string()]);
        self.spawn(command, "proxy.log")
    }

    /// True once the proxy answers `GET /V2/nosql/data` with its version header (it does
    /// only after it has reached the store).
    async fn proxy_answers(&self) -> bool {
        let Ok(http) = reqwest::Client::builder().timeout(Duration::from_secs(2)).build() else { return false };
        let url = format!("{}/V2/nosql/data", self.endpoint());
        http.get(url).send().await.is_ok_and(|r| r.headers().contains_key("x-nosql-version"))
    }

    /// Waits until a data request through the proxy reaches the store: a `GetTable` of a
    /// table that does not exist answers TABLE_NOT_FOUND (2) then, and something else (an
    /// unavailable store, a refused connection) before.
    async fn wait_serving(&self, deadline: Instant) -> Result<(), String> {
        loop {
            if self.get_missing_table().await == Some(2) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the NoSQL proxy did not reach the store within {START_TIMEOUT:?}\n{}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The error code of a `GetTable` of a table that does not exist (`None`: no answer).
    async fn get_missing_table(&self) -> Option<i64> {
        let answer = nosql_request(&self.endpoint(), 11, "nats_sinks_testkit_readiness", Vec::new()).await.ok()?;
        answer.get("e")?.as_i64()
    }

    /// Stops KVLite abruptly (SIGKILL) and waits until its registry port is closed. The
    /// proxy keeps running (its requests fail until the store is back).
    pub fn kill_store(&mut self) {
        crate::process::kill_child(&mut self.store);
        wait_closed(self.kv_port);
    }

    /// Stops the proxy abruptly (SIGKILL) and waits until its port is closed.
    pub fn kill_proxy(&mut self) {
        crate::process::kill_child(&mut self.proxy);
        wait_closed(self.http_port);
    }

    /// Kills both (the proxy first).
    pub fn kill(&mut self) {
        self.kill_proxy();
        self.kill_store();
    }

    /// Starts both again on the same store and ports, and waits until the proxy serves.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.start_store().await?;
        self.start_proxy().await
    }
}

impl Drop for KvLite {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The name prefix of a store's directory under the temporary directory, followed by the
/// owning process's id.
const ROOT_PREFIX: &str = "kvlite-";

/// One raw request to a NoSQL proxy (or the fault-injection server) at `endpoint`: operation
/// `op` on `table` (none when empty) with the payload fields `payload`, as the SDKs send it
/// (NSON version 4, a request id); the decoded answer, errors included (HTTP 200 with `e`).
pub async fn nosql_request(endpoint: &str, op: i32, table: &str, payload: Vec<(String, Nson)>) -> Result<Nson, String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
    let mut header =
        vec![("v".to_owned(), Nson::Integer(4)), ("o".into(), Nson::Integer(op)), ("ts".into(), Nson::Integer(-1))];
    if !table.is_empty() {
        header.push(("n".into(), Nson::str(table)));
    }
    header.push(("t".into(), Nson::Integer(25_000)));
    let mut body = 4i16.to_be_bytes().to_vec();
    write_value(&mut body, &Nson::Map(vec![("h".into(), Nson::Map(header)), ("p".into(), Nson::Map(payload))]));
    let response = http
        .post(format!("{}/V2/nosql/data", endpoint.trim_end_matches('/')))
        .header("content-type", "application/octet-stream")
        .header("x-nosql-request-id", "1")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("nosql request: {e}{}", kvlite_disk_note()))?;
    let bytes = response.bytes().await.map_err(|e| format!("nosql answer: {e}{}", kvlite_disk_note()))?;
    let mut input: &[u8] = &bytes;
    read_value(&mut input)
}

/// Runs an administrative statement (`CREATE NAMESPACE …`, `DROP NAMESPACE …`) through the
/// proxy at `endpoint` as a system request, and waits until it is done. (The Rust SDK's own
/// `SystemRequest` sends the statement as an NSON string where an on-premises proxy reads
/// binary, and is refused.)
pub async fn nosql_admin(endpoint: &str, statement: &str) -> Result<(), String> {
    const SYSTEM_REQUEST: i32 = 23;
    const SYSTEM_STATUS: i32 = 24;
    let failed = |answer: &Nson| {
        let code = answer.get("e").and_then(Nson::as_i64).unwrap_or(0);
        let text = answer.get("x").and_then(Nson::as_str).unwrap_or_default();
        (code != 0).then(|| format!("{statement}: error {code}: {text}"))
    };
    let statement_bytes = Nson::Binary(statement.as_bytes().to_vec());
    let mut answer = nosql_request(endpoint, SYSTEM_REQUEST, "", vec![("st".into(), statement_bytes)]).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(error) = failed(&answer) {
            return Err(error);
        }
        // `ta`: 0 complete, 1 working.
        if answer.get("ta").and_then(Nson::as_i64) != Some(1) {
            return Ok(());
        }
        let Some(id) = answer.get("od").and_then(Nson::as_str).map(str::to_owned) else {
            return Err(format!("{statement}: still working, without an operation id"));
        };
        if Instant::now() > deadline {
            return Err(format!("{statement}: not done within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = vec![("od".to_owned(), Nson::str(id)), ("st".into(), Nson::str(statement))];
        answer = nosql_request(endpoint, SYSTEM_STATUS, "", status).await?;
    }
}

static SHARED: tokio::sync::OnceCell<Result<String, String>> = tokio::sync::OnceCell::const_new();

/// The endpoint of the Oracle NoSQL proxy tests share: the one named by [`NOSQL_LIVE_ENV`],
/// else a store and proxy started once for this process (stopped when the process ends).
/// An error says why there is none (the caller fails with it).
pub async fn shared_kvlite() -> Result<String, String> {
    let shared = SHARED
        .get_or_init(|| async {
            if let Ok(endpoint) = std::env::var(NOSQL_LIVE_ENV)
                && !endpoint.trim().is_empty()
            {
                return Ok(endpoint.trim().to_owned());
            }
            let started = Instant::now();
            // Leaked on purpose: it serves the whole process, and its watchdogs stop it when
            // the process ends.
            let kv: &'static KvLite = Box::leak(Box::new(KvLite::start().await?));
            eprintln!(
                "sinks-testkit: started a private KVLite {ORACLE_NOSQL_VERSION} + proxy at {} in {:.1} s",
                kv.endpoint(),
                started.elapsed().as_secs_f64()
            );
            Ok(kv.endpoint())
        })
        .await;
    shared.clone()
}

/// Starts a store and proxy for a whole run (`cargo xtask test`, `certify`, `bench`): returns
/// them with the environment variable that makes [`shared_kvlite`] use them.
pub async fn start_kvlite_for_run() -> Result<(KvLite, crate::RunEnv), String> {
    let kv = KvLite::start().await?;
    let endpoint = kv.endpoint();
    Ok((kv, vec![(NOSQL_LIVE_ENV, endpoint)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_the_jars_is_refused_naming_what_is_missing() {
        let empty = tempfile::tempdir().unwrap();
        let err = with_jars(empty.path()).unwrap_err();
        assert!(err.contains("kvstore-25.3.21.jar") && err.contains(ORACLE_NOSQL_DIR_ENV), "{err}");
        std::fs::create_dir(empty.path().join("lib")).unwrap();
        std::fs::write(empty.path().join("lib/kvstore-25.3.21.jar"), b"").unwrap();
        assert!(with_jars(empty.path()).unwrap_err().contains("httpproxy-25.3.21.jar"));
        std::fs::write(empty.path().join("lib/httpproxy-25.3.21.jar"), b"").unwrap();
        assert!(with_jars(empty.path()).is_ok());
    }

    #[test]
    fn a_disk_below_the_floor_is_named_as_the_cause() {
        let path = Path::new("/srv/x");
        let why = disk_shortfall(path, (3 << 30) + (1 << 29), 0).unwrap();
        assert!(why.contains("/srv/x") && why.contains("3.5 GiB free") && why.contains("below 5.0 GiB"), "{why}");
        assert!(why.contains("je.freeDisk") && !why.contains("a new store"), "{why}");
        assert_eq!(disk_shortfall(path, KVLITE_FREE_DISK_FLOOR, 0), None);
        // A new store asks for the margin too.
        let new = disk_shortfall(path, KVLITE_FREE_DISK_FLOOR, START_MARGIN).unwrap();
        assert!(new.contains("a new store asks for 6.0 GiB"), "{new}");
        assert_eq!(disk_shortfall(path, KVLITE_FREE_DISK_FLOOR + START_MARGIN, START_MARGIN), None);
        // The real file system answers, and this machine's temporary directory is measured.
        let free = available_bytes(&std::env::temp_dir()).expect("statvfs of the temporary directory");
        assert!(free > 0);
        assert_eq!(kvlite_disk_note().is_empty(), free >= KVLITE_FREE_DISK_FLOOR);
    }

    #[test]
    fn the_shared_directory_is_found_next_to_the_workspace() {
        // The default location, as CI's fresh clone has it (`<clone>/../shared/oracle-nosql`).
        let dir = oracle_nosql_dir().unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.join("lib").join(format!("kvstore-{ORACLE_NOSQL_VERSION}.jar")).is_file());
    }
}
