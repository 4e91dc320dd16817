//! Fork detection. A forked child inherits a copy of every pool's memory but
//! not the threads that may hold its locks, nor a usable SQLite connection
//! (SQLite forbids carrying one across `fork`). So a pool remembers the fork
//! generation it was opened in, and refuses every call from a later one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    // Async-signal-safe: one atomic add, nothing else.
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Registers the at-fork handler once per process. `pthread_atfork` sees
/// every fork (`os.fork`, `multiprocessing`, C code), unlike
/// `os.register_at_fork`, which sees only forks made through Python.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function with no captured
        // state; the handler only touches a static atomic.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
}

/// The fork generation of this process: 0 in the process that loaded the
/// module, incremented in each forked child.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}
