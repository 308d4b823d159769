//! Who may connect to a serve, and what it leaves on disk.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use jsonrpsee::client_transport::ws::WsHandshakeError;
use serde_json::json;

use super::{handshake, poll_until, read_serve_json, serve_command, Serve};

fn status_of(result: Result<impl Sized, WsHandshakeError>) -> Option<u16> {
    match result {
        Err(WsHandshakeError::Rejected { status_code, .. }) => Some(status_code),
        Err(other) => panic!("expected a refused handshake, got {other}"),
        Ok(_) => None,
    }
}

#[tokio::test]
async fn a_handshake_without_the_token_is_refused_with_401() {
    let serve = Serve::start().await;
    assert_eq!(status_of(handshake(serve.port(), &[]).await), Some(401));
    assert_eq!(
        status_of(handshake(serve.port(), &[("authorization", "Bearer")]).await),
        Some(401)
    );
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
        assert_eq!(
            status_of(
                handshake(
                    serve.port(),
                    &[("authorization", &format!("Bearer {presented}"))]
                )
                .await
            ),
            Some(401),
            "{presented}"
        );
    }
    // The right one works, and a call goes through.
    let mut client = serve.client().await;
    let status = client.request("serve/status", json!({})).await;
    assert_eq!(status["result"]["port"], serve.port());
    let logs = serve.stderr()
        + &std::fs::read_to_string(serve.path().join("logs/tandem.log")).unwrap_or_default();
    assert!(logs.contains("refused a connection"), "{logs}");
    assert!(!logs.contains(&token), "the token appears in the logs");
    assert!(
        !logs.contains(&wrong),
        "a presented token appears in the logs"
    );
}

#[tokio::test]
async fn a_browser_origin_is_refused_even_with_the_token() {
    let serve = Serve::start().await;
    let bearer = format!("Bearer {}", serve.token());
    for origin in ["https://evil.example", "http://127.0.0.1:8080", "null"] {
        assert_eq!(
            status_of(
                handshake(
                    serve.port(),
                    &[("authorization", &bearer), ("origin", origin)]
                )
                .await
            ),
            Some(403),
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
        status_of(
            handshake(
                serve.port(),
                &[
                    ("authorization", &bearer),
                    ("origin", "vscode-webview://tandem")
                ]
            )
            .await
        ),
        None
    );
    assert_eq!(
        status_of(
            handshake(
                serve.port(),
                &[
                    ("authorization", &bearer),
                    ("origin", "vscode-webview://other")
                ]
            )
            .await
        ),
        Some(403)
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
    let mut client = serve.client().await;
    assert!(client
        .request("serve/status", json!({}))
        .await
        .get("result")
        .is_some());
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
async fn messages_over_the_limit_are_refused_and_connections_over_the_limit_get_429() {
    let serve = Serve::start_with("[serve]\nmax_message_bytes = 4096\nmax_connections = 1\n").await;
    let mut client = serve.client().await;
    let big = "x".repeat(8192);
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tandem/listSessions", "params": {"pad": big}}))
        .await;
    let refused = client.wait_for(|m| m.get("error").is_some()).await;
    assert_eq!(refused["error"]["code"], -32007, "{refused}");
    // The connection survives it.
    let listed = client.request("tandem/listSessions", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    // One connection is the limit.
    let bearer = format!("Bearer {}", serve.token());
    assert_eq!(
        status_of(handshake(serve.port(), &[("authorization", &bearer)]).await),
        Some(429)
    );
}
