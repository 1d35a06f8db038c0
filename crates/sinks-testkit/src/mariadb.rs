//! Private MariaDB servers for tests: never the machine's own (nothing may be running on
//! 3306, and if something is, it is not ours).
//!
//! [`MariaDb::start`] runs a server on a free port with its own data directory, which a test
//! may kill and start again with the same data (outage tests). [`shared_mysql`] gives the
//! server named by `NATS_SINKS_TEST_MYSQL` (`host:port`, started once by `cargo xtask test`
//! and `certify`), or else starts one private server for the calling process. Root has no
//! password and the `test` database exists. The binaries come from Debian's
//! `mariadb-server-core` (installed by `cargo xtask setup`), or the directory named by
//! `MARIADB_BIN_DIR`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{first_file, free_port};

/// Environment variable naming a running test server, `host:port`.
pub const MYSQL_ENV: &str = "NATS_SINKS_TEST_MYSQL";

/// Where a test MySQL-compatible server answers (root, no password, database `test`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MySqlAddr {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl MySqlAddr {
    /// Parses `host:port`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (host, port) = text.rsplit_once(':').ok_or_else(|| format!("{MYSQL_ENV}={text:?} is not host:port"))?;
        let port = port.parse().map_err(|_| format!("{MYSQL_ENV}={text:?}: bad port"))?;
        Ok(Self { host: host.to_owned(), port })
    }
}

impl std::fmt::Display for MySqlAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// `mariadb-install-db` and `mariadbd`, or what to run to get them.
pub fn find_mariadb() -> Result<(PathBuf, PathBuf), String> {
    let dir = std::env::var_os("MARIADB_BIN_DIR").map(PathBuf::from);
    let find = |name: &str, system: &[&str]| {
        first_file(
            std::iter::once(dir.as_ref().map(|d| d.join(name)))
                .chain(system.iter().map(|d| Some(PathBuf::from(d).join(name)))),
        )
    };
    match (find("mariadb-install-db", &["/usr/bin", "/usr/local/bin"]), find("mariadbd", &["/usr/sbin", "/usr/bin"])) {
        (Some(install), Some(server)) => Ok((install, server)),
        _ => Err("no MariaDB binaries: run `cargo xtask setup` (installs Debian mariadb-server-core) or set \
                  MARIADB_BIN_DIR"
            .into()),
    }
}

/// A mariadbd process owned by a test. Killed on drop, and by a watchdog when the owning
/// process ends.
#[derive(Debug)]
pub struct MariaDb {
    dir: tempfile::TempDir,
    port: u16,
    server: PathBuf,
    child: Option<Child>,
}

impl MariaDb {
    /// Initializes a data directory and starts the server on a free port (panics when that
    /// is impossible).
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Initializes a data directory and starts the server on a free port.
    pub fn try_start() -> Result<Self, String> {
        let (install, server) = find_mariadb()?;
        // Named after this process: a shared server lives in a static that is never dropped, and
        // the next test process removes what an ended one left (about 120 MB each).
        let dir = crate::process::owned_tempdir("mariadb-")?;
        let datadir = dir.path().join("data");
        // A private tmpdir: with the shared /tmp, concurrent installs remove each other's
        // temporary tables (`#sql-temptable-…`) and fail with "Unknown table
        // 'mysql.tmp_user_sys'" (6 of 10 concurrent installs here; 0 of 10 with their own).
        let tmpdir = dir.path().join("tmp");
        std::fs::create_dir_all(&tmpdir).map_err(|e| format!("cannot create {}: {e}", tmpdir.display()))?;
        let out = Command::new(&install)
            .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal", "--skip-name-resolve"])
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--tmpdir={}", tmpdir.display()))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", install.display()))?;
        if !out.status.success() {
            // Its own words say why (a full disk, a lock, a missing file): the last lines of both streams.
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(12)..].join("\n");
            return Err(format!("{} failed ({}): {tail}", install.display(), out.status));
        }
        let mut db = Self { dir, port: free_port(), server, child: None };
        db.spawn()?;
        Ok(db)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let d = self.dir.path();
        let log = d.join("error.log");
        let child = Command::new(&self.server)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--socket={}", d.join("mysqld.sock").display()))
            .arg(format!("--tmpdir={}", d.join("tmp").display()))
            .arg(format!("--pid-file={}", d.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .args(["--user=root", "--bind-address=127.0.0.1", "--skip-name-resolve", "--innodb-buffer-pool-size=32M"])
            .arg(format!("--port={}", self.port))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.server.display()))?;
        crate::process::watch(&child);
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!("mariadbd exited ({status}); see {}", log.display()));
            }
            if Instant::now() > deadline {
                return Err(format!("mariadbd did not start within 60 s; see {}", log.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The port (stable across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> MySqlAddr {
        MySqlAddr { host: "127.0.0.1".into(), port: self.port }
    }

    /// Stops the server abruptly (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
    }

    /// Starts the server again on the same port with the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.kill();
    }
}

static SHARED: std::sync::OnceLock<Result<MySqlAddr, String>> = std::sync::OnceLock::new();

/// The MySQL-compatible server tests share: the one named by [`MYSQL_ENV`], else a private
/// server started once for this process (stopped when the process ends). An error says
/// why there is none (the caller fails with it).
pub fn shared_mysql() -> Result<MySqlAddr, String> {
    SHARED
        .get_or_init(|| {
            if let Ok(addr) = std::env::var(MYSQL_ENV) {
                return MySqlAddr::parse(&addr);
            }
            // Leaked on purpose: it serves the whole process, and its watchdog stops it when
            // the process ends.
            let server: &'static MariaDb = Box::leak(Box::new(MariaDb::try_start()?));
            eprintln!("sinks-testkit: started a private MariaDB at {}", server.addr());
            Ok(server.addr())
        })
        .clone()
}

/// Starts a server for a whole run (`cargo xtask test`, `certify`, `bench`): returns it with
/// the environment variable that makes [`shared_mysql`] use it.
pub fn start_mysql_for_run() -> Result<(MariaDb, crate::RunEnv), String> {
    let server = MariaDb::try_start()?;
    let addr = server.addr().to_string();
    Ok((server, vec![(MYSQL_ENV, addr)]))
}
