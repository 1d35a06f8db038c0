//! Unique names for streams, consumers, tables and directories, so tests never collide.

use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `{prefix}_{pid}_{counter}_{random}`: unique across tests and processes; only
/// characters valid in stream, consumer and table names.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let r: u32 = rand::random();
    format!("{prefix}_{}_{n}_{r:08x}", std::process::id())
}
