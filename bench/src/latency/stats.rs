//! The arithmetic of the latency suite, apart from any IO so that it is unit-tested: the
//! open-loop publisher's absolute schedule, the percentiles of a run's latencies, and the
//! stream sequence of a JetStream ack subject.

use std::time::Duration;

/// The instant (as an offset from the run's start) at which message `i` of a run at `rate`
/// messages per second is meant to be published. Computed from the start for every message
/// (never by adding an interval to the previous one), so a late wake-up delays no later
/// message and rounding does not accumulate.
pub(crate) fn intended(i: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate)
}

/// How many messages of a run at `rate` are due by `elapsed` since its start (the messages
/// `0..due` have an intended instant at or before it), never more than `total`.
pub(crate) fn due(elapsed: Duration, rate: f64, total: u64) -> u64 {
    // Message i is due when i / rate <= elapsed, i.e. i <= elapsed * rate.
    let last = (elapsed.as_secs_f64() * rate).floor();
    if last < 0.0 { 0 } else { ((last as u64).saturating_add(1)).min(total) }
}

/// The `q` quantile (0–1) of `sorted` (ascending) by nearest rank: the smallest value that at
/// least `q` of the values do not exceed. `None` when there are none.
pub(crate) fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The summary of one run's latencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    /// Messages measured (after the warm-up).
    pub(crate) count: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) p999: Duration,
    pub(crate) max: Duration,
}

impl Summary {
    /// The summary of `latencies` (in any order); `None` when there are none.
    pub(crate) fn of(mut latencies: Vec<Duration>) -> Option<Self> {
        latencies.sort_unstable();
        Some(Self {
            count: latencies.len(),
            p50: percentile(&latencies, 0.50)?,
            p99: percentile(&latencies, 0.99)?,
            p999: percentile(&latencies, 0.999)?,
            max: *latencies.last()?,
        })
    }
}

/// What an ack published to `subject` with `body` acknowledges: the stream sequence of a
/// positive ack (`+ACK`, or an empty body, which JetStream also takes as an ack), `None` for
/// anything else (`+NAK`, `+WPI`, `+TERM`, a subject of another shape). The subject is the
/// message's reply subject, `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
/// seq>.<timestamp>.<pending>`, or with a domain and account hash after `ACK` and a token at
/// the end (12 tokens or more).
pub(crate) fn acked_sequence(subject: &str, body: &[u8]) -> Option<u64> {
    let positive = body.is_empty() || body.starts_with(b"+ACK");
    if !positive {
        return None;
    }
    let tokens: Vec<&str> = subject.split('.').collect();
    if tokens.len() < 2 || tokens[0] != "$JS" || tokens[1] != "ACK" {
        return None;
    }
    let at = match tokens.len() {
        9 => 5,
        n if n >= 12 => 7,
        _ => return None,
    };
    tokens[at].parse().ok()
}

/// Milliseconds of `d`, with two decimals (the report's unit).
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_absolute_and_due_counts_what_it_reached() {
        // 1,000 msgs/s: message i at i ms.
        assert_eq!(intended(0, 1000.0), Duration::ZERO);
        assert_eq!(intended(1500, 1000.0), Duration::from_millis(1500));
        // The millionth message at 3 msgs/s has not drifted by the sum of rounded intervals.
        let t = intended(1_000_000, 3.0).as_secs_f64();
        assert!((t - 333_333.333_333).abs() < 1e-3, "{t}");
        assert_eq!(due(Duration::ZERO, 1000.0, 10), 1);
        assert_eq!(due(Duration::from_micros(999), 1000.0, 10), 1);
        assert_eq!(due(Duration::from_millis(1), 1000.0, 10), 2);
        assert_eq!(due(Duration::from_millis(4), 1000.0, 10), 5);
        assert_eq!(due(Duration::from_secs(60), 1000.0, 10), 10);
        // Whatever is due at an instant was intended at or before it, and the next was not.
        for ms in [0u64, 3, 17, 250] {
            let at = Duration::from_millis(ms);
            let n = due(at, 400.0, u64::MAX);
            assert!(intended(n - 1, 400.0) <= at && intended(n, 400.0) > at, "{ms}");
        }
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let d: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 0.5), Some(Duration::from_millis(500)));
        assert_eq!(percentile(&d, 0.99), Some(Duration::from_millis(990)));
        assert_eq!(percentile(&d, 0.999), Some(Duration::from_millis(999)));
        assert_eq!(percentile(&d, 1.0), Some(Duration::from_millis(1000)));
        assert_eq!(percentile(&d, 0.0), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&[], 0.5), None);
        // One slow message in a hundred is the p99; one in a thousand is not.
        let mut v = vec![Duration::from_millis(1); 999];
        v.push(Duration::from_millis(80));
        let s = Summary::of(v).expect("values");
        assert_eq!(
            (s.p50, s.p99, s.p999, s.max),
            (Duration::from_millis(1), Duration::from_millis(1), Duration::from_millis(1), Duration::from_millis(80))
        );
        let mut v = vec![Duration::from_millis(1); 98];
        v.extend([Duration::from_millis(50), Duration::from_millis(60)]);
        let s = Summary::of(v).expect("values");
        assert_eq!((s.p99, s.p999), (Duration::from_millis(50), Duration::from_millis(60)));
        assert_eq!(Summary::of(Vec::new()), None);
    }

    #[test]
    fn only_positive_acks_name_their_stream_sequence() {
        let v1 = "$JS.ACK.LAT.lat.1.4711.4700.1765000000000000000.12";
        assert_eq!(acked_sequence(v1, b"+ACK"), Some(4711));
        assert_eq!(acked_sequence(v1, b""), Some(4711));
        assert_eq!(acked_sequence(v1, b"+NAK"), None);
        assert_eq!(acked_sequence(v1, b"+WPI"), None);
        assert_eq!(acked_sequence(v1, b"+TERM"), None);
        let v2 = "$JS.ACK.hub.ACCHASH.LAT.lat.1.4712.4701.1765000000000000000.11.rand";
        assert_eq!(acked_sequence(v2, b"+ACK"), Some(4712));
        assert_eq!(acked_sequence("$JS.ACK.LAT.lat.1.x.4700.1.1", b"+ACK"), None);
        assert_eq!(acked_sequence("lat.orders.k1", b"+ACK"), None);
        assert_eq!(acked_sequence("$JS.ACK.LAT.lat.1", b"+ACK"), None);
    }
}
