//! The Coherence suite: one private Coherence member for every contender, nats-sink on the
//! default config, with `ordering_key: none` and with the legacy protocol, and the reference,
//! after a warm-up run not counted; each contender's entries counted and its cache destroyed,
//! and the member's CPU and memory during each run.

use std::process::Command;

use anyhow::{Result, bail};
use serde_json::json;

use super::proc::Load;
use super::{Bench, Collected, Reset, Stream, config, measure, publish_stream, write};

/// Runs the suite; the measurements go to `c.results` and the member's load to
/// `c.member_load`.
pub(super) async fn run(b: &Bench<'_>, c: &mut Collected) -> Result<()> {
    let (args, programs, js, url, work) = (b.args, b.programs, b.js, b.url, b.work);
    let log = |name: &str| b.log(name);
    let Collected { results, member_load, .. } = c;
    let stream = Stream { name: "BENCHCOH", subject_root: "benchcoh", total: args.coherence_messages, subjects: 8 };
    publish_stream(js, stream).await;
    // One private Coherence member (active persistence, one member: no backups) for
    // every contender; a fresh cache each (a second run's entries would all exist),
    // counted and destroyed after its run.
    let member = sinks_testkit::CoherenceMember::start().await.map_err(anyhow::Error::msg)?;
    // nats-sink on the default config (ordered by subject: one put in flight per
    // subject), with `ordering_key: none` and with the legacy protocol (nats-sink
    // only; the reference has no such fields), and the reference on the default config.
    let sink = &programs.nats_sink;
    let mut contenders = vec![
        ("coherence", "nats-sink, coherence sink".to_owned(), sink.clone(), true, None),
        ("coherence-none", "nats-sink, coherence sink, ordering none".to_owned(), sink.clone(), false, None),
        (
            "coherence-legacy",
            "nats-sink, coherence sink, legacy protocol".to_owned(),
            sink.clone(),
            true,
            Some("legacy"),
        ),
    ];
    if let Some(py) = &programs.reference {
        let name = "Python reference 0.4.3, coherence sink".to_owned();
        contenders.push(("reference-coherence", name, py.clone(), true, None));
    }
    // A fresh JVM compiles its hot paths during its first thousands of puts: one
    // run of nats-sink into a scratch cache first, not counted, so that every
    // measured contender meets the same warm member.
    let harness = sink_coherence::certify::CoherenceHarness::new(member.address());
    let warm_up = ("coherence-warm-up", "warm-up (not counted)".to_owned(), sink.clone(), false, None);
    for (index, (id, name, program, ordered, protocol)) in std::iter::once(warm_up).chain(contenders).enumerate() {
        let cache = sink_coherence::certify::CoherenceHarness::cache_name();
        let mut sink = json!({"type": "coherence", "address": member.address(), "cache_name": &cache});
        if let Some(protocol) = protocol {
            sink["protocol"] = protocol.into();
        }
        let mut config = config(url, stream, args, sink);
        if !ordered {
            config["delivery"]["ordering_key"] = "none".into();
        }
        let path = write(&work.join(format!("{id}.json")), &config)?;
        let mut cmd = Command::new(program);
        cmd.arg("run").arg(&path);
        let before = Load::now(member.pid());
        let measured = measure(&name, cmd, js, stream, &Reset::None, &log(id)).await?;
        let load = Load::now(member.pid()).since(&before, &name, stream.total);
        // Every message is an entry; then the cache is destroyed, so that each
        // contender meets a member holding only its own cache.
        let mut read_config = harness.config();
        read_config.cache_name = cache;
        let reader = harness.read_back(&read_config).map_err(anyhow::Error::msg)?;
        let entries = reader.size().await.map_err(anyhow::Error::msg)?;
        drop(reader);
        if usize::try_from(entries).ok() != Some(stream.total) {
            bail!("{name}: {entries} entries stored for {} messages", stream.total);
        }
        if index > 0 {
            member_load.push(load);
            results.push(measured);
        }
    }
    drop(member);
    Ok(())
}
