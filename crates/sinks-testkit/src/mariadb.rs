//! A private MariaDB server for one test, which the test may stop and start again on the
//! same port with the same data (for outage tests). Uses the machine's `mariadb-install-db`
//! and `mariadbd`; root has no password and the `test` database exists.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::free_port;

/// A mariadbd process owned by a test. Killed on drop.
#[derive(Debug)]
pub struct MariaDb {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

fn binary(name: &str, dirs: &[&str]) -> PathBuf {
    dirs.iter().map(|d| PathBuf::from(d).join(name)).find(|p| p.is_file()).unwrap_or_else(|| PathBuf::from(name))
}

impl MariaDb {
    /// Initializes a data directory and starts the server on a free port.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new().prefix("mariadb-").tempdir().unwrap();
        let datadir = dir.path().join("data");
        let status = Command::new(binary("mariadb-install-db", &["/usr/bin", "/usr/local/bin"]))
            .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal"])
            .arg(format!("--datadir={}", datadir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("mariadb-install-db must be installed (Debian package mariadb-server)");
        assert!(status.success(), "mariadb-install-db failed");
        let mut db = Self { dir, port: free_port(), child: None };
        db.spawn();
        db
    }

    fn spawn(&mut self) {
        let d = self.dir.path();
        let child = Command::new(binary("mariadbd", &["/usr/sbin", "/usr/bin"]))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--socket={}", d.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", d.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", d.join("error.log").display()))
            .args(["--user=root", "--bind-address=127.0.0.1", "--skip-name-resolve", "--innodb-buffer-pool-size=32M"])
            .arg(format!("--port={}", self.port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd must be installed (Debian package mariadb-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "mariadbd did not start; see {}", d.join("error.log").display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The port (stable across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server abruptly (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        crate::process::kill_child(&mut self.child);
    }

    /// Starts the server again on the same port with the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.kill();
    }
}
