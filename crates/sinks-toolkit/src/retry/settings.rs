//! The in-write retry fields of a sink section, once: `max_retries`, `retry_backoff_ms`,
//! `retry_max_backoff_ms`, `retry_backoff_mode`, `retry_backoff_multiplier` and
//! `retry_jitter` (the S3, NoSQL and Coherence sinks). [`RetrySettings`] holds their values,
//! checks them with the same bounds and words in every sink, and makes the [`InPlace`]
//! loop of a write; the `default_*` functions are the shared defaults a field names in
//! `#[serde(default = "…")]`.
//!
//! The fields themselves stay in each sink's config struct, each with its own `///` doc:
//! `#[serde(flatten)]` of a shared struct would break what `sinks_contract::config` reads
//! from a struct that denies unknown fields. A struct with a flattened field reports an
//! unknown field without the list of known ones (so no "did you mean", and the generated
//! config reference, which asks each struct for its fields that way, would miss them), and
//! reports a bad value inside the flattened part at the section instead of at its field.

use std::time::Duration;

use sinks_contract::config::Issues;

use super::{Backoff, BackoffMode, InPlace, Jitter};

/// Default of `max_retries`: 3 retries after the first attempt.
pub fn default_max_retries() -> u32 {
    3
}

/// Default of `retry_backoff_ms`: 10 ms before the first retry.
pub fn default_backoff_ms() -> u64 {
    10
}

/// Default of `retry_max_backoff_ms`: 250 ms at the most spent waiting in place.
pub fn default_max_backoff_ms() -> u64 {
    250
}

/// Default of `retry_backoff_mode`: exponential.
pub fn default_backoff_mode() -> BackoffMode {
    BackoffMode::Exponential
}

/// Default of `retry_backoff_multiplier`: 2.0.
pub fn default_backoff_multiplier() -> f64 {
    2.0
}

/// Default of `retry_jitter`: full.
pub fn default_jitter() -> Jitter {
    Jitter::Full
}

/// The values of a sink section's in-write retry fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySettings {
    /// `max_retries`: extra attempts after a temporary failure within one write, 0–10.
    pub max_retries: u32,
    /// `retry_backoff_ms`: delay before the first retry, 0–60,000 ms.
    pub backoff_ms: u64,
    /// `retry_max_backoff_ms`: longest wait in place, 0–300,000 ms, at least `backoff_ms`.
    pub max_backoff_ms: u64,
    /// `retry_backoff_mode`.
    pub mode: BackoffMode,
    /// `retry_backoff_multiplier`: growth factor of exponential backoff, 1.0–10.0.
    pub multiplier: f64,
    /// `retry_jitter`.
    pub jitter: Jitter,
}

impl Default for RetrySettings {
    /// Every field at its `default_*`.
    fn default() -> Self {
        Self {
            max_retries: default_max_retries(),
            backoff_ms: default_backoff_ms(),
            max_backoff_ms: default_max_backoff_ms(),
            mode: default_backoff_mode(),
            multiplier: default_backoff_multiplier(),
            jitter: default_jitter(),
        }
    }
}

impl RetrySettings {
    /// The backoff schedule of the retries.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(self.backoff_ms),
            max: Duration::from_millis(self.max_backoff_ms),
            mode: self.mode,
            multiplier: self.multiplier,
            jitter: self.jitter,
        }
    }

    /// The in-place retries of a write whose requests time out after `request_timeout`.
    pub fn in_place(&self, request_timeout: Duration) -> InPlace {
        InPlace::new(self.backoff(), self.max_retries, request_timeout)
    }

    /// Checks the values; each problem names its field as `sink.<field>`.
    pub fn validate(&self, issues: &mut Issues) {
        issues.range("sink.max_retries", u64::from(self.max_retries), 0, 10);
        issues.range("sink.retry_backoff_ms", self.backoff_ms, 0, 60_000);
        issues.range("sink.retry_max_backoff_ms", self.max_backoff_ms, 0, 300_000);
        if self.max_backoff_ms < self.backoff_ms {
            issues.push("sink.retry_max_backoff_ms", "must not be less than sink.retry_backoff_ms");
        }
        let multiplier = self.multiplier;
        if !(multiplier.is_finite() && (1.0..=10.0).contains(&multiplier)) {
            issues.push("sink.retry_backoff_multiplier", format!("must be in 1.0..=10.0 (got {multiplier})"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(settings: RetrySettings) -> Vec<String> {
        let mut issues = Issues::default();
        settings.validate(&mut issues);
        match issues.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.issues.iter().map(|i| format!("{}: {}", i.path, i.message)).collect(),
        }
    }

    #[test]
    fn the_defaults_are_valid_and_shared() {
        let d = RetrySettings::default();
        assert_eq!((d.max_retries, d.backoff_ms, d.max_backoff_ms), (3, 10, 250));
        assert_eq!((d.mode, d.multiplier, d.jitter), (BackoffMode::Exponential, 2.0, Jitter::Full));
        assert_eq!(problems(d), Vec::<String>::new());
    }

    #[test]
    fn every_bad_value_names_its_field() {
        let d = RetrySettings::default();
        let rows: [(RetrySettings, &[&str]); 8] = [
            (RetrySettings { max_retries: 11, ..d }, &["sink.max_retries: must be in 0..=10 (got 11)"]),
            (RetrySettings { max_retries: 10, max_backoff_ms: 60_000, backoff_ms: 60_000, ..d }, &[]),
            (
                RetrySettings { backoff_ms: 60_001, max_backoff_ms: 300_000, ..d },
                &["sink.retry_backoff_ms: must be in 0..=60000 (got 60001)"],
            ),
            (
                RetrySettings { max_backoff_ms: 300_001, ..d },
                &["sink.retry_max_backoff_ms: must be in 0..=300000 (got 300001)"],
            ),
            (
                RetrySettings { backoff_ms: 900, max_backoff_ms: 100, ..d },
                &["sink.retry_max_backoff_ms: must not be less than sink.retry_backoff_ms"],
            ),
            (
                RetrySettings { multiplier: 0.5, ..d },
                &["sink.retry_backoff_multiplier: must be in 1.0..=10.0 (got 0.5)"],
            ),
            (
                RetrySettings { multiplier: f64::NAN, ..d },
                &["sink.retry_backoff_multiplier: must be in 1.0..=10.0 (got NaN)"],
            ),
            (RetrySettings { multiplier: 10.0, backoff_ms: 0, max_backoff_ms: 0, max_retries: 0, ..d }, &[]),
        ];
        for (settings, want) in rows {
            assert_eq!(problems(settings), want, "{settings:?}");
        }
    }

    #[test]
    fn the_loop_gets_the_schedule_the_retries_and_the_timeout() {
        let settings = RetrySettings {
            max_retries: 5,
            backoff_ms: 20,
            max_backoff_ms: 700,
            mode: BackoffMode::Linear,
            multiplier: 3.0,
            jitter: Jitter::Equal,
        };
        let in_place = settings.in_place(Duration::from_millis(120));
        assert_eq!(in_place.max_retries(), 5);
        assert_eq!(
            *in_place.backoff(),
            Backoff {
                base: Duration::from_millis(20),
                max: Duration::from_millis(700),
                mode: BackoffMode::Linear,
                multiplier: 3.0,
                jitter: Jitter::Equal,
            }
        );
        assert_eq!(in_place.shortest_attempt(), Duration::from_millis(120), "the request timeout, under 250 ms");
        assert_eq!(in_place, InPlace::new(settings.backoff(), 5, Duration::from_millis(120)));
    }
}
