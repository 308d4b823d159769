//! Never flood a slow editor: while the editor does not read, the turn
//! goes on, and the chunks that queued up reach it merged — fewer frames,
//! exactly the same text, in order, `turn_end` before the response.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};

use crate::support::client::{frame, tandem_bin};
use crate::support::model_server::{openai, ModelServer, Reply};

const CHUNKS: usize = 3000;

pub(super) async fn send(stdin: &mut ChildStdin, message: Value) {
    stdin
        .write_all(&frame(message.to_string().as_bytes()))
        .await
        .expect("write to the daemon");
}

/// Reads one LSP frame.
pub(super) async fn read_frame(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut header = Vec::new();
    while !header.ends_with(b"\r\n\r\n") {
        header.push(stdout.read_u8().await.expect("daemon stdout"));
    }
    let header = String::from_utf8(header).unwrap();
    let len: usize = header
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("Content-Length");
    let mut body = vec![0; len];
    stdout.read_exact(&mut body).await.unwrap();
    serde_json::from_slice(&body).unwrap()
}

pub(super) async fn read_until_response(
    stdout: &mut BufReader<ChildStdout>,
    id: i64,
) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(30), read_frame(stdout))
            .await
            .expect("a frame within 30 s");
        let done = message["id"] == id && message.get("method").is_none();
        frames.push(message);
        if done {
            return frames;
        }
    }
}

#[tokio::test]
async fn a_slow_reader_gets_merged_chunks_with_the_exact_text() {
    let server = ModelServer::start().await;
    let pieces: Vec<String> = (0..CHUNKS)
        .map(|i| format!("piece {i:04} of the answer; "))
        .collect();
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(pieces.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(&mut stdin, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": crate::support::client::file_uri(root.path()), "capabilities": {}}}))
    .await;
    read_until_response(&mut stdout, 1).await;
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
    let frames = read_until_response(&mut stdout, 2).await;
    let session = frames.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}}),
    )
    .await;
    // The editor reads nothing while the model streams: the daemon must
    // take the whole stream and end the turn all the same.
    let log = home
        .path()
        .join("sessions")
        .join(format!("{session}.jsonl"));
    let mut polls = 0;
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("\"type\":\"turn_end\"") {
            break;
        }
        polls += 1;
        assert!(
            polls < 3000,
            "the turn did not end while the editor was not reading"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let frames = read_until_response(&mut stdout, 3).await;
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let chunks: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(chunks.concat(), pieces.concat(), "the exact text, in order");
    assert!(
        chunks.len() < CHUNKS / 2,
        "{} chunk frames for {CHUNKS} chunks: not merged",
        chunks.len()
    );
    let last = updates.last().unwrap();
    assert_eq!(last["sessionUpdate"], "turn_end");
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
}
