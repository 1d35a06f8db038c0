//! Logging of the commands: the tracing subscriber on standard error (`logging.format`
//! text or JSON, `logging.level`, refined by `RUST_LOG`), with the trace and span ids of the
//! message being handled when traces are on.

use sinks_runtime::config::{Config, LogFormat};
use tracing_subscriber::EnvFilter;

/// Installs the tracing subscriber (stderr; text or JSON) for `config`, with
/// `level_override` instead of `logging.level` when given. `RUST_LOG` refines the level. The
/// error is why the level is not one.
pub fn init_logging(config: &Config, level_override: Option<&str>) -> Result<(), String> {
    let mut logging = config.logging.clone();
    if let Some(level) = level_override {
        logging.level = level.to_owned();
    }
    let level = logging.filter_directive().ok_or_else(|| format!("unknown log level `{}`", logging.level))?;
    // The NATS client's own info lines repeat ours; keep its warnings and errors.
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("{level},async_nats=warn")));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let format = tracing_subscriber::fmt::format();
    let result = match logging.format {
        LogFormat::Text => builder.event_format(WithTrace(format.with_ansi(ansi))).try_init(),
        LogFormat::Json => builder.json().event_format(WithTrace(format.json().flatten_event(true))).try_init(),
    };
    result.map_err(|e| e.to_string())
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
