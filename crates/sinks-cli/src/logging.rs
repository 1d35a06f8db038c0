//! Logging of the commands: the tracing subscriber on standard error (`logging.format`
//! text or JSON, `logging.level`, or `RUST_LOG` in its place), with the trace and span ids of
//! the message being handled when traces are on.

use sinks_runtime::config::{Config, LogFormat};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Installs the tracing subscriber (stderr; text or JSON) for `config`, with
/// `level_override` instead of `logging.level` when given. `RUST_LOG`, when set, takes the
/// level's place (see `filter`). The error is why the level or `RUST_LOG` is not one.
pub fn init_logging(config: &Config, level_override: Option<&str>) -> Result<(), String> {
    let mut logging = config.logging.clone();
    if let Some(level) = level_override {
        logging.level = level.to_owned();
    }
    let level = logging.filter_directive().ok_or_else(|| format!("unknown log level `{}`", logging.level))?;
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref(), level)?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    subscriber(logging.format, filter, std::io::stderr, ansi).try_init().map_err(|e| e.to_string())
}

/// The subscriber: events that `filter` lets through, in `format`, to `writer`. The fmt
/// layer's own level filter (INFO unless told) is opened to TRACE, so that `filter` alone
/// decides.
fn subscriber<W>(
    format: LogFormat,
    filter: Targets,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_max_level(LevelFilter::TRACE).with_writer(writer).with_ansi(ansi);
    let events = tracing_subscriber::fmt::format();
    match format {
        LogFormat::Text => Box::new(builder.event_format(WithTrace(events.with_ansi(ansi))).finish().with(filter)),
        LogFormat::Json => {
            Box::new(builder.json().event_format(WithTrace(events.json().flatten_event(true))).finish().with(filter))
        }
    }
}

/// What is logged: `RUST_LOG` when it is set, else `level` with the NATS client's own info
/// lines left out (they repeat ours; its warnings and errors stay). `RUST_LOG` takes a level
/// and `target=level` directives separated by commas (`info,sinks_runtime=debug`); span and
/// field filters (`target[span{field=value}]=level`) are not supported and name `RUST_LOG` in
/// the error, instead of being ignored.
pub(crate) fn filter(rust_log: Option<&str>, level: &str) -> Result<Targets, String> {
    match rust_log {
        Some(directives) => {
            let hint = "use `level` or `target=level`, comma-separated";
            // Targets would read `target[span]` as a target name that never matches.
            if directives.contains(['[', ']', '{', '}']) {
                return Err(format!("RUST_LOG `{directives}`: span and field filters are not supported ({hint})"));
            }
            directives.parse().map_err(|e| format!("RUST_LOG `{directives}`: {e} ({hint})"))
        }
        None => format!("{level},async_nats=warn").parse().map_err(|e| format!("log level `{level}`: {e}")),
    }
}

/// An event format that adds the trace and span ids of the message (or batch write) being
/// handled, when traces are on (`sinks_runtime::otel::current`): first in a JSON line
/// (`{"trace_id":"…","span_id":"…",…}`), last in a text line. Other lines are unchanged.
#[derive(Debug)]
struct WithTrace<F>(F);

impl<S, N, F> tracing_subscriber::fmt::FormatEvent<S, N> for WithTrace<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
    F: tracing_subscriber::fmt::FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let Some(ids) = sinks_runtime::otel::current() else { return self.0.format_event(ctx, writer, event) };
        let mut line = String::with_capacity(256);
        self.0.format_event(ctx, tracing_subscriber::fmt::format::Writer::new(&mut line), event)?;
        let (trace_id, span_id) = (ids.trace_hex(), ids.span_hex());
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"),
            None => {
                let body = line.strip_suffix('\n').unwrap_or(&line);
                writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::Level;

    use super::{LogFormat, filter, subscriber};

    /// The lines logged through the subscriber `init_logging` installs for `level`, with
    /// one event of each level sent through it.
    fn logged(format: LogFormat, level: &str) -> String {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Captured::default();
        let writer = out.clone();
        let filter = filter(None, level).expect("a level");
        tracing::subscriber::with_default(subscriber(format, filter, move || writer.clone(), false), || {
            tracing::trace!(target: "sinks_runtime::runner", "line at trace");
            tracing::debug!(target: "sinks_runtime::runner", stream_sequence = 7, "line at debug");
            tracing::info!(target: "sinks_runtime::runner", "line at info");
            tracing::info!(target: "async_nats::connector", "client line at info");
        });
        let bytes = out.0.lock().expect("not poisoned").clone();
        String::from_utf8(bytes).expect("utf-8 lines")
    }

    #[test]
    fn the_configured_level_is_what_the_installed_subscriber_logs() {
        // The fmt layer's own filter is INFO unless opened: DEBUG must still reach the output.
        for format in [LogFormat::Text, LogFormat::Json] {
            let debug = logged(format, "debug");
            assert!(debug.contains("line at debug") && debug.contains("line at info"), "{debug}");
            assert!(debug.contains("stream_sequence"), "{debug}");
            assert!(!debug.contains("line at trace") && !debug.contains("client line"), "{debug}");
            let trace = logged(format, "trace");
            assert!(trace.contains("line at trace"), "{trace}");
            let info = logged(format, "info");
            assert!(info.contains("line at info") && !info.contains("line at debug"), "{info}");
        }
    }

    #[test]
    fn the_level_applies_with_the_clients_info_lines_left_out() {
        let f = filter(None, "info").unwrap();
        assert!(f.would_enable("sinks_runtime::runner", &Level::INFO));
        assert!(!f.would_enable("sinks_runtime::runner", &Level::DEBUG));
        assert!(!f.would_enable("async_nats::connector", &Level::INFO));
        assert!(f.would_enable("async_nats::connector", &Level::WARN));
    }

    #[test]
    fn rust_log_takes_the_levels_place_with_per_target_directives() {
        let f = filter(Some("warn,sinks_runtime=trace"), "info").unwrap();
        assert!(f.would_enable("sinks_runtime::runner", &Level::TRACE));
        assert!(!f.would_enable("sink_file", &Level::INFO));
        assert!(f.would_enable("async_nats", &Level::WARN));
    }

    #[test]
    fn an_unsupported_rust_log_is_an_error_naming_it() {
        for bad in ["sinks_runtime[batch]=debug", "sink_file[{id=1}]=trace", "info,sink_file=loud"] {
            let e = filter(Some(bad), "info").unwrap_err();
            assert!(e.starts_with("RUST_LOG `"), "{e}");
        }
    }
}
