//! The sizes of the heavy clauses a test run may scale: the crash certification's plan
//! ([`Plan`], read by each sink's `k1_k2_crash_certification` test from the environment)
//! and the soak's and the fault harness's minutes. `cargo xtask test` sets them for its nextest run (CI's sizes, or
//! the full ones with `--full`); `cargo xtask certify` sets the certification's own.

/// Environment variable: the minutes of the chaos soak test (`sinks-bench`'s
/// `tests/soak.rs`; default [`SOAK_CI_MINUTES`]).
pub const SOAK_MINUTES_ENV: &str = "NATS_SINKS_SOAK_MINUTES";
/// The soak's minutes in a CI run and a plain `cargo nextest run`.
pub const SOAK_CI_MINUTES: f64 = 2.0;
/// The soak's minutes in a full run (`cargo xtask test --full`).
pub const SOAK_FULL_MINUTES: f64 = 10.0;

/// Environment variable: the minutes of faults of the fault harness's test (`sinks-bench`'s
/// `tests/jepsen.rs`; default [`JEPSEN_CI_MINUTES`]).
pub const JEPSEN_MINUTES_ENV: &str = "NATS_SINKS_JEPSEN_MINUTES";
/// The fault harness's minutes of faults in a CI run and a plain `cargo nextest run` (its
/// first pass over every fault kind takes about this long, and always completes).
pub const JEPSEN_CI_MINUTES: f64 = 1.5;
/// The fault harness's minutes in a full run (`cargo xtask test --full`).
pub const JEPSEN_FULL_MINUTES: f64 = 10.0;

/// Environment variable: `full` runs the tests that repeat one crash to catch a rare race
/// (a kill during the last deliveries, a sink dying on a message's last delivery) for their
/// full number of rounds ([`rounds`]); anything else, or unset, for CI's.
pub const ROUNDS_ENV: &str = "NATS_SINKS_ROUNDS";

/// The rounds a repeating test runs: `full` when [`ROUNDS_ENV`] says `full` (`cargo xtask test
/// --full`), else `ci` (a CI run and a plain `cargo nextest run`).
pub fn rounds(ci: usize, full: usize) -> usize {
    if std::env::var(ROUNDS_ENV).is_ok_and(|v| v.trim() == "full") { full } else { ci }
}

/// Knobs of one crash certification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Messages published for K1.
    pub messages: usize,
    /// SIGKILLs during K1.
    pub kills: usize,
    /// Messages published for K2.
    pub graceful_messages: usize,
}

/// Environment variable: messages of K1 (default [`Plan::CI`]'s; a certification is at
/// least 20,000).
pub const MESSAGES_ENV: &str = "NATS_SINKS_CERTIFY_MESSAGES";
/// Environment variable: SIGKILLs of K1 (a certification is at least 5).
pub const KILLS_ENV: &str = "NATS_SINKS_CERTIFY_KILLS";
/// Environment variable: messages of K2.
pub const GRACEFUL_MESSAGES_ENV: &str = "NATS_SINKS_CERTIFY_GRACEFUL_MESSAGES";

// A certification's own size, checked at compile time.
const _: () = assert!(Plan::FULL.messages >= 20_000 && Plan::FULL.kills >= 5);

impl Plan {
    /// The size a CI run and a plain `cargo nextest run` use: 4,000 messages and 3 kills,
    /// then 2,000 for the graceful stop.
    pub const CI: Self = Self { messages: 4_000, kills: 3, graceful_messages: 2_000 };
    /// The size of a certification (`cargo xtask certify` and `cargo xtask test --full`):
    /// at least 20,000 messages and 5 kills (docs/sink-contract.md).
    pub const FULL: Self = Self { messages: 20_000, kills: 5, graceful_messages: 5_000 };

    /// The plan the environment asks for ([`MESSAGES_ENV`], [`KILLS_ENV`],
    /// [`GRACEFUL_MESSAGES_ENV`]), each unset value from [`Plan::CI`]; a value that is not a
    /// positive number is refused, naming its variable.
    pub fn from_env() -> Result<Self, String> {
        let read = |name: &str, default: usize| -> Result<usize, String> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(text) => match text.trim().parse::<usize>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!("{name}={text:?} is not a positive number")),
                },
            }
        };
        Ok(Self {
            messages: read(MESSAGES_ENV, Self::CI.messages)?,
            kills: read(KILLS_ENV, Self::CI.kills)?,
            graceful_messages: read(GRACEFUL_MESSAGES_ENV, Self::CI.graceful_messages)?,
        })
    }

    /// The environment that asks for this plan (for a `cargo nextest` child).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (MESSAGES_ENV, self.messages.to_string()),
            (KILLS_ENV, self.kills.to_string()),
            (GRACEFUL_MESSAGES_ENV, self.graceful_messages.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ci_and_full_plans_read_back_from_their_environment() {
        for plan in [Plan::CI, Plan::FULL] {
            let env = plan.env();
            let read = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.parse::<usize>().unwrap());
            assert_eq!(read(MESSAGES_ENV), Some(plan.messages));
            assert_eq!(read(KILLS_ENV), Some(plan.kills));
            assert_eq!(read(GRACEFUL_MESSAGES_ENV), Some(plan.graceful_messages));
        }
    }
}
