//! Log capture for clause C11: a process-wide tracing subscriber at TRACE level that writes
//! every event into a buffer the case can search.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static BUFFER: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();

/// A writer appending to the shared buffer.
struct BufferWriter;

impl Write for BufferWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(buffer) = BUFFER.get() {
            buffer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (once per process). Returns false when another global
/// subscriber was installed first, in which case logs cannot be inspected.
pub(crate) fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let _ = BUFFER.set(Mutex::new(Vec::new()));
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| BufferWriter)
            .try_init()
            .is_ok()
    })
}

/// The current end of the buffer. The buffer is never cleared, so concurrent cases in one
/// process cannot erase each other's evidence.
pub(crate) fn mark() -> usize {
    BUFFER.get().map_or(0, |b| b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len())
}

/// Everything captured since `mark`.
pub(crate) fn since(mark: usize) -> Vec<u8> {
    BUFFER
        .get()
        .map(|b| b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(mark..).unwrap_or_default().to_vec())
        .unwrap_or_default()
}
