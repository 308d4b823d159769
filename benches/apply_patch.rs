//! apply_patch (issue 4): a 20-hunk patch on a 10 MB file in under 20 ms.
//!
//! In process and in memory: `parse_patch` of the patch text plus
//! `apply_hunks` on the file's text, timed together, median of 20 runs
//! after one warm-up run. (Reading the file and writing the result are
//! not included: the tool reads through the buffer cache and hands edits
//! to the editor.) The file is generated Rust-like code, 10 MB in ~50-byte
//! lines with a `fn` line every 100 lines; the hunks are spread evenly
//! over it, each with 3 lines of context around 1 removed and 2 added
//! lines, every other one located by an `@@ fn ...` line as models write
//! them.
//!
//! `cargo bench --bench apply_patch`

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use tandem::tools::patch::{apply_hunks, parse_patch, FileOp};

use common::{env_usize, fmt, ms, report, verdict, Stats};

const FILE_BYTES: usize = 10 * 1024 * 1024;
const HUNKS: usize = 20;

fn line(i: usize) -> String {
    if i.is_multiple_of(100) {
        format!(
            "fn block_{:07}(input: &mut State) -> Result<(), Error> {{",
            i / 100
        )
    } else {
        format!(
            "    let value_{i:07} = compute(input, {i}, 0x{:08x});",
            i * 2654435761 % (1 << 32)
        )
    }
}

fn main() {
    common::print_machine();
    let runs = env_usize("TANDEM_BENCH_RUNS", 20);
    let mut original = String::with_capacity(FILE_BYTES + 100);
    let mut lines = 0;
    while original.len() < FILE_BYTES {
        original.push_str(&line(lines));
        original.push('\n');
        lines += 1;
    }

    let mut patch = String::from("*** Begin Patch\n*** Update File: src/big.rs\n");
    for h in 0..HUNKS {
        // Somewhere inside a block, clear of its `fn` line.
        let at = (h * lines / HUNKS + lines / (2 * HUNKS)) / 100 * 100 + 50;
        if h % 2 == 1 {
            patch.push_str(&format!("@@ {}\n", line(at / 100 * 100)));
        } else {
            patch.push_str("@@\n");
        }
        for i in at - 3..at {
            patch.push_str(&format!(" {}\n", line(i)));
        }
        patch.push_str(&format!("-{}\n", line(at)));
        patch.push_str(&format!("+    // hunk {h}: replaced line {at}\n"));
        patch.push_str(&format!(
            "+    let patched_{h} = compute(input, {at}, 0);\n"
        ));
        for i in at + 1..at + 4 {
            patch.push_str(&format!(" {}\n", line(i)));
        }
    }
    patch.push_str("*** End Patch\n");
    println!(
        "file: {:.1} MiB, {lines} lines; patch: {HUNKS} hunks, {} bytes",
        original.len() as f64 / (1024.0 * 1024.0),
        patch.len()
    );

    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    for run in 0..=runs {
        let start = Instant::now();
        let parsed = parse_patch(&patch).expect("the patch parses");
        let FileOp::Update { path, hunks, .. } = &parsed.ops[0] else {
            panic!("an update");
        };
        let applied = apply_hunks(path, &original, hunks).expect("the patch applies");
        let elapsed = start.elapsed();
        assert_eq!(applied.hunks.len(), HUNKS);
        assert!(applied.new_text.contains("let patched_19 = compute"));
        assert_eq!(
            applied.new_text.lines().count(),
            lines + HUNKS,
            "each hunk adds one line"
        );
        if run > 0 {
            times.push(elapsed);
        }
    }
    let stats = Stats::of(&times);
    report("parse_patch + apply_hunks", &stats);
    verdict(
        "20-hunk patch on a 10 MB file, median",
        &fmt(stats.median),
        "< 20 ms",
        ms(stats.median) < 20.0,
    );
}
