//! Process-wide memory settings: the allocator, and what is applied once at start-up before
//! any other thread exists.
//!
//! All keep what the process holds close to what it uses, and all yield to the operator: a
//! variable that is already set is left as it is.
//!
//! - jemalloc is the allocator (on Unix but musl), with one arena, per-thread caches that
//!   hold only allocations up to 4 KiB, freed pages handed back to the system within half a
//!   second, and allocations of 1 MiB and more (the S3 batch mode's multipart parts, a
//!   Parquet row group's pages) mapped for themselves and returned when freed
//!   (`narenas:1,tcache_max:4096,dirty_decay_ms:500,muzzy_decay_ms:0,
//!   oversize_threshold:1048576`; `_RJEM_MALLOC_CONF` adds to or overrides it). Every
//!   thread that allocates has a cache, and the file sink's writes and fsyncs run on up to
//!   16 blocking threads: with the default 32 KiB limit the file-only build peaked at
//!   16.3–17.6 MiB, at 4 KiB at 14.2–15.9 MiB, for no measurable CPU in the file or the
//!   HTTP sink (without caches at all, 13.2 MiB, but the CPU per message doubled;
//!   docs/performance.md, run 9). glibc's
//!   malloc kept what long-lived allocations (the batch mode's pending messages) sat
//!   between: the million-message batch run into one file grew to 110 MiB for a heap that
//!   never passed 26 MiB; jemalloc at its defaults (eight arenas, ten seconds of decay) held
//!   72 MiB, and with these settings about 50 MiB (docs/performance.md, "Batch mode").
//!   Purging at once (`dirty_decay_ms:0`) saves another few MiB for a third more CPU per
//!   message.
//! - The C library's allocator, still used by C code (and everywhere without jemalloc), gives every thread that allocates an arena of its own, up to eight
//!   per core; the runtime's workers and its blocking threads (file writes, fsyncs) each
//!   keep freed memory in theirs. Two arenas are enough for a process whose hot path is two
//!   worker threads (`MALLOC_ARENA_MAX`, read by glibc itself, overrides this).
//! - `mysql_async` keeps freed packet buffers for reuse: up to 128 of up to 4 MiB each. The
//!   MySQL sink's multi-row statements make buffers of about a megabyte, so the pool ends up
//!   holding tens of MiB for a handful of connections that use one buffer each at a time.
//!   It keeps 16 of at most 1 MiB here (`MYSQL_ASYNC_BUFFER_POOL_CAP` and
//!   `MYSQL_ASYNC_BUFFER_SIZE_CAP` override this).

/// The process's allocator (see the module docs).
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once when it starts (a C string the allocator looks up by name).
#[cfg(all(unix, not(target_env = "musl")))]
#[repr(transparent)]
pub(crate) struct JemallocConf(*const libc::c_char);

// SAFETY: the pointer is to a string literal, never written.
#[cfg(all(unix, not(target_env = "musl")))]
#[allow(unsafe_code)]
unsafe impl Sync for JemallocConf {}

/// What jemalloc runs with (see the module docs). `_RJEM_MALLOC_CONF` is read after it.
#[cfg(all(unix, not(target_env = "musl")))]
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub(crate) static JEMALLOC_CONF: JemallocConf =
    JemallocConf(c"narenas:1,tcache_max:4096,dirty_decay_ms:500,muzzy_decay_ms:0,oversize_threshold:1048576".as_ptr());

/// Arenas the C library's allocator may create when `MALLOC_ARENA_MAX` is not set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// The `mysql_async` buffer pool's defaults here: how many buffers, and the largest kept.
#[cfg(feature = "mysql")]
const MYSQL_BUFFERS: [(&str, &str); 2] =
    [("MYSQL_ASYNC_BUFFER_POOL_CAP", "16"), ("MYSQL_ASYNC_BUFFER_SIZE_CAP", "1048576")];

/// Applies the settings. Must run before any other thread starts (it may set environment
/// variables, which is only sound while the process has one thread). The workspace's only
/// `unsafe` besides jemalloc's options: neither setting has a safe interface.
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
