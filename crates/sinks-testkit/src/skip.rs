//! What a test does when something it needs is missing: it fails, saying what to run
//! ([`cannot_run`]), unless the missing thing is on the one allow-list of skips
//! (`sinks_certify::skips`), when it records an allowed skip (`allowed_skip`, with the `certify` feature).

#[cfg(feature = "certify")]
pub use sinks_certify::skips::{ALLOWED_SKIPS, ORACLE_DATABASE, SKIP_LOG_ENV};

/// Fails `test` because `reason` keeps it from running (a tool `cargo xtask setup` installs,
/// a server that did not start). Never a skip.
#[track_caller]
pub fn cannot_run(test: &str, reason: impl std::fmt::Display) -> ! {
    panic!(
        "{test} cannot run: {reason} (a test that cannot run fails; only the allow-list in sinks_certify::skips may skip)"
    )
}

#[cfg(feature = "certify")]
/// Records that `test` does not run for the allow-listed reason `id`, `detail` saying what
/// is missing (it is printed, and logged when `NATS_SINKS_SKIP_LOG` names a file). Panics
/// when `id` is not on the allow-list.
pub fn allowed_skip(id: &str, test: &str, detail: &str) {
    sinks_certify::skips::record_allowed_skip(id, test, detail);
}

#[cfg(feature = "certify")]
/// The value of `variable` when it is set and not blank; otherwise records an allowed skip
/// of `test` under `id` and returns `None`.
pub fn env_or_allowed_skip(variable: &str, id: &str, test: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
        _ => {
            allowed_skip(id, test, &format!("{variable} is not set"));
            None
        }
    }
}
