//! The shim's stdout: no frame is split over two `write(2)`s, header and
//! body together, so the editor is never woken for half a frame (Rust's
//! line-buffered `Stdout` wrote the header up to its blank line, then the
//! body at the flush). The shim carries bytes: what it read from the serve
//! in one read (the serve writes each frame in one write) goes out in one
//! write, so a record holds one or more whole frames.
//!
//! The shim's stdout is a `SOCK_SEQPACKET` socket here: each write arrives
//! as one record, so a frame split over two writes shows as two records.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{ChildStdin, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::StopOnDrop;
use crate::support::client::{file_uri, frame, tandem_bin};
use crate::support::model_server::openai::{delta, ending};
use crate::support::model_server::{ModelServer, Reply};

/// A connected pair of `SOCK_SEQPACKET` Unix sockets.
fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "socketpair: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are fresh and owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Reads records (one per write of the shim) until the socket closes.
fn read_records(fd: OwnedFd, tx: mpsc::UnboundedSender<Vec<u8>>) {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 || tx.send(buf[..n as usize].to_vec()).is_err() {
            return;
        }
    }
}

/// The bodies of a record holding one or more whole LSP frames.
fn whole_frames(record: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(record);
    let mut rest: &str = &text;
    let mut bodies = Vec::new();
    while !rest.is_empty() {
        let (header, after) = rest
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("a record without a whole header: {text:?}"));
        let length: usize = header
            .strip_prefix("Content-Length: ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("not an LSP header: {header:?}"));
        assert!(
            after.len() >= length,
            "a record that ends inside a frame: {text:?}"
        );
        let (body, next) = after.split_at(length);
        bodies.push(serde_json::from_str(body).expect("a JSON body"));
        rest = next;
    }
    bodies
}

/// An editor whose stdout from the shim is a `SOCK_SEQPACKET` socket.
struct Editor {
    stdin: ChildStdin,
    records: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Every message read so far, in order.
    received: Vec<Value>,
}

impl Editor {
    fn send(&mut self, message: Value) {
        self.stdin
            .write_all(&frame(message.to_string().as_bytes()))
            .expect("write to the shim");
    }

    /// Reads whole frames until the answer to request `id`.
    async fn answer(&mut self, id: i64) -> Value {
        loop {
            let record = tokio::time::timeout(Duration::from_secs(30), self.records.recv())
                .await
                .expect("the shim wrote nothing for 30 s")
                .expect("the shim closed its stdout");
            let mut answer = None;
            for message in whole_frames(&record) {
                if message["id"] == id {
                    answer = Some(message.clone());
                }
                self.received.push(message);
            }
            if let Some(answer) = answer {
                return answer;
            }
        }
    }
}

#[tokio::test]
async fn no_frame_reaches_the_editor_split_over_two_writes() {
    let model = ModelServer::start().await;
    let pieces: Vec<String> = (0..20).map(|i| format!("p{i} ")).collect();
    let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(
        pieces
            .iter()
            .map(|piece| delta(json!({ "content": piece }))),
    );
    steps.extend(ending("stop"));
    model.push(Reply::Sse(steps));
    let home = tempfile::tempdir().unwrap();
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();

    let (ours, theirs) = seqpacket_pair();
    let mut child = std::process::Command::new(tandem_bin())
        .args(["lsp", "--attach"])
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .env_remove("TANDEM_BASE_URL")
        .env_remove("TANDEM_MODEL")
        .env_remove("TANDEM_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(theirs))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tandem lsp --attach");
    let (tx, records) = mpsc::unbounded_channel();
    std::thread::spawn(move || read_records(ours, tx));
    let mut editor = Editor {
        stdin: child.stdin.take().expect("stdin"),
        records,
        received: Vec::new(),
    };

    let uri = file_uri(workspace.path());
    editor.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": uri, "capabilities": {}}}));
    editor.answer(1).await;
    editor.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    editor.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tandem/newSession",
        "params": {"config": model.session_config()}}),
    );
    let session = editor.answer(2).await["result"]["sessionId"].clone();
    assert!(session.is_string(), "{:?}", editor.received);
    editor.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}}));
    let receipt = editor.answer(3).await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");

    let streamed: String = editor
        .received
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(streamed, pieces.concat());
    editor.send(json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}));
    editor.answer(4).await;
    editor.send(json!({"jsonrpc": "2.0", "method": "exit"}));
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .expect("wait");
    assert!(status.success());
}
