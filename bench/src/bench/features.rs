//! What each optional feature costs, off and on (`cargo xtask bench --suite core`, or
//! `--only features`; `--only features-policies` runs only the two policy rows, each row's id
//! being [`row_id`]): the blackhole sink run side by side with a variant of its own config,
//! as metrics on / off are measured (both processes started together on two durable
//! consumers of one stream, ten pairs, start order alternating).
//!
//! Every feature is measured twice: its section **present but disabled** against no section
//! (what an operator pays for a feature left off: nothing measurable is the target), and
//! **on** against off (what it costs):
//!
//! | feature | on |
//! |---|---|
//! | message policies | every step: HMAC authenticity, mission metadata, security labels, size, pre-sink, custody hashes, priority lanes |
//! | delivery ledger | one receipt per message, awaited before its ack (`before_ack`), into a JetStream stream |
//! | payload encryption | AES-256-GCM of every payload before the sink |
//! | OpenTelemetry | traces with every message sampled; OTLP metrics every second (metrics on in both sides) |
//! | rate limit | `sink.rate_limit` far above the ceiling (a billion messages per second): the pacing's own cost |
//!
//! The rate limit's accuracy ([`accuracy`], row id `blackhole-rate-limit-accuracy`): two
//! processes side by side, one limited to 5,000 messages per second and one to as many payload
//! bytes per second as 5,000 of these messages carry, each rate achieved against its setting
//! (target: within 5 %).
//!
//! The messages carry what the policies read (`bin/support/policed.rs`, shared with
//! `policy_steps`, which measures each step alone), so with the policies on every message
//! passes every step (none is dead-lettered). The ledger's stream is made anew
//! before each pair. OTLP exports go to a loopback endpoint in this process (`otel.rs`).
//!
//! Each row gives the median of the pairs' rate ratios (variant / baseline; one nats-server
//! serves and paces both, so a rate ratio shows only part of a cost), the median of the
//! ratios of the sink's own CPU per message (baseline / variant: the rate ratio the extra CPU
//! alone would cause where CPU is scarce) and the CPU the variant adds per message (median of
//! the pairs' differences).

use std::path::Path;

use anyhow::Result;
use async_nats::HeaderMap;
use async_nats::jetstream::Context as Js;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use sinks_testkit::{js_publish_all, stream_with_subjects};

#[path = "../bin/support/policed.rs"]
pub(super) mod policed;

use super::{
    BENCH_KEY_B64, BENCH_KEY_ENV, Measurement, SIDE_BASE, SIDE_VARIANT, Stream, quantile, side_by_side, side_name,
    write,
};

/// Pairs per variant.
const PAIRS: usize = 10;

/// The stream of the pairs.
pub(super) const STREAM: Stream = Stream { name: "BENCHFEAT", subject_root: "benchfeat", total: 100_000, subjects: 8 };

/// The ledger's stream and subject.
const LEDGER_STREAM: &str = "BENCHLEDGER";
const LEDGER_SUBJECT: &str = "benchledger.receipts";

/// One row: `(title, baseline label, variant label, target)`. The labels name the processes
/// in the results and must be unique across the whole benchmark.
type Row = (&'static str, &'static str, &'static str, &'static str);

/// The rows, in the order they run and are reported.
const ROWS: [Row; 10] = [
    (
        "message policies: every section present, each disabled / absent",
        "policies absent",
        "policies disabled",
        "no measurable cost",
    ),
    ("message policies: every step on / off", "policies off", "policies on", "say what it costs"),
    ("delivery ledger: section present, disabled / absent", "ledger absent", "ledger disabled", "no measurable cost"),
    ("delivery ledger: on (before_ack) / off", "ledger off", "ledger on", "say what it costs"),
    (
        "payload encryption: section present, disabled / absent",
        "encryption absent",
        "encryption disabled",
        "no measurable cost",
    ),
    ("payload encryption: on (AES-256-GCM) / off", "encryption off", "encryption on", "say what it costs"),
    (
        "OpenTelemetry: section present, everything disabled / absent",
        "otel absent",
        "otel disabled",
        "no measurable cost",
    ),
    ("OpenTelemetry: traces on, every message sampled / off", "traces off", "traces on", "≥ 0.90"),
    (
        "OpenTelemetry: OTLP metrics every second / off (metrics on in both)",
        "metrics on, OTLP off",
        "metrics on, OTLP on",
        "≥ 0.97",
    ),
    ("rate limit: far above the ceiling / none", "rate limit absent", "rate limit far above", "≥ 0.97"),
];

/// The id `--only` matches the rate limit's accuracy by.
pub(super) const ACCURACY_ID: &str = "blackhole-rate-limit-accuracy";
/// The rate the accuracy runs are limited to, messages per second.
const ACCURACY_RATE: f64 = 5_000.0;

/// The id `--only` matches a row by: `blackhole-features-` and its variant's label in words
/// joined by `-` (`blackhole-features-policies-on`).
pub(super) fn row_id(row: &Row) -> String {
    let words: Vec<&str> = row.2.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    format!("blackhole-features-{}", words.join("-"))
}

/// Whether any row's id is `wanted`.
pub(super) fn any_wanted(wanted: impl Fn(&str) -> bool) -> bool {
    ROWS.iter().any(|row| wanted(&row_id(row)))
}

/// Publishes the pairs' stream: the benchmark's orders with every header the policies read.
pub(super) async fn publish(js: &Js) -> Result<()> {
    stream_with_subjects(js, STREAM.name, &[&format!("{}.>", STREAM.subject_root)]).await;
    let key = B64.decode(BENCH_KEY_B64)?;
    let msgs = (0..STREAM.total)
        .map(|i| {
            let (subject, headers, payload) = policed::message(i, STREAM.subject_root, STREAM.subjects, &key);
            let mut h = HeaderMap::new();
            for (name, value) in &headers {
                h.insert(name.as_str(), value.as_str());
            }
            (subject, h, payload.into())
        })
        .collect();
    js_publish_all(js, msgs).await;
    Ok(())
}

/// Every policy section, each `enabled` as given (`support/policed.rs`).
fn policies(config: &mut Value, enabled: bool) {
    let sections = policed::sections(enabled, STREAM.subject_root, BENCH_KEY_ENV);
    if let Value::Object(map) = sections {
        for (name, section) in map {
            if name == "priority_lanes" {
                config["delivery"][name] = section;
            } else {
                config[name] = section;
            }
        }
    }
}

fn ledger(config: &mut Value, enabled: bool) {
    config["ledger"] = json!({"enabled": enabled, "subject": LEDGER_SUBJECT, "mode": "before_ack"});
}

fn encryption(config: &mut Value, enabled: bool) {
    config["encryption"] = json!({"enabled": enabled, "key_id": "bench", "key_b64_env": BENCH_KEY_ENV});
}

/// The `(baseline, variant)` configs of every row of [`ROWS`], from `plain` (the blackhole on
/// [`STREAM`]); `otlp` is the loopback OTLP endpoint.
fn configs(plain: &Value, otlp: &str) -> Vec<(Value, Value)> {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = plain.clone();
        f(&mut c);
        c
    };
    let metrics_on = with(&|c| c["metrics"] = json!({"enabled": true}));
    let mut exported = metrics_on.clone();
    exported["opentelemetry"] = json!({"endpoint": otlp, "metrics": {"enabled": true, "interval_ms": 1000}});
    vec![
        (plain.clone(), with(&|c| policies(c, false))),
        (with(&|c| policies(c, false)), with(&|c| policies(c, true))),
        (plain.clone(), with(&|c| ledger(c, false))),
        (plain.clone(), with(&|c| ledger(c, true))),
        (plain.clone(), with(&|c| encryption(c, false))),
        (plain.clone(), with(&|c| encryption(c, true))),
        (
            plain.clone(),
            with(&|c| {
                c["opentelemetry"] =
                    json!({"endpoint": otlp, "metrics": {"enabled": false}, "traces": {"enabled": false}});
            }),
        ),
        (
            plain.clone(),
            with(&|c| c["opentelemetry"] = json!({"endpoint": otlp, "traces": {"enabled": true, "sample_ratio": 1.0}})),
        ),
        (metrics_on, exported),
        (plain.clone(), with(&|c| c["sink"]["rate_limit"] = json!({"messages_per_second": 1e9}))),
    ]
}

/// The rate limit's accuracy: the blackhole on [`STREAM`] limited to [`ACCURACY_RATE`]
/// messages per second beside one limited to the payload bytes of as many messages per
/// second, both run together; the report's lines (achieved rate against the setting).
pub(super) async fn accuracy(program: &Path, plain: &Value, js: &Js, work: &Path) -> Result<String> {
    let bytes: usize = (0..STREAM.total).map(|i| policed::payload(i).len()).sum();
    let per_message = bytes as f64 / STREAM.total as f64;
    let byte_rate = (ACCURACY_RATE * per_message).round();
    let mut by_messages = plain.clone();
    by_messages["sink"]["rate_limit"] = json!({"messages_per_second": ACCURACY_RATE});
    by_messages["nats"]["consumer"] = json!(SIDE_BASE);
    let mut by_bytes = plain.clone();
    by_bytes["sink"]["rate_limit"] = json!({"bytes_per_second": byte_rate});
    by_bytes["nats"]["consumer"] = json!(SIDE_VARIANT);
    let a = write(&work.join("blackhole-rate-messages.json"), &by_messages)?;
    let b = write(&work.join("blackhole-rate-bytes.json"), &by_bytes)?;
    let sides = [("rate limit by messages", a.as_path()), ("rate limit by bytes", b.as_path())];
    let (m, b) = side_by_side(program, sides, js, STREAM, 0, work).await?;
    let row = |what: &str, setting: String, achieved: f64, target: f64| {
        format!(
            "| {what} | {setting} | {achieved:.0} messages/s | {:.3} | {:.2} s for {} messages |\n",
            achieved / target,
            STREAM.total as f64 / achieved,
            STREAM.total
        )
    };
    let mut md = String::from(
        "\n## The rate limit's accuracy (blackhole, side by side)\n\n| limit | setting | achieved | achieved / setting (target 0.95–1.05) | wall |\n|---|---|---:|---:|---:|\n",
    );
    md.push_str(&row("messages per second", format!("{ACCURACY_RATE} messages/s"), m.rate(), ACCURACY_RATE));
    md.push_str(&row(
        "payload bytes per second",
        format!("{byte_rate} bytes/s ({per_message:.0} bytes a message)"),
        b.rate(),
        byte_rate / per_message,
    ));
    Ok(md)
}

/// Runs the pairs of every `wanted` row (by [`row_id`]); `plain` is the blackhole config on [`STREAM`] (its
/// consumer is replaced by the pair's). The measurements go into `results`, named by
/// [`side_by_side`].
pub(super) async fn run(
    program: &Path,
    plain: &Value,
    js: &Js,
    work: &Path,
    results: &mut Vec<Measurement>,
    wanted: impl Fn(&str) -> bool,
) -> Result<()> {
    let (otlp, received) = super::otel::endpoint().await?;
    for (i, ((base, variant), row)) in configs(plain, &otlp).into_iter().zip(ROWS).enumerate() {
        if !wanted(&row_id(&row)) {
            continue;
        }
        let (_, base_label, variant_label, _) = row;
        let (mut base, mut variant) = (base, variant);
        base["nats"]["consumer"] = json!(SIDE_BASE);
        variant["nats"]["consumer"] = json!(SIDE_VARIANT);
        let receipts = variant["ledger"]["enabled"] == json!(true);
        let base_path = write(&work.join(format!("blackhole-feature-{i}-base.json")), &base)?;
        let variant_path = write(&work.join(format!("blackhole-feature-{i}-variant.json")), &variant)?;
        for round in 0..PAIRS {
            if receipts {
                // A fresh ledger stream per pair: the same receipts again would be dropped by
                // its duplicate window, which costs the server less than storing them.
                let _ = js.delete_stream(LEDGER_STREAM).await;
                stream_with_subjects(js, LEDGER_STREAM, &[LEDGER_SUBJECT]).await;
            }
            let sides = [(base_label, base_path.as_path()), (variant_label, variant_path.as_path())];
            let (a, b) = side_by_side(program, sides, js, STREAM, round, work).await?;
            results.extend([a, b]);
        }
    }
    let _ = js.delete_stream(LEDGER_STREAM).await;
    received.log();
    Ok(())
}

/// One row's pairs: `(variant rate / baseline rate, baseline CPU / variant CPU, variant CPU
/// − baseline CPU in µs per message)` per pair.
fn pairs(results: &[Measurement], base: &str, variant: &str) -> Vec<(f64, f64, f64)> {
    let find = |label: &str, round: usize| {
        let name = side_name(label, round);
        results.iter().find(|m| m.name == name)
    };
    (0..PAIRS)
        .filter_map(|r| find(base, r).zip(find(variant, r)))
        .map(|(a, b)| {
            (b.rate() / a.rate(), a.cpu_us_per_msg() / b.cpu_us_per_msg(), b.cpu_us_per_msg() - a.cpu_us_per_msg())
        })
        .collect()
}

/// The section of the report: one line per row that ran.
pub(super) fn render(results: &[Measurement]) -> String {
    let mut md = String::from(
        "\n## What each feature costs (blackhole, side by side)\n\n| variant / baseline | pairs | rate ratio (median) | range | sink CPU baseline / variant (median) | CPU added µs/msg (median) | target |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut any = false;
    for (title, base, variant, target) in ROWS {
        let pairs = pairs(results, base, variant);
        if pairs.is_empty() {
            continue;
        }
        any = true;
        let column = |f: fn(&(f64, f64, f64)) -> f64| pairs.iter().map(f).collect::<Vec<f64>>();
        let (rates, cpu, added) = (column(|p| p.0), column(|p| p.1), column(|p| p.2));
        let q = |v: &[f64], at: f64| quantile(v, at).unwrap_or(f64::NAN);
        md.push_str(&format!(
            "| {title} | {} | {:.3} | {:.3}–{:.3} | {:.3} | {:+.2} | {target} |\n",
            pairs.len(),
            q(&rates, 0.5),
            q(&rates, 0.0),
            q(&rates, 1.0),
            q(&cpu, 0.5),
            q(&added, 0.5),
        ));
    }
    if any { md } else { String::new() }
}

/// One line of `policy_steps`: a policy step alone (or `all`), its CPU per message.
#[derive(Debug, Clone)]
pub(super) struct StepCost {
    /// The step's config section, or `all`.
    pub(super) step: String,
    /// Messages measured.
    pub(super) messages: u64,
    /// CPU time per message, µs.
    pub(super) cpu_us: f64,
    /// Wall time per message, µs.
    pub(super) wall_us: f64,
}

impl StepCost {
    /// One line of `policy_steps`'s output, or `None` when it is not a step.
    pub(super) fn parse(line: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(line).ok()?;
        Some(Self {
            step: v["step"].as_str()?.to_owned(),
            messages: v["messages"].as_u64()?,
            cpu_us: v["cpu_us_per_msg"].as_f64()?,
            wall_us: v["wall_us_per_msg"].as_f64()?,
        })
    }
}

/// The prefix of the reference's steps among the policies suite's lines (`--reference`).
pub(super) const REFERENCE_STEP: &str = "reference: ";

/// The policies suite's section of the report: each run's CPU per message and what it adds to
/// the pipeline with no step on (`none`), ours and, with `--reference`, the reference's.
pub(super) fn render_steps(steps: &[StepCost]) -> String {
    let (reference, ours): (Vec<&StepCost>, Vec<&StepCost>) =
        steps.iter().partition(|s| s.step.starts_with(REFERENCE_STEP));
    if ours.is_empty() {
        return String::new();
    }
    let none = |runs: &[&StepCost]| runs.iter().find(|s| s.step.ends_with("none")).map(|s| s.cpu_us);
    let (our_none, their_none) = (none(&ours), none(&reference));
    let mut md = String::from(
        "\n## Each message policy step alone (one process, no NATS, no sink)\n\n| step | messages | CPU µs/msg | over none | wall µs/msg | reference CPU µs/msg | reference over none |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let over = |cpu: f64, base: Option<f64>| base.map_or_else(String::new, |b| format!("{:+.2}", cpu - b));
    for s in ours {
        let theirs = reference.iter().find(|r| r.step.strip_prefix(REFERENCE_STEP) == Some(s.step.as_str()));
        md.push_str(&format!(
            "| {} | {} | {:.2} | {} | {:.2} | {} | {} |\n",
            s.step,
            s.messages,
            s.cpu_us,
            over(s.cpu_us, our_none),
            s.wall_us,
            theirs.map_or_else(String::new, |r| format!("{:.1}", r.cpu_us)),
            theirs.map_or_else(String::new, |r| over(r.cpu_us, their_none)),
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(label: &str, round: usize, wall_ms: u64, cpu_ms: u64) -> Measurement {
        Measurement::of_1000(side_name(label, round), wall_ms, cpu_ms)
    }

    #[test]
    fn a_pair_is_read_as_variant_over_its_own_rounds_baseline() {
        // Round 1: the variant takes twice as long and twice the CPU; round 2 a second
        // baseline at another speed must not be mixed into round 1.
        let results = vec![
            side("ledger off", 0, 100, 10),
            side("ledger on", 0, 200, 20),
            side("ledger off", 1, 50, 5),
            side("ledger on", 1, 100, 10),
        ];
        let p = pairs(&results, "ledger off", "ledger on");
        assert_eq!(p.len(), 2);
        for (rate, cpu, _) in &p {
            assert!((rate - 0.5).abs() < 1e-9, "{rate}");
            assert!((cpu - 0.5).abs() < 1e-9, "{cpu}");
        }
        // 10 ms over 1,000 messages is 10 µs per message, 20 ms is 20 µs: 10 µs added.
        assert!((p[0].2 - 10.0).abs() < 1e-9, "{}", p[0].2);
        assert!((p[1].2 - 5.0).abs() < 1e-9, "{}", p[1].2);
        let md = render(&results);
        assert!(md.contains("| delivery ledger: on (before_ack) / off | 2 | 0.500 |"), "{md}");
        assert!(!md.contains("message policies"), "rows that did not run are left out: {md}");
    }

    #[test]
    fn a_step_line_is_read_and_other_lines_are_not() {
        let step =
            StepCost::parse(r#"{"step":"custody","messages":1000,"cpu_us_per_msg":12.5,"wall_us_per_msg":13.0}"#)
                .expect("a step line");
        assert_eq!((step.step.as_str(), step.messages), ("custody", 1000));
        assert!((step.cpu_us - 12.5).abs() < 1e-9 && (step.wall_us - 13.0).abs() < 1e-9);
        assert!(StepCost::parse("policy_steps: building messages").is_none());
        assert!(render_steps(std::slice::from_ref(&step)).contains("| custody | 1000 | 12.50 |  | 13.00 |  |  |"));
        assert_eq!(render_steps(&[]), "");
        let line = |name: &str, cpu: f64| StepCost { step: name.into(), messages: 10, cpu_us: cpu, wall_us: cpu };
        let md =
            render_steps(&[line("none", 0.5), step, line("reference: none", 40.0), line("reference: custody", 170.0)]);
        assert!(md.contains("| none | 10 | 0.50 | +0.00 | 0.50 | 40.0 | +0.00 |"), "{md}");
        assert!(md.contains("| custody | 1000 | 12.50 | +12.00 | 13.00 | 170.0 | +130.00 |"), "{md}");
        assert!(!md.contains("| reference: "), "the reference's runs are columns, not rows: {md}");
    }

    #[test]
    fn every_label_is_unique_and_every_row_has_its_configs() {
        let mut labels: Vec<&str> = ROWS.iter().flat_map(|r| [r.1, r.2]).collect();
        labels.sort_unstable();
        let count = labels.len();
        labels.dedup();
        assert_eq!(labels.len(), count, "labels name processes in the results and must not repeat");
        let mut ids: Vec<String> = ROWS.iter().map(row_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ROWS.len(), "every row has its own id: {ids:?}");
        assert_eq!(row_id(&ROWS[1]), "blackhole-features-policies-on");
        let only = |o: &'static str| move |id: &str| id.contains(o);
        let picked: Vec<String> = ROWS.iter().map(row_id).filter(|id| only("features-policies")(id)).collect();
        assert_eq!(picked, ["blackhole-features-policies-disabled", "blackhole-features-policies-on"]);
        assert!(any_wanted(only("features")) && any_wanted(only("blackhole")) && !any_wanted(only("mysql")));
        let plain = json!({"nats": {}, "delivery": {}, "sink": {"type": "blackhole"}});
        let configs = configs(&plain, "http://127.0.0.1:1");
        assert_eq!(configs.len(), ROWS.len());
        for ((base, variant), row) in configs.iter().zip(ROWS) {
            assert_ne!(base, variant, "row `{}` compares a config with itself", row.0);
        }
    }

    #[test]
    fn a_disabled_section_differs_from_absence_only_by_its_presence() {
        let plain = json!({"nats": {}, "delivery": {}, "sink": {"type": "blackhole"}});
        let configs = configs(&plain, "http://127.0.0.1:1");
        for (i, ((base, variant), row)) in configs.iter().zip(ROWS).enumerate() {
            if row.1.ends_with("absent") {
                assert_eq!(base, &plain, "row {i}");
                let text = variant.to_string();
                assert!(!text.contains("\"enabled\":true"), "row {i} turns something on: {text}");
            }
        }
    }
}
