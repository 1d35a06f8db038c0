//! The fault harness's faults: what each kind does to the cluster in its namespaces, the
//! sink's workers or the stream's leadership, how long it holds, and how it heals. The plan
//! is seeded: the first kinds come in a shuffled pass over every kind (so even a short run has
//! each at least once), then at random.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use async_nats::jetstream::Context as Js;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rustix::process::Signal;
use sinks_testkit::{CLUSTER_NODES, NetCluster};

use super::store::{self, Damage, Damaged};

/// The stream the producers publish to and the sink consumes.
pub(crate) const STREAM: &str = "JEPSEN";
/// The consumer's AckWait: every pause holds longer than this.
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(4);
/// How long a pause lasts: past AckWait, so that the paused party's messages are redelivered.
pub(crate) const PAUSE: Duration = Duration::from_secs(6);
/// How long a cut lasts: long enough for the routes to go (three missed pings of a second)
/// and a leader to be elected on the majority side.
pub(crate) const CUT: Duration = Duration::from_secs(6);

/// One kind of fault (a row of the result table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    /// One node (not chosen for leading) cut from the other two, both ways: a majority and a
    /// minority.
    MinorityPartition,
    /// The stream leader cut from the other two: the majority elects another.
    LeaderIsolated,
    /// The node the first worker is connected to cut from the other two; the worker stays
    /// connected to a node that cannot reach the leader.
    SinkServerCut,
    /// One direction between two nodes cut (a gray failure).
    OneWayCut,
    /// Two nodes cut from each other, both still seeing the third (a bridge).
    Bridge,
    /// One node stopped (SIGSTOP) past AckWait, then resumed.
    NodePaused,
    /// One worker stopped (SIGSTOP) past AckWait while it holds a batch, then resumed.
    SinkPaused,
    /// One node killed (SIGKILL), then restarted on its store.
    NodeKilled,
    /// Every node killed at once, restarted with `sync_interval: always`.
    AllKilledSyncAlways,
    /// Every node killed at once, restarted with the default sync (every two minutes).
    AllKilledSyncDefault,
    /// The stream leader asked to step down (`nats stream cluster step-down`) under load.
    StepDown,
    /// One node killed, the newest block of its stream store and of the stream's Raft log
    /// cut short (a tail that never reached the disk), restarted.
    StoreTruncated,
    /// One node killed, one bit of its stream's newest message block flipped, restarted.
    StoreBitFlip,
}

impl Fault {
    /// Every kind.
    pub(crate) const ALL: [Self; 13] = [
        Self::MinorityPartition,
        Self::LeaderIsolated,
        Self::SinkServerCut,
        Self::OneWayCut,
        Self::Bridge,
        Self::NodePaused,
        Self::SinkPaused,
        Self::NodeKilled,
        Self::AllKilledSyncAlways,
        Self::AllKilledSyncDefault,
        Self::StepDown,
        Self::StoreTruncated,
        Self::StoreBitFlip,
    ];

    /// The kind's short name (`--faults`).
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::MinorityPartition => "partition",
            Self::LeaderIsolated => "leader-isolated",
            Self::SinkServerCut => "sink-server-cut",
            Self::OneWayCut => "one-way",
            Self::Bridge => "bridge",
            Self::NodePaused => "node-pause",
            Self::SinkPaused => "sink-pause",
            Self::NodeKilled => "node-kill",
            Self::AllKilledSyncAlways => "all-kill-sync-always",
            Self::AllKilledSyncDefault => "all-kill-sync-default",
            Self::StepDown => "step-down",
            Self::StoreTruncated => "store-truncate",
            Self::StoreBitFlip => "store-bitflip",
        }
    }

    /// The kinds a `--faults` list names (`all`: every kind); an unknown name is refused.
    pub(crate) fn parse_list(list: &str) -> Result<Vec<Self>> {
        let mut kinds = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "all" {
                kinds.extend(Self::ALL);
                continue;
            }
            match Self::ALL.iter().find(|f| f.id() == name) {
                Some(f) => kinds.push(*f),
                None => {
                    bail!("unknown fault kind {name:?} in --faults; known: all, {}", Self::ALL.map(Self::id).join(", "))
                }
            }
        }
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            bail!("--faults names no fault kind");
        }
        Ok(kinds)
    }

    /// The kind's name in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::MinorityPartition => "majority/minority partition",
            Self::LeaderIsolated => "stream leader isolated",
            Self::SinkServerCut => "sink's server cut from the others",
            Self::OneWayCut => "one-way cut",
            Self::Bridge => "bridge",
            Self::NodePaused => "node SIGSTOP past AckWait",
            Self::SinkPaused => "sink SIGSTOP past AckWait",
            Self::NodeKilled => "kill -9 one node",
            Self::AllKilledSyncAlways => "kill -9 all (sync always)",
            Self::AllKilledSyncDefault => "kill -9 all (sync default)",
            Self::StepDown => "leader step-down (natscli)",
            Self::StoreTruncated => "a node's store tail lost",
            Self::StoreBitFlip => "a bit flipped in a node's store",
        }
    }
}

/// The seeded order of faults: a shuffled pass over every kind asked for, then random ones.
#[derive(Debug)]
pub(crate) struct Plan {
    kinds: Vec<Fault>,
    first: Vec<Fault>,
}

impl Plan {
    /// A plan of `kinds` whose first pass `rng` shuffles.
    pub(crate) fn new(rng: &mut StdRng, kinds: &[Fault]) -> Self {
        let mut first = kinds.to_vec();
        first.shuffle(rng);
        first.reverse();
        Self { kinds: kinds.to_vec(), first }
    }

    /// The next fault; `None` once the first pass is over and `time_left` is false.
    pub(crate) fn next(&mut self, rng: &mut StdRng, time_left: bool) -> Option<Fault> {
        match self.first.pop() {
            Some(f) => Some(f),
            None if time_left && !self.kinds.is_empty() => Some(self.kinds[rng.random_range(0..self.kinds.len())]),
            None => None,
        }
    }
}

/// What the faults act on: the cluster and the workers' process ids.
pub(crate) struct Target<'a> {
    /// The cluster in its namespaces.
    pub(crate) nc: &'a mut NetCluster,
    /// A client seeded with every node (for leaders and step-downs).
    pub(crate) js: &'a Js,
    /// The workers' process ids and the node each is connected to.
    pub(crate) workers: Vec<(u32, usize)>,
    /// The natscli binary.
    pub(crate) natscli: &'a Path,
}

/// What an injection did, for the log.
#[derive(Debug, Default)]
pub(crate) struct Injected {
    /// What it did, in words (which node, whether the leader moved).
    pub(crate) note: String,
    /// Another stream leader than the one before, named while the fault held, for the faults
    /// that move it (an isolated leader, a step-down); `None` when none was. After the heal a
    /// rejoining node may win a new election, so only this shows that the fault took
    /// leadership away.
    pub(crate) moved_to: Option<String>,
    /// The files a store fault damaged (empty for the other kinds).
    pub(crate) damaged: Vec<Damaged>,
}

impl Target<'_> {
    /// The index of the stream's leader now (a random node when there is none).
    pub(crate) async fn leader(&self, rng: &mut StdRng) -> usize {
        let leader = self.nc.cluster().stream_leader(self.js, STREAM).await;
        leader.and_then(|l| self.nc.cluster().index_of(&l)).unwrap_or_else(|| rng.random_range(0..CLUSTER_NODES))
    }

    /// Injects `fault`, holds it, heals it; returns when it is healed.
    pub(crate) async fn inject(&mut self, fault: Fault, rng: &mut StdRng) -> Result<Injected> {
        let leader = self.leader(rng).await;
        let mut moved_to = None;
        let mut damaged = Vec::new();
        let note = match fault {
            Fault::MinorityPartition => {
                let others: Vec<usize> = (0..CLUSTER_NODES).filter(|i| *i != leader).collect();
                let node = others[rng.random_range(0..others.len())];
                self.isolate_for(node, CUT).await?;
                format!("n{node} cut off (leader n{leader} on the majority side)")
            }
            Fault::LeaderIsolated => {
                // Held until the majority has elected another leader (the Raft election
                // timeout is several seconds; an idle stream may take longer than `CUT`).
                self.nc.isolate(leader).map_err(anyhow::Error::msg)?;
                let majority = (leader + 1) % CLUSTER_NODES;
                let started = Instant::now();
                let mut elected = None;
                while started.elapsed() < CUT || (elected.is_none() && started.elapsed() < ELECTION_LIMIT) {
                    let seen = leader_seen_by(&self.nc.cluster().monitoring_url(majority)).await;
                    elected = seen.filter(|l| *l != self.nc.cluster().name(leader));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                self.nc.net().heal().map_err(anyhow::Error::msg)?;
                let note = format!(
                    "leader n{leader} cut off for {:.1} s; the majority elected {}",
                    started.elapsed().as_secs_f64(),
                    elected.as_deref().unwrap_or("no one")
                );
                moved_to = elected;
                note
            }
            Fault::SinkServerCut => {
                let node = self.workers.first().map_or(0, |w| w.1);
                self.isolate_for(node, CUT).await?;
                format!("n{node} (the first worker's server) cut off")
            }
            Fault::OneWayCut => {
                let from = rng.random_range(0..CLUSTER_NODES);
                let to = (from + rng.random_range(1..CLUSTER_NODES)) % CLUSTER_NODES;
                self.hold_cut(CUT, |nc| nc.net().cut(&NetCluster::member_of(from), &NetCluster::member_of(to))).await?;
                format!("n{from} -> n{to} cut")
            }
            Fault::Bridge => {
                let bridge = rng.random_range(0..CLUSTER_NODES);
                let (a, b) = ((bridge + 1) % CLUSTER_NODES, (bridge + 2) % CLUSTER_NODES);
                self.hold_cut(CUT, |nc| nc.net().cut_both(&NetCluster::member_of(a), &NetCluster::member_of(b)))
                    .await?;
                format!("n{a} and n{b} cut from each other, n{bridge} sees both")
            }
            Fault::NodePaused => {
                let node = rng.random_range(0..CLUSTER_NODES);
                self.nc.cluster().pause(node);
                tokio::time::sleep(PAUSE).await;
                self.nc.cluster().resume(node);
                format!("n{node} paused for {} s", PAUSE.as_secs())
            }
            Fault::SinkPaused => {
                let Some(&(pid, _)) = self.workers.get(rng.random_range(0..self.workers.len().max(1))) else {
                    bail!("no worker to pause");
                };
                // Mid-batch: wait (briefly) until the consumer has messages out with a worker.
                let busy = holds_messages(self.js, Duration::from_secs(3)).await;
                signal(pid, Signal::STOP);
                tokio::time::sleep(PAUSE).await;
                signal(pid, Signal::CONT);
                format!("worker {pid} paused for {} s (messages out when paused: {busy})", PAUSE.as_secs())
            }
            Fault::NodeKilled => {
                let node = rng.random_range(0..CLUSTER_NODES);
                self.nc.cluster_mut().kill(node);
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.nc.cluster_mut().restart(node);
                format!("n{node} killed for 3 s")
            }
            Fault::AllKilledSyncAlways | Fault::AllKilledSyncDefault => {
                let always = fault == Fault::AllKilledSyncAlways;
                self.nc.cluster_mut().set_jetstream(if always { "  sync_interval: always" } else { "" });
                self.nc.cluster_mut().kill_all();
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.nc.cluster_mut().restart_all().await;
                format!("every node killed, restarted with sync {}", if always { "always" } else { "default" })
            }
            Fault::StepDown => {
                let moved = self.step_down(leader).await?;
                let note = format!("leader n{leader} stepped down; now {moved:?}");
                moved_to = moved.filter(|l| *l != self.nc.cluster().name(leader));
                note
            }
            Fault::StoreTruncated | Fault::StoreBitFlip => {
                let node = rng.random_range(0..CLUSTER_NODES);
                let how = if fault == Fault::StoreTruncated { Damage::Truncate } else { Damage::FlipBit };
                let caught_up;
                (damaged, caught_up) = self.damage_store(node, how, rng).await?;
                let what: Vec<String> = damaged.iter().map(ToString::to_string).collect();
                let caught_up = caught_up.map_or("not caught up within 60 s".to_owned(), |d| {
                    format!("caught up with the leader in {:.1} s", d.as_secs_f64())
                });
                let what = if what.is_empty() { "no block found".to_owned() } else { what.join("; ") };
                format!("n{node} killed, {what}, restarted; {caught_up}")
            }
        };
        Ok(Injected { note, moved_to, damaged })
    }

    /// Kills node `i`, damages its store's newest blocks of the stream as `how` says, and
    /// restarts it on what is left.
    /// Returns the damage and how long the node took to catch up (`None`: not within a
    /// minute).
    async fn damage_store(
        &mut self,
        i: usize,
        how: Damage,
        rng: &mut StdRng,
    ) -> Result<(Vec<Damaged>, Option<Duration>)> {
        let group = self.raft_group().await;
        self.nc.cluster_mut().kill(i);
        let store = self.nc.cluster().store_dir(i);
        let mut damaged = Vec::new();
        for file in store::targets(&store, STREAM, group.as_deref(), how) {
            damaged.push(store::damage(&file, how, rng)?);
        }
        self.nc.cluster_mut().restart(i);
        // One node's damage at a time: the next fault waits until this node has caught up
        // (or a minute has passed), so that two nodes' lost tails never add up to a
        // majority's, which no replicated log survives.
        let caught_up = self.wait_caught_up(i, Duration::from_secs(60)).await;
        Ok((damaged, caught_up))
    }

    /// Waits until node `i` leads the stream or is a current replica with no lag, at most
    /// `limit`; how long that took, `None` when it did not.
    async fn wait_caught_up(&self, i: usize, limit: Duration) -> Option<Duration> {
        let name = self.nc.cluster().name(i).to_owned();
        let started = Instant::now();
        while started.elapsed() < limit {
            let caught_up = async {
                let mut stream =
                    tokio::time::timeout(Duration::from_secs(2), self.js.get_stream(STREAM)).await.ok()?.ok()?;
                let info = tokio::time::timeout(Duration::from_secs(2), stream.info()).await.ok()?.ok()?;
                let cluster = info.cluster.as_ref()?;
                if cluster.leader.as_deref() == Some(name.as_str()) {
                    return Some(true);
                }
                let replica = cluster.replicas.iter().find(|r| r.name == name)?;
                Some(replica.current && !replica.offline && replica.lag.unwrap_or(0) == 0)
            };
            if caught_up.await == Some(true) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    /// The stream's Raft group (its log's directory name in each node's store).
    async fn raft_group(&self) -> Option<String> {
        let mut stream = tokio::time::timeout(Duration::from_secs(2), self.js.get_stream(STREAM)).await.ok()?.ok()?;
        let info = tokio::time::timeout(Duration::from_secs(2), stream.info()).await.ok()?.ok()?;
        info.cluster.as_ref()?.raft_group.clone()
    }

    /// Cuts node `i` from the other nodes for `hold`, then heals.
    async fn isolate_for(&self, i: usize, hold: Duration) -> Result<()> {
        self.hold_cut(hold, |nc| nc.isolate(i)).await
    }

    /// Makes the cuts `cut` names, holds them for `hold`, then heals every cut: the shape of
    /// each network fault that holds for a fixed time.
    async fn hold_cut(&self, hold: Duration, cut: impl FnOnce(&NetCluster) -> Result<(), String>) -> Result<()> {
        cut(self.nc).map_err(anyhow::Error::msg)?;
        tokio::time::sleep(hold).await;
        self.nc.net().heal().map_err(anyhow::Error::msg)
    }

    /// `nats stream cluster step-down STREAM` through a node that is not `leader`; returns
    /// the leader after it (polled up to 10 s until it differs from `leader`).
    pub(crate) async fn step_down(&self, leader: usize) -> Result<Option<String>> {
        let through = (leader + 1) % CLUSTER_NODES;
        // Right after another fault's heal the stream may have no leader for a moment: the
        // step-down is tried again until one accepts it.
        let tried = Instant::now();
        loop {
            let out = tokio::process::Command::new(self.natscli)
                .args([
                    "--server",
                    &self.nc.cluster().url(through),
                    "--timeout",
                    "5s",
                    "stream",
                    "cluster",
                    "step-down",
                ])
                .arg(STREAM)
                .stdin(std::process::Stdio::null())
                .output()
                .await?;
            if out.status.success() {
                break;
            }
            if tried.elapsed() > Duration::from_secs(30) {
                bail!(
                    "nats stream cluster step-down failed for 30 s: {}{}",
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let before = self.nc.cluster().name(leader).to_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = self.nc.cluster().stream_leader(self.js, STREAM).await;
            if now.as_ref().is_some_and(|l| *l != before) || Instant::now() >= deadline {
                return Ok(now);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The longest an isolated leader stays cut off while the majority elects another.
const ELECTION_LIMIT: Duration = Duration::from_secs(30);

/// The stream's leader as the node whose monitoring endpoint is `monitor` sees it
/// (`/jsz?streams=true`), `None` when it names none or does not answer.
async fn leader_seen_by(monitor: &str) -> Option<String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().ok()?;
    let bytes = http.get(format!("{monitor}/jsz?streams=true")).send().await.ok()?.bytes().await.ok()?;
    let body: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    body["account_details"].as_array()?.iter().find_map(|account| {
        account["stream_detail"].as_array()?.iter().find_map(|s| {
            (s["name"].as_str() == Some(STREAM))
                .then(|| s["cluster"]["leader"].as_str().filter(|l| !l.is_empty()).map(str::to_owned))
                .flatten()
        })
    })
}

/// Sends `signal` to process `pid`.
pub(crate) fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// True once the sink's consumer has messages out with a worker (acknowledgement pending),
/// polled until `within` passes.
async fn holds_messages(js: &Js, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(info) = consumer_info(js).await
            && info.num_ack_pending > 0
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The sink's consumer's info, `None` while it cannot be read.
pub(crate) async fn consumer_info(js: &Js) -> Option<async_nats::jetstream::consumer::Info> {
    let stream = tokio::time::timeout(Duration::from_secs(2), js.get_stream(STREAM)).await.ok()?.ok()?;
    tokio::time::timeout(Duration::from_secs(2), stream.consumer_info(super::CONSUMER)).await.ok()?.ok()
}

/// Each fault kind the harness injects takes effect: while it holds, the cut node's routes
/// go, the paused process is stopped, the killed node's process is gone; after it, the
/// leader moved (an isolated leader, a step-down) and the killed nodes run again as new
/// processes. A harness whose faults did nothing cannot pass these. They need root for the
/// namespaces (CI runs as root).
#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rand::SeedableRng as _;

    use super::*;

    /// What was seen while a fault held: per node, the fewest route peers its `/routez`
    /// named and whether its monitoring port once did not answer; and the processes seen
    /// stopped (state `T`) or gone.
    #[derive(Debug, Default)]
    struct Seen {
        fewest_routes: [Option<usize>; CLUSTER_NODES],
        silent: [bool; CLUSTER_NODES],
        stopped: BTreeSet<u32>,
        gone: BTreeSet<u32>,
    }

    /// The distinct route peers `/routez` at `url` names, `None` when it does not answer.
    async fn route_peers(http: &reqwest::Client, url: &str) -> Option<usize> {
        let bytes = http.get(format!("{url}/routez")).send().await.ok()?.bytes().await.ok()?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let peers: BTreeSet<&str> =
            body["routes"].as_array()?.iter().filter_map(|r| r["remote_name"].as_str()).collect();
        Some(peers.len())
    }

    /// Polls what [`Seen`] records until `done`.
    async fn observe(monitors: Vec<String>, pids: Vec<u32>, done: &AtomicBool) -> Seen {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().unwrap();
        let mut seen = Seen::default();
        while !done.load(Ordering::SeqCst) {
            for (i, url) in monitors.iter().enumerate() {
                match route_peers(&http, url).await {
                    Some(n) => seen.fewest_routes[i] = Some(seen.fewest_routes[i].map_or(n, |m| m.min(n))),
                    None => seen.silent[i] = true,
                }
            }
            for &pid in &pids {
                match sinks_testkit::process_state(pid) {
                    Some('T') => {
                        seen.stopped.insert(pid);
                    }
                    None => {
                        seen.gone.insert(pid);
                    }
                    Some(_) => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    }

    /// What one injection did.
    struct Outcome {
        seen: Seen,
        leader_before: usize,
        /// The leader the cluster named while the fault held ([`Injected::moved_to`]).
        moved_to: Option<String>,
        /// The files a store fault damaged ([`Injected::damaged`]).
        damaged: Vec<Damaged>,
        leader_after: Option<String>,
        pids_before: Vec<u32>,
        pids_after: Vec<u32>,
        nc: NetCluster,
    }

    /// A cluster in namespaces with the harness's stream, every node routed to the others, a
    /// stand-in worker (a `sleep` process: the pause acts on any process) connected to n0;
    /// then `fault` injected as the harness injects it, observed while it holds.
    async fn inject(test: &str, fault: Fault) -> Outcome {
        let mut nc = NetCluster::start(&[], "").await.unwrap_or_else(|e| sinks_testkit::cannot_run(test, e));
        let js = nc.cluster().js().await;
        nc.cluster().create_stream(&js, STREAM, &["jepsen.>"], 3).await;
        // Stored messages, so that every node has message blocks for the store faults.
        for n in 0..200 {
            js.publish("jepsen.before", format!("event {n}").into()).await.unwrap().await.unwrap();
        }
        for i in 0..CLUSTER_NODES {
            let others: Vec<String> = (0..CLUSTER_NODES).filter(|j| *j != i).map(NetCluster::member_of).collect();
            let others: Vec<&str> = others.iter().map(String::as_str).collect();
            let peers = nc.wait_route_peers(i, &others, Duration::from_secs(20)).await;
            assert_eq!(peers.map(|p| p.len()), Some(2), "n{i} is not routed to both others before the fault");
        }
        let mut worker = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let natscli = sinks_testkit::find_natscli();
        let monitors: Vec<String> = (0..CLUSTER_NODES).map(|i| nc.cluster().monitoring_url(i)).collect();
        let pids_before = nc.cluster().pids();
        let mut rng = StdRng::seed_from_u64(7);
        let mut target = Target { nc: &mut nc, js: &js, workers: vec![(worker.id(), 0)], natscli: &natscli };
        let leader_before = target.leader(&mut rng).await;
        let mut watched = pids_before.clone();
        watched.push(worker.id());
        let done = AtomicBool::new(false);
        let injecting = async {
            let injected = target.inject(fault, &mut rng).await;
            done.store(true, Ordering::SeqCst);
            injected
        };
        let (injected, seen) = tokio::join!(injecting, observe(monitors, watched, &done));
        let injected = injected.unwrap_or_else(|e| panic!("injecting {}: {e:#}", fault.name()));
        eprintln!("{}: {}", fault.name(), injected.note);
        let (moved_to, damaged) = (injected.moved_to, injected.damaged);
        let _ = worker.kill();
        let _ = worker.wait();
        let leader_after = nc.cluster().stream_leader(&js, STREAM).await;
        let pids_after = nc.cluster().pids();
        Outcome { seen, leader_before, moved_to, damaged, leader_after, pids_before, pids_after, nc }
    }

    /// The nodes whose routes went down to `peers` or fewer while the fault held.
    fn routes_at_most(seen: &Seen, peers: usize) -> Vec<usize> {
        (0..CLUSTER_NODES).filter(|i| seen.fewest_routes[*i].is_some_and(|n| n <= peers)).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_minority_partition_cuts_one_node_from_both_others() {
        let out = inject("a_minority_partition_cuts_one_node", Fault::MinorityPartition).await;
        let cut = routes_at_most(&out.seen, 0);
        assert_eq!(cut.len(), 1, "not exactly one node lost every route: {:?}", out.seen);
        assert_ne!(cut[0], out.leader_before, "the minority was the leader: {:?}", out.seen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_isolated_leader_loses_its_routes_and_its_leadership() {
        let out = inject("an_isolated_leader_loses_its_routes", Fault::LeaderIsolated).await;
        assert_eq!(routes_at_most(&out.seen, 0), [out.leader_before], "{:?}", out.seen);
        // While it held, the majority named another leader. After the heal the old leader
        // may win again (its term rose while it was cut off), so the leader after is not it.
        let before = out.nc.cluster().name(out.leader_before).to_owned();
        assert!(
            out.moved_to.as_ref().is_some_and(|l| *l != before),
            "the majority never elected another leader than {before} (seen: {:?}, after: {:?})",
            out.moved_to,
            out.leader_after
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sinks_server_is_cut_from_the_others() {
        let out = inject("the_sinks_server_is_cut", Fault::SinkServerCut).await;
        // The stand-in worker is connected to n0.
        assert_eq!(routes_at_most(&out.seen, 0), [0], "{:?}", out.seen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_one_way_cut_takes_down_the_route_between_two_nodes_only() {
        let out = inject("a_one_way_cut_takes_down_one_route", Fault::OneWayCut).await;
        assert_eq!(routes_at_most(&out.seen, 1).len(), 2, "{:?}", out.seen);
        assert!(routes_at_most(&out.seen, 0).is_empty(), "a node lost every route: {:?}", out.seen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bridge_keeps_one_node_routed_to_both_sides() {
        let out = inject("a_bridge_keeps_one_node_routed", Fault::Bridge).await;
        let sides = routes_at_most(&out.seen, 1);
        assert_eq!(sides.len(), 2, "not two nodes down to one route: {:?}", out.seen);
        let bridge = (0..CLUSTER_NODES).find(|i| !sides.contains(i)).unwrap();
        assert_eq!(out.seen.fewest_routes[bridge], Some(2), "the bridge lost a side: {:?}", out.seen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_node_is_stopped_and_answers_nothing_until_resumed() {
        let out = inject("a_paused_node_is_stopped", Fault::NodePaused).await;
        let stopped: Vec<u32> = out.pids_before.iter().copied().filter(|p| out.seen.stopped.contains(p)).collect();
        assert_eq!(stopped.len(), 1, "not exactly one node seen stopped: {:?}", out.seen);
        let i = out.pids_before.iter().position(|p| *p == stopped[0]).unwrap();
        assert!(out.seen.silent[i], "the paused node's monitoring port answered: {:?}", out.seen);
        assert_eq!(sinks_testkit::process_state(stopped[0]).map(|s| s != 'T'), Some(true), "the node was not resumed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_sink_is_stopped_past_ack_wait_and_resumed() {
        let started = Instant::now();
        let out = inject("a_paused_sink_is_stopped", Fault::SinkPaused).await;
        assert!(started.elapsed() > ACK_WAIT);
        assert!(
            out.seen.stopped.iter().any(|p| !out.pids_before.contains(p)),
            "the worker was never seen stopped: {:?}",
            out.seen
        );
        assert!(out.pids_before.iter().all(|p| !out.seen.stopped.contains(p)), "a node was paused: {:?}", out.seen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_node_is_gone_then_runs_again_as_a_new_process() {
        let out = inject("a_killed_node_is_gone", Fault::NodeKilled).await;
        let gone: Vec<&u32> = out.pids_before.iter().filter(|p| out.seen.gone.contains(p)).collect();
        assert_eq!(gone.len(), 1, "not exactly one node seen gone: {:?}", out.seen);
        assert_eq!(out.pids_after.len(), CLUSTER_NODES, "a node did not come back");
        assert_eq!(out.pids_after.iter().filter(|p| out.pids_before.contains(p)).count(), 2);
    }

    async fn all_killed(test: &str, fault: Fault, always: bool) {
        let out = inject(test, fault).await;
        assert!(out.pids_before.iter().all(|p| out.seen.gone.contains(p)), "a node survived: {:?}", out.seen);
        assert_eq!(out.pids_after.len(), CLUSTER_NODES, "a node did not come back");
        assert!(out.pids_after.iter().all(|p| !out.pids_before.contains(p)));
        let varz = reqwest::get(format!("{}/varz", out.nc.cluster().monitoring_url(0))).await.unwrap();
        let varz: serde_json::Value = serde_json::from_slice(&varz.bytes().await.unwrap()).unwrap();
        let config = &varz["jetstream"]["config"];
        assert_eq!(config["sync_always"].as_bool().unwrap_or(false), always, "the restarted node's config: {config}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_nodes_killed_come_back_syncing_always() {
        all_killed("all_nodes_killed_sync_always", Fault::AllKilledSyncAlways, true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_nodes_killed_come_back_with_the_default_sync() {
        all_killed("all_nodes_killed_sync_default", Fault::AllKilledSyncDefault, false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_down_through_natscli_moves_the_leader() {
        let out = inject("a_step_down_moves_the_leader", Fault::StepDown).await;
        let before = out.nc.cluster().name(out.leader_before).to_owned();
        assert!(
            out.moved_to.as_ref().is_some_and(|l| *l != before),
            "the leader stayed {before} (after: {:?})",
            out.leader_after
        );
    }

    /// A store fault: one node killed and back as a new process, and the files damaged are
    /// that node's (the stream's newest block, and for a truncation its Raft log's too).
    async fn store_damaged(test: &str, fault: Fault) -> (Outcome, usize) {
        let out = inject(test, fault).await;
        // Killed and restarted at once: a new process in one node's place.
        assert_eq!(out.pids_after.len(), CLUSTER_NODES, "the damaged node did not come back");
        let gone: Vec<usize> = (0..CLUSTER_NODES).filter(|i| out.pids_after[*i] != out.pids_before[*i]).collect();
        assert_eq!(gone.len(), 1, "not exactly one node restarted: {:?} -> {:?}", out.pids_before, out.pids_after);
        let store = out.nc.cluster().store_dir(gone[0]);
        assert!(!out.damaged.is_empty(), "nothing was damaged");
        for d in &out.damaged {
            assert!(d.file.starts_with(&store), "{} is not n{}'s", d.file.display(), gone[0]);
            assert!(d.before > 0, "an empty block was picked: {d:?}");
        }
        (out, gone[0])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_store_tail_cuts_the_streams_block_and_raft_log_of_one_node() {
        let (out, _) = store_damaged("a_lost_store_tail", Fault::StoreTruncated).await;
        assert_eq!(out.damaged.len(), 2, "{:?}", out.damaged);
        assert!(out.damaged.iter().all(|d| d.after < d.before), "{:?}", out.damaged);
        assert!(
            out.damaged.iter().any(|d| d.file.to_string_lossy().contains("/_js_/")),
            "no raft log: {:?}",
            out.damaged
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flipped_bit_damages_one_block_of_one_node() {
        let (out, _) = store_damaged("a_flipped_bit", Fault::StoreBitFlip).await;
        assert_eq!(out.damaged.len(), 1, "{:?}", out.damaged);
        let d = &out.damaged[0];
        assert!(d.file.to_string_lossy().contains("/streams/JEPSEN/msgs/"), "{d:?}");
        assert_eq!(d.before, d.after);
    }
}
