//! `cargo xtask bench --suite http`: the HTTP sink against its raw ceiling.
//!
//! Two streams of the same messages, spread over 8 subjects and on a single subject. For each,
//! against one private nginx answering `200` at once ([`ceiling::Nginx`]): the raw
//! async-nats + reqwest loop (`raw_ceiling http`: the same body size, the sink's
//! concurrency), then `nats-sink` on the default config (ordered by subject: one request in
//! flight per subject), with `ordering_key: none` (nats-sink only; the reference has no such
//! field), and with `--reference` the Python reference on the default config. nginx checks
//! nothing: whether the sink's requests are right is the HTTP certification's business.

use std::path::Path;

use anyhow::Result;
use async_nats::jetstream::Context as Js;
use serde_json::json;

use super::ceiling::{self, HTTP_CONCURRENCY, Nginx, RAW_HTTP};
use super::{Args, Measurement, Programs, Reset, Stream, config, measure, publish_stream, write};

/// Runs the suite; measurements are appended to `results`.
pub(super) async fn run(
    args: &Args,
    programs: &Programs,
    js: &Js,
    url: &str,
    work: &Path,
    results: &mut Vec<Measurement>,
) -> Result<()> {
    let streams = [
        Stream { name: "BENCHHTTP", subject_root: "benchhttp", total: args.http_messages, subjects: 8 },
        Stream { name: "BENCHHTTP1", subject_root: "benchhttp1", total: args.http_messages, subjects: 1 },
    ];
    let log = |name: &str| work.join(format!("{name}.log"));
    let nginx = Nginx::start().await?;
    for stream in streams {
        publish_stream(js, stream).await;
        let label = if stream.subjects == 1 { "1 subject".to_owned() } else { format!("{} subjects", stream.subjects) };
        let id = format!("http-{}", stream.subjects);
        let raw =
            ceiling::raw_command(&programs.raw_ceiling, url, stream, args, HTTP_CONCURRENCY, &["http", &nginx.url()]);
        let name = format!("{RAW_HTTP}, {label} (no framework)");
        results.push(measure(&name, raw, js, stream, &Reset::None, &log(&format!("raw-{id}"))).await?);
        let sink = json!({"type": "http", "url": nginx.url(), "allow_http_for_local_testing": true});
        let ordered = config(url, stream, args, sink);
        let mut unordered = ordered.clone();
        unordered["delivery"]["ordering_key"] = "none".into();
        let ordered_path = write(&work.join(format!("{id}.json")), &ordered)?;
        let unordered_path = write(&work.join(format!("{id}-none.json")), &unordered)?;
        let mut contenders = vec![
            (id.clone(), format!("nats-sink, http sink, {label}"), programs.nats_sink.clone(), ordered_path.clone()),
            (
                format!("{id}-none"),
                format!("nats-sink, http sink, {label}, ordering none"),
                programs.nats_sink.clone(),
                unordered_path,
            ),
        ];
        if let Some(py) = &programs.reference {
            contenders.push((
                format!("reference-{id}"),
                format!("Python reference 0.4.3, http sink, {label}"),
                py.clone(),
                ordered_path,
            ));
        }
        for (id, name, program, path) in contenders {
            let mut cmd = std::process::Command::new(program);
            cmd.arg("run").arg(&path);
            results.push(measure(&name, cmd, js, stream, &Reset::None, &log(&id)).await?);
        }
    }
    drop(nginx);
    Ok(())
}
