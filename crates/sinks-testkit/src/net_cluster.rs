//! [`NetCluster`]: a three-node JetStream cluster whose nodes each run in a network namespace
//! of their own (a [`Net`]), so that a test can cut the links between nodes, and between a
//! node and its clients, one way or both, pause a node, and move a leader.
//!
//! The net has a member per node (`n0`–`n2`) and one per extra name the test asks for (a sink
//! worker, a producer), each of which it can run a process in ([`Net::command`]). The nodes
//! ping their routes and clients every second and drop a connection after three unanswered
//! pings, so that a cut is noticed within seconds rather than after the default two minutes;
//! the Raft groups (the meta group, every stream and consumer) notice it by their own
//! heartbeats either way.
//!
//! The cluster is dropped before the net (its nodes are killed, then the namespaces removed);
//! both have a watchdog for the ways a process ends without unwinding.

use std::io::Read as _;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::cluster::{CLUSTER_NODES, ClusterSpec, NatsCluster};
use crate::netns::{HOST, Net};

/// The config lines every node of a [`NetCluster`] gets: quick pings, so a cut link is
/// noticed (and the connection dropped) within about four seconds.
pub const QUICK_PINGS: &str = "ping_interval: \"1s\"\nping_max: 3";

/// A three-node cluster in a [`Net`] of its own; see the module documentation.
#[derive(Debug)]
pub struct NetCluster {
    // Dropped in this order: the nodes first, then the namespaces they ran in.
    cluster: NatsCluster,
    net: Net,
}

impl NetCluster {
    /// Starts the net (`n0`–`n2` and `extra`) and the cluster in it, `jetstream` added to every
    /// node's `jetstream {}` block (`sync_interval: always`, or empty for the default), and
    /// waits until it has a meta leader. Fails when the process may not make namespaces.
    pub async fn start(extra: &[&str], jetstream: &str) -> Result<Self, String> {
        let mut members: Vec<String> = (0..CLUSTER_NODES).map(|i| format!("n{i}")).collect();
        members.extend(extra.iter().map(|e| (*e).to_owned()));
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        let net = Net::start(&names)?;
        let nodes = (0..CLUSTER_NODES)
            .map(|i| {
                let member = net.member(&format!("n{i}"));
                let netns = member.netns.clone().unwrap_or_default();
                let ip = crate::netns::ip_program();
                (member.ip.into(), vec![ip, "netns".into(), "exec".into(), netns])
            })
            .collect();
        let spec = ClusterSpec { nodes, jetstream: jetstream.to_owned(), server: QUICK_PINGS.to_owned() };
        let cluster = NatsCluster::start_with(spec).await;
        Ok(Self { cluster, net })
    }

    /// The cluster (URLs, leaders, kill and restart, pause and resume).
    pub fn cluster(&self) -> &NatsCluster {
        &self.cluster
    }

    /// The cluster, to kill, restart or reconfigure nodes.
    pub fn cluster_mut(&mut self) -> &mut NatsCluster {
        &mut self.cluster
    }

    /// The net (cuts, heal, probes, commands run inside a member).
    pub fn net(&self) -> &Net {
        &self.net
    }

    /// The net member node `i` runs in (`n{i}`).
    pub fn member_of(i: usize) -> String {
        format!("n{i}")
    }

    /// The other nodes' names as node `i` sees them over its routes (`/routez`, distinct
    /// `remote_name`s), read from the host; `None` when its monitoring port does not answer.
    pub async fn route_peers(&self, i: usize) -> Option<Vec<String>> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().ok()?;
        let url = format!("{}/routez", self.cluster.monitoring_url(i));
        let bytes = http.get(&url).send().await.ok()?.bytes().await.ok()?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let mut peers: Vec<String> = body["routes"]
            .as_array()?
            .iter()
            .filter_map(|r| r["remote_name"].as_str().or_else(|| r["remote_id"].as_str()).map(str::to_owned))
            .collect();
        peers.sort();
        peers.dedup();
        Some(peers)
    }

    /// Polls node `i`'s route peers until they are `expected` (sorted names) or `timeout`
    /// passes; returns the last view.
    pub async fn wait_route_peers(&self, i: usize, expected: &[&str], timeout: Duration) -> Option<Vec<String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let peers = self.route_peers(i).await;
            if peers.as_ref().is_some_and(|p| p.iter().map(String::as_str).eq(expected.iter().copied()))
                || Instant::now() >= deadline
            {
                return peers;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// True when node `i`'s client port, reached from member `from`, sends its `INFO` line
    /// within `timeout`. A paused node accepts the connection (the kernel does that) but
    /// sends nothing; a cut one does not even accept it.
    pub fn answers(&self, from: &str, i: usize, timeout: Duration) -> bool {
        let (client, _) = self.cluster.addrs(i);
        self.net.in_member(from, move || info_within(client, timeout)).unwrap_or(false)
    }

    /// Cuts node `i` off from every other member (nodes, extras and the host), both ways.
    pub fn isolate(&self, i: usize) -> Result<(), String> {
        let node = Self::member_of(i);
        let others: Vec<&str> =
            self.net.members().iter().map(|m| m.name.as_str()).filter(|m| *m != node && *m != HOST).collect();
        self.net.partition(&[&node], &others)
    }
}

/// Connects to `addr` and reads until an `INFO` line starts or `timeout` passes.
fn info_within(addr: SocketAddr, timeout: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + timeout;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        stream
            .set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                seen.extend_from_slice(&buf[..n]);
                if seen.starts_with(b"INFO") {
                    return Ok(true);
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}
