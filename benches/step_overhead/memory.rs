//! The step-overhead bench's memory figure: the release daemon's RSS
//! holding the 5,000-message session, fresh and warm (see the bench's
//! module comment).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::model_server::{openai, ModelServer};
use crate::stdio_editor::{tandem_bin, Editor};
use crate::{mb, model_server};

/// `VmRSS` of a process, in bytes.
fn rss_bytes(pid: u32) -> usize {
    rss_parts(pid).0
}

/// `VmRSS` once it holds still: the daemon gives freed memory back when
/// its stdout writer goes idle, which may be just after the frame that
/// answered (a trim takes milliseconds). Read every 20 ms until two reads
/// agree, for at most a second.
async fn settled_rss(pid: u32) -> usize {
    let mut last = rss_bytes(pid);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = rss_bytes(pid);
        if now == last {
            break;
        }
        last = now;
    }
    last
}

/// `VmRSS`, `RssAnon` and `RssFile` of a process, in bytes: the heap and
/// stacks apart from the binary's pages read in from disk (code that ran).
fn rss_parts(pid: u32) -> (usize, usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> usize {
        let kb: usize = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} line"));
        kb * 1024
    };
    (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
}

/// A small session (one prompt and its answer) written to `home` by a
/// daemon of its own: loading and prompting it first warms the measured
/// daemon's code (the binary's pages it reads in) and allocator, so what
/// loading the large session adds after it is what holding it costs.
async fn small_session(server: &Arc<ModelServer>, home: &Path) -> String {
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let id = editor
        .new_session(&server.base_url(), model_server::MODEL_NAME)
        .await;
    server.push(openai::text(["ok"]));
    editor.prompt(&id, "hello").await;
    editor.shutdown().await;
    id
}

/// What [`daemon_rss`] measured, in bytes.
pub(crate) struct Memory {
    /// The fresh daemon: idle, after `tandem/loadSession`, holding the
    /// session after a prompt.
    pub idle: usize,
    pub after_load: usize,
    pub held: usize,
    /// The request body the prompt sent.
    pub body: usize,
    /// The warm daemon: holding the large session after a prompt, over
    /// holding the small one.
    pub warm_growth: usize,
    /// The warm daemon: holding the small session, over idle.
    pub first_session: usize,
}

/// The release binary loads the session in `home` and answers one prompt
/// in it (RSS before loading, after loading, after the answer, the body it
/// sent). Then, in a second daemon warmed by loading and prompting a small
/// session first, what the small one adds to the idle daemon and what the
/// large one adds to that.
pub(crate) async fn daemon_rss(server: &Arc<ModelServer>, home: &Path, session_id: &str) -> Memory {
    let measured = cold_daemon_rss(server, home, session_id).await;
    let small = small_session(server, home).await;
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let pid = editor.child.id().expect("daemon pid");
    let idle = rss_parts(pid);
    let mut after = Vec::new();
    for (id, text) in [(small.as_str(), "warm"), (session_id, "one more")] {
        let loaded = editor
            .request("tandem/loadSession", json!({"sessionId": id}))
            .await;
        assert!(
            loaded.get("result").is_some(),
            "loadSession failed: {loaded}"
        );
        server.push(openai::text(["ok"]));
        editor.prompt(id, text).await;
        settled_rss(pid).await;
        after.push(rss_parts(pid));
        if after.len() == 1 {
            let requests = server.requests();
            let request = requests.last().expect("the small session's request");
            println!(
                "  the same daemon idle: RSS {} MB; holding a small session ({} messages, a {} KB request) after a prompt: +{} MB = +{} MB anonymous + {} MB of the binary: what a daemon's first session adds whatever its length",
                mb(idle.0),
                request.body["messages"].as_array().map_or(0, Vec::len),
                request.raw_body.len() / 1024,
                mb(after[0].0.saturating_sub(idle.0)),
                mb(after[0].1.saturating_sub(idle.1)),
                mb(after[0].2.saturating_sub(idle.2)),
            );
        }
    }
    probe_heap(pid, home);
    let ((warm, warm_anon, warm_file), (held, held_anon, held_file)) = (after[0], after[1]);
    println!(
        "  warm daemon (a small session loaded and prompted first): RSS {} MB, then {} MB holding the 5,000-message session after a prompt: +{} MB = +{} MB anonymous + {} MB of the binary ({:.2}x the request)",
        mb(warm),
        mb(held),
        mb(held.saturating_sub(warm)),
        mb(held_anon.saturating_sub(warm_anon)),
        mb(held_file.saturating_sub(warm_file)),
        held.saturating_sub(warm) as f64 / measured.3 as f64
    );
    editor.shutdown().await;
    let (idle_cold, after_load, cold_held, body) = measured;
    Memory {
        idle: idle_cold,
        after_load,
        held: cold_held,
        body,
        warm_growth: held.saturating_sub(warm),
        first_session: warm.saturating_sub(idle.0),
    }
}

/// `TANDEM_BENCH_TRIM=1`: how much of the daemon's heap is in use and how
/// much the allocator holds free, by gdb calling `malloc_stats()` (its
/// output goes to the daemon's stderr log, printed here) and then
/// `malloc_trim(0)` in the daemon.
fn probe_heap(pid: u32, home: &Path) {
    if !std::env::var("TANDEM_BENCH_TRIM").is_ok_and(|v| v == "1") {
        return;
    }
    let stderr = home.join("stderr.log");
    let seen = std::fs::metadata(&stderr).map_or(0, |m| m.len() as usize);
    let probed = std::process::Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch"])
        .args(["-ex", "call (void)malloc_stats()"])
        .args(["-ex", "call (int)malloc_trim(0)"])
        .output();
    match probed {
        Ok(out) if out.status.success() => {
            let log = std::fs::read(&stderr).unwrap_or_default();
            let stats = String::from_utf8_lossy(log.get(seen..).unwrap_or_default());
            let lines: Vec<&str> = stats.lines().map(str::trim).collect();
            println!("    malloc_stats: {}", lines.join("; "));
            let (all, anon, _) = rss_parts(pid);
            println!(
                "  after malloc_trim(0) in the daemon: RSS {} MB ({} MB anonymous)",
                mb(all),
                mb(anon)
            );
        }
        _ => println!("  TANDEM_BENCH_TRIM: gdb could not attach; not measured"),
    }
}

/// [`daemon_rss`]'s measurement in a fresh daemon.
async fn cold_daemon_rss(
    server: &Arc<ModelServer>,
    home: &Path,
    session_id: &str,
) -> (usize, usize, usize, usize) {
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let pid = editor.child.id().expect("daemon pid");
    let idle = rss_bytes(pid);
    let show = |when: &str| {
        let (all, anon, file) = rss_parts(pid);
        println!(
            "  RSS {when}: {} MB = {} MB anonymous (heap, stacks) + {} MB of the binary and libraries",
            mb(all),
            mb(anon),
            mb(file)
        );
    };
    show("idle");
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session_id}))
        .await;
    assert!(
        loaded.get("result").is_some(),
        "loadSession failed: {loaded}"
    );
    let after_load = settled_rss(pid).await;
    show("after loadSession");
    let before = server.requests().len();
    server.push(openai::text(["ok"]));
    editor.prompt(session_id, "one more").await;
    let held = settled_rss(pid).await;
    show("holding the session after a prompt");
    probe_heap(pid, home);
    let body = server.requests()[before..]
        .last()
        .expect("the prompt reached the model server")
        .raw_body
        .len();
    editor.shutdown().await;
    (idle, after_load, held, body)
}
