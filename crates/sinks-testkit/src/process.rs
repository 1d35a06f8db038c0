//! Process and port helpers: free ports, the workspace root and target directory, running
//! cargo, killing a child, waiting for a started server to be ready and for a killed one's
//! port to close, and a watchdog that kills a server when the process that started it ends
//! (even by SIGKILL or a test-runner timeout), so no test run leaves a server behind.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A TCP port on 127.0.0.1 that was free a moment ago and stays this process's own.
///
/// A port the kernel hands out for `bind(…:0)` comes from the ephemeral range, which the
/// kernel also hands to outgoing connections and to every other process's `bind(…:0)`: between
/// picking it and a server binding it (or while a killed server is down before its restart on
/// the same ports) something else may take it ("address already in use"). So the port is
/// drawn from below the ephemeral range, where the kernel never assigns ports by itself, and
/// reserved for the life of this process by an exclusive lock on a file named after it in
/// `sinks-testkit-ports` under the temporary directory: the other test processes skip a
/// locked port, and the lock goes with the process however it ends. When no such range
/// exists (or the lock directory cannot be written) it falls back to a kernel-chosen port.
pub fn free_port() -> u16 {
    reserved_port()
        .unwrap_or_else(|| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap())
}

/// The directory (under the temporary directory) holding one lock file per reserved port.
const PORT_LOCKS: &str = "sinks-testkit-ports";

/// The lowest port [`free_port`] reserves (above the registered services most machines run).
const RESERVED_FROM: u16 = 10_000;

/// The lock files this process holds, one per port it reserved; never released before exit.
static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());

/// `len` consecutive free ports, reserved like [`free_port`]'s (for a server that takes a
/// port range, such as KVLite's replication ports); the first one is returned. Panics when no
/// such range can be reserved.
pub fn free_port_range(len: u16) -> u16 {
    reserved_range(len.max(1)).unwrap_or_else(|| panic!("no {len} consecutive free ports could be reserved"))
}

/// A port in `[RESERVED_FROM, start of the ephemeral range)` that no other process has
/// reserved and that binds now, with its lock kept in [`HELD`].
fn reserved_port() -> Option<u16> {
    reserved_range(1)
}

/// The first of `len` consecutive ports below the ephemeral range, each unreserved by any
/// other process and free to bind now, with their locks kept in [`HELD`].
fn reserved_range(len: u16) -> Option<u16> {
    let below = ephemeral_start()?;
    if below <= RESERVED_FROM + 1_000 + len {
        return None;
    }
    let dir = std::env::temp_dir().join(PORT_LOCKS);
    std::fs::create_dir_all(&dir).ok()?;
    'draw: for _ in 0..1_000 {
        let first = rand::random_range(RESERVED_FROM..below - len);
        let mut locks = Vec::with_capacity(usize::from(len));
        for port in first..first + len {
            let Ok(file) =
                std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(port.to_string()))
            else {
                return None;
            };
            // Locked by another process (or already by this one: flock locks are per open
            // file), or bound by something: draw again (the locks taken so far are dropped).
            if file.try_lock().is_err() || TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue 'draw;
            }
            locks.push(file);
        }
        HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(locks);
        return Some(first);
    }
    None
}

/// The first port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`).
fn ephemeral_start() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?.split_whitespace().next()?.parse().ok()
}

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() && !dir.join(".git").exists() {
        if !dir.pop() {
            break;
        }
    }
    dir
}

/// Where cargo puts build output: `CARGO_TARGET_DIR` (relative to the workspace root when
/// relative), else `target/` of the workspace.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

/// The debug `nats-sink` binary (built by `cargo build -p sinks-bin`).
pub fn debug_nats_sink() -> PathBuf {
    target_dir().join("debug/nats-sink")
}

/// Runs `cargo` (the one running us, when cargo started us) with `args` from the workspace
/// root, the command echoed first; fails on a non-zero exit.
pub fn cargo(args: &[&str], envs: &[(&str, String)]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo {}` failed with {status}", args.join(" ")));
    }
    Ok(())
}

/// The nginx of the HTTP benchmark's ceiling (`cargo xtask bench` installs it), if installed.
pub fn nginx_binary() -> Option<PathBuf> {
    Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file())
}

/// Where `cargo xtask setup` puts the tools it installs (`.local/tools` of the workspace).
pub fn tools_dir() -> PathBuf {
    workspace_root().join(".local/tools")
}

/// The Python of the reference's venv (PyPI `nats-sinks[crypto]==0.4.3`, installed by
/// `cargo xtask setup`), or `NATS_SINKS_REFERENCE_PYTHON`; an error says what to run.
pub fn reference_python() -> Result<PathBuf, String> {
    first_file([
        std::env::var_os("NATS_SINKS_REFERENCE_PYTHON").map(PathBuf::from),
        Some(tools_dir().join("reference/bin/python")),
    ])
    .ok_or_else(|| "the Python reference is not installed: run `cargo xtask setup`".into())
}

/// The first of `candidates` that is a file.
pub(crate) fn first_file(candidates: impl IntoIterator<Item = Option<PathBuf>>) -> Option<PathBuf> {
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// `name` on `PATH`, if it is there.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// A temporary directory named `{prefix}{pid}-…` after this process's id, made once the
/// directories of the same prefix whose process has ended are removed: a server shared by a
/// whole test process lives in a static that is never dropped (its processes die with their
/// watchdog, its directory stays), so the next test process cleans up after it.
pub(crate) fn owned_tempdir(prefix: &str) -> Result<tempfile::TempDir, String> {
    remove_ended_owners(&std::env::temp_dir(), prefix);
    tempfile::Builder::new().prefix(&format!("{prefix}{}-", std::process::id())).tempdir().map_err(|e| e.to_string())
}

/// Removes the directories `{prefix}{pid}-…` in `parent` whose process `pid` has ended.
fn remove_ended_owners(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Kills `child` (SIGKILL) if there is one and waits for it to exit.
pub(crate) fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Waits (up to 10 s) until nothing accepts connections on `port` of 127.0.0.1: a killed
/// server's ports free before a restart binds them again.
pub(crate) fn wait_closed(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How [`await_ready`] waits for a server it started: what to call it, how long at the most,
/// how often to ask, and what to quote when it fails (the end of its log).
pub(crate) struct Readiness<'a> {
    /// The server's name in the error (`"moto_server"`).
    pub(crate) what: &'a str,
    /// The longest wait.
    pub(crate) within: Duration,
    /// The pause between two probes.
    pub(crate) every: Duration,
    /// What the error quotes (read only when it fails).
    pub(crate) tail: &'a dyn Fn() -> String,
}

impl<'a> Readiness<'a> {
    /// `what`, probed every 200 ms for up to `within`, quoting `tail` when it fails.
    pub(crate) fn new(what: &'a str, within: Duration, tail: &'a dyn Fn() -> String) -> Self {
        Self { what, within, every: Duration::from_millis(200), tail }
    }
}

/// Probes until `ready` answers true. Fails with the server's name and its log's tail when
/// `child` exits first, or when the wait is over (the child killed then, so that nothing
/// half-started is left).
pub(crate) async fn await_ready(
    child: &mut Option<Child>,
    how: Readiness<'_>,
    mut ready: impl AsyncFnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + how.within;
    loop {
        if ready().await {
            return Ok(());
        }
        if let Some(Ok(Some(status))) = child.as_mut().map(Child::try_wait) {
            return Err(format!("{} exited ({status}): {}", how.what, (how.tail)()));
        }
        if Instant::now() > deadline {
            kill_child(child);
            return Err(format!("{} not ready after {} s: {}", how.what, how.within.as_secs(), (how.tail)()));
        }
        tokio::time::sleep(how.every).await;
    }
}

/// Starts a watchdog that SIGKILLs `child` once this process has ended, and ends by itself
/// when the child has. A server started for a test or a whole run thus never outlives its
/// owner, however the owner ends.
pub fn watch(child: &Child) {
    let script = "P=$1; C=$2; while kill -0 \"$P\" 2>/dev/null && kill -0 \"$C\" 2>/dev/null; do sleep 0.5; done; \
                  kill -9 \"$C\" 2>/dev/null";
    detached_sh(script, "watchdog", &[&child.id().to_string()]);
}

/// Runs shell `script` detached from this process, as `name`, with this process's id as `$1`
/// and `args` after it: the watchdogs that clean up after this process however it ends.
/// The `sh` is reaped by nobody while this process runs; a zombie costs nothing and goes with
/// it. Without `sh` there is no watchdog, which only matters on a crash.
pub(crate) fn detached_sh(script: &str, name: &str, args: &[&str]) {
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(name)
        .arg(std::process::id().to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    drop(spawned);
}

/// The state letter of process `pid` in `/proc/PID/stat` (`R`, `S`, `T` for stopped, …);
/// `None` for a process that is gone or a zombie.
pub fn process_state(pid: u32) -> Option<char> {
    stat_state(Path::new(&format!("/proc/{pid}/stat")))
}

/// The state letter of a `/proc` `stat` file, `None` when it cannot be read or names a zombie.
fn stat_state(path: &Path) -> Option<char> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The state follows the command name, which is in parentheses and may hold spaces.
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    (state != 'Z').then_some(state)
}

/// True when every thread of process `pid` is stopped (state `T` or `t` in
/// `/proc/PID/task/TID/stat`); false for a process that is gone or has a running thread.
pub(crate) fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mut any = false;
    for task in tasks.flatten() {
        match stat_state(&task.path().join("stat")) {
            Some('T' | 't') => any = true,
            _ => return false,
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_are_distinct_below_the_ephemeral_range_and_locked() {
        let below = ephemeral_start().expect("a Linux ephemeral port range");
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice: {ports:?}");
        for &port in &ports {
            assert!((RESERVED_FROM..below).contains(&port), "port {port} is not below the ephemeral range ({below})");
            // Another open file (as another process would hold) cannot take the lock.
            let other = std::fs::File::open(std::env::temp_dir().join(PORT_LOCKS).join(port.to_string())).unwrap();
            assert!(other.try_lock().is_err(), "port {port} is not locked while reserved");
            assert!(TcpListener::bind(("127.0.0.1", port)).is_ok(), "port {port} is not free");
        }
    }

    #[test]
    fn directories_of_ended_processes_are_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        let ours = parent.path().join(format!("srv-{}-abc", std::process::id()));
        // Above the kernel's largest pid (4,194,304): no such process.
        let ended = parent.path().join("srv-4294967-abc");
        let other_prefix = parent.path().join("other-4294967-abc");
        let not_a_pid = parent.path().join("srv-x-abc");
        for dir in [&ours, &ended, &other_prefix, &not_a_pid] {
            std::fs::create_dir_all(dir.join("data")).unwrap();
        }
        remove_ended_owners(parent.path(), "srv-");
        assert!(ours.exists(), "this process's directory was removed");
        assert!(!ended.exists(), "an ended process's directory was kept");
        assert!(other_prefix.exists() && not_a_pid.exists(), "a directory of another prefix or no pid was removed");
        let made = owned_tempdir("sinks-testkit-owned-").unwrap();
        let name = made.path().file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with(&format!("sinks-testkit-owned-{}-", std::process::id())), "{name}");
    }

    #[test]
    fn a_range_is_consecutive_reserved_and_apart_from_single_ports() {
        let first = free_port_range(4);
        let single = free_port();
        assert!(!(first..first + 4).contains(&single), "{single} was handed out inside the range at {first}");
        for port in first..first + 4 {
            let other = std::fs::File::open(std::env::temp_dir().join(PORT_LOCKS).join(port.to_string())).unwrap();
            assert!(other.try_lock().is_err(), "port {port} of the range is not locked");
            assert!(TcpListener::bind(("127.0.0.1", port)).is_ok(), "port {port} is not free");
        }
    }

    #[test]
    fn a_stopped_process_is_seen_stopped_and_a_running_one_is_not() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(!all_threads_stopped(pid), "a sleeping process counted as stopped");
        assert!(process_state(pid).is_some_and(|s| s != 'T'), "a live process that is not stopped");
        let target = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(target, rustix::process::Signal::STOP).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !all_threads_stopped(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(all_threads_stopped(pid), "SIGSTOP did not show as a stopped process");
        assert_eq!(process_state(pid), Some('T'));
        rustix::process::kill_process(target, rustix::process::Signal::CONT).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!all_threads_stopped(pid), "a process that is gone counted as stopped");
        assert_eq!(process_state(pid), None, "a process that is gone");
    }

    fn readiness(what: &'static str, within: Duration) -> Readiness<'static> {
        Readiness { what, within, every: Duration::from_millis(10), tail: &|| "the tail".to_owned() }
    }

    /// A server is ready when its probe says so; one that exits first, or is not ready in
    /// time, fails with its name and its log's tail, and the one not ready in time is killed.
    #[tokio::test]
    async fn a_started_server_is_awaited_until_ready_exited_or_late() {
        let mut probes = 0;
        let mut child = Some(Command::new("sleep").arg("30").spawn().unwrap());
        let ready = await_ready(&mut child, readiness("server", Duration::from_secs(10)), async || {
            probes += 1;
            probes == 3
        });
        assert_eq!(ready.await, Ok(()));
        assert_eq!(probes, 3, "probed until ready");
        assert!(child.as_mut().unwrap().try_wait().unwrap().is_none(), "a ready server is left running");
        kill_child(&mut child);

        let mut child = Some(Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap());
        let exited = await_ready(&mut child, readiness("server", Duration::from_secs(10)), async || false).await;
        let e = exited.unwrap_err();
        assert!(e.starts_with("server exited (exit status: 3): the tail"), "{e}");

        let mut child = Some(Command::new("sleep").arg("30").spawn().unwrap());
        let pid = child.as_ref().unwrap().id();
        let late = await_ready(&mut child, readiness("server", Duration::from_secs(1)), async || false).await;
        assert_eq!(late, Err("server not ready after 1 s: the tail".to_owned()));
        assert!(child.is_none() && process_state(pid).is_none(), "the late server was killed and reaped");
    }

    /// A port is awaited while something listens on it, and no longer once nothing does.
    #[test]
    fn a_closed_port_is_awaited() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(listener);
        });
        let started = Instant::now();
        wait_closed(port);
        assert!(started.elapsed() >= Duration::from_millis(250), "returned while the port was open");
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        closer.join().unwrap();
    }
}
