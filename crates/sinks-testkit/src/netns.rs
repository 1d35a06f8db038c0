//! [`Net`]: a private network of Linux network namespaces, for the tests that cut links.
//!
//! Every member (a nats-server node, a sink worker) gets a network namespace of its own,
//! joined to one router namespace by a veth pair on a `/30` of its own; the test's own
//! namespace (the "host": the process that made the net, its producers and checkers) is
//! joined to the router the same way. Addresses come from `198.18.0.0/15`, the range set
//! aside for network tests (RFC 2544), one `/24` per net, reserved for this process by a
//! lock file as [`crate::free_port`] reserves ports, so that nets of parallel tests never
//! share an address or a name.
//!
//! A cut is a policy rule in the router (`ip rule add from A to B blackhole`): packets from
//! A to B are dropped silently, as a real partition drops them, while B to A still flows
//! unless it is cut too. [`Net::heal`] removes every rule. [`Net::connects`] probes a link
//! from inside a member's namespace (a thread that joins it), so a test can show that a cut
//! took effect.
//!
//! Everything the net made (namespaces, the host's veth and its route) is removed when it
//! is dropped, and by a watchdog when the process that made it ends in any other way
//! (a panic that aborts, SIGKILL, a test runner's timeout); a later net on the same `/24`
//! also removes what an ended owner left. Making a net needs root (or CAP_NET_ADMIN and
//! CAP_SYS_ADMIN) and iproute2's `ip`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The member name of the test's own namespace (the host side of the net).
pub const HOST: &str = "host";

/// How many `/24`s of `198.18.0.0/15` a net may take.
const SLOTS: u32 = 512;

/// The most members a net holds (each takes a `/30` of its `/24`; the last `/30` is the
/// host's).
pub const MAX_MEMBERS: usize = 63;

/// One namespace of a [`Net`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name in the net (`n0`, `w-file-0`, …).
    pub name: String,
    /// Its network namespace (`ip netns` name); `None` for the host.
    pub netns: Option<String>,
    /// Its address.
    pub ip: Ipv4Addr,
}

/// A private network of namespaces joined by a router; removed on drop.
#[derive(Debug)]
pub struct Net {
    slot: u32,
    router: String,
    host_link: String,
    members: Vec<Member>,
    /// The cuts in force: `(from, to)` → the rule's preference.
    cuts: Mutex<BTreeMap<(String, String), u32>>,
    _lock: std::fs::File,
}

impl Net {
    /// Makes a net with one namespace per name in `members` (and the host), everything
    /// reachable from everything. Fails with what is missing when the process may not make
    /// namespaces or `ip` is not there.
    pub fn start(members: &[&str]) -> Result<Self, String> {
        if members.len() > MAX_MEMBERS {
            return Err(format!("a net holds at most {MAX_MEMBERS} members, not {}", members.len()));
        }
        if members.contains(&HOST) || has_duplicates(members) {
            return Err(format!("member names must be distinct and not `{HOST}`: {members:?}"));
        }
        if !rustix::process::geteuid().is_root() {
            return Err(
                "network namespaces need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN): run the test as root".into()
            );
        }
        ip_binary()?;
        let (slot, lock) = reserve_slot()?;
        remove_leftovers(slot);
        let prefix = format!("nsk{slot}-");
        let router = format!("{prefix}router");
        let mut net = Self {
            slot,
            router: router.clone(),
            host_link: format!("nk{slot}h"),
            members: Vec::new(),
            cuts: Mutex::new(BTreeMap::new()),
            _lock: lock,
        };
        // From here on, drop removes whatever was made, should a step fail.
        watchdog(slot);
        ip(&["netns", "add", &router])?;
        ip(&["-n", &router, "link", "set", "lo", "up"])?;
        in_netns(&router, || std::fs::write("/proc/sys/net/ipv4/ip_forward", "1"))
            .map_err(|e| format!("turning on forwarding in {router}: {e}"))?;
        for (m, name) in members.iter().enumerate() {
            let netns = format!("{prefix}{name}");
            let (outer, inner) = (format!("nk{slot}r{m}"), format!("nk{slot}m{m}"));
            let (gateway, ip_addr) = (net.address(4 * m as u32 + 1), net.address(4 * m as u32 + 2));
            ip(&["netns", "add", &netns])?;
            ip(&["-n", &netns, "link", "set", "lo", "up"])?;
            ip(&[
                "link", "add", "name", &outer, "netns", &router, "type", "veth", "peer", "name", &inner, "netns",
                &netns,
            ])?;
            ip(&["-n", &router, "addr", "add", &format!("{gateway}/30"), "dev", &outer])?;
            ip(&["-n", &router, "link", "set", &outer, "up"])?;
            ip(&["-n", &netns, "addr", "add", &format!("{ip_addr}/30"), "dev", &inner])?;
            ip(&["-n", &netns, "link", "set", &inner, "up"])?;
            ip(&["-n", &netns, "route", "add", "default", "via", &gateway.to_string()])?;
            net.members.push(Member { name: (*name).to_owned(), netns: Some(netns), ip: ip_addr });
        }
        let (gateway, host_ip) = (net.address(253), net.address(254));
        let router_side = format!("nk{slot}rh");
        ip(&["link", "add", "name", &net.host_link, "type", "veth", "peer", "name", &router_side, "netns", &router])?;
        ip(&["-n", &router, "addr", "add", &format!("{gateway}/30"), "dev", &router_side])?;
        ip(&["-n", &router, "link", "set", &router_side, "up"])?;
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &net.host_link])?;
        ip(&["link", "set", &net.host_link, "up"])?;
        ip(&["route", "add", &format!("{}/24", net.address(0)), "via", &gateway.to_string()])?;
        net.members.push(Member { name: HOST.into(), netns: None, ip: host_ip });
        Ok(net)
    }

    /// The `i`-th address of this net's `/24`.
    fn address(&self, i: u32) -> Ipv4Addr {
        let base = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + self.slot * 256;
        Ipv4Addr::from(base + i)
    }

    /// Every member, the host last.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member called `name` (panics on an unknown name: a test's own mistake).
    pub fn member(&self, name: &str) -> &Member {
        self.members.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no member {name} in the net"))
    }

    /// The address of member `name`.
    pub fn ip(&self, name: &str) -> Ipv4Addr {
        self.member(name).ip
    }

    /// A command that runs `program` inside member `name`'s namespace (`ip netns exec NS
    /// program`, which execs it: the child's pid is the program's). For the host, `program`
    /// itself.
    pub fn command(&self, name: &str, program: impl AsRef<OsStr>) -> Command {
        match &self.member(name).netns {
            Some(netns) => {
                let mut cmd = Command::new(ip_binary().unwrap_or_else(|_| "ip".into()));
                cmd.args(["netns", "exec", netns]).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    /// Cuts the link from `from` to `to`: their packets that way are dropped, silently.
    pub fn cut(&self, from: &str, to: &str) -> Result<(), String> {
        let mut cuts = self.cuts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cuts.contains_key(&(from.to_owned(), to.to_owned())) {
            return Ok(());
        }
        let pref = cuts.values().max().map_or(1000, |p| p + 1);
        let (a, b) = (self.ip(from).to_string(), self.ip(to).to_string());
        ip(&["-n", &self.router, "rule", "add", "pref", &pref.to_string(), "from", &a, "to", &b, "blackhole"])?;
        cuts.insert((from.to_owned(), to.to_owned()), pref);
        Ok(())
    }

    /// Cuts both ways between `a` and `b`.
    pub fn cut_both(&self, a: &str, b: &str) -> Result<(), String> {
        self.cut(a, b)?;
        self.cut(b, a)
    }

    /// Cuts both ways between every member of `side` and every member of `other`.
    pub fn partition(&self, side: &[&str], other: &[&str]) -> Result<(), String> {
        for a in side {
            for b in other {
                self.cut_both(a, b)?;
            }
        }
        Ok(())
    }

    /// The cuts in force, as `(from, to)`.
    pub fn cuts(&self) -> Vec<(String, String)> {
        self.cuts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect()
    }

    /// Removes every cut.
    pub fn heal(&self) -> Result<(), String> {
        let mut cuts = self.cuts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut failed = Vec::new();
        for ((from, to), pref) in std::mem::take(&mut *cuts) {
            if let Err(e) = ip(&["-n", &self.router, "rule", "del", "pref", &pref.to_string()]) {
                failed.push(format!("{from} -> {to}: {e}"));
            }
        }
        if failed.is_empty() { Ok(()) } else { Err(format!("healing failed: {}", failed.join("; "))) }
    }

    /// True when a TCP connection from inside member `from` to `to` is established within
    /// `timeout` (a probe that a link carries, or, false, that it is cut or nothing listens).
    /// A connection needs both directions: a one-way cut stops it either way.
    pub fn connects(&self, from: &str, to: SocketAddr, timeout: Duration) -> bool {
        self.in_member(from, move || TcpStream::connect_timeout(&to, timeout).map(drop)).is_ok()
    }

    /// True when a UDP datagram sent from member `from` reaches member `to` within
    /// `timeout`: the probe of one direction alone (a one-way cut lets the other through).
    pub fn datagram_arrives(&self, from: &str, to: &str, timeout: Duration) -> bool {
        let (from_ip, to_ip) = (self.ip(from), self.ip(to));
        let Ok(receiver) = self.in_member(to, move || UdpSocket::bind((to_ip, 0))) else { return false };
        let Ok(target) = receiver.local_addr() else { return false };
        let sent = self.in_member(from, move || {
            let socket = UdpSocket::bind((from_ip, 0))?;
            for _ in 0..3 {
                socket.send_to(b"probe", target)?;
            }
            Ok(())
        });
        if sent.is_err() || receiver.set_read_timeout(Some(timeout)).is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(receiver.recv_from(&mut buf), Ok((n, source)) if &buf[..n] == b"probe" && source.ip() == from_ip)
    }

    /// Runs `f` inside member `name`'s namespace (on a thread of its own), or here for the
    /// host. A socket made there stays in that namespace.
    pub fn in_member<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        match &self.member(name).netns {
            Some(netns) => in_netns(netns, f),
            None => f(),
        }
    }

    /// The `/24` slot this net holds (its namespaces are named `nsk{slot}-…`).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The names of the namespaces this net made, the router's included.
    pub fn namespace_names(&self) -> Vec<String> {
        self.namespaces()
    }

    /// The network namespaces and links that exist now and belong to `slot` (`nsk{slot}-…`,
    /// `nk{slot}…`): empty once a net is gone. For tests of the cleanup.
    pub fn leftovers(slot: u32) -> Vec<String> {
        let mut left = Vec::new();
        let run = |args: &[&str]| {
            Command::new(ip_binary().unwrap_or_else(|_| "ip".into()))
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let prefix = format!("nsk{slot}-");
        for line in run(&["netns", "list"]).lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name.starts_with(&prefix) {
                left.push(format!("netns {name}"));
            }
        }
        let link = format!("nk{slot}");
        for line in run(&["-o", "link", "show"]).lines() {
            let name = line.split(": ").nth(1).unwrap_or_default().split('@').next().unwrap_or_default();
            if name.starts_with(&link) && name[link.len()..].starts_with(|c: char| !c.is_ascii_digit()) {
                left.push(format!("link {name}"));
            }
        }
        left
    }

    /// The namespaces this net made (the router's included).
    fn namespaces(&self) -> Vec<String> {
        self.members.iter().filter_map(|m| m.netns.clone()).chain(std::iter::once(self.router.clone())).collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.host_link]);
        for netns in self.namespaces() {
            let _ = ip(&["netns", "del", &netns]);
        }
    }
}

fn has_duplicates(names: &[&str]) -> bool {
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// iproute2's `ip`: on `PATH`, else `/usr/sbin/ip` or `/sbin/ip`.
fn ip_binary() -> Result<PathBuf, String> {
    crate::process::first_file([
        crate::process::on_path("ip"),
        Some(PathBuf::from("/usr/sbin/ip")),
        Some(PathBuf::from("/sbin/ip")),
    ])
    .ok_or_else(|| "no `ip` command: install iproute2 (apt-get install iproute2)".into())
}

/// The path of iproute2's `ip` as a string (`ip` when it cannot be found; running it then
/// fails with that).
pub(crate) fn ip_program() -> String {
    ip_binary().map_or_else(|_| "ip".to_owned(), |p| p.display().to_string())
}

/// Runs `ip ARGS…`; an error names the command and what `ip` said.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new(ip_binary()?)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Runs `f` on a thread that has joined network namespace `netns` (a thread's network
/// namespace is its own: the rest of the process stays where it is).
fn in_netns<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let path = PathBuf::from("/run/netns").join(netns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path)?;
        // setns changes only this thread's network namespace, and the thread ends with `f`.
        rustix::thread::move_into_link_name_space(file.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))?;
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
}

/// The lock directory of the `/24` slots.
const SLOT_LOCKS: &str = "sinks-testkit-netns";

/// A `/24` slot no other process holds, with its lock (kept for the net's life).
fn reserve_slot() -> Result<(u32, std::fs::File), String> {
    let dir = std::env::temp_dir().join(SLOT_LOCKS);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let first = rand::random_range(0..SLOTS);
    for i in 0..SLOTS {
        let slot = (first + i) % SLOTS;
        let path = dir.join(slot.to_string());
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        if file.try_lock().is_ok() {
            return Ok((slot, file));
        }
    }
    Err(format!("all {SLOTS} network slots are taken"))
}

/// Removes what an ended owner of `slot` left behind (its namespaces and host link).
fn remove_leftovers(slot: u32) {
    let _ = ip(&["link", "del", &format!("nk{slot}h")]);
    let prefix = format!("nsk{slot}-");
    let listed = Command::new(ip_binary().unwrap_or_else(|_| "ip".into())).args(["netns", "list"]).output();
    let Ok(listed) = listed else { return };
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.starts_with(&prefix) {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Starts a watchdog that removes the net of `slot` once this process has ended.
fn watchdog(slot: u32) {
    let ip = ip_binary().map_or_else(|_| "ip".to_owned(), |p| p.display().to_string());
    let script = format!(
        "P=$1; while kill -0 \"$P\" 2>/dev/null; do sleep 0.5; done; \
         {ip} link del nk{slot}h 2>/dev/null; \
         for n in $({ip} netns list | awk '{{print $1}}' | grep '^nsk{slot}-'); do {ip} netns del \"$n\"; done"
    );
    crate::process::detached_sh(&script, "netns-watchdog", &[]);
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A listener inside member `name` on its address, accepting for ever.
    fn listen_in(net: &Net, name: &str) -> SocketAddr {
        let addr = SocketAddr::from((net.ip(name), 7000));
        let netns = net.member(name).netns.clone().unwrap();
        let listener = in_netns(&netns, move || TcpListener::bind(addr)).unwrap();
        std::thread::spawn(move || for _ in listener.incoming() {});
        addr
    }

    #[test]
    fn a_cut_drops_one_direction_and_heal_restores_it_and_drop_removes_everything() {
        let net = Net::start(&["a", "b"]).unwrap();
        let (a, b) = (listen_in(&net, "a"), listen_in(&net, "b"));
        // Where a connection must pass it may take up to `sure` (a veth's carrier comes up a
        // moment after the net is made, and a loaded machine stretches that: a first SYN
        // lost then is sent again after a second); where it must not, `quick` is enough.
        let (quick, sure) = (Duration::from_millis(500), Duration::from_secs(5));
        assert!(net.connects("a", b, sure) && net.connects("b", a, sure) && net.connects(HOST, a, sure));
        net.cut("a", "b").unwrap();
        // a's SYN to b is dropped; b's SYN reaches a, but a's answer is dropped: a one-way
        // cut stops new TCP connections both ways, as a real gray failure does, while the
        // host still reaches both.
        assert!(!net.connects("a", b, quick), "a reaches b through a cut");
        assert!(!net.connects("b", a, quick), "b's connection needs a's answers, which are cut");
        assert!(net.connects(HOST, a, sure) && net.connects(HOST, b, sure), "the host was cut too");
        let instant = Duration::from_millis(300);
        assert!(!net.datagram_arrives("a", "b", instant), "a datagram from a reached b through the cut");
        assert!(net.datagram_arrives("b", "a", sure), "the cut from a to b stopped b's datagrams to a");
        assert_eq!(net.cuts(), [("a".to_owned(), "b".to_owned())]);
        net.heal().unwrap();
        assert!(net.connects("a", b, sure), "a heal left the cut");
        net.partition(&["a"], &["b", HOST]).unwrap();
        assert!(!net.connects(HOST, a, quick) && !net.connects("b", a, quick) && net.connects(HOST, b, sure));
        let slot = net.slot();
        assert_eq!(
            Net::leftovers(slot).len(),
            4,
            "the probe of leftovers does not see the net: {:?}",
            Net::leftovers(slot)
        );
        drop(net);
        assert_eq!(Net::leftovers(slot), Vec::<String>::new(), "the net left something behind");
    }
}
