//! An editor for tests: spawns the real `tandem` binary and speaks LSP
//! frames to it over its stdio, recording every message it writes in order.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long any single wait may take before the test fails instead of
/// hanging. Generous: CI machines are slow; nothing waits for it to pass.
pub const WAIT: Duration = Duration::from_secs(30);

/// A message from the daemon, with its place in the order of arrival.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub index: usize,
    pub message: Value,
}

/// Answers the daemon's requests to the editor (method, params) -> result.
pub type RequestHandler = Box<dyn FnMut(&str, &Value) -> Option<Value> + Send>;

pub struct Editor {
    child: Child,
    stdin: ChildStdin,
    incoming: mpsc::UnboundedReceiver<Value>,
    /// Everything received so far, in order.
    pub received: Vec<Value>,
    next_id: i64,
    pub home: std::sync::Arc<tempfile::TempDir>,
    handler: Option<RequestHandler>,
    /// Methods whose requests from the daemon are left unanswered.
    held: Vec<String>,
}

/// The path of the built binary under test.
pub fn tandem_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tandem"))
}

pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads LSP frames from the daemon's stdout (or a serve's tunnel).
/// Strict: anything that is not a well-formed frame fails the test (stdout
/// carries frames only).
pub(crate) async fn read_frames(
    mut stdout: impl tokio::io::AsyncRead + Unpin,
    tx: mpsc::UnboundedSender<Value>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Parse as many frames as the buffer holds.
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let header = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = header
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| {
                    panic!("daemon wrote a frame without Content-Length: {header:?}")
                });
            if buf.len() < end + 4 + len {
                break;
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            let value: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
                panic!(
                    "daemon wrote a non-JSON body ({e}): {}",
                    String::from_utf8_lossy(&body)
                )
            });
            if tx.send(value).is_err() {
                return;
            }
        }
        match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

pub struct EditorOptions {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
    /// `$TANDEM_HOME`: a fresh temp dir unless given (a restarted daemon
    /// gets the home of the one before).
    pub home: Option<std::sync::Arc<tempfile::TempDir>>,
}

impl Default for EditorOptions {
    fn default() -> Self {
        EditorOptions {
            env: Vec::new(),
            args: vec!["lsp".to_string()],
            home: None,
        }
    }
}

impl Editor {
    pub async fn spawn() -> Editor {
        Editor::spawn_with(EditorOptions::default()).await
    }

    pub async fn spawn_with(options: EditorOptions) -> Editor {
        let home = options
            .home
            .clone()
            .unwrap_or_else(|| std::sync::Arc::new(tempfile::tempdir().expect("temp home")));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.path().join("stderr.log"))
            .expect("stderr log");
        let mut command = Command::new(tandem_bin());
        command
            .args(&options.args)
            .env("TANDEM_HOME", home.path())
            .env("TANDEM_LOG", "debug")
            .env("TANDEM_FSYNC", "0")
            .env_remove("TANDEM_BASE_URL")
            .env_remove("TANDEM_MODEL")
            .env_remove("TANDEM_PROVIDER")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        for (k, v) in &options.env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn tandem");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(read_frames(stdout, tx));
        Editor {
            child,
            stdin,
            incoming: rx,
            received: Vec::new(),
            next_id: 1,
            home,
            handler: None,
            held: Vec::new(),
        }
    }

    /// Sets how the editor answers the daemon's requests.
    pub fn on_request(
        &mut self,
        handler: impl FnMut(&str, &Value) -> Option<Value> + Send + 'static,
    ) {
        self.handler = Some(Box::new(handler));
    }

    /// Leaves the daemon's requests of `method` unanswered, as a user who
    /// has not decided yet would (they are still recorded in `received`).
    pub fn hold_requests(&mut self, method: &str) {
        self.held.push(method.to_string());
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.path().join("stderr.log")).unwrap_or_default()
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.home.path().join("sessions")
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.expect("write to daemon");
        self.stdin.flush().await.expect("flush to daemon");
    }

    pub async fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).expect("serialize");
        self.send_raw(&frame(&body)).await;
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Sends a request without waiting; returns its id.
    pub async fn start_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Receives the next message, answering daemon requests on the way.
    pub async fn next_message(&mut self) -> Value {
        let message = tokio::time::timeout(WAIT, self.incoming.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no message from the daemon within {WAIT:?}; stderr:\n{}",
                    self.stderr()
                )
            })
            .unwrap_or_else(|| panic!("daemon closed stdout; stderr:\n{}", self.stderr()));
        self.received.push(message.clone());
        if message.get("method").is_some() && message.get("id").is_some() {
            let method = message["method"].as_str().unwrap_or_default().to_string();
            if self.held.contains(&method) {
                return message;
            }
            let reply = match self
                .handler
                .as_mut()
                .and_then(|h| h(&method, &message["params"]))
            {
                Some(result) => json!({"jsonrpc": "2.0", "id": message["id"], "result": result}),
                None => json!({"jsonrpc": "2.0", "id": message["id"],
                               "error": {"code": -32601, "message": format!("method not found: {method}")}}),
            };
            self.send(&reply).await;
        }
        message
    }

    /// Waits for the response to request `id`; returns it and the index in
    /// `received` where it arrived. A response that already arrived (while
    /// waiting for another one) is returned at once, so responses to
    /// concurrent requests can be awaited in any order.
    pub async fn response(&mut self, id: i64) -> (Value, usize) {
        let is_response = |m: &Value| m.get("id") == Some(&json!(id)) && m.get("method").is_none();
        if let Some(at) = self.received.iter().position(is_response) {
            return (self.received[at].clone(), at);
        }
        loop {
            let message = self.next_message().await;
            if is_response(&message) {
                return (message, self.received.len() - 1);
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        self.response(id).await.0
    }

    /// Waits until a notification with `method` arrives that `pred` accepts.
    pub async fn wait_notification(
        &mut self,
        method: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        loop {
            let message = self.next_message().await;
            if message.get("method").and_then(Value::as_str) == Some(method)
                && message.get("id").is_none()
                && pred(&message["params"])
            {
                return message;
            }
        }
    }

    pub async fn initialize(&mut self, root: &Path) -> Value {
        self.initialize_with(root, json!({})).await
    }

    pub async fn initialize_with(&mut self, root: &Path, extra: Value) -> Value {
        let uri = file_uri(root);
        let mut params = json!({
            "processId": null,
            "rootUri": uri,
            "capabilities": {},
            "workspaceFolders": [{"uri": uri, "name": "root"}],
        });
        merge(&mut params, extra);
        let response = self.request("initialize", params).await;
        assert!(
            response.get("result").is_some(),
            "initialize failed: {response}"
        );
        self.notify("initialized", json!({})).await;
        response
    }

    pub async fn new_session(&mut self, config: Value) -> String {
        let response = self
            .request("tandem/newSession", json!({"config": config}))
            .await;
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("newSession failed: {response}"))
            .to_string()
    }

    /// Sends a text prompt and waits for its receipt. Returns the receipt
    /// and every `tandem/update` params received before it.
    pub async fn prompt(&mut self, session: &str, text: &str) -> (Value, Vec<Value>) {
        let start = self.received.len();
        let id = self
            .start_request(
                "tandem/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        let (response, at) = self.response(id).await;
        let updates = self.received[start..at]
            .iter()
            .filter(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"].clone())
            .collect();
        (response, updates)
    }

    /// Sends a text prompt without waiting for its receipt; returns the
    /// request id (for [`Editor::response`] or `$/cancelRequest`).
    pub async fn start_prompt(&mut self, session: &str, text: &str) -> i64 {
        self.start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Waits for a `tandem/update` of `session` whose `update` object `pred`
    /// accepts; returns the notification's params.
    pub async fn wait_update(&mut self, session: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_notification("tandem/update", |params| {
            params["sessionId"] == session && pred(&params["update"])
        })
        .await["params"]
            .clone()
    }

    /// Writes several messages with one write, so the daemon reads them
    /// back to back (nothing of ours runs in between).
    pub async fn send_together(&mut self, messages: &[Value]) {
        let mut bytes = Vec::new();
        for message in messages {
            bytes.extend(frame(&serde_json::to_vec(message).expect("serialize")));
        }
        self.send_raw(&bytes).await;
    }

    /// Every `tandem/update` params of `session` received so far, in order.
    pub fn updates_of(&self, session: &str) -> Vec<Value> {
        self.received
            .iter()
            .filter(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"].clone())
            .collect()
    }

    pub async fn open(&mut self, path: &Path, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": file_uri(path), "languageId": "rust", "version": 1, "text": text}}),
        )
        .await;
    }

    pub async fn shutdown_and_exit(mut self) -> std::process::ExitStatus {
        let response = self.request("shutdown", Value::Null).await;
        assert!(
            response.get("result").is_some(),
            "shutdown failed: {response}"
        );
        self.notify("exit", Value::Null).await;
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("daemon did not exit")
            .expect("wait")
    }

    /// SIGKILLs the daemon (no chance to flush or clean up) and returns its
    /// home for the next one.
    pub async fn kill_9(self) -> std::sync::Arc<tempfile::TempDir> {
        let Editor {
            mut child, home, ..
        } = self;
        child.start_kill().expect("kill -9");
        let _ = tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("killed daemon did not end");
        home
    }

    /// Whether the daemon process is still running (not exited, not
    /// killed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id of the daemon.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("daemon running")
    }

    /// Closes stdin, waits for the process to end, and returns everything
    /// it wrote that was not read yet.
    pub async fn close_stdin_collect(self) -> (std::process::ExitStatus, Vec<Value>) {
        let Editor {
            mut child,
            stdin,
            mut incoming,
            ..
        } = self;
        drop(stdin);
        let status = tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("daemon did not exit on EOF")
            .expect("wait");
        let mut rest = Vec::new();
        while let Ok(Some(message)) = tokio::time::timeout(WAIT, incoming.recv()).await {
            rest.push(message);
        }
        (status, rest)
    }

    /// Closes stdin and waits for the process to end.
    pub async fn close_stdin(self) -> std::process::ExitStatus {
        let Editor {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("daemon did not exit on EOF")
            .expect("wait")
    }

    /// The session's log lines (header first).
    pub fn log_lines(&self, session: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.sessions_dir().join(format!("{session}.jsonl")))
            .unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line ({e}): {l}")))
            .collect()
    }
}

pub fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}

/// The text of an update stream's `agent_message_chunk`s, concatenated.
pub fn agent_text(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|u| {
            u["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The `sessionUpdate` kinds of an update stream, in order.
pub fn update_kinds(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .map(|u| {
            u["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}
