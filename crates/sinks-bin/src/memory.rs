//! Process-wide memory settings, applied once at start-up before any other thread exists.
//!
//! Both keep what the process holds close to what it uses, and both yield to the operator:
//! a variable that is already set is left as it is.
//!
//! - glibc's allocator gives every thread that allocates an arena of its own, up to eight
//!   per core; the runtime's workers and its blocking threads (file writes, fsyncs) each
//!   keep freed memory in theirs. Two arenas are enough for a process whose hot path is two
//!   worker threads (`MALLOC_ARENA_MAX`, read by glibc itself, overrides this).
//! - `mysql_async` keeps freed packet buffers for reuse: up to 128 of up to 4 MiB each. The
//!   MySQL sink's multi-row statements make buffers of about a megabyte, so the pool ends up
//!   holding tens of MiB for a handful of connections that use one buffer each at a time.
//!   It keeps 16 of at most 1 MiB here (`MYSQL_ASYNC_BUFFER_POOL_CAP` and
//!   `MYSQL_ASYNC_BUFFER_SIZE_CAP` override this).

/// Arenas the allocator may create when `MALLOC_ARENA_MAX` is not set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// The `mysql_async` buffer pool's defaults here: how many buffers, and the largest kept.
#[cfg(feature = "mysql")]
const MYSQL_BUFFERS: [(&str, &str); 2] =
    [("MYSQL_ASYNC_BUFFER_POOL_CAP", "16"), ("MYSQL_ASYNC_BUFFER_SIZE_CAP", "1048576")];

/// Applies the settings. Must run before any other thread starts (it may set environment
/// variables, which is only sound while the process has one thread). The workspace's only
/// `unsafe`: neither setting has a safe interface.
#[allow(unsafe_code)]
pub(crate) fn apply_before_threads() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes an allocator parameter; M_ARENA_MAX is a valid one.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
    #[cfg(feature = "mysql")]
    for (name, value) in MYSQL_BUFFERS {
        if std::env::var_os(name).is_none() {
            // SAFETY: called from `main` before the runtime (or any other thread) starts, so
            // nothing reads the environment concurrently.
            unsafe { std::env::set_var(name, value) };
        }
    }
}
