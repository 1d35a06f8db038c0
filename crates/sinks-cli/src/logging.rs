//! Logging of the commands: the tracing subscriber on standard error (`logging.format`
//! text or JSON, `logging.level`, or `RUST_LOG` in its place), with the trace and span ids of
//! the message being handled when traces are on.

use sinks_runtime::config::{Config, LogFormat};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Installs the tracing subscriber (stderr; text or JSON) for `config`, with
/// `level_override` instead of `logging.level` when given. `RUST_LOG`, when set, takes the
/// level's place (see [`filter`]). The error is why the level or `RUST_LOG` is not one.
pub fn init_logging(config: &Config, level_override: Option<&str>) -> Result<(), String> {
    let mut logging = config.logging.clone();
    if let Some(level) = level_override {
        logging.level = level.to_owned();
    }
    let level = logging.filter_directive().ok_or_else(|| format!("unknown log level `{}`", logging.level))?;
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref(), level)?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(ansi);
    let format = tracing_subscriber::fmt::format();
    let result = match logging.format {
        LogFormat::Text => builder.event_format(WithTrace(format.with_ansi(ansi))).finish().with(filter).try_init(),
        LogFormat::Json => {
            builder.json().event_format(WithTrace(format.json().flatten_event(true))).finish().with(filter).try_init()
        }
    };
    result.map_err(|e| e.to_string())
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
    use tracing::Level;

    use super::filter;

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
