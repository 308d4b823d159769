//! Files searched on worker threads, their results taken in the order of
//! a sorted walk, so that the taker can stop the walk once it has enough
//! (`grep` at its `limit`).
//!
//! Why not `ignore`'s parallel walker: it visits files in no fixed order,
//! so the first `limit` matches in path order are known only once every
//! file has been searched. Here one thread walks (sorted, depth first) and
//! hands files to the workers through a short queue; results wait in a
//! reorder buffer until every file before them is done. Memory holds the
//! files in flight and the results ahead of the slowest one, never the
//! tree.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use parking_lot::Mutex;

/// What the taker of results wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Files handed to a worker at once: a queue operation per file cost as
/// much as searching a small file.
const BATCH: usize = 64;
/// Batches handed out but not taken yet, beyond which the walk waits for
/// results: bounds the reorder buffer when one file is slow.
const MAX_AHEAD: usize = 64;
/// Batches queued for the workers.
const QUEUE: usize = 8;

/// Searches each of `files` (in their order) with `search` on `threads`
/// workers and gives `take` every result in that same order, until the
/// files run out or `take` says [`Flow::Stop`]. True when it stopped.
pub fn search_in_order<R, S, T>(
    files: impl Iterator<Item = PathBuf>,
    threads: usize,
    search: S,
    mut take: T,
) -> bool
where
    R: Send,
    S: Fn(PathBuf) -> R + Sync,
    T: FnMut(R) -> Flow,
{
    let stop = AtomicBool::new(false);
    let (work_tx, work_rx) = mpsc::sync_channel::<(usize, Vec<PathBuf>)>(QUEUE);
    let work_rx = Mutex::new(work_rx);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Vec<R>)>();
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            let done_tx = done_tx.clone();
            let (work_rx, search, stop) = (&work_rx, &search, &stop);
            scope.spawn(move || loop {
                let next = work_rx.lock().recv();
                let Ok((seq, paths)) = next else { return };
                let mut results = Vec::with_capacity(paths.len());
                for path in paths {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    results.push(search(path));
                }
                if done_tx.send((seq, results)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        let mut order = Reorder::default();
        let mut issued = 0;
        let mut files = files.peekable();
        while files.peek().is_some() {
            let batch: Vec<PathBuf> = files.by_ref().take(BATCH).collect();
            while issued - order.next >= MAX_AHEAD && !order.stopped {
                match done_rx.recv() {
                    Ok((seq, results)) => order.put(seq, results, &mut take),
                    Err(_) => break,
                }
            }
            if order.stopped || work_tx.send((issued, batch)).is_err() {
                break;
            }
            issued += 1;
            while let Ok((seq, results)) = done_rx.try_recv() {
                order.put(seq, results, &mut take);
            }
            if order.stopped {
                break;
            }
        }
        if order.stopped {
            stop.store(true, Ordering::Relaxed);
        }
        drop(work_tx);
        for (seq, results) in done_rx.iter() {
            order.put(seq, results, &mut take);
        }
        order.stopped
    })
}

/// Batches of results that came before their turn.
struct Reorder<R> {
    /// The sequence number of the next batch to take.
    next: usize,
    early: BTreeMap<usize, Vec<R>>,
    stopped: bool,
}

impl<R> Default for Reorder<R> {
    fn default() -> Self {
        Reorder {
            next: 0,
            early: BTreeMap::new(),
            stopped: false,
        }
    }
}

impl<R> Reorder<R> {
    fn put(&mut self, seq: usize, results: Vec<R>, take: &mut impl FnMut(R) -> Flow) {
        if self.stopped {
            return;
        }
        self.early.insert(seq, results);
        while let Some(results) = self.early.remove(&self.next) {
            self.next += 1;
            for result in results {
                if take(result) == Flow::Stop {
                    self.stopped = true;
                    self.early.clear();
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(n: usize) -> Vec<PathBuf> {
        (0..n).map(|i| PathBuf::from(format!("f{i:04}"))).collect()
    }

    #[test]
    fn results_are_taken_in_the_files_order_whatever_order_they_finish_in() {
        let mut taken = Vec::new();
        let stopped = search_in_order(
            paths(300).into_iter(),
            4,
            |path| {
                // Earlier files finish later.
                let n: u64 = path.to_string_lossy()[1..].parse().unwrap();
                std::thread::sleep(std::time::Duration::from_micros((300 - n) % 7 * 50));
                path
            },
            |path| {
                taken.push(path);
                Flow::Continue
            },
        );
        assert!(!stopped);
        assert_eq!(taken, paths(300));
    }

    #[test]
    fn stop_ends_the_walk_without_taking_more() {
        let walked = std::sync::atomic::AtomicUsize::new(0);
        let files = paths(100_000).into_iter().inspect(|_| {
            walked.fetch_add(1, Ordering::Relaxed);
        });
        let mut taken = 0;
        let stopped = search_in_order(
            files,
            2,
            |path| path,
            |_| {
                taken += 1;
                if taken == 10 {
                    Flow::Stop
                } else {
                    Flow::Continue
                }
            },
        );
        assert!(stopped);
        assert_eq!(taken, 10);
        let walked = walked.load(Ordering::Relaxed);
        assert!(
            walked < 100_000 / 10,
            "the walk went on to {walked} files after the stop"
        );
    }
}
