//! The daemon gives freed memory back to the OS after a turn and after a
//! session's load, through the real binary: the debug log says when it
//! did, with how much the allocator held free. And its threads allocate
//! from one heap, not an arena each.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::acp::AcpClient;
use crate::serve::Serve;
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

const RETURNED: &str = "returned freed memory to the OS";
const KEPT: &str = "freed memory kept";

/// The allocator's thresholds, pinned for a daemon that must give back
/// what a 4 MB answer freed. By default glibc gives a piece that large a
/// map of its own, which a free hands straight back to the OS, and after
/// each such free moves that line up (and the heap's own give-back line
/// with it) to the piece's size: whether the answer's pieces end up in the
/// heap, where they stay once freed until a trim, or in maps of their own
/// depended on the order the daemon's threads freed them in, that is on
/// the machine's load (on a busy machine the trim after a load found
/// `free=137952` and kept it, in 2 runs of 30).
/// Pinned, every piece comes from the heap, as a long session's thousands
/// of small ones do, and nothing but the trim gives it back.
const PIECES_IN_THE_HEAP: (&str, &str) = (
    "GLIBC_TUNABLES",
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296",
);

fn heap_env() -> (String, String) {
    let (name, value) = PIECES_IN_THE_HEAP;
    (name.to_string(), value.to_string())
}

/// How many times a daemon's log says it returned freed memory.
fn returned(log: &str) -> usize {
    log.matches(RETURNED).count()
}

/// Waits (at most 10 s: the writer trims once idle, which may be just
/// after the frame the test waited for) until `count` of the daemon's
/// `log` reaches `want`, then checks it did not pass it.
async fn count_reaches(
    what: &str,
    log: impl Fn() -> String,
    count: fn(&str) -> usize,
    want: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&log()) < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let log = log();
    assert_eq!(count(&log), want, "{what}; stderr:\n{log}");
}

#[tokio::test]
async fn a_turn_and_a_load_that_freed_megabytes_give_them_back() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![heap_env()],
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    // A 4 MB answer: its chunk, its message and their frames are freed by
    // the turn's end, and read back from the log by the load.
    let answer = "x".repeat(4 << 20);
    server.push(openai::text([answer.as_str()]));
    let (receipt, _) = editor.prompt(&session, "write a lot").await;
    assert!(receipt.get("result").is_some(), "{receipt}");
    count_reaches("one trim after the turn", || editor.stderr(), returned, 1).await;
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    let mut loader = Editor::spawn_with(EditorOptions {
        env: vec![heap_env()],
        home: Some(home),
        ..EditorOptions::default()
    })
    .await;
    loader.initialize(root.path()).await;
    let before = returned(&loader.stderr());
    let loaded = loader
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    count_reaches(
        "one trim after the load",
        || loader.stderr(),
        returned,
        before + 1,
    )
    .await;
}

#[tokio::test]
async fn closing_big_buffers_gives_their_memory_back() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let text = "let x = 1;\n".repeat(200_000);
    for n in 0..4 {
        editor
            .open(&root.path().join(format!("big{n}.rs")), &text)
            .await;
    }
    let before = returned(&editor.stderr());
    for n in 0..4 {
        let uri = crate::support::client::file_uri(&root.path().join(format!("big{n}.rs")));
        editor
            .notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri}}),
            )
            .await;
    }
    // Something to write: the writer trims once idle after it.
    let answer = editor.request("tandem/listSessions", json!({})).await;
    assert!(answer.get("result").is_some(), "{answer}");
    count_reaches(
        "one trim after the closes",
        || editor.stderr(),
        returned,
        before + 1,
    )
    .await;
}

#[tokio::test]
async fn tandem_acp_gives_back_what_a_turn_and_a_load_freed() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let log = |name: &str| home.path().join(name);
    let spawn = |name: &str| {
        let stderr = std::fs::File::create(log(name)).unwrap();
        AcpClient::spawn_logging(
            &["acp"],
            &server,
            home.clone(),
            "debug",
            stderr,
            &[PIECES_IN_THE_HEAP],
        )
    };
    let stderr = |name: &str| std::fs::read_to_string(log(name)).unwrap_or_default();
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});

    let mut client = spawn("first.stderr").await;
    client.request("initialize", init.clone(), "").await;
    let (_, session) = client.new_session(root.path()).await;
    let answer = "x".repeat(4 << 20);
    server.push(openai::text([answer.as_str()]));
    let (reply, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "write a lot"}]}),
            "",
        )
        .await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    count_reaches(
        "one trim after the turn",
        || stderr("first.stderr"),
        returned,
        1,
    )
    .await;
    client.kill().await;

    let mut loader = spawn("second.stderr").await;
    loader.request("initialize", init, "").await;
    let before = returned(&stderr("second.stderr"));
    let (loaded, _) = loader
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    count_reaches(
        "one trim after the load",
        || stderr("second.stderr"),
        returned,
        before + 1,
    )
    .await;
}

#[tokio::test]
async fn tandem_serve_gives_back_what_a_turn_and_a_load_freed() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let serve = Serve::start().await;
    let mut first = serve.client().await;
    first.initialize(root.path(), json!({})).await;
    let session = first.new_session(server.session_config()).await;
    // A 4 MB answer (as over stdio, which the serve's connections write
    // alike): its chunk, its message and their frames are freed by the
    // turn's end, and read back from the log by the next load.
    let answer = "x".repeat(4 << 20);
    server.push(openai::text([answer.as_str()]));
    let id = first.start_prompt(&session, "write a lot").await;
    let reply = first.response(id).await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    count_reaches("one trim after the turn", || serve.stderr(), returned, 1).await;

    // A second window loads the session: the log's events are dropped
    // once its replay is out, not when it closes, and a trim is considered
    // then (the 4 MB pieces may have gone back to the OS when freed
    // already: glibc maps pieces that large apart).
    let considered = |log: &str| returned(log) + log.matches(KEPT).count();
    let before = considered(&serve.stderr());
    let mut second = serve.client().await;
    second.initialize(root.path(), json!({})).await;
    assert!(second.attach(&session).await > 0);
    count_reaches(
        "a trim considered after the replay",
        || serve.stderr(),
        considered,
        before + 1,
    )
    .await;
}

#[tokio::test]
async fn a_small_turn_keeps_its_little_freed_memory() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    server.push(openai::text(["ok"]));
    editor.prompt(&session, "hi").await;
    // The trim was considered (the log says so) and not worth its time.
    count_reaches(
        "the trim considered",
        || editor.stderr(),
        |log| usize::from(log.contains(KEPT)),
        1,
    )
    .await;
    let log = editor.stderr();
    assert!(log.contains(KEPT), "stderr:\n{log}");
    assert!(!log.contains(RETURNED), "stderr:\n{log}");
}

/// The heaps glibc made for threads besides the main one: each is a 64 MB
/// region aligned to 64 MB (what it uses readable, the rest reserved), in
/// the process's memory map.
fn thread_arenas(pid: u32) -> usize {
    const HEAP_MAX: u64 = 64 << 20;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("/proc maps");
    // (start, end) of the anonymous mappings, in address order.
    let anon: Vec<(u64, u64)> = maps
        .lines()
        .filter(|l| l.split_whitespace().nth(5).is_none())
        .filter_map(|l| {
            let (start, end) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(start, 16).ok()?,
                u64::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect();
    (0..anon.len())
        .filter(|&i| anon[i].0.is_multiple_of(HEAP_MAX))
        .filter(|&i| {
            // The region: this mapping and the ones right after it.
            let mut end = anon[i].1;
            for next in &anon[i + 1..] {
                if next.0 != end || end - anon[i].0 >= HEAP_MAX {
                    break;
                }
                end = next.1;
            }
            end - anon[i].0 == HEAP_MAX
        })
        .count()
}

#[tokio::test]
async fn every_thread_of_the_daemon_allocates_from_one_heap() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    // A turn allocates on the runtime's workers, the stdout writer and the
    // blocking pool (the log's fsync).
    server.push(openai::text(["ok"]));
    let (receipt, _) = editor.prompt(&session, "hi").await;
    assert!(receipt.get("result").is_some(), "{receipt}");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", editor.pid())).unwrap();
    assert_eq!(
        thread_arenas(editor.pid()),
        0,
        "a thread made a heap of its own; the memory map:\n{maps}"
    );
}
