//! Process-wide settings applied once at start-up, before any other thread exists; each
//! yields to the operator (a variable that is already set is left as it is).
//!
//! - The C library's allocator (used by C code, and by everything where the binary does not
//!   bring its own allocator) gives every thread that allocates an arena of its own, up to
//!   eight per core; the runtime's workers and its blocking threads (file writes, fsyncs)
//!   each keep freed memory in theirs. Two arenas are enough for a process whose hot path is
//!   two worker threads (`MALLOC_ARENA_MAX`, read by glibc itself, overrides this).
//! - The registered kinds' drivers read some settings from the environment once; each kind
//!   gives its defaults ([`sinks_contract::SinkFactory::process_defaults`], e.g. the MySQL
//!   driver's buffer pool), set here when unset.

use crate::Registry;

/// Arenas the C library's allocator may create when `MALLOC_ARENA_MAX` is not set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// True when the process has one thread (Linux: `/proc/self/task`; elsewhere not known, so
/// false).
fn single_threaded() -> bool {
    cfg!(target_os = "linux") && std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

/// Applies the settings. Meant to run before any other thread starts: environment variables
/// are only set while the process has one thread (the only time that is sound), and left
/// alone otherwise. Neither setting has a safe interface.
#[allow(unsafe_code)]
pub(crate) fn apply_before_threads(registry: &Registry) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes an allocator parameter; M_ARENA_MAX is a valid one.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
    let defaults: Vec<_> = registry.process_defaults().filter(|(name, _)| std::env::var_os(name).is_none()).collect();
    if defaults.is_empty() || !single_threaded() {
        return;
    }
    for (name, value) in defaults {
        // SAFETY: the process has a single thread (checked just above, and nothing here
        // starts one), so nothing reads the environment concurrently.
        unsafe { std::env::set_var(name, value) };
    }
}
