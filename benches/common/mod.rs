//! Shared by the bench harnesses (`harness = false`): order statistics and
//! the one-line report each figure gets. Include with
//! `#[path = "common/mod.rs"] mod common;`.
#![allow(dead_code)]

use std::time::Duration;

/// Order statistics of a set of timings.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub min: Duration,
    pub median: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Stats {
    /// Panics on an empty sample: a bench that measured nothing is broken.
    pub fn of(samples: &[Duration]) -> Stats {
        assert!(!samples.is_empty(), "no samples");
        let mut sorted = samples.to_vec();
        sorted.sort();
        Stats {
            n: sorted.len(),
            min: sorted[0],
            median: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// Nearest-rank percentile of an ascending sample.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `1.234 ms` / `56.7 µs` / `2.50 s`.
pub fn fmt(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 1.0 {
        format!("{secs:.2} s")
    } else if secs >= 1e-3 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Prints the distribution on one line.
pub fn report(label: &str, stats: &Stats) {
    println!(
        "{label}: n={} min={} median={} p99={} max={}",
        stats.n,
        fmt(stats.min),
        fmt(stats.median),
        fmt(stats.p99),
        fmt(stats.max)
    );
}

/// Prints `TARGET <what>: <figure> (target <target>) -> met|MISSED`.
pub fn verdict(what: &str, figure: &str, target: &str, met: bool) {
    println!(
        "TARGET {what}: {figure} (target {target}) -> {}",
        if met { "met" } else { "MISSED" }
    );
}

/// A value from the environment (`TANDEM_BENCH_*`), to scale a run down.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints the core count and the load average, which the figures depend on.
pub fn print_machine() {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!("machine: {cores} cores, load average {}", load.join(" "));
}
