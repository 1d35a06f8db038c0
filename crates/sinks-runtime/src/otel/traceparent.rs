//! The W3C Trace Context headers of a message: `traceparent` (and `tracestate`) as a
//! producer instrumented with OpenTelemetry sets them on a NATS message.
//!
//! A malformed value is ignored, never an error: the message is processed as if it had no
//! trace context (and is sampled like one). Parsing follows the W3C Trace Context level 1
//! rules: `version-traceid-parentid-flags`, lowercase hex, version `ff` invalid, all-zero
//! ids invalid, version `00` exactly 55 characters, later versions at least 55 with a `-`
//! after the flags. An invalid `tracestate` is dropped and the `traceparent` kept.

use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// The header carrying the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The header carrying vendor trace state.
pub const TRACESTATE: &str = "tracestate";

fn hex_lower(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// True when `value` is a W3C `tracestate`: at most 32 comma-separated `key=value` members
/// (empty members allowed), keys lowercase `[a-z0-9_*/-]` (optionally `tenant@system`),
/// values printable ASCII without `,` and `=`, at most 256 characters, no trailing blank.
fn valid_tracestate(value: &str) -> bool {
    let members: Vec<&str> = value.split(',').map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty()).collect();
    let key_ok = |k: &str| {
        let (tenant, system) = k.split_once('@').map_or((k, None), |(t, s)| (t, Some(s)));
        let part = |p: &str, first_digit: bool| {
            !p.is_empty()
                && p.len() <= 256
                && p.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || (first_digit && b.is_ascii_digit()))
                && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/".contains(&b))
        };
        part(tenant, system.is_some()) && system.is_none_or(|s| part(s, false))
    };
    let value_ok = |v: &str| {
        !v.is_empty()
            && v.len() <= 256
            && !v.ends_with(' ')
            && v.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
    };
    members.len() <= 32 && members.iter().all(|m| m.split_once('=').is_some_and(|(k, v)| key_ok(k) && value_ok(v)))
}

/// The remote parent named by `traceparent` (with `tracestate`, when valid), or `None` when
/// the value is malformed.
pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let value = traceparent.trim_matches([' ', '\t']);
    if value.len() < 55 || !value.is_ascii() {
        return None;
    }
    let (version, rest) = value.split_at(2);
    if !hex_lower(version) || version == "ff" {
        return None;
    }
    if version == "00" && value.len() != 55 {
        return None;
    }
    if value.len() > 55 && value.as_bytes()[55] != b'-' {
        return None;
    }
    let mut parts = rest[..53].split('-');
    let (Some(""), Some(trace), Some(span), Some(flags), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if trace.len() != 32 || span.len() != 16 || flags.len() != 2 || ![trace, span, flags].iter().all(|p| hex_lower(p)) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok().filter(|t| *t != TraceId::INVALID)?;
    let span_id = SpanId::from_hex(span).ok().filter(|s| *s != SpanId::INVALID)?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let state = tracestate
        .filter(|s| valid_tracestate(s))
        .and_then(|s| TraceState::from_str(s.trim()).ok())
        .unwrap_or_default();
    Some(SpanContext::new(trace_id, span_id, TraceFlags::new(flags & 1), true, state))
}

/// The `traceparent` value of a span context (what a producer sends).
pub fn format(context: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    /// `(trace id, span id, sampled)` of a parsed parent.
    type Parsed = Option<(String, String, bool)>;

    #[test]
    fn traceparent_table() {
        let ok = |sampled: bool| Some((TRACE.to_owned(), SPAN.to_owned(), sampled));
        #[rustfmt::skip]
        let table: &[(&str, &str, Parsed)] = &[
            ("sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ok(true)),
            ("not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ok(false)),
            ("other flag bits are not `sampled`", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02", ok(false)),
            ("surrounding blanks", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t", ok(true)),
            ("a later version may carry more fields", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever", ok(true)),
            ("empty", "", None),
            ("garbage", "not a traceparent", None),
            ("version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
            ("version 00 with a suffix", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", None),
            ("later version, no dash after the flags", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", None),
            ("uppercase hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", None),
            ("all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
            ("all-zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),
            ("short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),
            ("long span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7a-1", None),
            ("non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", None),
            ("wrong separators", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", None),
            ("non-hex version", "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
            ("non-ASCII", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é", None),
            ("truncated", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9", None),
        ];
        for (what, value, want) in table {
            let got = parse(value, None).map(|c| (c.trace_id().to_string(), c.span_id().to_string(), c.is_sampled()));
            assert_eq!(&got, want, "{what}: {value:?}");
            if let Some(c) = parse(value, None) {
                assert!(c.is_remote() && c.is_valid(), "{what}: a remote, valid parent");
            }
        }
    }

    #[test]
    fn tracestate_is_kept_when_valid_and_dropped_when_not() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let kept = parse(tp, Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(kept.trace_state().get("congo"), Some("t61rcWkgMzE"));
        for bad in ["=== not a trace state", "UPPER=x", "k=v,=x", "k=a=b", "k="] {
            let dropped = parse(tp, Some(bad)).unwrap();
            assert_eq!(dropped.trace_state().header(), "", "an invalid tracestate is dropped: {bad:?}");
            assert!(dropped.is_sampled(), "the traceparent still counts");
        }
        for good in ["a=1", "tenant@system=v,b=2", "k1_x/-*=v v", "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"] {
            assert!(!parse(tp, Some(good)).unwrap().trace_state().header().is_empty(), "{good:?}");
        }
    }

    #[test]
    fn format_round_trips() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(format(&parse(tp, None).unwrap()), tp);
    }
}
