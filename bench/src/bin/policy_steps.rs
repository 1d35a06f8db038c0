//! What each message policy step costs alone, in one process (`cargo xtask bench --suite
//! policies`): no NATS, no sink, only `sinks_policy::Pipeline::prepare` on prepared envelopes.
//!
//! `policy_steps COUNT [STEP,...]` builds COUNT messages (`support/policed.rs`: every header the
//! policies read, HMAC-signed), then runs every message through a pipeline with no step on
//! (`none`: the pipeline's own pass, the baseline the others are read against), with each step
//! alone, and with all of them together, and prints one JSON line per run: the step, the CPU
//! time per message (this thread's time on CPU, in nanoseconds from
//! `/proc/thread-self/schedstat`) and how many messages came out ready (all of them, or the
//! measurement is of a refusal and fails). A second argument keeps only the runs it names
//! (comma-separated, e.g. `custody,all`, for a profile of one step). The authenticity key is
//! read from `BENCH_PAYLOAD_KEY_B64`. The envelopes are cloned before each pass; the clone is
//! not timed. Like `nats-sink`, it allocates with jemalloc.
#![allow(clippy::print_stdout)]

#[path = "support/policed.rs"]
mod policed;

/// The allocator `nats-sink` runs on (its options are `nats-sink`'s business; jemalloc's
/// defaults here), so the steps' allocations cost what they cost there.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::time::Instant;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use sinks_policy::{Pipeline, Prepared, Sections};

const KEY_ENV: &str = "BENCH_PAYLOAD_KEY_B64";
const ROOT: &str = "benchfeat";

/// A config section from `all`, or its default (off) when the step is not `on`.
fn section<T: serde::de::DeserializeOwned>(all: &Value, name: &str, on: bool) -> Result<T> {
    let value = if on { all[name].clone() } else { json!({}) };
    serde_json::from_value(value).with_context(|| format!("the {name} section"))
}

/// This thread's CPU time so far, in seconds: the nanoseconds on CPU of
/// `/proc/thread-self/schedstat` (what the bench reads for each process's threads), not the
/// 10 ms clock ticks of `stat`.
fn thread_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()).unwrap_or(0.0) / 1e9
}

fn main() -> Result<()> {
    let count: usize = std::env::args().nth(1).context("usage: policy_steps COUNT [STEP,...]")?.parse()?;
    let only: Option<Vec<String>> = std::env::args().nth(2).map(|s| s.split(',').map(str::to_owned).collect());
    let key = base64::engine::general_purpose::STANDARD.decode(std::env::var(KEY_ENV).context(KEY_ENV)?)?;
    let envelopes: Vec<_> = (0..count).map(|i| policed::envelope(i, ROOT, 8, &key)).collect();
    let all = policed::sections(true, ROOT, KEY_ENV);
    let runs = [("none", Vec::new())]
        .into_iter()
        .chain(policed::STEPS.iter().map(|s| (*s, vec![*s])))
        .chain([("all", policed::STEPS.to_vec())])
        .filter(|(name, _)| only.as_ref().is_none_or(|o| o.iter().any(|n| n == name)));
    for (name, on) in runs {
        let is_on = |step: &str| on.contains(&step);
        let mission = section(&all, "mission_metadata", is_on("mission_metadata"))?;
        let labels = section(&all, "security_labels", is_on("security_labels"))?;
        let authenticity = section(&all, "message_authenticity", is_on("message_authenticity"))?;
        let encryption = section(&all, "encryption", false)?;
        let size = section(&all, "size_policy", is_on("size_policy"))?;
        let presink = section(&all, "pre_sink_policy", is_on("pre_sink_policy"))?;
        let custody = section(&all, "custody", is_on("custody"))?;
        let lanes = section(&all, "priority_lanes", is_on("priority_lanes"))?;
        let metadata = sinks_toolkit::metadata::MessageMetadataConfig::default();
        let pipeline = Pipeline::from_config(Sections {
            message_metadata: &metadata,
            mission_metadata: &mission,
            security_labels: &labels,
            message_authenticity: &authenticity,
            encryption: &encryption,
            size_policy: &size,
            pre_sink_policy: &presink,
            custody: &custody,
            priority_lanes: &lanes,
        })?;
        // One pass to warm caches and the allocator, then the measured pass.
        let mut measured = (0.0, 0.0, 0);
        for _ in 0..2 {
            let batch = envelopes.clone();
            let (cpu, wall) = (thread_cpu(), Instant::now());
            let mut ready = 0;
            for (i, envelope) in batch.into_iter().enumerate() {
                if let Prepared::Ready(_) = pipeline.prepare(envelope, i % 500) {
                    ready += 1;
                }
            }
            measured = (thread_cpu() - cpu, wall.elapsed().as_secs_f64(), ready);
        }
        let (cpu, wall, ready) = measured;
        if ready != count {
            bail!("{name}: {ready} of {count} messages passed; the benchmark measures passing messages");
        }
        let per = |s: f64| s * 1e6 / count as f64;
        println!(
            "{}",
            json!({"step": name, "messages": count, "cpu_us_per_msg": per(cpu), "wall_us_per_msg": per(wall)})
        );
    }
    Ok(())
}
