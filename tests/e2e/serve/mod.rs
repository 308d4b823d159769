//! `tandem serve` through the real binaries: a serve process, WebSocket
//! clients that present (or fail to present) its token, and editors that
//! speak LSP to `tandem lsp --attach`.

mod acp;
mod attach;
mod buffers;
mod cancel;
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

use jsonrpsee::client_transport::ws::{
    EitherStream, HeaderMap, HeaderValue, Url, WsHandshakeError, WsTransportClientBuilder,
};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{json, Value};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::compat::Compat;

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

    /// A client with the right token.
    pub async fn client(&self) -> Ws {
        Ws::connect(
            self.port(),
            &[("authorization", &format!("Bearer {}", self.token()))],
        )
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; serve stderr:\n{}", self.stderr()))
    }

    /// Waits for the process to end by itself.
    pub async fn wait(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("serve did not exit; stderr:\n{}", self.stderr()))
            .expect("wait")
    }
}

type Sender = jsonrpsee::client_transport::ws::Sender<Compat<EitherStream>>;

/// A WebSocket client: raw JSON-RPC, every message recorded in arrival
/// order; the messages inside `tandem/sessionMessage` subscriptions are
/// recorded unwrapped, with their subscription id in `subscription`.
pub struct Ws {
    tx: Sender,
    rx: mpsc::UnboundedReceiver<Value>,
    pub received: Vec<Value>,
    next_id: i64,
}

/// Opens a WebSocket to the serve with these handshake headers.
pub async fn handshake(
    port: u16,
    headers: &[(&str, &str)],
) -> Result<
    (
        Sender,
        jsonrpsee::client_transport::ws::Receiver<Compat<EitherStream>>,
    ),
    WsHandshakeError,
> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    let url = Url::parse(&format!("ws://127.0.0.1:{port}/")).expect("url");
    WsTransportClientBuilder::default()
        .set_headers(map)
        .build(url)
        .await
}

impl Ws {
    pub async fn connect(port: u16, headers: &[(&str, &str)]) -> Result<Ws, WsHandshakeError> {
        let (tx, mut receiver) = handshake(port, headers).await?;
        let (sink, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let text = match receiver.receive().await {
                    Ok(ReceivedMessage::Text(text)) => text,
                    Ok(ReceivedMessage::Bytes(bytes)) => {
                        String::from_utf8_lossy(&bytes).into_owned()
                    }
                    Ok(ReceivedMessage::Pong) => continue,
                    Err(_) => return,
                };
                let mut value: Value = serde_json::from_str(&text).expect("the serve sent JSON");
                if value["method"] == "tandem/sessionMessage" {
                    let subscription = value["params"]["subscription"].clone();
                    value = value["params"]["result"].take();
                    value["subscription"] = subscription;
                }
                if sink.send(value).is_err() {
                    return;
                }
            }
        });
        Ok(Ws {
            tx,
            rx,
            received: Vec::new(),
            next_id: 1,
        })
    }

    pub async fn send(&mut self, message: Value) {
        self.tx
            .send(message.to_string())
            .await
            .expect("send to the serve");
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

    /// Attaches and waits for the end of the replay; returns the number of
    /// updates replayed.
    pub async fn attach(&mut self, session: &str) -> u64 {
        let response = self
            .request("tandem/attachSession", json!({"sessionId": session}))
            .await;
        assert!(
            response.get("result").is_some(),
            "attach failed: {response}"
        );
        let attached = self
            .wait_for(|m| m["method"] == "tandem/attached" && m["params"]["sessionId"] == session)
            .await;
        attached["params"]["replayed"].as_u64().expect("replayed")
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
        let _ = self.tx.close().await;
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
