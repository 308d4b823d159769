//! grep vs ripgrep (issue 4): tandem's `grep` tool over a generated tree of
//! 50,000 files, against `rg` on the same tree and query in the same run;
//! the target is within 1.3x of ripgrep's time.
//!
//! The tree (in a temp dir, a git repository so that ripgrep honours its
//! `.gitignore` the way tandem always does): 50 crates x 10 modules x 100
//! files of 2-4 KB of Rust-like text, plus 2,000 files under `target/` and
//! 500 `*.log` files that the `.gitignore` excludes (they contain the
//! needle too, so a tool that searched them would report more matches).
//! One file in 25 defines `fn needle_<n>(`; the query is
//! `fn needle_\d+\(`. Both tools see a warm page cache: each runs once
//! before timing. Then they alternate, `TANDEM_BENCH_RUNS` (default 7)
//! runs each, and the medians are compared. tandem's tool is run in
//! process (`Grep.run` with a `ToolContext` on the tree); `rg -n PATTERN .`
//! runs as a child process with its output piped to this one and counted,
//! which is a fair copy of what calling it would cost. Both use all cores
//! (2 here). Both must report the same number of matching lines.
//!
//! `TANDEM_BENCH_TREE=DIR` keeps the tree in DIR for the next run.
//!
//! Needs `rg` (Debian: `apt-get install -y ripgrep`); without it the bench
//! says so and skips. `cargo bench --bench grep`

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tandem::buffers::BufferCache;
use tandem::tools::grep::Grep;
use tandem::tools::{Tool, ToolContext};
use tandem::workspace::Workspace;
use tokio_util::sync::CancellationToken;

use common::{env_usize, fmt, report, verdict, Stats};

const CRATES: usize = 50;
const MODULES: usize = 10;
const FILES: usize = 100;
const PATTERN: &str = r"fn needle_\d+\(";

/// A few KB of Rust-like text; every 25th file defines a needle.
fn file_text(n: usize) -> String {
    let mut text = format!(
        "//! Module {n}: generated for the grep benchmark.\n\nuse std::collections::HashMap;\n\n"
    );
    let functions = 8 + n % 9;
    for f in 0..functions {
        text.push_str(&format!(
            "/// Computes item {f} of module {n}.\npub fn item_{n}_{f}(map: &mut HashMap<u64, String>, key: u64) -> Option<usize> {{\n    let entry = map.entry(key ^ 0x{:x}).or_default();\n    entry.push_str(\"value {f}\");\n    Some(entry.len() + {f})\n}}\n\n",
            n * 31 + f
        ));
    }
    if n.is_multiple_of(25) {
        text.push_str(&format!(
            "fn needle_{n}(haystack: &str) -> bool {{\n    haystack.contains(\"needle\")\n}}\n"
        ));
    }
    text
}

fn generate(root: &Path) -> usize {
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status();
    if !git.is_ok_and(|s| s.success()) {
        // ripgrep only needs to see a `.git` to apply `.gitignore`.
        std::fs::create_dir_all(root.join(".git")).expect("create .git");
    }
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").expect("write .gitignore");
    let mut n = 0;
    let mut bytes = 0;
    for c in 0..CRATES {
        for m in 0..MODULES {
            let dir = root.join(format!("crate_{c:02}/src/mod_{m:02}"));
            std::fs::create_dir_all(&dir).expect("create dirs");
            for f in 0..FILES {
                let text = file_text(n);
                bytes += text.len();
                std::fs::write(dir.join(format!("file_{f:03}.rs")), text).expect("write file");
                if f % 20 == 0 && m == 0 {
                    std::fs::write(dir.join(format!("debug_{f}.log")), file_text(0))
                        .expect("write log");
                }
                n += 1;
            }
        }
    }
    let target = root.join("target/debug/build");
    std::fs::create_dir_all(&target).expect("create target");
    for t in 0..2000 {
        std::fs::write(target.join(format!("gen_{t}.rs")), file_text(0)).expect("write target");
    }
    println!(
        "tree: {n} files searched ({:.0} MB), plus 2,000 under target/ and {} *.log ignored",
        bytes as f64 / 1e6,
        CRATES * 5
    );
    n
}

fn rg_run(root: &Path) -> (Duration, usize) {
    let start = Instant::now();
    let output = Command::new("rg")
        .args(["-n", PATTERN, "."])
        .current_dir(root)
        .output()
        .expect("run rg");
    let elapsed = start.elapsed();
    assert!(output.status.success(), "rg failed: {output:?}");
    let lines = output.stdout.iter().filter(|&&b| b == b'\n').count();
    (elapsed, lines)
}

async fn tandem_run(ctx: &ToolContext) -> (Duration, usize) {
    let start = Instant::now();
    // A limit no query reaches: the whole tree is searched, as rg does
    // (at the default limit grep stops at the 101st match).
    let out = Grep
        .run(json!({"pattern": PATTERN, "limit": 100_000_000}), ctx)
        .await
        .expect("grep runs");
    let elapsed = start.elapsed();
    (elapsed, out.lines().count())
}

#[tokio::main]
async fn main() {
    common::print_machine();
    if Command::new("rg").arg("--version").output().is_err() {
        println!("SKIPPED: `rg` is not installed (Debian: apt-get install -y ripgrep)");
        return;
    }
    let version = Command::new("rg").arg("--version").output().expect("rg");
    println!(
        "ripgrep: {}",
        String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("?")
    );
    let runs = env_usize("TANDEM_BENCH_RUNS", 7);
    // `TANDEM_BENCH_TREE=DIR` keeps the tree in DIR and reuses it on the
    // next run (for profiling); by default it is a temp dir.
    let tree = tempfile::tempdir().expect("temp tree");
    let root = match std::env::var_os("TANDEM_BENCH_TREE") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => tree.path().to_path_buf(),
    };
    if root.join(".gitignore").exists() {
        println!("reusing the tree in {}", root.display());
    } else {
        std::fs::create_dir_all(&root).expect("create the tree's dir");
        let started = Instant::now();
        generate(&root);
        println!("generated in {}", fmt(started.elapsed()));
    }
    let ctx = ToolContext::new(
        Arc::new(Workspace::new(vec![root.clone()])),
        Arc::new(BufferCache::new()),
        CancellationToken::new(),
    );

    // Warm the page cache and both tools.
    let (_, rg_matches) = rg_run(&root);
    let (_, tandem_matches) = tandem_run(&ctx).await;
    assert_eq!(
        tandem_matches, rg_matches,
        "both tools find the same matching lines"
    );
    println!("query /{PATTERN}/: {rg_matches} matching lines");

    let (mut rg_times, mut tandem_times) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        rg_times.push(rg_run(&root).0);
        tandem_times.push(tandem_run(&ctx).await.0);
    }
    let rg = Stats::of(&rg_times);
    let tandem = Stats::of(&tandem_times);
    report("rg -n", &rg);
    report("tandem grep", &tandem);
    let ratio = tandem.median.as_secs_f64() / rg.median.as_secs_f64();
    verdict(
        "grep / rg, medians",
        &format!("{ratio:.2}x ({} vs {})", fmt(tandem.median), fmt(rg.median)),
        "<= 1.3x",
        ratio <= 1.3,
    );
}
