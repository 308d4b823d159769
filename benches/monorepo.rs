//! Monorepo-sized workspaces (issue 28): a generated tree of 500,000 files
//! and a 100 MB file.
//!
//! - `grep` vs `rg -n` on the same tree and pattern, alternating, medians:
//!   grep with a `limit` it never reaches (the whole tree, rg's work) and
//!   at its default limit (it stops at the 101st match); and each one's
//!   peak RSS, measured in a child process of its own (this bench re-run
//!   with `TANDEM_BENCH_CHILD=grep|grep-limit|rg`: tandem's `grep` tool in
//!   process, or `rg` as its only child, `ru_maxrss`; the grep child also
//!   prints its RSS before the search, the bench binary's own). Targets:
//!   time <= 1.0x rg's, peak RSS <= rg's.
//! - `list_files` with the glob `**/*.rs`: at its default limit (500; it
//!   stops at the 501st) and with a limit it never reaches (the whole
//!   tree). Target: < 2x rg's time on the same tree.
//! - `read_file` of a 100 MB file (1,048,576 lines of 100 bytes): 200
//!   lines at offset 1 and at offset 500,001. Target: < 50 ms for the
//!   first window (it must not read the file), < 1 s for the middle.
//!
//! The tree lives in `/tmp` (`TANDEM_BENCH_TREE=DIR` keeps and reuses it):
//! `TANDEM_BENCH_FILES` files (default 500,000; a quick run: 20000) of
//! 300-600 bytes, 1,000 per directory, a git repository with a
//! `.gitignore`; one file in 1,000 defines `fn needle_<n>(`.
//! `TANDEM_BENCH_RUNS` (default 3) alternated runs per tool.
//!
//! `cargo bench --bench monorepo` (needs `rg`: `apt-get install -y ripgrep`)

#[path = "common/mod.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tandem::buffers::BufferCache;
use tandem::tools::grep::Grep;
use tandem::tools::list_files::ListFiles;
use tandem::tools::read_file::ReadFile;
use tandem::tools::{Tool, ToolContext};
use tandem::workspace::Workspace;
use tokio_util::sync::CancellationToken;

use common::{env_usize, fmt, report, verdict, Stats};

const PATTERN: &str = r"fn needle_\d+\(";
const PER_DIR: usize = 1000;
const BIG_LINES: usize = 1024 * 1024;

fn file_text(n: usize) -> String {
    let mut text = format!("//! File {n}.\n\n");
    for f in 0..(3 + n % 4) {
        text.push_str(&format!(
            "pub fn item_{n}_{f}(key: u64) -> u64 {{\n    key ^ 0x{:x}\n}}\n\n",
            n * 31 + f
        ));
    }
    if n.is_multiple_of(1000) {
        text.push_str(&format!("fn needle_{n}() {{}}\n"));
    }
    text
}

fn generate(root: &Path, files: usize) {
    let _ = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status();
    std::fs::create_dir_all(root.join(".git")).expect("create .git");
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").expect("write .gitignore");
    for n in 0..files {
        let dir = root.join(format!(
            "pkg_{:03}/src/mod_{:02}",
            n / (PER_DIR * 20),
            (n / PER_DIR) % 20
        ));
        if n.is_multiple_of(PER_DIR) {
            std::fs::create_dir_all(&dir).expect("create dirs");
        }
        std::fs::write(
            dir.join(format!("file_{:04}.rs", n % PER_DIR)),
            file_text(n),
        )
        .expect("write file");
    }
    let mut big = std::io::BufWriter::new(std::fs::File::create(root.join("big.log")).unwrap());
    for n in 1..=BIG_LINES {
        writeln!(big, "{:<99}", format!("line {n}")).unwrap();
    }
    big.flush().unwrap();
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
    (
        elapsed,
        output.stdout.iter().filter(|&&b| b == b'\n').count(),
    )
}

fn context(root: &Path) -> ToolContext {
    ToolContext::new(
        Arc::new(Workspace::new(vec![root.to_path_buf()])),
        Arc::new(BufferCache::new()),
        CancellationToken::new(),
    )
}

async fn timed(tool: &dyn Tool, args: serde_json::Value, ctx: &ToolContext) -> (Duration, String) {
    let start = Instant::now();
    let out = tool.run(args, ctx).await.expect("tool runs");
    (start.elapsed(), out)
}

/// A field of /proc/self/status (`VmRSS`, `VmHWM`), KiB.
fn status_kib(field: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn max_rss_kib(who: libc::c_int) -> i64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    unsafe { libc::getrusage(who, &mut usage) };
    usage.ru_maxrss
}

/// `grep`'s arguments: the whole tree, or at the default limit.
fn grep_args(whole: bool) -> serde_json::Value {
    if whole {
        json!({"pattern": PATTERN, "limit": 100_000_000})
    } else {
        json!({"pattern": PATTERN})
    }
}

/// Child mode: one search, then `peak before` RSS (KiB) on stdout.
async fn child(kind: &str, root: &Path) {
    match kind {
        "rg" => {
            rg_run(root);
            println!("{} 0", max_rss_kib(libc::RUSAGE_CHILDREN));
        }
        _ => {
            let ctx = context(root);
            let before = status_kib("VmRSS");
            timed(&Grep, grep_args(kind == "grep"), &ctx).await;
            // The high-water mark of this image's own memory: `ru_maxrss`
            // would be the bench's, which the fork that started this child
            // counted before the exec (it read 56 MiB where this reads 6).
            println!("{} {before}", status_kib("VmHWM"));
        }
    }
}

/// A child's (peak, RSS before the search), KiB.
fn peak_rss(kind: &str, root: &Path) -> (i64, i64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .env("TANDEM_BENCH_CHILD", kind)
        .env("TANDEM_BENCH_TREE", root)
        .output()
        .expect("run the child");
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers: Vec<i64> = text
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    match numbers[..] {
        [peak, before] => (peak, before),
        _ => panic!("child said {text:?}"),
    }
}

fn mib(kib: i64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[tokio::main]
async fn main() {
    let tree = tempfile::tempdir_in("/tmp").expect("temp tree");
    let root =
        std::env::var_os("TANDEM_BENCH_TREE").map_or(tree.path().to_path_buf(), PathBuf::from);
    if let Ok(kind) = std::env::var("TANDEM_BENCH_CHILD") {
        return child(&kind, &root).await;
    }
    common::print_machine();
    if Command::new("rg").arg("--version").output().is_err() {
        println!("SKIPPED: `rg` is not installed (Debian: apt-get install -y ripgrep)");
        return;
    }
    let files = env_usize("TANDEM_BENCH_FILES", 500_000);
    let runs = env_usize("TANDEM_BENCH_RUNS", 3);
    if root.join(".gitignore").exists() {
        println!("reusing the tree in {}", root.display());
    } else {
        std::fs::create_dir_all(&root).expect("create the tree's dir");
        let started = Instant::now();
        generate(&root, files);
        println!(
            "generated {files} files and big.log in {}",
            fmt(started.elapsed())
        );
    }
    let ctx = context(&root);

    // grep: warm both, same matches, then alternate.
    let (_, rg_matches) = rg_run(&root);
    let (_, out) = timed(&Grep, grep_args(true), &ctx).await;
    let tandem_matches = out.lines().filter(|l| l.contains("needle_")).count();
    assert_eq!(tandem_matches, rg_matches, "both find the same lines");
    println!("query /{PATTERN}/: {rg_matches} matching lines");
    let mut times: [Vec<Duration>; 5] = Default::default();
    let whole_list = json!({"glob": "**/*.rs", "limit": 100_000_000});
    for _ in 0..runs {
        times[0].push(rg_run(&root).0);
        times[1].push(timed(&Grep, grep_args(true), &ctx).await.0);
        times[2].push(timed(&Grep, grep_args(false), &ctx).await.0);
        times[3].push(timed(&ListFiles, json!({"glob": "**/*.rs"}), &ctx).await.0);
        times[4].push(timed(&ListFiles, whole_list.clone(), &ctx).await.0);
    }
    let [rg, grep, grep_limit, list, list_whole] = times.map(|t| Stats::of(&t));
    report("rg -n", &rg);
    report("tandem grep, whole tree", &grep);
    report(
        "tandem grep, default limit (stops at the 101st match)",
        &grep_limit,
    );
    report("tandem list_files **/*.rs, default limit (500)", &list);
    report("tandem list_files **/*.rs, whole tree", &list_whole);
    let ratio = grep.median.as_secs_f64() / rg.median.as_secs_f64();
    verdict(
        "grep (whole tree) / rg, medians",
        &format!("{ratio:.2}x ({} vs {})", fmt(grep.median), fmt(rg.median)),
        "<= 1.0x",
        ratio <= 1.0,
    );
    let ratio = grep_limit.median.as_secs_f64() / rg.median.as_secs_f64();
    verdict(
        "grep (default limit) / rg, medians",
        &format!("{ratio:.2}x ({})", fmt(grep_limit.median)),
        "<= 1.0x",
        ratio <= 1.0,
    );
    let (rg_rss, _) = peak_rss("rg", &root);
    for kind in ["grep", "grep-limit"] {
        let (peak, before) = peak_rss(kind, &root);
        verdict(
            &format!("{kind} peak RSS vs rg's"),
            &format!(
                "{} vs {} (the bench binary before the search: {}; the search added {})",
                mib(peak),
                mib(rg_rss),
                mib(before),
                mib(peak - before)
            ),
            "<= rg's",
            peak <= rg_rss,
        );
    }
    for (what, stats) in [("default limit", &list), ("whole tree", &list_whole)] {
        let ratio = stats.median.as_secs_f64() / rg.median.as_secs_f64();
        verdict(
            &format!("list_files **/*.rs ({what}) / rg, medians"),
            &format!("{ratio:.2}x ({})", fmt(stats.median)),
            "< 2x",
            ratio < 2.0,
        );
    }

    // read_file of the 100 MB file.
    let (mut first, mut middle) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(5) {
        first.push(
            timed(&ReadFile, json!({"path": "big.log", "limit": 200}), &ctx)
                .await
                .0,
        );
        let args = json!({"path": "big.log", "offset": BIG_LINES / 2 + 1, "limit": 200});
        middle.push(timed(&ReadFile, args, &ctx).await.0);
    }
    let (first, middle) = (Stats::of(&first), Stats::of(&middle));
    report("read_file 100 MB, offset 1, 200 lines", &first);
    report("read_file 100 MB, offset 524,289, 200 lines", &middle);
    verdict(
        "read_file 100 MB first 200 lines, median",
        &fmt(first.median),
        "< 50 ms",
        first.median < Duration::from_millis(50),
    );
    verdict(
        "read_file 100 MB middle 200 lines, median",
        &fmt(middle.median),
        "< 1 s",
        middle.median < Duration::from_secs(1),
    );
}
