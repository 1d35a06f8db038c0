//! Backoff for redelivery delays and for the runner's own reconnect loops, the one
//! in-place retry loop of the sinks that retry inside a write ([`InPlace`]), and the retry
//! fields those sinks' sections share ([`settings`]).
//!
//! For redelivery the attempt number is JetStream's delivery count, so a restart of the
//! process does not reset the backoff of a message that keeps failing.

mod in_place;
pub mod settings;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use in_place::{Attempt, Budget, InPlace, Retriable};
pub use settings::RetrySettings;

/// How the nominal delay grows with the attempt number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackoffMode {
    /// Always `base`.
    Fixed,
    /// `base × attempt`.
    Linear,
    /// `base × multiplier^(attempt-1)`.
    #[default]
    Exponential,
}

/// How randomness is applied to the nominal delay `d`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// Exactly `d`.
    None,
    /// Uniform in `[0, d]`.
    #[default]
    Full,
    /// `d/2` plus uniform in `[0, d/2]`.
    Equal,
}

/// A backoff schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay of the first attempt.
    pub base: Duration,
    /// Upper bound of the nominal delay.
    pub max: Duration,
    /// Growth mode.
    pub mode: BackoffMode,
    /// Growth factor for exponential mode (≥ 1).
    pub multiplier: f64,
    /// Randomization.
    pub jitter: Jitter,
}

impl Backoff {
    /// The nominal (un-jittered) delay for 1-based `attempt`, capped at `max`.
    pub fn nominal(&self, attempt: u64) -> Duration {
        let attempt = attempt.max(1);
        let base = self.base.as_secs_f64();
        let secs = match self.mode {
            BackoffMode::Fixed => base,
            BackoffMode::Linear => base * attempt as f64,
            BackoffMode::Exponential => {
                let exp = i32::try_from(attempt - 1).unwrap_or(i32::MAX);
                base * self.multiplier.max(1.0).powi(exp)
            }
        };
        let max = self.max.as_secs_f64();
        if !secs.is_finite() || secs >= max { self.max } else { Duration::from_secs_f64(secs.max(0.0)) }
    }

    /// The delay for `attempt`, jittered with `sample` drawn uniformly from `[0, 1)`.
    pub fn delay(&self, attempt: u64, sample: f64) -> Duration {
        let d = self.nominal(attempt);
        let sample = sample.clamp(0.0, 1.0);
        match self.jitter {
            Jitter::None => d,
            Jitter::Full => d.mul_f64(sample),
            Jitter::Equal => d / 2 + (d / 2).mul_f64(sample),
        }
    }

    /// The delay for `attempt` with a fresh random sample.
    pub fn delay_random(&self, attempt: u64) -> Duration {
        self.delay(attempt, rand::random::<f64>())
    }
}

/// Requests retried inside a write, process-wide (see [`note_retry_in_place`]).
static RETRIES_IN_PLACE: AtomicU64 = AtomicU64::new(0);

/// Notes that a sink retried a request inside one write instead of reporting a failure
/// ([`InPlace::run`] notes each of its retries). The core's metrics read the count
/// (`retries_in_place_total`); a sink never talks to an exporter.
pub fn note_retry_in_place() {
    RETRIES_IN_PLACE.fetch_add(1, Ordering::Relaxed);
}

/// Requests retried inside a write since the process started.
pub fn retries_in_place() -> u64 {
    RETRIES_IN_PLACE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(mode: BackoffMode, jitter: Jitter) -> Backoff {
        Backoff { base: Duration::from_millis(100), max: Duration::from_millis(1000), mode, multiplier: 2.0, jitter }
    }

    #[test]
    fn nominal_table() {
        use BackoffMode::*;
        let ms = |mode, attempt| b(mode, Jitter::None).nominal(attempt).as_millis();
        let rows = [
            (Fixed, [100, 100, 100, 100, 100]),
            (Linear, [100, 200, 300, 400, 500]),
            (Exponential, [100, 200, 400, 800, 1000]),
        ];
        for (mode, expected) in rows {
            let got: Vec<u128> = (1..=5).map(|a| ms(mode, a)).collect();
            assert_eq!(got, expected, "{mode:?}");
        }
        assert_eq!(ms(Exponential, u64::MAX), 1000, "huge attempts saturate at max");
        assert_eq!(ms(Exponential, 0), 100, "attempt 0 counts as the first");
    }

    #[test]
    fn jitter_table() {
        let full = b(BackoffMode::Fixed, Jitter::Full);
        let equal = b(BackoffMode::Fixed, Jitter::Equal);
        assert_eq!(full.delay(1, 0.0), Duration::ZERO);
        assert_eq!(full.delay(1, 0.5), Duration::from_millis(50));
        assert_eq!(equal.delay(1, 0.0), Duration::from_millis(50));
        assert_eq!(equal.delay(1, 1.0), Duration::from_millis(100));
        for _ in 0..100 {
            let d = full.delay_random(3);
            assert!(d <= Duration::from_millis(100));
        }
    }
}
