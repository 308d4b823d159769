//! The serve's Unix socket `$TANDEM_HOME/serve.sock`: what the shims reach
//! it over, guarded by the same checks as the TCP port (for the editors'
//! tunnels and the control WebSocket alike), mode 0600, and not in the way
//! of the next serve after a crash.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use jsonrpsee::client_transport::ws::{
    HeaderMap, HeaderValue, Url, WsHandshakeError, WsTransportClientBuilder,
};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{json, Value};
use tokio_util::compat::Compat;

use super::{
    attach_options, poll_until, read_serve_json, serve_command, spawn_serve, tunnel,
    upgrade_headers, Serve, StopOnDrop,
};
use crate::support::client::{file_uri, frame, read_frames, Editor, WAIT};

/// The inodes of the sockets process `pid` has open.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the process's fds")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The inodes listed in `/proc/net/<table>` (column `column`).
fn table_inodes(table: &str, column: usize) -> HashSet<u64> {
    std::fs::read_to_string(format!("/proc/net/{table}"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(column)?.parse().ok())
        .collect()
}

/// The TCP connections and Unix sockets among `pid`'s sockets.
fn tcp_and_unix_sockets(pid: u32) -> (usize, usize) {
    let mine = socket_inodes(pid);
    let tcp: HashSet<u64> = table_inodes("tcp", 9)
        .union(&table_inodes("tcp6", 9))
        .copied()
        .collect();
    let unix = table_inodes("unix", 6);
    (
        mine.intersection(&tcp).count(),
        mine.intersection(&unix).count(),
    )
}

#[tokio::test]
async fn a_shim_reaches_the_serve_over_its_socket_and_over_tcp_only_when_told() {
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();

    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    let info = read_serve_json(home.path()).expect("the shim started a serve");
    assert_eq!(
        info["socket"],
        json!(home.path().join("serve.sock")),
        "{info}"
    );
    // The shim's link is up (it answered initialize through the serve):
    // it holds no TCP connection, and the serve logged a Unix one.
    let (tcp, unix) = tcp_and_unix_sockets(editor.pid());
    assert_eq!(tcp, 0, "the shim holds a TCP connection");
    assert!(unix >= 1, "the shim holds no Unix socket");
    let log_path = home.path().join("logs/serve.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let connected = |log: &str, transport: &str| {
        log.lines()
            .filter(|l| l.contains("a client connected") && l.contains(transport))
            .count()
    };
    assert_eq!(connected(&log, "transport=\"unix\""), 1, "{log}");
    assert_eq!(connected(&log, "transport=\"tcp\""), 0, "{log}");

    // Told to, a second window's shim takes the TCP port: the same count
    // now sees its connection.
    let mut options = attach_options(&home);
    options.env.push(("TANDEM_ATTACH_TCP".into(), "1".into()));
    let mut second = Editor::spawn_with(options).await;
    second.initialize(workspace.path()).await;
    let (tcp, _) = tcp_and_unix_sockets(second.pid());
    assert_eq!(tcp, 1, "the forced shim holds no TCP connection");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert_eq!(connected(&log, "transport=\"tcp\""), 1, "{log}");

    assert!(editor.shutdown_and_exit().await.success());
    assert!(second.shutdown_and_exit().await.success());
}

type UnixSender = jsonrpsee::client_transport::ws::Sender<Compat<tokio::net::UnixStream>>;
type UnixReceiver = jsonrpsee::client_transport::ws::Receiver<Compat<tokio::net::UnixStream>>;

/// A WebSocket handshake over the socket at `path` with these headers.
async fn handshake_unix(
    path: &Path,
    headers: &[(&str, &str)],
) -> Result<(UnixSender, UnixReceiver), WsHandshakeError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
    WsTransportClientBuilder::default()
        .set_headers(map)
        .build_with_stream(Url::parse("ws://localhost/").unwrap(), stream)
        .await
}

/// An editor's tunnel (`GET /lsp` or `/acp`, `Upgrade: tandem`) over the
/// socket at `socket` with these headers: the connection after the `101`
/// with what followed it, or the status the serve answered instead.
async fn tunnel_unix(
    socket: &Path,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(tokio::net::UnixStream, Vec<u8>), u16> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", socket.display()));
    super::upgrade(stream, "localhost", path, headers).await
}

/// The status of a tunnel over the socket with `authorization` (and
/// `Upgrade: tandem`) and `extra` headers; `None` for `101`.
async fn unix_tunnel_refusal(
    socket: &Path,
    path: &str,
    authorization: Option<&str>,
    extra: &[(&str, &str)],
) -> Option<u16> {
    let mut headers = vec![("Connection", "Upgrade"), ("Upgrade", "tandem")];
    if let Some(value) = authorization {
        headers.push(("Authorization", value));
    }
    headers.extend_from_slice(extra);
    tunnel_unix(socket, path, &headers).await.err()
}

/// An editor's connection over the socket: its writing half (dropping it
/// ends the connection) and what the serve sends.
type UnixEditor = (
    tokio::net::unix::OwnedWriteHalf,
    tokio::sync::mpsc::UnboundedReceiver<Value>,
);

/// An LSP tunnel with the token over the socket, initialized: its
/// `initialize` answer, and the open connection.
async fn lsp_over_socket(socket: &Path, token: &str) -> (Value, UnixEditor) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let headers = upgrade_headers(token);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (stream, leftover) = tunnel_unix(socket, "/lsp", &headers)
        .await
        .unwrap_or_else(|status| panic!("/lsp over the socket answered {status}"));
    let (read, mut write) = stream.into_split();
    let root = tempfile::tempdir().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": file_uri(root.path()), "capabilities": {}}});
    write
        .write_all(&frame(initialize.to_string().as_bytes()))
        .await
        .unwrap();
    let (sink, mut messages) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(read_frames(
        std::io::Cursor::new(leftover).chain(read),
        sink,
    ));
    let answer = loop {
        let message = tokio::time::timeout(WAIT, messages.recv())
            .await
            .expect("initialize's answer in time")
            .expect("the tunnel stays open");
        if message["id"] == 1 {
            break message;
        }
    };
    (answer, (write, messages))
}

fn refused_with(result: Result<impl Sized, WsHandshakeError>) -> Option<u16> {
    match result {
        Err(WsHandshakeError::Rejected { status_code, .. }) => Some(status_code),
        Err(other) => panic!("expected a refused handshake, got {other}"),
        Ok(_) => None,
    }
}

/// `serve/status` over the socket with the serve's token.
async fn status_over_socket(path: &Path, token: &str) -> Value {
    let (mut tx, mut rx) = handshake_unix(path, &[("authorization", &format!("Bearer {token}"))])
        .await
        .expect("the right token is let in over the socket");
    tx.send(json!({"jsonrpc": "2.0", "id": 1, "method": "serve/status"}).to_string())
        .await
        .expect("send");
    loop {
        let message = tokio::time::timeout(WAIT, rx.receive())
            .await
            .expect("an answer in time")
            .expect("receive");
        if let ReceivedMessage::Text(text) = message {
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == 1 {
                return value["result"].clone();
            }
        }
    }
}

fn socket_of(serve: &Serve) -> PathBuf {
    PathBuf::from(
        serve.info["socket"]
            .as_str()
            .expect("serve.json names a socket"),
    )
}

#[tokio::test]
async fn over_the_socket_no_token_a_wrong_token_and_a_browser_origin_are_refused() {
    let serve = Serve::start().await;
    let path = socket_of(&serve);
    assert_eq!(path, serve.path().join("serve.sock"));
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let token = serve.token();
    let mut wrong = token.clone().into_bytes();
    wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
    let wrong = format!("Bearer {}", String::from_utf8(wrong).unwrap());
    assert_eq!(refused_with(handshake_unix(&path, &[]).await), Some(401));
    assert_eq!(
        refused_with(handshake_unix(&path, &[("authorization", &wrong)]).await),
        Some(401)
    );
    let bearer = format!("Bearer {token}");
    assert_eq!(
        refused_with(
            handshake_unix(
                &path,
                &[
                    ("authorization", &bearer),
                    ("origin", "https://evil.example")
                ]
            )
            .await
        ),
        Some(403)
    );
    // The editors' tunnels over the socket: the same checks.
    for tunnel_path in ["/lsp", "/acp"] {
        assert_eq!(
            unix_tunnel_refusal(&path, tunnel_path, None, &[]).await,
            Some(401),
            "{tunnel_path}"
        );
        assert_eq!(
            unix_tunnel_refusal(&path, tunnel_path, Some(&wrong), &[]).await,
            Some(401),
            "{tunnel_path}"
        );
        assert_eq!(
            unix_tunnel_refusal(
                &path,
                tunnel_path,
                Some(&bearer),
                &[("Origin", "https://evil.example")]
            )
            .await,
            Some(403),
            "{tunnel_path}"
        );
        assert_eq!(
            tunnel_unix(
                &path,
                tunnel_path,
                &[("Authorization", &bearer), ("Upgrade", "websocket")]
            )
            .await
            .err(),
            Some(426),
            "{tunnel_path}"
        );
    }
    let status = status_over_socket(&path, &token).await;
    assert_eq!(status["pid"], serve.info["pid"], "{status}");
    let (initialized, _editor) = lsp_over_socket(&path, &token).await;
    assert_eq!(
        initialized["result"]["capabilities"]["experimental"]["tandem"]["serve"],
        json!({"port": serve.port(), "pid": serve.info["pid"]}),
        "{initialized}"
    );
    let log = serve.stderr();
    assert!(log.contains("refused a connection"), "{log}");
    assert!(
        log.lines().any(|l| l.contains("a client connected")
            && l.contains("transport=\"unix\"")
            && l.contains("/lsp")),
        "{log}"
    );
}

#[tokio::test]
async fn the_connection_limit_counts_both_listeners() {
    let serve = Serve::start_with("[serve]\nmax_connections = 1\n").await;
    let path = socket_of(&serve);
    let bearer = format!("Bearer {}", serve.token());
    let tcp = serve.client().await;
    assert_eq!(
        refused_with(handshake_unix(&path, &[("authorization", &bearer)]).await),
        Some(429)
    );
    for tunnel_path in ["/lsp", "/acp"] {
        assert_eq!(
            unix_tunnel_refusal(&path, tunnel_path, Some(&bearer), &[]).await,
            Some(429),
            "{tunnel_path}"
        );
    }
    // The other way round: an editor on the socket fills the TCP port.
    tcp.close().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let _unix = loop {
        let headers = upgrade_headers(&serve.token());
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        match tunnel_unix(&path, "/lsp", &headers).await {
            Ok(open) => break open,
            Err(429) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await
            }
            Err(status) => panic!("the closed TCP tunnel still counts: {status}"),
        }
    };
    let headers = upgrade_headers(&serve.token());
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    assert_eq!(
        tunnel(serve.port(), "/lsp", &headers).await.err(),
        Some(429)
    );
    assert_eq!(
        refused_with(super::control::handshake(serve.port(), &[("authorization", &bearer)]).await),
        Some(429)
    );
}

#[tokio::test]
async fn a_socket_left_by_a_killed_serve_does_not_stop_a_new_one_and_stop_removes_it() {
    let mut first = Serve::start().await;
    let home = first.home.clone();
    let path = socket_of(&first);
    first.child.start_kill().expect("kill -9");
    first.wait().await;
    // Left behind, and dead: nothing answers on it.
    assert!(std::fs::symlink_metadata(&path).is_ok());
    assert!(tokio::net::UnixStream::connect(&path).await.is_err());

    let mut second = spawn_serve(home.path(), &home.path().join("serve2.stderr"), "debug");
    let pid = second.id().unwrap();
    poll_until("the second serve's serve.json", || {
        read_serve_json(home.path()).is_some_and(|info| info["pid"] == pid)
    })
    .await;
    let info = read_serve_json(home.path()).unwrap();
    assert_eq!(info["socket"], json!(path));
    let status = status_over_socket(&path, info["token"].as_str().unwrap()).await;
    assert_eq!(status["pid"], pid, "{status}");
    let log = std::fs::read_to_string(home.path().join("serve2.stderr")).unwrap();
    assert!(log.contains("left by an earlier serve"), "{log}");

    let stop = serve_command(home.path())
        .args(["serve", "--stop"])
        .output()
        .await
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    let exited = tokio::time::timeout(WAIT, second.wait()).await.unwrap();
    assert!(exited.unwrap().success());
    assert!(
        std::fs::symlink_metadata(&path).is_err(),
        "serve.sock outlived its serve"
    );
}

#[tokio::test]
async fn a_home_too_long_for_a_socket_path_is_served_over_tcp_alone() {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("h".repeat(110));
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut serve = spawn_serve(&home, &base.path().join("serve.stderr"), "debug");
    poll_until("serve.json", || read_serve_json(&home).is_some()).await;
    let info = read_serve_json(&home).unwrap();
    assert!(info.get("socket").is_none(), "{info}");
    let log = std::fs::read_to_string(base.path().join("serve.stderr")).unwrap();
    assert!(log.contains("no Unix socket"), "{log}");
    // `serve --status` (a client) still reaches it, over TCP.
    let status = serve_command(&home)
        .args(["serve", "--status"])
        .output()
        .await
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    serve.start_kill().unwrap();
    let _ = serve.wait().await;
}

#[tokio::test]
async fn a_client_on_the_socket_keeps_the_serve_from_idling_out_and_idle_exit_removes_it() {
    let mut serve = Serve::start_with("[serve]\nidle_exit_secs = 0.3\n").await;
    let path = socket_of(&serve);
    let bearer = format!("Bearer {}", serve.token());
    let (mut tx, rx) = handshake_unix(&path, &[("authorization", &bearer)])
        .await
        .expect("connect over the socket");
    let (_, editor) = lsp_over_socket(&path, &serve.token()).await;
    let connected_for = std::time::Instant::now();
    poll_until("a second of connection", || {
        connected_for.elapsed().as_millis() > 1000
    })
    .await;
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "exited with a client connected over the socket"
    );
    // The control connection goes; the editor's tunnel alone holds it.
    let _ = tx.close().await;
    drop((tx, rx));
    let alone_for = std::time::Instant::now();
    poll_until("a second of the editor alone", || {
        alone_for.elapsed().as_millis() > 1000
    })
    .await;
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "exited with an editor's tunnel open over the socket"
    );
    drop(editor);
    assert!(serve.wait().await.success());
    assert!(
        std::fs::symlink_metadata(&path).is_err(),
        "serve.sock outlived its serve"
    );
}
