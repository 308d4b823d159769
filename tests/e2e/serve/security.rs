//! Who may connect to a serve, and what it leaves on disk. Every check
//! holds for the three doors of the port: the editors' tunnels (`GET /lsp`
//! and `GET /acp` with `Upgrade: tandem`) and the control WebSocket (`/`).

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::control::{handshake, refused_with, Control};
use super::{poll_until, read_serve_json, serve_command, tunnel, Serve};
use crate::support::client::WAIT;

const TUNNELS: [&str; 2] = ["/lsp", "/acp"];

/// The status a tunnel request with the token `bearer` (none: no
/// `Authorization`) and `extra` headers got; `None` for `101`.
async fn tunnel_refusal(
    port: u16,
    path: &str,
    authorization: Option<&str>,
    extra: &[(&str, &str)],
) -> Option<u16> {
    let mut headers = vec![("Connection", "Upgrade"), ("Upgrade", "tandem")];
    if let Some(value) = authorization {
        headers.push(("Authorization", value));
    }
    headers.extend_from_slice(extra);
    tunnel(port, path, &headers).await.err()
}

/// The status of each door (`/lsp`, `/acp`, the control WebSocket) for a
/// client presenting `authorization` and `extra` headers.
async fn doors(port: u16, authorization: Option<&str>, extra: &[(&str, &str)]) -> Vec<Option<u16>> {
    let mut statuses = Vec::new();
    for path in TUNNELS {
        statuses.push(tunnel_refusal(port, path, authorization, extra).await);
    }
    let mut ws: Vec<(&str, &str)> = extra.to_vec();
    if let Some(value) = authorization {
        ws.push(("authorization", value));
    }
    statuses.push(refused_with(handshake(port, &ws).await));
    statuses
}

/// The whole answer (head and body) to a request of these header lines.
async fn raw_answer(port: u16, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("the serve closes a refused connection")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_handshake_without_the_token_is_refused_with_401() {
    let serve = Serve::start().await;
    let port = serve.port();
    assert_eq!(doors(port, None, &[]).await, [Some(401); 3]);
    assert_eq!(doors(port, Some("Bearer"), &[]).await, [Some(401); 3]);
    let basic = format!("Basic {}", serve.token());
    assert_eq!(doors(port, Some(&basic), &[]).await, [Some(401); 3]);
    // The tunnels' 401 says how to authenticate, and why.
    for path in TUNNELS {
        let answer = raw_answer(
            port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tandem\r\n\r\n"
            ),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
        assert!(
            answer.contains("\r\nWWW-Authenticate: Bearer\r\n"),
            "{answer}"
        );
        assert!(answer.contains("serve.json"), "{answer}");
    }
}

#[tokio::test]
async fn a_tunnel_without_upgrade_tandem_is_answered_426_and_closed() {
    let serve = Serve::start().await;
    let bearer = format!("Bearer {}", serve.token());
    for path in TUNNELS {
        for upgrade in ["", "Connection: Upgrade\r\nUpgrade: websocket\r\n"] {
            // The serve answers and closes: `raw_answer` reads to the end.
            let answer = raw_answer(
                serve.port(),
                &format!(
                    "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {bearer}\r\n{upgrade}\r\n"
                ),
            )
            .await;
            assert!(answer.starts_with("HTTP/1.1 426 "), "{path}: {answer}");
            assert!(answer.contains("Upgrade: tandem"), "{path}: {answer}");
        }
    }
    // And keeps serving.
    let mut editor = serve.client().await;
    let root = tempfile::tempdir().unwrap();
    editor.initialize(root.path(), json!({})).await;
}

#[tokio::test]
async fn a_wrong_token_is_refused_with_401_and_never_logged() {
    // Everything jsonrpsee and tandem can log, whole requests included.
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let serve = Serve::start_logging(home, "trace").await;
    let token = serve.token();
    // Same length, one digit off: only a full compare tells them apart.
    let mut wrong = token.clone().into_bytes();
    wrong[63] = if wrong[63] == b'0' { b'1' } else { b'0' };
    let wrong = String::from_utf8(wrong).unwrap();
    for presented in [wrong.as_str(), &token[..63], "x"] {
        let bearer = format!("Bearer {presented}");
        assert_eq!(
            doors(serve.port(), Some(&bearer), &[]).await,
            [Some(401); 3],
            "{presented}"
        );
    }
    // The right one works at each door, and a call goes through.
    let mut control = Control::connect(&serve).await;
    let status = control.request("serve/status", json!({})).await;
    assert_eq!(status["result"]["port"], serve.port(), "{status}");
    let mut editor = serve.client().await;
    let root = tempfile::tempdir().unwrap();
    let initialized = editor.initialize(root.path(), json!({})).await;
    assert_eq!(
        initialized["result"]["capabilities"]["experimental"]["tandem"]["serve"],
        json!({"port": serve.port(), "pid": serve.info["pid"]}),
        "{initialized}"
    );
    let answered = acp_initialize(&serve).await;
    assert_eq!(answered["result"]["protocolVersion"], 1, "{answered}");

    let logs = serve.stderr()
        + &std::fs::read_to_string(serve.path().join("logs/tandem.log")).unwrap_or_default();
    assert!(logs.contains("refused a connection"), "{logs}");
    assert!(!logs.contains(&token), "the token appears in the logs");
    assert!(
        !logs.contains(&wrong),
        "a presented token appears in the logs"
    );
}

/// ACP's `initialize` through an `/acp` tunnel with the token: its answer.
async fn acp_initialize(serve: &Serve) -> Value {
    let bearer = format!("Bearer {}", serve.token());
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Connection", "Upgrade"),
        ("Upgrade", "tandem"),
    ];
    let (stream, leftover) = tunnel(serve.port(), "/acp", &headers)
        .await
        .unwrap_or_else(|status| panic!("/acp answered {status}"));
    let (read, mut write) = stream.into_split();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    write
        .write_all(format!("{request}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(std::io::Cursor::new(leftover).chain(read)).lines();
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("ACP's answer in time")
            .unwrap()
            .expect("the tunnel stays open");
        let message: Value = serde_json::from_str(&line).expect("ACP sends JSON lines");
        if message["id"] == 1 {
            return message;
        }
    }
}

#[tokio::test]
async fn a_browser_origin_is_refused_even_with_the_token() {
    let serve = Serve::start().await;
    let bearer = format!("Bearer {}", serve.token());
    for origin in ["https://evil.example", "http://127.0.0.1:8080", "null"] {
        assert_eq!(
            doors(serve.port(), Some(&bearer), &[("Origin", origin)]).await,
            [Some(403); 3],
            "{origin}"
        );
    }
}

#[tokio::test]
async fn an_allowlisted_origin_may_connect() {
    let serve =
        Serve::start_with("[serve]\nallowed_origins = [\"vscode-webview://tandem\"]\n").await;
    let bearer = format!("Bearer {}", serve.token());
    assert_eq!(
        doors(
            serve.port(),
            Some(&bearer),
            &[("Origin", "vscode-webview://tandem")]
        )
        .await,
        [None; 3]
    );
    assert_eq!(
        doors(
            serve.port(),
            Some(&bearer),
            &[("Origin", "vscode-webview://other")]
        )
        .await,
        [Some(403); 3]
    );
}

#[tokio::test]
async fn serve_json_is_0600_in_a_0700_home_and_names_a_loopback_port() {
    let serve = Serve::start().await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&serve.path().join("serve.json")), 0o600);
    assert_eq!(mode(&serve.path()), 0o700);
    assert_eq!(serve.info["pid"], serve.child.id().unwrap());
    assert_eq!(serve.info["version"], env!("CARGO_PKG_VERSION"));
    let token = serve.token();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    // Listening on loopback only: the port answers on 127.0.0.1 and not on
    // another address of this machine, if it has one.
    assert!(std::net::TcpStream::connect(("127.0.0.1", serve.port())).is_ok());
    let others: Vec<std::net::IpAddr> = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|_| s))
        .and_then(|s| s.local_addr())
        .map(|a| vec![a.ip()])
        .unwrap_or_default();
    for ip in others.into_iter().filter(|ip| !ip.is_loopback()) {
        assert!(
            std::net::TcpStream::connect((ip, serve.port())).is_err(),
            "the serve answers on {ip}"
        );
    }
}

#[tokio::test]
async fn a_second_serve_refuses_to_start_and_the_first_keeps_serving() {
    let serve = Serve::start().await;
    let second = serve_command(&serve.path())
        .arg("serve")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run a second serve");
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "already running (pid {}",
            serve.child.id().unwrap()
        )),
        "{stderr}"
    );
    assert_eq!(read_serve_json(&serve.path()), Some(serve.info.clone()));
    let mut control = Control::connect(&serve).await;
    let status = control.request("serve/status", json!({})).await;
    assert_eq!(status["result"]["pid"], serve.info["pid"], "{status}");
    let mut editor = serve.client().await;
    let root = tempfile::tempdir().unwrap();
    editor.initialize(root.path(), json!({})).await;
}

#[tokio::test]
async fn a_home_others_can_write_is_refused() {
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = serve_command(home.path())
        .arg("serve")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("writable by other users"));
    assert!(!home.path().join("serve.json").exists());
}

#[tokio::test]
async fn a_serve_json_others_can_read_is_refused_by_clients() {
    let serve = Serve::start().await;
    std::fs::set_permissions(
        serve.path().join("serve.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let output = serve_command(&serve.path())
        .args(["serve", "--status"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("readable or writable by other users"),
        "{output:?}"
    );
}

#[tokio::test]
async fn listen_beyond_loopback_is_refused_without_tls() {
    let home = tempfile::tempdir().unwrap();
    let output = serve_command(home.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs TLS"));
    assert!(!home.path().join("serve.json").exists());
}

#[tokio::test]
async fn status_and_stop_reach_the_running_serve() {
    let mut serve = Serve::start().await;
    let status = serve_command(&serve.path())
        .args(["serve", "--status"])
        .output()
        .await
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("pid {}", serve.child.id().unwrap())),
        "{text}"
    );
    assert!(text.contains(&format!("port {}", serve.port())), "{text}");

    let stop = serve_command(&serve.path())
        .args(["serve", "--stop"])
        .output()
        .await
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    assert!(serve.wait().await.success());
    assert!(!serve.path().join("serve.json").exists());
    let status = serve_command(&serve.path())
        .args(["serve", "--status"])
        .output()
        .await
        .unwrap();
    assert_eq!(status.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&status.stdout).contains("not running"));
}

#[tokio::test]
async fn the_serve_exits_when_idle_and_not_while_a_client_is_connected() {
    let mut serve = Serve::start_with("[serve]\nidle_exit_secs = 0.3\n").await;
    let client = serve.client().await;
    // Connected: well past the idle limit, it is still there.
    let connected_for = std::time::Instant::now();
    let path = serve.path();
    poll_until("a second of connection", || {
        connected_for.elapsed().as_millis() > 1000
    })
    .await;
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "exited with a client connected"
    );
    assert!(read_serve_json(&path).is_some());
    client.close().await;
    assert!(serve.wait().await.success());
    assert!(!path.join("serve.json").exists());
}

#[tokio::test]
async fn a_control_connection_also_keeps_the_serve_from_idling_out() {
    let mut serve = Serve::start_with("[serve]\nidle_exit_secs = 0.3\n").await;
    let control = Control::connect(&serve).await;
    let connected_for = std::time::Instant::now();
    poll_until("a second of connection", || {
        connected_for.elapsed().as_millis() > 1000
    })
    .await;
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "exited with a control connection open"
    );
    control.close().await;
    assert!(serve.wait().await.success());
}

#[tokio::test]
async fn messages_over_the_limit_are_refused_and_connections_over_the_limit_get_429() {
    let serve = Serve::start_with("[serve]\nmax_message_bytes = 4096\nmax_connections = 1\n").await;
    let bearer = format!("Bearer {}", serve.token());
    let mut control = Control::connect(&serve).await;
    let big = "x".repeat(8192);
    control
        .send(
            &json!({"jsonrpc": "2.0", "id": 41, "method": "serve/status", "params": {"pad": big}}),
        )
        .await;
    let refused = control.next_message().await;
    assert_eq!(refused["error"]["code"], -32007, "{refused}");
    // The connection survives it.
    let status = control.request("serve/status", json!({})).await;
    assert_eq!(status["result"]["port"], serve.port(), "{status}");
    // One connection is the limit, whichever door the next one knocks on.
    assert_eq!(
        doors(serve.port(), Some(&bearer), &[]).await,
        [Some(429); 3]
    );
    control.close().await;

    // An editor's tunnel counts as much as a control connection.
    let deadline = tokio::time::Instant::now() + WAIT;
    let editor = loop {
        let headers = super::upgrade_headers(&serve.token());
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        match tunnel(serve.port(), "/lsp", &headers).await {
            Ok(open) => break open,
            Err(429) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await
            }
            Err(status) => panic!("the closed control connection still counts: {status}"),
        }
    };
    assert_eq!(
        doors(serve.port(), Some(&bearer), &[]).await,
        [Some(429); 3]
    );
    drop(editor);
}

#[tokio::test]
async fn a_frame_over_the_lsp_limit_through_a_tunnel_is_refused_and_the_tunnel_goes_on() {
    let serve = Serve::start().await;
    let headers = super::upgrade_headers(&serve.token());
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (stream, leftover) = tunnel(serve.port(), "/lsp", &headers)
        .await
        .unwrap_or_else(|status| panic!("/lsp answered {status}"));
    let (read, mut write) = stream.into_split();
    let (sink, mut messages) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(crate::support::client::read_frames(
        std::io::Cursor::new(leftover).chain(read),
        sink,
    ));
    let root = tempfile::tempdir().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": null, "rootUri": crate::support::client::file_uri(root.path()),
        "capabilities": {}}});
    write
        .write_all(&crate::support::client::frame(
            initialize.to_string().as_bytes(),
        ))
        .await
        .unwrap();
    let initialized = next(&mut messages).await;
    assert!(initialized.get("result").is_some(), "{initialized}");
    // A header promising more than the frontend takes, its body never sent.
    write
        .write_all(b"Content-Length: 268435457\r\n\r\n")
        .await
        .unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tandem/listSessions", "params": {}});
    write
        .write_all(&crate::support::client::frame(list.to_string().as_bytes()))
        .await
        .unwrap();
    let refused = next(&mut messages).await;
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit")),
        "{refused}"
    );
    let listed = next(&mut messages).await;
    assert_eq!(listed["id"], 7, "{listed}");
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
}

async fn next(messages: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(WAIT, messages.recv())
        .await
        .expect("an answer in time")
        .expect("the tunnel stays open")
}
