//! A private three-node `nats-server` cluster with JetStream, for the tests that lose a node.
//!
//! Every node gets free ports (client, cluster routes, HTTP monitoring), its own store
//! directory and a server name (`n0`, `n1`, `n2`), and routes to all three; the cluster has a
//! unique name. A test can SIGKILL any node and start it again on the same ports with its store
//! intact, or do that to the whole cluster. Helpers create replicated streams (retrying while
//! the cluster forms), name the stream and consumer leaders, and find the node a named client
//! is connected to. A watchdog kills every node when the test process ends.
//!
//! [`NatsCluster::start_with`] places the nodes elsewhere ([`ClusterSpec`]): each on an address
//! of its own and started through a command such as `ip netns exec NS` (a node per network
//! namespace of a [`crate::Net`], so that the links between them can be cut), with lines of its
//! own in every node's `jetstream {}` block; such a cluster can also pause a node (SIGSTOP),
//! change those lines for the next start, and stop every node cleanly so its store can be read.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::Context, stream};
use rustix::process::Signal;

use crate::nats::find_nats_server;
use crate::process::{free_port, kill_child};

/// Nodes in a [`NatsCluster`].
pub const CLUSTER_NODES: usize = 3;

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    name: String,
    /// The address it binds (client, route and monitoring ports).
    host: IpAddr,
    /// The command it is started through (program and arguments), empty for none.
    wrap: Vec<String>,
    route_port: u16,
    port: u16,
    monitor_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A three-node JetStream cluster owned by a test. Every node is killed on drop.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
    bin: PathBuf,
    cluster_name: String,
    jetstream: String,
    server: String,
}

/// Where a cluster's nodes run and what their configs add, for [`NatsCluster::start_with`].
#[derive(Debug, Clone, Default)]
pub struct ClusterSpec {
    /// Per node: the address it binds, and the command (program and arguments) it is started
    /// through, e.g. `ip netns exec NS`. Empty: every node on 127.0.0.1, started directly.
    pub nodes: Vec<(IpAddr, Vec<String>)>,
    /// Lines added to every node's `jetstream {}` block (`sync_interval: always`).
    pub jetstream: String,
    /// Lines added at the top of every node's config (`ping_interval: "1s"`).
    pub server: String,
}

impl NatsCluster {
    /// Starts three JetStream nodes routed to each other and waits until the cluster has a
    /// JetStream meta leader (it answers account requests), which takes a few seconds.
    pub async fn start() -> Self {
        Self::start_with(ClusterSpec::default()).await
    }

    /// [`NatsCluster::start`] with the nodes placed as `spec` says.
    pub async fn start_with(spec: ClusterSpec) -> Self {
        let dir = tempfile::Builder::new().prefix("nats-cluster-").tempdir().unwrap();
        let cluster_name = crate::unique("C");
        let loopback = (IpAddr::V4(Ipv4Addr::LOCALHOST), Vec::new());
        let nodes = (0..CLUSTER_NODES)
            .map(|i| {
                let (host, wrap) = spec.nodes.get(i).cloned().unwrap_or_else(|| loopback.clone());
                let name = format!("n{i}");
                let node_dir = dir.path().join(&name);
                std::fs::create_dir_all(node_dir.join("store")).unwrap();
                Node {
                    name,
                    host,
                    wrap,
                    route_port: free_port(),
                    port: free_port(),
                    monitor_port: free_port(),
                    config: node_dir.join("server.conf"),
                    log: node_dir.join("server.log"),
                    child: None,
                }
            })
            .collect();
        let mut cluster =
            Self { nodes, dir, bin: find_nats_server(), cluster_name, jetstream: spec.jetstream, server: spec.server };
        cluster.write_configs();
        for i in 0..CLUSTER_NODES {
            cluster.spawn(i);
        }
        cluster.wait_ready().await;
        cluster
    }

    /// Writes every node's config file (read at its next start).
    fn write_configs(&self) {
        let routes: Vec<String> =
            self.nodes.iter().map(|n| format!("\"nats-route://{}:{}\"", n.host, n.route_port)).collect();
        for node in &self.nodes {
            let text = format!(
                "{server}\nserver_name: \"{name}\"\nlisten: \"{host}:{port}\"\nhttp: \"{host}:{monitor_port}\"\n\
                 jetstream {{\n  store_dir: \"{store}\"\n  max_memory_store: 64MB\n  max_file_store: 1GB\n{jetstream}\n}}\n\
                 cluster {{\n  name: \"{cluster_name}\"\n  listen: \"{host}:{route_port}\"\n  routes: [{routes}]\n}}\n",
                server = self.server,
                name = node.name,
                host = node.host,
                port = node.port,
                monitor_port = node.monitor_port,
                route_port = node.route_port,
                store = self.store_dir_of(node).display(),
                jetstream = self.jetstream,
                cluster_name = self.cluster_name,
                routes = routes.join(", "),
            );
            std::fs::write(&node.config, text).unwrap();
        }
    }

    fn store_dir_of(&self, node: &Node) -> PathBuf {
        self.dir.path().join(&node.name).join("store")
    }

    fn spawn(&mut self, i: usize) {
        let bin = self.bin.clone();
        let node = &mut self.nodes[i];
        let ready_before = ready_lines(&node.log);
        let mut command = match node.wrap.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        let child = command
            .arg("-c")
            .arg(&node.config)
            .arg("-l")
            .arg(&node.log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        crate::process::watch(&child);
        node.child = Some(child);
        // The node is up when its own log says so for this start (the log is appended to
        // across restarts) while the process still runs. A client port that merely accepts
        // is not enough: should anything else hold one of the ports (they are reserved for
        // this process, see `free_port`, but a foreign program may still bind one), this node
        // exits while the port answers for someone else.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let exited = node.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some());
            assert!(!exited, "cluster node {} exited at start:\n{}", node.name, tail(&node.log));
            if ready_lines(&node.log) > ready_before {
                break;
            }
            assert!(Instant::now() < deadline, "cluster node {} did not start:\n{}", node.name, tail(&node.log));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until JetStream answers through the running nodes (a meta leader is elected).
    pub async fn wait_ready(&self) {
        assert!(
            self.ready_within(Duration::from_secs(60)).await,
            "the nats cluster did not elect a meta leader within 60 s; logs under {}:\n{}",
            self.dir.path().display(),
            self.log_tails()
        );
    }

    /// True once JetStream answers account requests through the running nodes, false when
    /// `timeout` passes first.
    async fn ready_within(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(client) = self.connect().await {
                let js = jetstream::new(client);
                if js.query_account().await.is_ok() {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of every node's log, for a failure message.
    fn log_tails(&self) -> String {
        self.nodes.iter().map(|n| format!("--- {} ---\n{}", n.name, tail(&n.log))).collect::<Vec<_>>().join("\n")
    }

    async fn connect(&self) -> Result<async_nats::Client, async_nats::ConnectError> {
        let urls: Vec<async_nats::ServerAddr> = self.urls().iter().map(|u| u.parse().unwrap()).collect();
        async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(2))
            .max_reconnects(None)
            .connect(urls)
            .await
    }

    /// A client seeded with every node (it reconnects to any survivor).
    pub async fn client(&self) -> async_nats::Client {
        self.wait_ready().await;
        self.connect().await.unwrap()
    }

    /// A JetStream context on a fresh client seeded with every node.
    pub async fn js(&self) -> Context {
        jetstream::new(self.client().await)
    }

    /// `nats://127.0.0.1:{port}` of every node, for `nats.urls`.
    pub fn urls(&self) -> Vec<String> {
        (0..CLUSTER_NODES).map(|i| self.url(i)).collect()
    }

    /// The client URL of node `i`.
    pub fn url(&self, i: usize) -> String {
        format!("nats://{}:{}", self.nodes[i].host, self.nodes[i].port)
    }

    /// The monitoring URL of node `i` (`http://HOST:PORT`, for `/varz`, `/healthz`, `/jsz`).
    pub fn monitoring_url(&self, i: usize) -> String {
        format!("http://{}:{}", self.nodes[i].host, self.nodes[i].monitor_port)
    }

    /// The client and route addresses of node `i`.
    pub fn addrs(&self, i: usize) -> (std::net::SocketAddr, std::net::SocketAddr) {
        let node = &self.nodes[i];
        ((node.host, node.port).into(), (node.host, node.route_port).into())
    }

    /// The store directory of node `i` (its `jetstream/` is below it).
    pub fn store_dir(&self, i: usize) -> PathBuf {
        self.store_dir_of(&self.nodes[i])
    }

    /// The process id of node `i` while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].child.as_ref().map(Child::id)
    }

    /// Pauses node `i` (SIGSTOP): it keeps its connections and answers nothing until
    /// [`NatsCluster::resume`]. Returns once every thread of the node is stopped (up to 5 s):
    /// the signal is delivered asynchronously, and on a busy machine a thread still running
    /// for a moment after `kill` returned once greeted a new connection.
    pub fn pause(&self, i: usize) {
        self.signal(i, Signal::STOP);
        if let Some(pid) = self.pid(i) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !crate::process::all_threads_stopped(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Resumes a paused node `i` (SIGCONT).
    pub fn resume(&self, i: usize) {
        self.signal(i, Signal::CONT);
    }

    fn signal(&self, i: usize, signal: Signal) {
        if let Some(child) = self.nodes[i].child.as_ref() {
            let _ = rustix::process::kill_process(rustix::process::Pid::from_child(child), signal);
        }
    }

    /// Replaces the lines added to every node's `jetstream {}` block; a node reads them at
    /// its next start (a restart).
    pub fn set_jetstream(&mut self, lines: &str) {
        lines.clone_into(&mut self.jetstream);
        self.write_configs();
    }

    /// Stops every node cleanly (SIGTERM, a resumed node first; SIGKILL after 20 s) and waits,
    /// so that every store is flushed and can be read.
    pub fn stop_all(&mut self) {
        for i in 0..CLUSTER_NODES {
            self.resume(i);
            self.signal(i, Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &mut self.nodes {
            while let Some(c) = node.child.as_mut() {
                if c.try_wait().ok().flatten().is_some() {
                    node.child = None;
                } else if Instant::now() > deadline {
                    kill_child(&mut node.child);
                } else {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// The server name of node `i` (`n{i}`).
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// The index of the node called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Kills node `i` with SIGKILL (no clean shutdown, no leadership hand-off) and waits for
    /// it to exit.
    pub fn kill(&mut self, i: usize) {
        kill_child(&mut self.nodes[i].child);
    }

    /// Starts node `i` again on the same ports with its store intact (killing it first if it
    /// runs).
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
    }

    /// Kills every node.
    pub fn kill_all(&mut self) {
        for i in 0..CLUSTER_NODES {
            self.kill(i);
        }
    }

    /// Starts every node that is not running, then waits for a meta leader.
    ///
    /// After every node was killed at once, a meta election on a loaded machine can stall
    /// (the nodes' election timers keep colliding). When no leader is elected within 40 s
    /// the whole cluster is stopped and started once more, up to three starts in all; the
    /// panic after that shows every node's log. What the calling test asserts is unchanged:
    /// the cluster was down and comes back with its stores intact.
    pub async fn restart_all(&mut self) {
        const STARTS: usize = 3;
        for start in 1..=STARTS {
            for i in 0..CLUSTER_NODES {
                if !self.is_running(i) {
                    self.spawn(i);
                }
            }
            if self.ready_within(Duration::from_secs(40)).await {
                return;
            }
            assert!(
                start < STARTS,
                "the nats cluster did not elect a meta leader after {STARTS} full starts; logs under {}:\n{}",
                self.dir.path().display(),
                self.log_tails()
            );
            self.kill_all();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// True while node `i` runs.
    pub fn is_running(&mut self, i: usize) -> bool {
        self.nodes[i].child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The process ids of the running nodes (for CPU accounting in benchmarks).
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(|n| n.child.as_ref().map(Child::id)).collect()
    }

    /// The server log of node `i` (shown when a test fails).
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default()
    }

    /// The node (index) a client that connected with `name` (`nats.name`) is connected to,
    /// from the nodes' `/connz` monitoring endpoints.
    pub async fn node_of_client(&self, name: &str) -> Option<usize> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().ok()?;
        for (i, node) in self.nodes.iter().enumerate() {
            let url = format!("http://{}:{}/connz?limit=4096", node.host, node.monitor_port);
            let Ok(response) = http.get(&url).send().await else { continue };
            let Ok(bytes) = response.bytes().await else { continue };
            let Ok(body) = serde_json::from_slice::<serde_json::Value>(&bytes) else { continue };
            let found = body["connections"]
                .as_array()
                .is_some_and(|conns| conns.iter().any(|c| c["name"].as_str() == Some(name)));
            if found {
                return Some(i);
            }
        }
        None
    }

    /// Creates a file-backed stream `name` capturing `subjects` with `replicas` replicas,
    /// retrying while the cluster is still forming (peers not yet current), and waits until
    /// it has a leader.
    pub async fn create_stream(&self, js: &Context, name: &str, subjects: &[&str], replicas: usize) -> stream::Stream {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let created = js
                .get_or_create_stream(stream::Config {
                    name: name.to_owned(),
                    subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await;
            match created {
                Ok(s) => {
                    assert!(
                        self.wait_stream_leader(js, name, Duration::from_secs(30)).await.is_some(),
                        "stream {name} has no leader"
                    );
                    return s;
                }
                Err(e) => {
                    assert!(Instant::now() < deadline, "create stream {name} (R{replicas}): {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    }

    /// The server name of the stream's current leader (`$JS.API.STREAM.INFO` → cluster.leader).
    pub async fn stream_leader(&self, js: &Context, stream: &str) -> Option<String> {
        let mut s = js.get_stream(stream).await.ok()?;
        let info = s.info().await.ok()?;
        info.cluster.as_ref()?.leader.clone().filter(|l| !l.is_empty())
    }

    /// The server name of the consumer's current leader.
    pub async fn consumer_leader(&self, js: &Context, stream: &str, consumer: &str) -> Option<String> {
        let s = js.get_stream(stream).await.ok()?;
        let info = s.consumer_info(consumer).await.ok()?;
        info.cluster.as_ref()?.leader.clone().filter(|l| !l.is_empty())
    }

    /// Asks the stream's leader to step down (`$JS.API.STREAM.LEADER.STEPDOWN`); another
    /// replica is elected. Returns whether the request was accepted.
    pub async fn step_down_stream(&self, js: &Context, stream: &str) -> bool {
        let subject = format!("$JS.API.STREAM.LEADER.STEPDOWN.{stream}");
        step_down(js, subject).await
    }

    /// Asks the consumer's leader to step down (`$JS.API.CONSUMER.LEADER.STEPDOWN`).
    pub async fn step_down_consumer(&self, js: &Context, stream: &str, consumer: &str) -> bool {
        let subject = format!("$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}");
        step_down(js, subject).await
    }

    /// Polls until the stream has a leader (returns its name) or `timeout` passes.
    pub async fn wait_stream_leader(&self, js: &Context, stream: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(leader) = self.stream_leader(js, stream).await {
                return Some(leader);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How many times the node's log says it is ready (`Server is ready`), over all its starts.
fn ready_lines(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log).map(|t| t.matches("Server is ready").count()).unwrap_or(0)
}

/// The last 40 lines of a node's log.
fn tail(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

async fn step_down(js: &Context, subject: String) -> bool {
    match tokio::time::timeout(Duration::from_secs(5), js.client().request(subject, "".into())).await {
        Ok(Ok(reply)) => serde_json::from_slice::<serde_json::Value>(&reply.payload)
            .is_ok_and(|v| v["success"].as_bool() == Some(true)),
        _ => false,
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}
