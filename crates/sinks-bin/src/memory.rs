//! The process's allocator: jemalloc (on Unix but musl), with one arena, per-thread caches
//! that hold only allocations up to 4 KiB, freed pages handed back to the system within half a
//! second, and allocations of 1 MiB and more (the S3 batch mode's multipart parts, a Parquet
//! row group's pages) mapped for themselves and returned when freed
//! (`narenas:1,tcache_max:4096,dirty_decay_ms:500,muzzy_decay_ms:0,
//! oversize_threshold:1048576`; `_RJEM_MALLOC_CONF` adds to or overrides it). The other
//! process settings (the C allocator's arenas, the drivers' buffer pools) are applied by
//! `sinks_cli::main`.
//!
//! Why these settings: every thread that allocates has a cache, and the file sink's writes
//! and fsyncs run on up to 16 blocking threads: with the default 32 KiB limit the file-only
//! build peaked at 16.3–17.6 MiB, at 4 KiB at 14.2–15.9 MiB, for no measurable CPU in the file
//! or the HTTP sink (without caches at all, 13.2 MiB, but the CPU per message doubled;
//! docs/performance.md, run 9). glibc's malloc kept what long-lived allocations (the batch
//! mode's pending messages) sat between: the million-message batch run into one file grew to
//! 110 MiB for a heap that never passed 26 MiB; jemalloc at its defaults (eight arenas, ten
//! seconds of decay) held 72 MiB, and with these settings about 50 MiB (docs/performance.md,
//! "Batch mode"). Purging at once (`dirty_decay_ms:0`) saves another few MiB for a third more
//! CPU per message.

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
