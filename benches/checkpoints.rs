//! Checkpoints (issue 26): what they cost.
//!
//! - The scan around a command: `stat_tree` of a generated workspace of
//!   `TANDEM_BENCH_FILES` files (default 50,000; 500 per directory, a
//!   `.gitignore` that hides one directory in ten), twice (before and
//!   after) plus the diff, as the first `exec_command` of a turn pays it;
//!   and incremental, as every later command of the turn pays it: the walk
//!   after the previous command reused as this one's before, 5 known files
//!   stat'ed afresh, one walk after, the diff. The two alternate in each
//!   run (which goes first alternates too). Median of `TANDEM_BENCH_RUNS`
//!   (default 7) runs, the first (cold) one reported apart.
//! - A turn's checkpoint: 5 files of 4 KB stored before (hash + write once),
//!   the manifest, the 5 files again after the change, the manifest again,
//!   and the prune, in a store already holding 1,000 checkpoints.
//!
//! `cargo bench --bench checkpoints`

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tandem::core::checkpoints::capture;
use tandem::core::checkpoints::scan::{changed, changed_around, file_key, stat_tree, Stat, Stats};
use tandem::core::checkpoints::store::{now_ms, Bounds, Manifest, Store};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn make_tree(root: &Path, files: usize) {
    std::fs::write(root.join(".gitignore"), "ignored*/\n").unwrap();
    for i in 0..files {
        let dir = if (i / 500) % 10 == 9 {
            root.join(format!("ignored{}", i / 500))
        } else {
            root.join(format!("d{}", i / 500))
        };
        if i % 500 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let files = env_or("TANDEM_BENCH_FILES", 50_000);
    let runs = env_or("TANDEM_BENCH_RUNS", 7).max(1);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let made = Instant::now();
    make_tree(&root, files);
    println!("tree: {files} files made in {:.1?}", made.elapsed());
    let roots = vec![root.clone()];

    let mut times = Vec::new();
    let mut incremental_times = Vec::new();
    let mut seen = 0;
    let mut last = stat_tree(&roots);
    let known: Vec<PathBuf> = (1..=5)
        .map(|i| root.join(format!("d1/f{}.txt", 500 + i)))
        .collect();
    for run in 0..=runs {
        let full = |n: usize| {
            let started = Instant::now();
            let before = stat_tree(&roots);
            std::fs::write(root.join("d0/f0.txt"), format!("changed {n}\n")).unwrap();
            let after = stat_tree(&roots);
            let diff = changed(&before, &after);
            let took = started.elapsed();
            assert_eq!(diff, vec![root.join("d0/f0.txt")]);
            (took, after)
        };
        let incremental = |n: usize, last: Stats| {
            let started = Instant::now();
            let before = last;
            let fresh: std::collections::HashMap<PathBuf, Option<Stat>> = known
                .iter()
                .map(|p| (p.clone(), file_key(p).map(|(s, _)| s)))
                .collect();
            std::fs::write(root.join("d0/f1.txt"), format!("changed {n}\n")).unwrap();
            let after = stat_tree(&roots);
            let diff = changed_around(&before, &after, &fresh);
            let took = started.elapsed();
            assert_eq!(diff, vec![root.join("d0/f1.txt")]);
            (took, after)
        };
        // The walk reused is always the latest one taken (as in a turn).
        let (took, inc) = if run % 2 == 0 {
            let (took, after) = full(run);
            let (inc, after) = incremental(run, after);
            seen = after.len();
            last = after;
            (took, inc)
        } else {
            let (inc, _) = incremental(run, std::mem::take(&mut last));
            let (took, after) = full(run);
            seen = after.len();
            last = after;
            (took, inc)
        };
        if run == 0 {
            println!("scan around a command, first run: {took:.1?}; incremental: {inc:.1?}");
        } else {
            times.push(took);
            incremental_times.push(inc);
        }
    }
    let one = {
        let started = Instant::now();
        let _ = stat_tree(&roots);
        started.elapsed()
    };
    println!(
        "scan around a command ({seen} visible files): median {:.1?} of {runs} (one walk: {one:.1?})",
        median(times)
    );
    println!(
        "scan around a later command of the turn (incremental): median {:.1?} of {runs}",
        median(incremental_times)
    );

    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path());
    for n in 0..1000u64 {
        let hash = store.put(format!("old content {n}").as_bytes()).unwrap();
        store
            .write_manifest(&Manifest {
                created_ms: now_ms() - 1000 + n,
                session: "old".into(),
                turn: format!("t{n}"),
                workspace: root.display().to_string(),
                objects: [hash].into_iter().collect(),
            })
            .unwrap();
    }
    let files: Vec<PathBuf> = (0..5).map(|i| root.join(format!("turn{i}.rs"))).collect();
    let mut turn_times = Vec::new();
    for turn in 0..=runs {
        for (i, f) in files.iter().enumerate() {
            std::fs::write(f, format!("{turn}{i}").repeat(4096 / 2)).unwrap();
        }
        let started = Instant::now();
        let mut objects = BTreeSet::new();
        {
            let _lock = store.shared().unwrap();
            for f in &files {
                objects.extend(capture(&store, f, None).unwrap().hash);
            }
        }
        let mut manifest = Manifest {
            created_ms: now_ms(),
            session: "s".into(),
            turn: format!("t{turn}"),
            workspace: root.display().to_string(),
            objects,
        };
        store.write_manifest(&manifest).unwrap();
        let mid = started.elapsed();
        for (i, f) in files.iter().enumerate() {
            std::fs::write(f, format!("{i}{turn}").repeat(4096 / 2)).unwrap();
        }
        let ended = Instant::now();
        {
            let _lock = store.shared().unwrap();
            for f in &files {
                manifest
                    .objects
                    .extend(capture(&store, f, None).unwrap().hash);
            }
        }
        store.write_manifest(&manifest).unwrap();
        let keep = store.manifest_path(manifest.created_ms, "s", &manifest.turn);
        store
            .prune(
                &root.display().to_string(),
                &keep,
                Bounds {
                    keep_days: 14,
                    max_bytes: 1 << 30,
                },
            )
            .unwrap();
        let total = mid + ended.elapsed();
        if turn > 0 {
            turn_times.push(total);
        }
        if turn == runs {
            println!(
                "  last turn: before {mid:.1?}, after + prune {:.1?}",
                ended.elapsed()
            );
        }
    }
    println!(
        "checkpoint of a turn changing 5 files (store of 1,000 checkpoints): median {:.1?} of {runs}",
        median(turn_times)
    );
}
