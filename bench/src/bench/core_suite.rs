//! The core suite's own parts: the framework's overhead (the raw consume + ack ceiling, the
//! blackhole sink, metrics off and on side by side with the encryption control, what each
//! optional feature costs) and the local file sinks (the file sink against its raw loop, fsync
//! off and on, in alternating rounds; fan-out; encryption; the review package sink), each
//! beside the reference with `--reference`.

use std::process::Command;

use anyhow::Result;
use serde_json::json;

use super::{
    BENCH_KEY_B64, BENCH_KEY_ENV, Bench, CONSUMER, CONTROL_PAIRS, Collected, FSYNC_ROUNDS, METRICS_PAIRS, Measurement,
    Reset, SIDE_BASE, SIDE_VARIANT, Stream, ceiling, config, features, measure, median, median_run, publish_stream,
    side_by_side, write,
};

/// The framework's overhead, whole processes, on a stream of its own (500,000 messages by
/// default): the raw ceiling, the blackhole sink, metrics off and on side by side, the
/// encryption control, and what each optional feature costs.
pub(super) async fn overhead(b: &Bench<'_>, c: &mut Collected) -> Result<()> {
    let (args, programs, js, url, work) = (b.args, b.programs, b.js, b.url, b.work);
    let log = |name: &str| b.log(name);
    let wanted = |id: &str| b.wanted(id);
    let Collected { results, pairs, control, accuracy, .. } = c;
    let stream = Stream { name: "BENCHBH", subject_root: "benchbh", total: args.blackhole_messages, subjects: 8 };
    publish_stream(js, stream).await;
    let mut raw = Command::new(&programs.raw_consume);
    raw.args([url, stream.name, CONSUMER, &stream.total.to_string(), &args.batch.to_string()]);
    results.push(measure(ceiling::RAW_CONSUME, raw, js, stream, &Reset::None, &log("raw")).await?);
    if wanted("blackhole") {
        let plain = config(url, stream, args, json!({"type": "blackhole"}));
        let plain_path = write(&work.join("blackhole.json"), &plain)?;
        let name = "nats-sink, blackhole sink";
        results.push(median_run(name, &programs.nats_sink, &plain_path, js, stream, &log("blackhole")).await?);
    }
    if wanted("blackhole") && !args.ceilings {
        let plain = config(url, stream, args, json!({"type": "blackhole"}));
        // Metrics off and on (registry, /metrics listener, snapshot every second)
        // side by side: run one after the other, the two differ by more from run
        // to run on this machine (±15 %) than metrics could cost. The two share
        // one nats-server, which paces both, so a side-by-side ratio shows only
        // part of a cost: a control pair with payload encryption (a known CPU
        // cost) measures how much, next to the same control run alone.
        let mut off = plain.clone();
        off["nats"]["consumer"] = json!(SIDE_BASE);
        let mut on = off.clone();
        on["nats"]["consumer"] = json!(SIDE_VARIANT);
        let mut encrypted = on.clone();
        on["metrics"] = json!({
            "enabled": true,
            "listen": format!("127.0.0.1:{}", sinks_testkit::free_port()),
            "snapshot_file": work.join("blackhole-metrics.snapshot.json"),
            "snapshot_interval_seconds": 1,
        });
        encrypted["encryption"] = json!({"enabled": true, "key_id": "bench", "key_b64_env": BENCH_KEY_ENV});
        let off_path = write(&work.join("blackhole-side-off.json"), &off)?;
        let on_path = write(&work.join("blackhole-side-on.json"), &on)?;
        let encrypted_path = write(&work.join("blackhole-side-encrypted.json"), &encrypted)?;
        let program = &programs.nats_sink;
        for round in 0..METRICS_PAIRS {
            let sides = [("metrics off", off_path.as_path()), ("metrics on", on_path.as_path())];
            let (off, on) = side_by_side(program, sides, js, stream, round, work).await?;
            pairs.rate.push(on.rate() / off.rate());
            pairs.cpu.push(off.cpu_us_per_msg() / on.cpu_us_per_msg());
            results.extend([off, on]);
        }
        for round in 0..CONTROL_PAIRS {
            let sides = [("plain", off_path.as_path()), ("encrypted", encrypted_path.as_path())];
            let (plain, encrypted) = side_by_side(program, sides, js, stream, round, work).await?;
            control.push(encrypted.rate() / plain.rate());
            results.extend([plain, encrypted]);
        }
        let mut alone_encrypted = encrypted.clone();
        alone_encrypted["nats"]["consumer"] = json!(CONSUMER);
        let alone_path = write(&work.join("blackhole-encrypted.json"), &alone_encrypted)?;
        let name = "nats-sink, blackhole sink, encrypted";
        results.push(median_run(name, program, &alone_path, js, stream, &log("blackhole-encrypted")).await?);
    }
    if features::any_wanted(wanted) && !args.ceilings {
        // What each optional feature costs off and on (policies, ledger,
        // encryption, OpenTelemetry), on a stream whose messages carry what the
        // policies read.
        features::publish(js).await?;
        let plain = config(url, features::STREAM, args, json!({"type": "blackhole"}));
        features::run(&programs.nats_sink, &plain, js, work, results, wanted).await?;
    }
    if wanted(features::ACCURACY_ID) && !args.ceilings {
        features::publish(js).await?;
        let plain = config(url, features::STREAM, args, json!({"type": "blackhole"}));
        *accuracy = features::accuracy(&programs.nats_sink, &plain, js, work).await?;
    }
    Ok(())
}

/// The local file sinks on `stream`, writing below a fresh temporary directory.
pub(super) async fn files(b: &Bench<'_>, stream: Stream, c: &mut Collected) -> Result<()> {
    let (args, programs, js, url, work) = (b.args, b.programs, b.js, b.url, b.work);
    let log = |name: &str| b.log(name);
    let wanted = |id: &str| b.wanted(id);
    let Collected { results, rounds, .. } = c;
    // File output goes to the system temp directory: on this machine kind, file
    // creation in a long-used build tree is measurably slower than in a fresh one.
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("out");
    for (id, fsync) in [("file-nofsync", false), ("file-fsync", true)] {
        if wanted(id) {
            let (ceiling, mode, on) = if fsync {
                (ceiling::RAW_FILE_FSYNC, "fsync", "on")
            } else {
                (ceiling::RAW_FILE_NOFSYNC, "nofsync", "off")
            };
            let dir = out.display().to_string();
            // The default config, then the raw loop's own work: no ordering, and
            // then also all files in one directory as the loop writes them (the
            // sink's default partitions by subject: 8 directories and the root
            // fsynced per batch, not one).
            let file_config = |suffix: &str, ordered: bool, partition: bool| {
                let sink = json!({"type": "file", "directory": out, "fsync": fsync, "partition_by_subject": partition});
                let mut c = config(url, stream, args, sink);
                if !ordered {
                    c["delivery"]["ordering_key"] = "none".into();
                }
                write(&work.join(format!("{id}{suffix}.json")), &c)
            };
            let path = file_config("", true, true)?;
            let unordered = file_config("-none", false, true)?;
            let flat = file_config("-none-flat", false, false)?;
            let contenders = [
                (format!("nats-sink, file sink, fsync {on}"), &programs.nats_sink, &path),
                (format!("nats-sink (file-only build), file sink, fsync {on}"), &programs.nats_sink_file, &path),
                (
                    format!("nats-sink (file-only build), file sink, fsync {on}, ordering none"),
                    &programs.nats_sink_file,
                    &unordered,
                ),
                (
                    format!("nats-sink (file-only build), file sink, fsync {on}, ordering none, one directory"),
                    &programs.nats_sink_file,
                    &flat,
                ),
            ];
            // With fsync the disk's latency drifts between runs: the rounds alternate
            // the ceiling and the contenders (in an order rotated every round), and
            // each row is the median round.
            let round_count = if fsync { FSYNC_ROUNDS } else { 1 };
            let mut runs: Vec<Vec<Measurement>> = vec![Vec::new(); contenders.len() + 1];
            for round in 0..round_count {
                let raw = ceiling::raw_command(&programs.raw_ceiling, url, stream, args, 0, &["file", &dir, mode]);
                let name = format!("{ceiling} (no framework)");
                runs[0].push(measure(&name, raw, js, stream, &Reset::Dir(&out), &log(&format!("raw-{id}"))).await?);
                for i in ceiling::round_order(contenders.len(), round) {
                    let (name, program, config) = &contenders[i];
                    let mut cmd = Command::new(program);
                    cmd.arg("run").arg(config);
                    let log = log(&format!("{id}-{i}-{round}"));
                    runs[i + 1].push(measure(name, cmd, js, stream, &Reset::Dir(&out), &log).await?);
                }
            }
            if fsync {
                *rounds = runs.clone();
            }
            for runs in runs {
                let name = runs[0].name.clone();
                results.push(if runs.len() == 1 {
                    runs.into_iter().next().expect("one run")
                } else {
                    median(runs, &name)
                });
            }
            if let Some(py) = &programs.reference {
                let mut cmd = Command::new(py);
                cmd.arg("run").arg(&path);
                let name = format!("Python reference 0.4.3, file sink, fsync {on}");
                results
                    .push(measure(&name, cmd, js, stream, &Reset::Dir(&out), &log(&format!("reference-{id}"))).await?);
            }
        }
    }
    // Fan-out: the same stream to two file targets (both required), written
    // concurrently; the ratio to one file target is the fan-out's overhead.
    if wanted("file-fanout") && !args.ceilings {
        let sink = json!({"type": "fanout",
            "sinks": {"a": {"type": "file", "directory": out.join("a"), "fsync": false},
                      "b": {"type": "file", "directory": out.join("b"), "fsync": false}},
            "routes": [{"name": "all", "match": {"subject": ">"}, "targets": ["a", "b"]}]});
        let path = write(&work.join("file-fanout.json"), &config(url, stream, args, sink))?;
        let mut cmd = Command::new(&programs.nats_sink);
        cmd.arg("run").arg(&path);
        let name = "nats-sink, fan-out to two file sinks, fsync off";
        results.push(measure(name, cmd, js, stream, &Reset::Dir(&out), &log("file-fanout")).await?);
    }
    // The cost of payload encryption: the same file sink, every payload AES-256-GCM
    // encrypted before the sink sees it.
    if wanted("file-encrypted") && !args.ceilings {
        let mut encrypted = config(url, stream, args, json!({"type": "file", "directory": out, "fsync": false}));
        encrypted["encryption"] = json!({"enabled": true, "key_id": "bench", "key_b64_env": BENCH_KEY_ENV});
        let path = write(&work.join("file-encrypted.json"), &encrypted)?;
        let mut cmd = Command::new(&programs.nats_sink);
        cmd.arg("run").arg(&path).env(BENCH_KEY_ENV, BENCH_KEY_B64);
        let name = "nats-sink, file sink, fsync off, encrypted";
        results.push(measure(name, cmd, js, stream, &Reset::Dir(&out), &log("file-encrypted")).await?);
    }
    // The review package sink: per message a directory of four files (metadata,
    // payload, manifest, hash list) renamed into place, fsync off and on, with the
    // reference's beside it.
    for (id, fsync) in [("review-package-nofsync", false), ("review-package-fsync", true)] {
        if wanted(id) && !args.ceilings {
            let on = if fsync { "on" } else { "off" };
            let sink = json!({"type": "review_package", "enabled": true, "directory": out, "fsync": fsync});
            let path = write(&work.join(format!("{id}.json")), &config(url, stream, args, sink))?;
            let mut cmd = Command::new(&programs.nats_sink);
            cmd.arg("run").arg(&path);
            let name = format!("nats-sink, review package sink, fsync {on}");
            results.push(measure(&name, cmd, js, stream, &Reset::Dir(&out), &log(id)).await?);
            if let Some(py) = &programs.reference {
                let mut cmd = Command::new(py);
                cmd.arg("run").arg(&path);
                let name = format!("Python reference 0.4.3, review package sink, fsync {on}");
                let log = log(&format!("reference-{id}"));
                results.push(measure(&name, cmd, js, stream, &Reset::Dir(&out), &log).await?);
            }
        }
    }
    Ok(())
}
