//! Giving freed memory back to the OS after a burst. glibc's allocator
//! keeps what a replay of a long session freed (megabytes of events and
//! frames) in its heap, where the daemon's RSS counts it for as long as
//! the daemon runs; `malloc_trim` returns it.

/// Returns the allocator's free memory to the OS (glibc only; elsewhere
/// nothing to do). Takes a few milliseconds on a heap of tens of MB.
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let started = std::time::Instant::now();
        // SAFETY: malloc_trim only walks and trims the allocator's own
        // free lists; it takes the allocator's locks like malloc does.
        unsafe {
            libc::malloc_trim(0);
        }
        tracing::debug!(took = ?started.elapsed(), "returned freed memory to the OS");
    }
}
