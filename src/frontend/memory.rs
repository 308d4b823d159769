//! Giving freed memory back to the OS at the moments a lot was just freed.
//! glibc's allocator keeps what a replay of a long session freed
//! (megabytes of events and frames), and what a turn's requests freed (a
//! body as large as the history for every step), in its heap, where the
//! daemon's RSS counts it for as long as the daemon runs; `malloc_trim`
//! returns it.
//!
//! One heap for every thread ([`use_one_heap`], set before any thread
//! starts): by default glibc gives each thread that allocates an arena of
//! its own (up to 8 per core), and a loaded session's pieces end up spread
//! over several of them, mixed with what each thread freed; a trim can
//! only return whole free pages, so what the daemon held after a load and
//! a prompt varied by megabytes from run to run. With one arena the live
//! pieces pack into fewer pages and the figure is steady (BENCHMARKS.md
//! §2). Small allocations still come from each thread's own cache without
//! a lock.
//!
//! Invariant: a trim never runs on a step's path. It is asked for through
//! the queue of the editor it was done for (`OutboundQueue::trim_when_idle`:
//! after a load, at a turn's end and after a buffer is closed), so in
//! `tandem serve` one window's writer never takes another's; that writer
//! asks for it once everything queued before the request is written, so
//! the replay's frames are freed first, and it runs on the blocking pool,
//! where no chunk waits behind it; a turn's end is not on the model's path
//! (the next step has nothing to send until a new prompt arrives).

/// Below this much free memory in the heap a trim is not worth its time.
const WORTH_TRIMMING: usize = 1 << 20;

/// Makes every thread allocate from the one main heap instead of an arena
/// of its own (glibc only; elsewhere nothing to do). Called first thing
/// in `main`, before the runtime starts any thread: an arena a thread
/// already has stays.
pub fn use_one_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameter; no thread
    // allocates concurrently this early.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Returns the allocator's free memory to the OS if it holds at least a
/// MB of it (glibc only; elsewhere nothing to do), and says whether it
/// trimmed. What a trim costs: BENCHMARKS.md §2.
pub(crate) fn return_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let started = std::time::Instant::now();
        let free = free_heap_bytes();
        if free < WORTH_TRIMMING {
            tracing::debug!(free, "freed memory kept: too little to return");
            return false;
        }
        // SAFETY: malloc_trim only walks and trims the allocator's own
        // free lists; it takes the allocator's locks like malloc does.
        unsafe {
            libc::malloc_trim(0);
        }
        tracing::debug!(free, took = ?started.elapsed(), "returned freed memory to the OS");
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// [`return_freed_memory`] on the blocking pool: the runtime's threads
/// write the editors' frames and must not wait for a trim (nothing to do
/// outside a runtime).
pub(crate) fn return_freed_memory_soon() {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(return_freed_memory);
    }
}

/// Bytes the allocator holds free in its heaps (every arena).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn free_heap_bytes() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.fordblks
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn rss_anon_kb() -> usize {
        std::fs::read_to_string("/proc/self/status")
            .expect("/proc/self/status")
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon line")
    }

    #[test]
    fn memory_freed_inside_the_heap_goes_back_to_the_os() {
        // 32 MB in small pieces (too small for mmap, so they come from the
        // heap), then one piece allocated after them stays: the heap cannot
        // shrink from its top, and the freed pieces stay resident.
        let pieces: Vec<Vec<u8>> = (0..32 * 1024).map(|i| vec![i as u8; 1000]).collect();
        let pinned = vec![1u8; 1000];
        drop(pieces);
        let before = rss_anon_kb();
        assert!(return_freed_memory(), "32 MB free is worth a trim");
        let after = rss_anon_kb();
        // Other tests of this process allocate meanwhile: most of it, not
        // all of it, must have gone back.
        assert!(
            before.saturating_sub(after) > 16 * 1024,
            "RssAnon {before} kB before the trim, {after} kB after"
        );
        drop(pinned);
    }
}
