//! `tandem serve` through the real binaries: a serve process, WebSocket
//! clients that present (or fail to present) its token, and editors that
//! speak LSP to `tandem lsp --attach`.

mod acp;
mod attach;
mod attach_follow;
mod buffers;
mod cancel;
mod control;
mod durable;
mod images;
mod instructions;
mod interleave;
mod ordering;
mod progress;
mod requests;
mod security;
mod shim;
mod shim_link;
mod shim_stdout;
mod slow_window;
mod socket;
mod tasks;
mod two_windows;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::support::client::{file_uri, tandem_bin, EditorOptions, WAIT};

/// A `tandem serve` child with its own `$TANDEM_HOME`.
pub struct Serve {
    pub child: Child,
    pub home: Arc<tempfile::TempDir>,
    pub info: Value,
}

/// Polls `done` every few milliseconds until it holds, failing the test
/// after [`WAIT`] with `what`.
pub async fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

pub fn serve_command(home: &Path) -> Command {
    let mut command = Command::new(tandem_bin());
    command
        .env("TANDEM_HOME", home)
        .env("TANDEM_LOG", "debug")
        .env("TANDEM_FSYNC", "0")
        .env_remove("TANDEM_BASE_URL")
        .env_remove("TANDEM_MODEL")
        .env_remove("TANDEM_PROVIDER");
    command
}

pub fn read_serve_json(home: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(home.join("serve.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// `tandem serve` on `home` with `TANDEM_LOG` set to `filter`, its
/// stderr in the file `stderr`, killed when dropped.
pub fn spawn_serve(home: &Path, stderr: &Path, filter: &str) -> tokio::process::Child {
    let stderr = std::fs::File::create(stderr).expect("stderr file");
    serve_command(home)
        .env("TANDEM_LOG", filter)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tandem serve")
}

impl Serve {
    /// Starts a serve in a fresh home (with `config_toml` as its
    /// config.toml) and waits for its serve.json.
    pub async fn start_with(config_toml: &str) -> Serve {
        let home = Arc::new(tempfile::tempdir().expect("temp home"));
        std::fs::write(home.path().join("config.toml"), config_toml).expect("config.toml");
        Serve::start_in(home).await
    }

    pub async fn start() -> Serve {
        Serve::start_with("").await
    }

    pub async fn start_in(home: Arc<tempfile::TempDir>) -> Serve {
        Serve::start_logging(home, "debug").await
    }

    /// With `TANDEM_LOG` set to `filter`.
    pub async fn start_logging(home: Arc<tempfile::TempDir>, filter: &str) -> Serve {
        let child = spawn_serve(home.path(), &home.path().join("serve.stderr"), filter);
        let path = home.path().to_path_buf();
        poll_until("serve.json", || read_serve_json(&path).is_some()).await;
        let info = read_serve_json(home.path()).expect("serve.json");
        Serve { child, home, info }
    }

    pub fn path(&self) -> PathBuf {
        self.home.path().to_path_buf()
    }

    pub fn token(&self) -> String {
        self.info["token"].as_str().expect("token").to_string()
    }

    pub fn port(&self) -> u16 {
        self.info["port"].as_u64().expect("port") as u16
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.path().join("serve.stderr")).unwrap_or_default()
    }

    /// An editor's connection (an LSP tunnel) with the right token.
    pub async fn client(&self) -> Ws {
        Ws::connect(self.port(), &self.token()).await
    }

    /// Waits for the process to end by itself.
    pub async fn wait(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("serve did not exit; stderr:\n{}", self.stderr()))
            .expect("wait")
    }
}

/// An editor's connection to the serve without a shim: the tunnel
/// (`GET /lsp` with the token and `Upgrade: tandem`), then LSP's frames
/// both ways, as the shim carries them; every message recorded in arrival
/// order.
pub struct Ws {
    tx: tokio::net::tcp::OwnedWriteHalf,
    rx: mpsc::UnboundedReceiver<Value>,
    pub received: Vec<Value>,
    next_id: i64,
}

/// Opens a tunnel (`path`: `/lsp` or `/acp`) with these request headers:
/// the connection after the `101`, with what followed it; or the status
/// the serve answered instead.
pub async fn tunnel(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(tokio::net::TcpStream, Vec<u8>), u16> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the serve");
    upgrade(stream, &format!("127.0.0.1:{port}"), path, headers).await
}

/// Sends a tunnel request (`Host: host`) on `stream` and reads the answer:
/// the stream after the `101`, with what followed it; or the status.
pub async fn upgrade<S>(
    mut stream: S,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(S, Vec<u8>), u16>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.expect("read the answer");
        assert!(n > 0, "the serve closed before answering: {head:?}");
        head.extend_from_slice(&chunk[..n]);
    };
    let status: u16 = String::from_utf8_lossy(&head[..end])
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("an HTTP status");
    if status != 101 {
        return Err(status);
    }
    Ok((stream, head.split_off(end)))
}

/// The headers of a client that has the token.
pub fn upgrade_headers(token: &str) -> [(&'static str, String); 3] {
    [
        ("Authorization", format!("Bearer {token}")),
        ("Connection", "Upgrade".to_string()),
        ("Upgrade", "tandem".to_string()),
    ]
}

impl Ws {
    /// An LSP tunnel with the token.
    pub async fn connect(port: u16, token: &str) -> Ws {
        let headers = upgrade_headers(token);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let (stream, leftover) = tunnel(port, "/lsp", &headers)
            .await
            .unwrap_or_else(|status| panic!("the serve answered {status}"));
        let (read, tx) = stream.into_split();
        let (sink, rx) = mpsc::unbounded_channel();
        let input = std::io::Cursor::new(leftover).chain(read);
        tokio::spawn(crate::support::client::read_frames(input, sink));
        Ws {
            tx,
            rx,
            received: Vec::new(),
            next_id: 1,
        }
    }

    pub async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        let bytes = crate::support::client::frame(message.to_string().as_bytes());
        self.tx.write_all(&bytes).await.expect("send to the serve");
    }

    /// Answers the serve's request `id` (a permission request, a question).
    pub async fn answer(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    pub async fn start_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub async fn next_message(&mut self) -> Value {
        let message = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("no message from the serve in time")
            .expect("the serve closed the connection");
        self.received.push(message.clone());
        message
    }

    /// The answer to request `id` (already received or the next to come).
    pub async fn response(&mut self, id: i64) -> Value {
        let is = |m: &Value| m["id"] == json!(id) && m.get("method").is_none();
        if let Some(found) = self.received.iter().find(|m| is(m)) {
            return found.clone();
        }
        loop {
            let message = self.next_message().await;
            if is(&message) {
                return message;
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        self.response(id).await
    }

    /// Waits for a message `pred` accepts.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.received.iter().find(|m| pred(m)) {
            return found.clone();
        }
        loop {
            let message = self.next_message().await;
            if pred(&message) {
                return message;
            }
        }
    }

    pub async fn initialize(&mut self, root: &Path, capabilities: Value) -> Value {
        let uri = file_uri(root);
        let response = self
            .request(
                "initialize",
                json!({"processId": null, "rootUri": uri, "capabilities": capabilities,
                       "workspaceFolders": [{"uri": uri, "name": "root"}]}),
            )
            .await;
        assert!(
            response.get("result").is_some(),
            "initialize failed: {response}"
        );
        response
    }

    pub async fn new_session(&mut self, config: Value) -> String {
        let mode = config["approval"]["mode"].as_str().unwrap_or("review");
        let response = self
            .request("tandem/newSession", json!({"config": config}))
            .await;
        assert_eq!(response["result"]["mode"], mode, "{response}");
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("newSession failed: {response}"))
            .to_string()
    }

    /// Loads (follows) a session: its history is replayed before the
    /// answer; returns the number of updates replayed.
    pub async fn attach(&mut self, session: &str) -> u64 {
        let response = self
            .request("tandem/loadSession", json!({"sessionId": session}))
            .await;
        response["result"]["replayed"]
            .as_u64()
            .unwrap_or_else(|| panic!("load failed: {response}"))
    }

    pub async fn start_prompt(&mut self, session: &str, text: &str) -> i64 {
        self.start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// The `tandem/update` params received so far for `session`.
    pub fn updates_of(&self, session: &str) -> Vec<Value> {
        self.received
            .iter()
            .filter(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"].clone())
            .collect()
    }

    pub async fn wait_update(&mut self, session: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_for(|m| {
            m["method"] == "tandem/update"
                && m["params"]["sessionId"] == session
                && pred(&m["params"]["update"])
        })
        .await
    }

    pub async fn close(mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = self.tx.shutdown().await;
    }
}

/// The session's log lines (header first).
pub fn log_lines(home: &Path, session: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(home.join("sessions").join(format!("{session}.jsonl")))
        .unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect()
}

/// Stops the serve a shim started, whatever the test did.
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new(tandem_bin())
            .args(["serve", "--stop"])
            .env("TANDEM_HOME", &self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// How to spawn an editor's `tandem lsp --attach` on `home`.
pub fn attach_options(home: &Arc<tempfile::TempDir>) -> EditorOptions {
    EditorOptions {
        args: vec!["lsp".into(), "--attach".into()],
        home: Some(home.clone()),
        ..EditorOptions::default()
    }
}
