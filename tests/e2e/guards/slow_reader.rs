//! Never flood a slow editor: while the editor does not read, the turn
//! goes on, and the chunks that queued up reach it merged — fewer frames,
//! exactly the same text, in order, `turn_end` before the response; the
//! same through the ACP frontend, with every other update in its place.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};

use crate::support::client::{frame, tandem_bin};
use crate::support::model_server::{openai, ModelServer, Reply};

const CHUNKS: usize = 3000;

pub(crate) async fn send(stdin: &mut ChildStdin, message: Value) {
    stdin
        .write_all(&frame(message.to_string().as_bytes()))
        .await
        .expect("write to the daemon");
}

/// Reads one LSP frame.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(stdout: &mut BufReader<R>) -> Value {
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

pub(crate) async fn read_until_response<R: AsyncRead + Unpin>(
    stdout: &mut BufReader<R>,
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

/// The LSP handshake (`initialize`, id 1, then `initialized`) on a raw
/// stdio connection, rooted at `root`.
pub(crate) async fn initialize<R: AsyncRead + Unpin>(
    stdin: &mut ChildStdin,
    stdout: &mut BufReader<R>,
    root: &std::path::Path,
) {
    send(stdin, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": crate::support::client::file_uri(root), "capabilities": {}}}))
    .await;
    read_until_response(stdout, 1).await;
    send(
        stdin,
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    )
    .await;
}

/// `tandem/newSession` (id 2) on a raw stdio connection; the session id.
pub(crate) async fn new_session<R: AsyncRead + Unpin>(
    stdin: &mut ChildStdin,
    stdout: &mut BufReader<R>,
    config: Value,
) -> String {
    send(
        stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tandem/newSession",
        "params": {"config": config}}),
    )
    .await;
    let frames = read_until_response(stdout, 2).await;
    frames.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// How the editor connects to the daemon's stdout.
enum Stdout {
    Pipe,
    /// A Unix socket, as libuv (VS Code, Neovim) gives a child.
    Socket,
}

#[tokio::test]
async fn a_slow_reader_gets_merged_chunks_with_the_exact_text() {
    slow_lsp_reader(Stdout::Pipe).await;
}

#[tokio::test]
async fn a_slow_reader_on_a_unix_socket_gets_merged_chunks_with_the_exact_text() {
    slow_lsp_reader(Stdout::Socket).await;
}

async fn slow_lsp_reader(kind: Stdout) {
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
    let (daemon_stdout, socket) = match kind {
        Stdout::Pipe => (Stdio::piped(), None),
        Stdout::Socket => {
            let (theirs, ours) = std::os::unix::net::UnixStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            let ours = tokio::net::UnixStream::from_std(ours).unwrap();
            (Stdio::from(std::os::fd::OwnedFd::from(theirs)), Some(ours))
        }
    };
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(daemon_stdout)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let reader: Box<dyn AsyncRead + Unpin + Send> = match socket {
        Some(socket) => Box::new(socket),
        None => Box::new(child.stdout.take().unwrap()),
    };
    let mut stdout = BufReader::new(reader);
    initialize(&mut stdin, &mut stdout, root.path()).await;
    let session = new_session(&mut stdin, &mut stdout, server.session_config()).await;

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}}),
    )
    .await;
    // The editor reads nothing while the model streams: the daemon must
    // take the whole stream and end the turn all the same.
    wait_for_turn_end(home.path(), &session).await;

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
    // More than 32 frames unread make the editor slow: the rest waited in
    // the daemon, merged, not in the kernel's buffer (a pipe's 64 KiB, a
    // socket's 200 KiB: hundreds of frames).
    assert!(
        chunks.len() <= 40,
        "{} chunk frames for {CHUNKS} chunks: written to an editor known to be slow",
        chunks.len()
    );
    let last = updates.last().unwrap();
    assert_eq!(last["sessionUpdate"], "turn_end");
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
}

/// One line of `tandem acp`'s output.
async fn read_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("a line within 30 s")
        .unwrap()
        .expect("stdout open");
    serde_json::from_str(&line).unwrap()
}

async fn acp_send(stdin: &mut ChildStdin, message: Value) {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    stdin.write_all(&line).await.expect("write to the daemon");
}

async fn acp_until_response(lines: &mut Lines<BufReader<ChildStdout>>, id: i64) -> Vec<Value> {
    let mut messages = Vec::new();
    loop {
        let message = read_line(lines).await;
        let done = message["id"] == id && message.get("method").is_none();
        messages.push(message);
        if done {
            return messages;
        }
    }
}

#[tokio::test]
async fn a_slow_acp_client_gets_merged_chunks_and_every_other_update_in_order() {
    let server = ModelServer::start().await;
    let before: Vec<String> = (0..CHUNKS / 2)
        .map(|i| format!("before {i:04}; "))
        .collect();
    let after: Vec<String> = (0..CHUNKS / 2).map(|i| format!("after {i:04}; ")).collect();
    // Step 1: text, then a plan; step 2: more text.
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(before.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.push(openai::delta(
        json!({"tool_calls": [{"index": 0, "id": "p1",
        "type": "function", "function": {"name": "update_plan",
        "arguments": r#"{"plan":[{"step":"read","status":"in_progress"}]}"#}}]}),
    ));
    steps.extend(openai::ending("tool_calls"));
    server.push(Reply::Sse(steps));
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(after.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));

    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(tandem_bin())
        .arg("acp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_BASE_URL", server.base_url())
        .env("TANDEM_MODEL", "scripted-model")
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )
    .await;
    acp_until_response(&mut lines, 1).await;
    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": root.path(), "mcpServers": []}}),
    )
    .await;
    let created = acp_until_response(&mut lines, 2).await;
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    acp_send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "plan"}]}}),
    )
    .await;
    // The client reads nothing until the turn has ended.
    wait_for_turn_end(home.path(), &session).await;

    let messages = acp_until_response(&mut lines, 3).await;
    assert_eq!(messages.last().unwrap()["result"]["stopReason"], "end_turn");
    let updates: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session.as_str())
        .map(|m| &m["params"]["update"])
        .collect();
    let is_chunk = |u: &Value| u["sessionUpdate"] == "agent_message_chunk";
    let chunk_frames = updates.iter().filter(|u| is_chunk(u)).count();
    // Past 32 unread frames the client is slow: the rest merged.
    assert!(
        chunk_frames <= 40,
        "{chunk_frames} chunk frames for {CHUNKS} chunks: not merged"
    );
    // The text of each step, exactly, on its side of the plan's updates.
    let plan_at = updates
        .iter()
        .position(|u| u["sessionUpdate"] == "tool_call")
        .expect("the plan's tool_call");
    // The last `usage_update` follows the answer's text.
    let last_other = updates
        .iter()
        .rposition(|u| !is_chunk(u) && u["sessionUpdate"] != "usage_update")
        .expect("updates other than chunks");
    let text = |us: &[&Value]| -> String {
        us.iter()
            .filter(|u| is_chunk(u))
            .map(|u| u["content"]["text"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text(&updates[..plan_at]), before.concat());
    assert_eq!(text(&updates[last_other..]), after.concat());
    assert_eq!(
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "session_info_update")
            .count(),
        1
    );
    // Every other update, in the order the turn produced it.
    let others: Vec<String> = updates
        .iter()
        .filter(|u| !is_chunk(u))
        // The title comes when the prompt is queued, which may be before
        // or after the commands that follow `session/new`'s answer.
        .filter(|u| u["sessionUpdate"] != "session_info_update")
        .map(|u| {
            let kind = u["sessionUpdate"].as_str().unwrap();
            match u["status"].as_str() {
                Some(status) => format!("{kind}:{status}"),
                None => kind.to_string(),
            }
        })
        .collect();
    assert_eq!(
        others,
        [
            // Sent after `session/new`'s response, read only now.
            "available_commands_update",
            "usage_update",
            "tool_call:pending",
            "tool_call_update:in_progress",
            "plan",
            "tool_call_update:completed",
            "usage_update"
        ],
        "{others:?}"
    );
}

/// Polls the session log (capped) until the running turn has ended.
pub(crate) async fn wait_for_turn_end(home: &std::path::Path, session: &str) {
    let log = home.join("sessions").join(format!("{session}.jsonl"));
    for _ in 0..3000 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("\"type\":\"turn_end\"") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the turn did not end while the client was not reading");
}
