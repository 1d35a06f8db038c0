//! Raw ceilings: for each sink a hand-written loop doing the same writes with no framework
//! (`raw_consume`, `raw_mysql`, `raw_ceiling`, `raw_nosql`), measured in the same run as the sink, and the
//! report's table of every contender against its ceiling with the targets of
//! docs/performance.md.
//!
//! The HTTP contenders post to a private nginx (Debian `nginx-light`, one worker, every
//! request answered `200` at once, no access log), started here on a free port: it answers
//! far faster than any sink can post (`wrk` gets about 230,000 requests/s from it on this
//! machine kind), so the ceiling is the client's CPU, not the endpoint's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Args, CONSUMER, Measurement, Stream};

/// Bytes of the document each raw loop writes per message: the size of the file record, the
/// S3 object and the HTTP body the sinks write for the benchmark's 256-byte messages with
/// their default settings (2,172–2,213 bytes measured), so that both move the same bytes.
pub(super) const DOC_BYTES: usize = 2200;

/// The HTTP sink's default `max_concurrent_requests` (requests in flight per batch).
pub(super) const HTTP_CONCURRENCY: usize = 16;
/// The S3 sink's default `max_concurrent_requests` (puts in flight per batch).
pub(super) const S3_CONCURRENCY: usize = 64;

/// A private nginx answering every request with `200`.
#[derive(Debug)]
pub(super) struct Nginx {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts one on a free loopback port and waits until it accepts connections.
    pub(super) async fn start() -> Result<Self> {
        let binary = sinks_testkit::nginx_binary().context("nginx is not installed (cargo xtask bench installs it)")?;
        let dir = tempfile::tempdir()?;
        let port = sinks_testkit::free_port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n  client_body_temp_path {d}/body;\n  \
             proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  \
             scgi_temp_path {d}/scgi;\n  client_body_buffer_size 64k;\n  \
             server {{\n    listen 127.0.0.1:{port};\n    location / {{ return 200 '{{}}'; }}\n  }}\n}}\n"
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf)?;
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting nginx")?;
        let mut nginx = Self { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = nginx.child.try_wait()? {
                bail!("nginx exited at start ({status}); see {}/error.log", nginx._dir.path().display());
            }
            if Instant::now() > deadline {
                bail!("nginx did not listen on port {port} within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(nginx)
    }

    /// The URL every request goes to.
    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/ingest", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `raw_ceiling` command for `stream`, writing to `target` (`http URL`, `s3 ENDPOINT
/// BUCKET`, `file DIRECTORY fsync|nofsync`) with `concurrency` writes in flight per batch.
pub(super) fn raw_command(
    program: &Path,
    url: &str,
    stream: Stream,
    args: &Args,
    concurrency: usize,
    target: &[&str],
) -> Command {
    let mut cmd = Command::new(program);
    cmd.args([url, stream.name, CONSUMER])
        .args([stream.total, args.batch, args.in_flight, concurrency, DOC_BYTES].map(|n| n.to_string()))
        .args(target);
    cmd
}

/// One contender against its ceiling, with the targets it is held to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pairing {
    /// Prefix of the contender's name.
    contender: &'static str,
    /// Prefix of its ceiling's name.
    ceiling: &'static str,
    /// Lowest acceptable rate ratio to the ceiling.
    min_ratio: f64,
    /// Highest acceptable CPU µs per message of the sink, when the issue sets one.
    max_cpu_us: Option<f64>,
    /// Highest acceptable peak RSS (MiB), when the issue sets one.
    max_rss_mib: Option<f64>,
}

/// Name prefixes of the raw ceilings.
pub(super) const RAW_CONSUME: &str = "raw async-nats consume + ack";
pub(super) const RAW_MYSQL: &str = "raw JetStream → multi-row upsert loop";
pub(super) const RAW_FILE_NOFSYNC: &str = "raw JetStream → temp file + rename loop, fsync off";
pub(super) const RAW_FILE_FSYNC: &str = "raw JetStream → temp file + fsync + rename loop, fsync on";
/// Followed by `, <n> subject(s)`.
pub(super) const RAW_HTTP: &str = "raw JetStream → reqwest POST loop";
pub(super) const RAW_S3: &str = "raw JetStream → object_store put loop";
pub(super) const RAW_NOSQL: &str = "raw JetStream → Oracle NoSQL SDK put-if-absent loop";

/// Every contender with a ceiling, and its targets.
pub(super) const PAIRINGS: &[Pairing] = &[
    Pairing {
        contender: "nats-sink, blackhole sink (median",
        ceiling: RAW_CONSUME,
        min_ratio: 0.9,
        max_cpu_us: None,
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink, file sink, fsync off",
        ceiling: RAW_FILE_NOFSYNC,
        min_ratio: 0.8,
        max_cpu_us: None,
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink (file-only build), file sink, fsync off",
        ceiling: RAW_FILE_NOFSYNC,
        min_ratio: 0.8,
        max_cpu_us: None,
        max_rss_mib: Some(16.0),
    },
    Pairing {
        contender: "nats-sink, file sink, fsync on",
        ceiling: RAW_FILE_FSYNC,
        min_ratio: 0.9,
        max_cpu_us: None,
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink (file-only build), file sink, fsync on",
        ceiling: RAW_FILE_FSYNC,
        min_ratio: 0.9,
        max_cpu_us: None,
        max_rss_mib: Some(16.0),
    },
    Pairing {
        contender: "nats-sink (file-only build), file sink, fsync on, ordering none",
        ceiling: RAW_FILE_FSYNC,
        min_ratio: 0.9,
        max_cpu_us: None,
        max_rss_mib: Some(16.0),
    },
    Pairing {
        contender: "nats-sink (file-only build), file sink, fsync on, ordering none, one directory",
        ceiling: RAW_FILE_FSYNC,
        min_ratio: 0.9,
        max_cpu_us: None,
        max_rss_mib: Some(16.0),
    },
    Pairing {
        contender: "nats-sink, http sink, 1 subject, ordering none",
        ceiling: "raw JetStream → reqwest POST loop, 1 subject",
        min_ratio: 0.8,
        max_cpu_us: Some(15.0),
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink, http sink, 8 subjects, ordering none",
        ceiling: "raw JetStream → reqwest POST loop, 8 subjects",
        min_ratio: 0.8,
        max_cpu_us: Some(15.0),
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink, mysql sink",
        ceiling: RAW_MYSQL,
        min_ratio: 0.95,
        max_cpu_us: None,
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink (mysql-only build), mysql sink",
        ceiling: RAW_MYSQL,
        min_ratio: 0.95,
        max_cpu_us: None,
        // Issue 65: 36 MiB (40 before; 22.6–22.7 MiB measured since the driver keeps 4
        // buffers and closes statements of odd widths).
        max_rss_mib: Some(36.0),
    },
    Pairing {
        contender: "nats-sink, nosql sink, ordering none",
        ceiling: RAW_NOSQL,
        min_ratio: 0.8,
        max_cpu_us: None,
        max_rss_mib: None,
    },
    Pairing {
        contender: "nats-sink, s3 sink, ordering none",
        ceiling: RAW_S3,
        min_ratio: 0.8,
        max_cpu_us: None,
        max_rss_mib: None,
    },
];

/// Whether `value` meets a target, as the table shows it.
fn mark(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

/// The report's table of every measured contender against its ceiling.
pub(super) fn render(results: &[Measurement]) -> String {
    let find = |prefix: &str| results.iter().find(|m| m.name.starts_with(prefix));
    let mut md = String::from(
        "\n## Every contender against its raw ceiling (same run)\n\n\
         | contender | msgs/s | CPU µs/msg | peak RSS MiB | ceiling msgs/s | ceiling CPU µs/msg | ceiling peak RSS MiB | ratio | targets | met |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    let mut any = false;
    for p in PAIRINGS {
        let (Some(c), Some(ceiling)) = (find(p.contender), find(p.ceiling)) else { continue };
        any = true;
        let ratio = c.rate() / ceiling.rate();
        let mut targets = vec![format!("ratio ≥ {}", p.min_ratio)];
        let mut met = ratio >= p.min_ratio;
        if let Some(cpu) = p.max_cpu_us {
            targets.push(format!("CPU ≤ {cpu} µs"));
            met &= c.cpu_us_per_msg() <= cpu;
        }
        if let Some(rss) = p.max_rss_mib {
            targets.push(format!("RSS ≤ {rss} MiB"));
            met &= c.peak_rss_mib() <= rss;
        }
        md.push_str(&format!(
            "| {} | {:.0} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {ratio:.2}× | {} | {} |\n",
            c.name,
            c.rate(),
            c.cpu_us_per_msg(),
            c.peak_rss_mib(),
            ceiling.rate(),
            ceiling.cpu_us_per_msg(),
            ceiling.peak_rss_mib(),
            targets.join(", "),
            mark(met),
        ));
    }
    if any { md } else { String::new() }
}

/// The rounds of one contender family against its ceiling, round by round: `runs[0]` holds
/// the ceiling's runs, each other entry one contender's, round `r` of each measured after
/// round `r` of the ceiling. Each cell is the contender's rate over the ceiling's in the
/// same round (the disk's drift cancels within a round); the last row is each column's
/// median ratio.
pub(super) fn render_rounds(runs: &[Vec<Measurement>]) -> String {
    let Some((ceiling, contenders)) = runs.split_first() else { return String::new() };
    if contenders.is_empty() || ceiling.len() < 2 {
        return String::new();
    }
    let mut md = format!(
        "\n## {}: each round against the ceiling run just before it\n\n| round | ceiling msgs/s |",
        ceiling[0].name
    );
    for c in contenders {
        md.push_str(&format!(" {} |", c[0].name));
    }
    md.push_str(&format!("\n|---|---:|{}\n", "---:|".repeat(contenders.len())));
    let ratio = |c: &[Measurement], round: usize| c.get(round).map(|m| m.rate() / ceiling[round].rate());
    for (round, raw) in ceiling.iter().enumerate() {
        md.push_str(&format!("| {} | {:.0} |", round + 1, raw.rate()));
        for c in contenders {
            match ratio(c, round) {
                Some(r) => md.push_str(&format!(" {r:.2}× |")),
                None => md.push_str(" — |"),
            }
        }
        md.push('\n');
    }
    md.push_str("| median | |");
    for c in contenders {
        let mut ratios: Vec<f64> = (0..ceiling.len()).filter_map(|round| ratio(c, round)).collect();
        ratios.sort_by(f64::total_cmp);
        match ratios.get(ratios.len() / 2) {
            Some(r) => md.push_str(&format!(" **{r:.2}×** |")),
            None => md.push_str(" — |"),
        }
    }
    md.push('\n');
    md
}

/// The order in which round `round` runs `contenders` after its ceiling: rotated by one
/// each round, so that over `contenders` rounds every contender runs once in every position
/// and none always runs first after the ceiling (the disk's speed drifts within a round).
pub(super) fn round_order(contenders: usize, round: usize) -> Vec<usize> {
    (0..contenders).map(|k| (k + round) % contenders).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{PAIRINGS, render, render_rounds, round_order};
    use crate::bench::Measurement;

    fn measured(name: &str, wall_s: f64, cpu_s: f64, rss_mib: u64) -> Measurement {
        Measurement {
            name: name.into(),
            wall: Duration::from_secs_f64(wall_s),
            first_ack: Duration::ZERO,
            peak_rss_kib: rss_mib * 1024,
            cpu: Duration::from_secs_f64(cpu_s),
            messages: 100_000,
            profile: None,
        }
    }

    #[test]
    fn each_contender_is_held_to_its_ceiling_and_a_missed_target_shows() {
        let results = vec![
            measured("raw JetStream → temp file + rename loop, fsync off", 1.0, 0.5, 8),
            measured("nats-sink, file sink, fsync off", 1.2, 0.9, 14),
            measured("raw JetStream → temp file + fsync + rename loop, fsync on", 2.0, 0.6, 8),
            // 0.8× of its ceiling where 0.9× is the target, and over the memory target (the
            // slim build's row carries it).
            measured("nats-sink (file-only build), file sink, fsync on", 2.5, 1.0, 20),
        ];
        let md = render(&results);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| nats-sink")).collect();
        assert_eq!(rows.len(), 2, "{md}");
        assert!(rows[0].contains("| 0.83× |") && rows[0].ends_with("| yes |"), "{}", rows[0]);
        assert!(rows[1].contains("| 0.80× |") && rows[1].ends_with("| **no** |"), "{}", rows[1]);
        assert!(rows[1].contains("ratio ≥ 0.9, RSS ≤ 16 MiB"), "{}", rows[1]);
        // A contender without its ceiling in the run is left out, and no run leaves no table.
        assert!(!md.contains("blackhole"));
        assert_eq!(render(&[]), "");
    }

    #[test]
    fn rounds_are_ratios_within_each_round_and_their_median() {
        // The ceiling drifts (100,000, 50,000, 75,000 msgs/s); the contender is 0.95×, 0.85×
        // and 0.5× of the ceiling run of its own round. The ratio of the two medians (42,500
        // over 75,000, 0.57×) would pair runs of different rounds; the median round is 0.85×.
        let ceiling = [1.0, 2.0, 4.0 / 3.0].map(|wall| measured("raw loop", wall, 0.5, 8));
        let contender = [1.0 / 0.95, 2.0 / 0.85, 4.0 / 3.0 / 0.5].map(|wall| measured("nats-sink", wall, 0.5, 8));
        let md = render_rounds(&[ceiling.to_vec(), contender.to_vec()]);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows[0], "| round | ceiling msgs/s | nats-sink |", "{md}");
        assert_eq!(rows[1], "| 1 | 100000 | 0.95× |", "{md}");
        assert_eq!(rows[2], "| 2 | 50000 | 0.85× |", "{md}");
        assert_eq!(rows[3], "| 3 | 75000 | 0.50× |", "{md}");
        assert_eq!(rows[4], "| median | | **0.85×** |", "{md}");
        // One round, or no contender, is no round table.
        assert_eq!(render_rounds(&[ceiling[..1].to_vec(), contender[..1].to_vec()]), "");
        assert_eq!(render_rounds(&[ceiling.to_vec()]), "");
    }

    #[test]
    fn every_ceiling_is_named_once_and_every_pairing_has_a_target() {
        for p in PAIRINGS {
            assert!(p.min_ratio > 0.0 && p.min_ratio <= 1.0, "{p:?}");
            assert!(!p.contender.starts_with("raw") && p.ceiling.starts_with("raw"), "{p:?}");
        }
    }

    #[test]
    fn every_contender_runs_once_in_every_position_over_as_many_rounds() {
        for n in 1..=5 {
            let orders: Vec<Vec<usize>> = (0..n).map(|r| round_order(n, r)).collect();
            for order in &orders {
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "each round runs every contender once: {order:?}");
            }
            for position in 0..n {
                let mut at: Vec<usize> = orders.iter().map(|o| o[position]).collect();
                at.sort_unstable();
                assert_eq!(at, (0..n).collect::<Vec<_>>(), "position {position} over {n} rounds: {orders:?}");
            }
        }
        assert_eq!(round_order(4, 1), vec![1, 2, 3, 0]);
    }
}
