//! Pacing writes under a destination's limits: [`Gcra`], the generic cell rate algorithm (the
//! virtual-scheduling form of a token bucket), and [`Pace`], one or two of them (messages and
//! bytes per second) reserved together. Pure: the caller gives the time and sleeps for what
//! a reservation returns.
//!
//! A reservation of `n` units at time `now` moves the theoretical arrival time on by `n`
//! intervals and may go once it is within the burst tolerance: after a quiet period `burst`
//! units go at once, and any longer run goes at exactly the rate. A reservation larger than
//! the burst waits for its share, so nothing is ever refused.

use std::time::{Duration, Instant};

/// One rate: `per_second` units per second with a burst of `burst` units.
#[derive(Debug, Clone)]
pub struct Gcra {
    /// Time one unit takes, in seconds.
    interval: f64,
    /// How far ahead of now the schedule may run, in seconds (`burst` intervals).
    tolerance: f64,
    /// When the schedule is free again (`None`: never used).
    tat: Option<Instant>,
}

impl Gcra {
    /// A rate of `per_second` units (> 0) per second with a burst of `burst` units (at least
    /// one unit).
    pub fn new(per_second: f64, burst: f64) -> Self {
        let interval = 1.0 / per_second.max(f64::MIN_POSITIVE);
        Self { interval, tolerance: burst.max(1.0) * interval, tat: None }
    }

    /// Reserves `units` at `now`: how long to wait before they may go (zero: at once).
    pub fn reserve(&mut self, units: f64, now: Instant) -> Duration {
        let start = self.tat.filter(|t| *t > now).unwrap_or(now);
        let end = start + Duration::from_secs_f64(units.max(0.0) * self.interval);
        self.tat = Some(end);
        let allowed = end.checked_sub(Duration::from_secs_f64(self.tolerance)).unwrap_or(now);
        allowed.saturating_duration_since(now)
    }
}

/// Messages and bytes per second, each optional, reserved together: a write waits for the
/// stricter of the two.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    messages: Option<Gcra>,
    bytes: Option<Gcra>,
}

impl Pace {
    /// A pace of `messages` and `bytes` per second, each `(rate, burst)` when set.
    pub fn new(messages: Option<(f64, f64)>, bytes: Option<(f64, f64)>) -> Self {
        Self {
            messages: messages.map(|(rate, burst)| Gcra::new(rate, burst)),
            bytes: bytes.map(|(rate, burst)| Gcra::new(rate, burst)),
        }
    }

    /// Reserves `messages` messages of `bytes` bytes at `now`: how long to wait before they
    /// may go.
    pub fn reserve(&mut self, messages: u64, bytes: u64, now: Instant) -> Duration {
        let m = self.messages.as_mut().map_or(Duration::ZERO, |g| g.reserve(messages as f64, now));
        let b = self.bytes.as_mut().map_or(Duration::ZERO, |g| g.reserve(bytes as f64, now));
        m.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_and_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut g = Gcra::new(100.0, 10.0);
        for i in 0..10 {
            assert_eq!(g.reserve(1.0, t0), Duration::ZERO, "unit {i} of the burst");
        }
        // The 11th at the same instant waits one interval (10 ms), the 12th two.
        assert_eq!(g.reserve(1.0, t0).as_millis(), 10);
        assert_eq!(g.reserve(1.0, t0).as_millis(), 20);
    }

    #[test]
    fn a_steady_sender_gets_exactly_the_rate() {
        // Sending one unit whenever allowed, for a simulated 10 s at 250 units/s with a burst
        // of 25: 25 + 2,500 units.
        let t0 = Instant::now();
        let mut g = Gcra::new(250.0, 25.0);
        let mut now = t0;
        let mut sent = 0u64;
        while now < t0 + Duration::from_secs(10) {
            let wait = g.reserve(1.0, now);
            now += wait;
            sent += 1;
        }
        assert!((2_524..=2_526).contains(&sent), "{sent}");
    }

    #[test]
    fn a_reservation_larger_than_the_burst_waits_for_its_share() {
        let t0 = Instant::now();
        let mut g = Gcra::new(1_000.0, 100.0);
        assert_eq!(g.reserve(500.0, t0).as_millis(), 400, "500 units at 1,000/s with 100 at once: 400 ms");
        assert_eq!(g.reserve(100.0, t0 + Duration::from_millis(400)).as_millis(), 100);
        // After a quiet second the burst is back.
        assert_eq!(g.reserve(100.0, t0 + Duration::from_secs(2)), Duration::ZERO);
    }

    #[test]
    fn the_stricter_of_messages_and_bytes_decides() {
        let t0 = Instant::now();
        let mut p = Pace::new(Some((1_000.0, 1.0)), Some((10_000.0, 1_000.0)));
        assert_eq!(p.reserve(1, 1_000, t0), Duration::ZERO);
        // 5,000 bytes at 10 kB/s waits 0.5 s (minus nothing: the burst is spent) while one
        // message waits 1 ms: the bytes decide.
        assert_eq!(p.reserve(1, 5_000, t0).as_millis(), 500);
        assert_eq!(Pace::default().reserve(1_000, 1 << 30, t0), Duration::ZERO, "no limit, no wait");
    }
}
