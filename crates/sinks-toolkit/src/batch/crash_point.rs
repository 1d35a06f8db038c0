//! Crash points of batch mode for the crash tests: with the cargo feature `crash-points`
//! and `NATS_SINKS_CRASH_AT=<point>:<n>` in its environment, the process aborts (as a
//! `kill -9` would leave it: nothing flushed, nothing acknowledged) the `n`-th time it
//! reaches `<point>`. The points, in a commit's order: `staged` (the object staged, no
//! manifest yet), `claimed` (its manifest written, the object not yet visible),
//! `table_committed` (table mode: the object's table commit landed) and `settled` (its
//! messages' outcomes about to be handed back to be acknowledged). Without the feature
//! (every build but the tests') [`reached`] does nothing.

/// The environment variable naming a crash point and its occurrence.
pub const CRASH_AT_ENV: &str = "NATS_SINKS_CRASH_AT";

/// Every crash point, in a commit's order.
pub const POINTS: &[&str] = &["staged", "claimed", "table_committed", "settled"];

/// Marks crash point `point`: aborts when it is the one the environment names and this is
/// its `n`-th time (feature `crash-points` only).
#[cfg(feature = "crash-points")]
#[allow(clippy::print_stderr)] // the abort follows at once: a buffered log writer would lose the line
pub fn reached(point: &'static str) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let value = std::env::var(CRASH_AT_ENV).ok()?;
        let (name, n) = value.split_once(':')?;
        Some((name.to_owned(), n.parse().ok()?))
    });
    if let Some((name, n)) = at
        && name == point
        && COUNT.fetch_add(1, Ordering::SeqCst) + 1 == *n
    {
        tracing::error!(point, "crash point reached: aborting");
        eprintln!("crash point {point} reached: aborting");
        std::process::abort();
    }
}

/// Marks crash point `point` (a no-op: built without the feature `crash-points`).
#[cfg(not(feature = "crash-points"))]
#[inline]
pub fn reached(_point: &'static str) {}
