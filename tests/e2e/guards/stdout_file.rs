//! A daemon whose stdout is a file (`tandem lsp > out`), not a pipe or a
//! socket: nothing there says what the reader has read, so its writer
//! writes on the blocking pool and never waits for a reader; every frame
//! still reaches the file whole, in order, and the last ones before the
//! process exits.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::process::Command;

use super::slow_reader::send;
use crate::support::client::{agent_text, file_uri, tandem_bin};
use crate::support::model_server::{openai, ModelServer, Reply};

const CHUNKS: usize = 500;

/// The LSP frames in `bytes`; panics on a partial or bad frame unless
/// `partial_ok` (the file is still being written).
fn frames(bytes: &[u8], partial_ok: bool) -> Vec<Value> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            assert!(partial_ok, "a partial header at the end: {rest:?}");
            break;
        };
        let header = std::str::from_utf8(&rest[..end]).expect("an ASCII header");
        let len: usize = header
            .strip_prefix("Content-Length: ")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("a Content-Length header, not {header:?}"));
        let body = &rest[end + 4..];
        if body.len() < len {
            assert!(partial_ok, "a partial body at the end");
            break;
        }
        frames.push(serde_json::from_slice(&body[..len]).expect("a JSON body"));
        rest = &body[len..];
    }
    frames
}

/// Waits until the file holds the response to `id`; all its frames.
async fn until_response(path: &std::path::Path, id: i64) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let all = frames(&std::fs::read(path).unwrap(), true);
        if all
            .iter()
            .any(|m| m["id"] == id && m.get("method").is_none())
        {
            return all;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no response to {id} within 30 s: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_daemon_whose_stdout_is_a_file_writes_every_frame_in_order_before_it_exits() {
    let server = ModelServer::start().await;
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("piece {i:04}; ")).collect();
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(pieces.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let out = home.path().join("stdout");
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": file_uri(root.path()), "capabilities": {}}}),
    )
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    )
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tandem/newSession",
            "params": {"config": server.session_config()}}),
    )
    .await;
    let created = until_response(&out, 2).await;
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}}),
    )
    .await;
    until_response(&out, 3).await;
    // `shutdown` and `exit` together: the answer to `shutdown` is queued
    // just before the process ends, and must still reach the file.
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
    )
    .await;
    send(&mut stdin, json!({"jsonrpc": "2.0", "method": "exit"})).await;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the daemon exits within 30 s")
        .unwrap();
    assert!(status.success(), "{status:?}");

    let all = frames(&std::fs::read(&out).unwrap(), false);
    let ids: Vec<i64> = all
        .iter()
        .filter(|m| m.get("method").is_none())
        .filter_map(|m| m["id"].as_i64())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4], "every response, in order, none twice");
    let shutdown = all.iter().find(|m| m["id"] == 4).unwrap();
    assert!(shutdown["result"].is_null(), "{shutdown}");
    let updates: Vec<Value> = all
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| m["params"].clone())
        .collect();
    assert_eq!(
        agent_text(&updates),
        pieces.concat(),
        "the exact text, in order"
    );
    let turn_end = all
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "turn_end")
        .expect("a turn_end update");
    let answered = all.iter().position(|m| m["id"] == 3).unwrap();
    assert!(turn_end < answered, "turn_end before the prompt's response");
}
