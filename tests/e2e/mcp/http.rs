//! Streamable-HTTP MCP servers: npm's server-everything in its
//! `streamableHttp` mode and a server on PyPI's Python SDK that tells the
//! headers it received, each started here on a loopback port.

use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{call, config_with, list_servers, mcp_dir, missing, session, tool_result};
use crate::acp::AcpClient;
use crate::support::client::EditorOptions;
use crate::support::model_server::{openai, ModelServer};

/// A server process listening on a loopback port; killed when dropped.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl HttpServer {
    /// npm's everything server over streamable HTTP.
    fn everything() -> Option<HttpServer> {
        let entry =
            mcp_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if !entry.exists() {
            missing("@modelcontextprotocol/server-everything")?;
        }
        let port = free_port();
        let mut command = std::process::Command::new("node");
        command
            .arg(entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string());
        Some(HttpServer::start(command, port))
    }

    /// `tests/mcp/headers_server.py` (the `mcp` package of PyPI).
    fn headers() -> Option<HttpServer> {
        let found = std::process::Command::new("python3")
            .args(["-c", "import mcp.server.mcpserver"])
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            missing("the Python MCP SDK (`mcp`, installed with mcp-server-time)")?;
        }
        let port = free_port();
        let mut command = std::process::Command::new("python3");
        command
            .arg(mcp_dir().join("headers_server.py"))
            .arg(port.to_string());
        Some(HttpServer::start(command, port))
    }

    fn start(mut command: std::process::Command, port: u16) -> HttpServer {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP server");
        // Node and uvicorn start slowly on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the MCP server never listened on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn http_servers_are_called_and_a_headers_value_comes_from_the_named_variable() {
    let (Some(everything), Some(headers)) = (HttpServer::everything(), HttpServer::headers())
    else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        (
            "c_echo",
            "mcp__everything__echo",
            &json!({"message": "over http"}).to_string(),
        ),
        (
            "c_header",
            "mcp__headers__header",
            &json!({"name": "X-Tandem-Team"}).to_string(),
        ),
    ]));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({
            "everything": {"url": everything.url, "startup_timeout_sec": 60},
            "headers": {
                "url": headers.url,
                "headers": {"X-Tandem-Team": "team ${TANDEM_TEST_MCP_TEAM}"},
                "startup_timeout_sec": 60,
            },
        }),
    );
    let options = EditorOptions {
        env: vec![("TANDEM_TEST_MCP_TEAM".into(), "core".into())],
        ..Default::default()
    };
    let (mut editor, session) = session(root.path(), config, options).await;
    let (receipt, _) = editor.prompt(&session, "echo and tell the header").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    assert_eq!(tool_result(&requests[1], "c_echo"), "Echo: over http");
    // The text, then the structured content the Python SDK adds, as JSON.
    let header = tool_result(&requests[1], "c_header");
    assert_eq!(header.lines().next(), Some("team core"), "{header}");
    let servers = list_servers(&mut editor, &session).await;
    let states: Vec<(&Value, &Value)> = servers
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (&s["name"], &s["state"]))
        .collect();
    assert_eq!(
        states,
        [
            (&json!("everything"), &json!("ready")),
            (&json!("headers"), &json!("ready"))
        ],
        "{servers}"
    );
}

#[tokio::test]
async fn a_header_naming_an_unset_variable_fails_its_server_naming_the_variable() {
    let server = ModelServer::start().await;
    server.push(openai::text(["no tools, still answering"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({"web": {
            "url": format!("http://127.0.0.1:{}/mcp", free_port()),
            "headers": {"Authorization": "TANDEM_TEST_MCP_UNSET_TOKEN"},
        }}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let (receipt, _) = editor.prompt(&session, "hello").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let servers = list_servers(&mut editor, &session).await;
    assert_eq!(servers[0]["state"], "failed", "{servers}");
    let error = servers[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("`Authorization`")
            && error.contains("`TANDEM_TEST_MCP_UNSET_TOKEN`")
            && error.contains("not set"),
        "{error}"
    );
}

#[tokio::test]
async fn an_acp_clients_http_server_is_called_with_the_clients_literal_headers() {
    let Some(headers) = HttpServer::headers() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call(
        "c1",
        "mcp__web__header",
        json!({"name": "X-Client-Token"}),
    ));
    server.push(openai::text(["ok"]));
    let mut acp = AcpClient::spawn(&["acp"], &server).await;
    let (init, _) = acp
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": false}),
        "{init}"
    );
    let cwd = tempfile::tempdir().unwrap();
    let (new, _) = acp
        .request(
            "session/new",
            json!({"cwd": cwd.path(), "mcpServers": [{
                "type": "http", "name": "web", "url": headers.url,
                "headers": [{"name": "X-Client-Token", "value": "from-the-client"}],
            }]}),
            "",
        )
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let (answer, _) = acp
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "token?"}]}),
            "allow_once",
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let header = tool_result(&server.requests()[1], "c1");
    assert_eq!(header.lines().next(), Some("from-the-client"), "{header}");
}
