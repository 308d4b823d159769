//! The daemon's memory with 1,000 open buffers (issue 28).
//!
//! The release `tandem lsp` (as an editor runs it) gets `initialize`, then
//! `textDocument/didOpen` for `TANDEM_BENCH_BUFFERS` (1,000) documents of
//! `TANDEM_BENCH_BUFFER_KB` (20) KiB each, Rust-like lines of ~40 bytes,
//! then one incremental `didChange` each (a typed character: the rope's
//! edit path), then `didClose` for all. Its resident set (`VmRSS` of
//! /proc/PID/status) is read after the handshake, after the opens, after
//! the edits and after the closes, each once a request sent behind the
//! notifications has been answered (the frontend handles them in order)
//! and 500 ms have passed (freed memory is returned when idle).
//!
//! Targets: the buffers add at most 2x their text (a rope, its line index
//! and the cache's maps around the text itself); closing them gives back
//! at least half of what they added.
//!
//! `cargo bench --bench open_buffers`

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::time::Duration;

use serde_json::json;

use common::{env_usize, verdict};
use stdio_editor::{tandem_bin, Editor};

fn document(n: usize, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 64);
    let mut line = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "    let value_{n}_{line} = compute({line}, {n});\n"
        ));
        line += 1;
    }
    text
}

fn rss_kib(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .expect("the daemon's VmRSS")
}

/// The daemon's RSS once everything sent before has been handled.
async fn settled_rss(editor: &mut Editor, pid: u32) -> i64 {
    let answer = editor.request("tandem/listSessions", json!({})).await;
    assert!(answer.get("result").is_some(), "{answer}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    rss_kib(pid)
}

fn mib(kib: i64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let count = env_usize("TANDEM_BENCH_BUFFERS", 1000);
    let kb = env_usize("TANDEM_BENCH_BUFFER_KB", 20);
    let home = tempfile::tempdir().expect("home");
    let root = tempfile::tempdir().expect("workspace");
    let root = root.path().canonicalize().expect("canonical root");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home.path());
    let pid = editor.child.id().expect("pid");
    editor.handshake(&root).await;
    let baseline = settled_rss(&mut editor, pid).await;

    let mut text_bytes = 0;
    let uris: Vec<String> = (0..count)
        .map(|n| format!("file://{}/src/m{:02}/f{n:04}.rs", root.display(), n / 100))
        .collect();
    for (n, uri) in uris.iter().enumerate() {
        let text = document(n, kb * 1024);
        text_bytes += text.len() as i64;
        editor
            .send(
                &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}}),
            )
            .await;
    }
    let opened = settled_rss(&mut editor, pid).await;
    for uri in &uris {
        editor
            .send(
                &json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"range": {"start": {"line": 3, "character": 4},
                                              "end": {"line": 3, "character": 4}}, "text": "x"}]}}),
            )
            .await;
    }
    let edited = settled_rss(&mut editor, pid).await;
    for uri in &uris {
        editor
            .send(
                &json!({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {
                "textDocument": {"uri": uri}}}),
            )
            .await;
    }
    let closed = settled_rss(&mut editor, pid).await;
    editor.shutdown().await;

    let text_kib = text_bytes / 1024;
    println!("{count} buffers of {kb} KiB: {} of text", mib(text_kib));
    println!("daemon RSS after the handshake: {}", mib(baseline));
    println!("daemon RSS with {count} open buffers: {}", mib(opened));
    println!("daemon RSS after one edit in each: {}", mib(edited));
    println!("daemon RSS after closing them: {}", mib(closed));
    let added = edited.max(opened) - baseline;
    let ratio = added as f64 / text_kib as f64;
    verdict(
        &format!("RSS the {count} buffers add / their text"),
        &format!("{ratio:.2}x ({} for {})", mib(added), mib(text_kib)),
        "<= 2x",
        ratio <= 2.0,
    );
    let returned = edited.max(opened) - closed;
    verdict(
        "RSS given back by closing them",
        &format!("{} of {}", mib(returned), mib(added)),
        ">= half",
        returned * 2 >= added,
    );
}
