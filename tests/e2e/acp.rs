//! The ACP frontend (`tandem acp`, and `tandem` auto-detecting `{`):
//! newline-delimited JSON-RPC through the real binary.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::client::{tandem_bin, WAIT};
use crate::support::model_server::{openai, ModelServer};

pub(crate) struct AcpClient {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: i64,
    _home: std::sync::Arc<tempfile::TempDir>,
}

impl AcpClient {
    pub(crate) async fn spawn(args: &[&str], server: &ModelServer) -> AcpClient {
        let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
        AcpClient::spawn_in(args, server, home).await
    }

    /// With `home` as its `$TANDEM_HOME` (shared with other clients).
    pub(crate) async fn spawn_in(
        args: &[&str],
        server: &ModelServer,
        home: std::sync::Arc<tempfile::TempDir>,
    ) -> AcpClient {
        AcpClient::spawn_logging(args, server, home, "warn", Stdio::null(), &[]).await
    }

    /// With `TANDEM_LOG` set to `filter`, its stderr to `stderr` and
    /// `env` added to its environment.
    pub(crate) async fn spawn_logging(
        args: &[&str],
        server: &ModelServer,
        home: std::sync::Arc<tempfile::TempDir>,
        filter: &str,
        stderr: impl Into<Stdio>,
        env: &[(&str, &str)],
    ) -> AcpClient {
        let mut child = tokio::process::Command::new(tandem_bin())
            .args(args)
            .envs(env.iter().copied())
            .env("TANDEM_HOME", home.path())
            .env("TANDEM_BASE_URL", server.base_url())
            .env("TANDEM_MODEL", "scripted-model")
            .env("TANDEM_LOG", filter)
            .env("TANDEM_FSYNC", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        AcpClient {
            _child: child,
            stdin,
            lines,
            next_id: 1,
            _home: home,
        }
    }

    /// Its `$TANDEM_HOME`.
    pub(crate) fn home(&self) -> &std::path::Path {
        self._home.path()
    }

    /// Its `$TANDEM_HOME`, to share.
    pub(crate) fn shared_home(&self) -> std::sync::Arc<tempfile::TempDir> {
        self._home.clone()
    }

    /// Kills the process (a window reload) and waits for it to be gone.
    pub(crate) async fn kill(&mut self) {
        self._child.kill().await.unwrap();
    }

    /// Sends a request without waiting for its answer; returns its id.
    pub(crate) async fn start_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Reads messages until `done` holds for one; returns them all.
    pub(crate) async fn read_until(&mut self, mut done: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let stop = done(&message);
            seen.push(message);
            if stop {
                return seen;
            }
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("no line from tandem acp")
            .unwrap()
            .expect("stdout closed");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// `session/new` in `cwd`: its answer and the session id.
    pub(crate) async fn new_session(&mut self, cwd: &std::path::Path) -> (Value, String) {
        let (new, _) = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}), "")
            .await;
        let session = new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId: {new}"))
            .to_string();
        (new, session)
    }

    /// Sends a request; returns its response and everything before it,
    /// answering permission requests with `answer`.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        params: Value,
        answer: &str,
    ) -> (Value, Vec<Value>) {
        self.request_answering(method, params, |message| {
            (message["method"] == "session/request_permission")
                .then(|| json!({"outcome": {"outcome": "selected", "optionId": answer}}))
        })
        .await
    }

    /// Sends a request; returns its response and everything before it. A
    /// request of tandem's (fs, terminal, permission, …) is answered with
    /// the result `answer` gives for it; one it gives none for stays open.
    pub(crate) async fn request_answering(
        &mut self,
        method: &str,
        params: Value,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (message, before);
            }
            let result = message.get("id").and_then(|_| answer(&message));
            if let Some(result) = result {
                let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                before.push(message);
                self.send(reply).await;
                continue;
            }
            before.push(message);
        }
    }
}

/// The answer text streamed in `session/update` `agent_message_chunk`s.
pub(crate) fn agent_text_of(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

pub(crate) fn update_kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn an_acp_client_runs_a_turn_with_a_permission_prompt() {
    let server = ModelServer::start().await;
    permission_turn(&server);
    let root = tempfile::tempdir().unwrap();
    // No subcommand: the first byte `{` picks ACP.
    let mut client = AcpClient::spawn(&[], &server).await;

    let (init, _) = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);

    let (_, session) = client.new_session(root.path()).await;
    a_turn_with_a_permission_prompt(&mut client, root.path(), &session).await;
}

/// The prompt of a session whose model was given [`permission_turn`]'s
/// replies: the client allows the command once; the command ran, the
/// permission named its call, the turn's updates came in order and none of
/// tandem's own update kinds reached the ACP client. The slash commands
/// may lead the updates (they follow `session/new`'s answer), once.
pub(crate) async fn a_turn_with_a_permission_prompt(
    client: &mut AcpClient,
    root: &std::path::Path,
    session: &str,
) {
    let (response, before) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "make a file"}]}),
            "allow_once",
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(root.join("made").exists(), "the allowed command ran");
    let permission = before
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .expect("a permission request");
    assert_eq!(permission["params"]["sessionId"], session);
    assert_eq!(permission["params"]["toolCall"]["toolCallId"], "c1");
    let mut kinds = update_kinds(&before);
    // The commands that follow session/new's answer may be read here, before
    // or after the title the prompt gives the session.
    if let Some(at) = kinds
        .iter()
        .take(2)
        .position(|k| k == "available_commands_update")
    {
        kinds.remove(at);
    }
    assert_eq!(kinds[0], "session_info_update", "{kinds:?}");
    // The user's own prompt is not echoed back during session/prompt.
    assert!(
        !kinds.iter().any(|k| k == "user_message_chunk"),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"tool_call".to_string()) && kinds.contains(&"tool_call_update".to_string())
    );
    assert!(
        !kinds.iter().any(|k| k == "turn_end"
            || k == "usage"
            || k == "input_status"
            || k == "available_commands_update"),
        "{kinds:?}"
    );
    assert_eq!(agent_text_of(&before), "Made it.");
}

/// The model's replies for [`a_turn_with_a_permission_prompt`]: a command,
/// then the answer.
pub(crate) fn permission_turn(server: &ModelServer) {
    server.push(openai::tool_calls(&[(
        "c1",
        "exec_command",
        r#"{"cmd":"touch made"}"#,
    )]));
    server.push(openai::text(["Made ", "it."]));
}

#[tokio::test]
async fn a_notification_sent_with_an_id_is_answered() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    let (new, _) = client
        .request("session/new", json!({"cwd": root.path()}), "")
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let (reply, _) = client
        .request("session/cancel", json!({"sessionId": session}), "")
        .await;
    assert_eq!(reply["result"], json!({}), "{reply}");
    let (reply, _) = client
        .request("$/cancel_request", json!({"requestId": 9}), "")
        .await;
    assert_eq!(reply["result"], json!({}), "{reply}");
}

#[tokio::test]
async fn acp_errors_are_specific_and_the_agent_keeps_serving() {
    let server = ModelServer::start().await;
    server.push(openai::error(401, "bad key"));
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    client.send(json!("not an object")).await;
    let reply = client.next().await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    client.stdin.write_all(b"{broken json\n").await.unwrap();
    let reply = client.next().await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let (reply, _) = client.request("no/such/method", json!({}), "").await;
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
    let (reply, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
            "",
        )
        .await;
    assert_eq!(reply["error"]["code"], -32001, "{reply}");
    let (new, _) = client
        .request("session/new", json!({"cwd": root.path()}), "")
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let (reply, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}),
            "",
        )
        .await;
    assert_eq!(
        reply["error"]["code"], -32603,
        "a failed turn is an error in ACP: {reply}"
    );
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad key"),
        "{reply}"
    );
}

#[tokio::test]
async fn a_line_that_is_not_utf8_is_a_parse_error_and_the_agent_keeps_serving() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    // Invalid UTF-8 inside a string and as a bare byte: both were once
    // taken as the end of input.
    client
        .stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":\"\xff\xfe\"}\n",
        )
        .await
        .unwrap();
    let reply = client.next().await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
    client.stdin.write_all(b"\xc3\x28\n").await.unwrap();
    let reply = client.next().await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let (init, _) = client
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (new, _) = client
        .request("session/new", json!({"cwd": root.path()}), "")
        .await;
    assert!(new["result"]["sessionId"].is_string(), "{new}");
}
