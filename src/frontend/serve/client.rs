//! Reaching a running serve: read serve.json, connect with the bearer
//! token (over the serve's Unix socket when serve.json names one that
//! exists, else over its loopback TCP port), start the serve if none runs.
//! jsonrpsee's WebSocket client for the control calls (`serve --status`,
//! `--stop`); an editor tunnel, on a blocking socket, for the shims.
//!
//! Invariant: the token goes from serve.json into the handshake header and
//! nowhere else (never an argument, a URL or a log line), and only over a
//! socket owned by the home's owner and closed to everyone else.

use std::path::Path;
use std::time::{Duration, Instant};

use jsonrpsee::client_transport::ws::{HeaderMap, HeaderValue, Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{json, Value};
use tokio_util::compat::Compat;

use super::shim_socket::{self, Opened};
use super::state::{read_info, ServeInfo};
use super::stream::Stream;
use super::tunnel::Protocol;

pub type WsSender = jsonrpsee::client_transport::ws::Sender<Compat<Stream>>;
pub type WsReceiver = jsonrpsee::client_transport::ws::Receiver<Compat<Stream>>;

/// Set to `1`, clients use the serve's TCP port even when it has a socket
/// (to compare the two, or to rule the socket out).
pub const FORCE_TCP_ENV: &str = "TANDEM_ATTACH_TCP";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Set to `1`, a shim on the Unix socket relays the editor's bytes itself
/// instead of handing the serve its stdio (to compare the two).
pub const RELAY_ENV: &str = "TANDEM_ATTACH_RELAY";

/// Opens a connection to the serve described by `info`.
pub async fn connect(
    info: &ServeInfo,
    max_message_bytes: u32,
) -> Result<(WsSender, WsReceiver), String> {
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&bearer(info))
        .map_err(|_| "serve.json holds a malformed token".to_string())?;
    headers.insert("authorization", bearer);
    let (stream, host) = open_stream(info).await?;
    let transport = stream.transport().name();
    let url = Url::parse(&format!("ws://{host}/")).map_err(|e| e.to_string())?;
    WsTransportClientBuilder::default()
        .set_headers(headers)
        .max_request_size(max_message_bytes)
        .max_response_size(max_message_bytes)
        .connection_timeout(CONNECT_TIMEOUT)
        .build_with_stream(url, stream)
        .await
        .map_err(|e| {
            format!(
                "cannot connect to tandem serve (port {}, over {transport}): {e}",
                info.port
            )
        })
}

/// Opens an editor tunnel: the upgrade request with the bearer token,
/// then the socket in blocking mode with what followed the `101`.
pub async fn open_tunnel(info: &ServeInfo, protocol: Protocol) -> Result<Opened, String> {
    use tokio::io::AsyncWriteExt;
    let bearer = bearer(info);
    if bearer.bytes().any(|b| b.is_ascii_control()) {
        return Err("serve.json holds a malformed token".to_string());
    }
    let (mut stream, host) = open_stream(info).await?;
    let transport = stream.transport().name();
    let failed = |e: String| {
        format!(
            "cannot connect to tandem serve (port {}, over {transport}): {e}",
            info.port
        )
    };
    // Over the Unix socket the serve can take the editor's pipes.
    let pass_stdio =
        matches!(stream, Stream::Unix(_)) && std::env::var_os(RELAY_ENV).is_none_or(|v| v != "1");
    let pass = if pass_stdio {
        format!(
            "{}: {}\r\n",
            super::stdio_pass::HEADER,
            super::stdio_pass::PASS
        )
    } else {
        String::new()
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {bearer}\r\nConnection: Upgrade\r\nUpgrade: {}\r\n{pass}\r\n",
        protocol.path(),
        super::tunnel::UPGRADE
    );
    let answered = async {
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let end = super::tunnel::read_head(&mut stream, &mut head).await?;
        Ok::<_, std::io::Error>((head, end))
    };
    let (mut head, end) = tokio::time::timeout(CONNECT_TIMEOUT, answered)
        .await
        .map_err(|_| failed(format!("the handshake timed out after {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| failed(format!("the handshake failed: {e}")))?;
    let Some(end) = end else {
        return Err(failed("the serve's answer is not HTTP".to_string()));
    };
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&head[..end]) {
        Ok(httparse::Status::Complete(_)) if response.code == Some(101) => {}
        Ok(httparse::Status::Complete(_)) => {
            return Err(failed(format!(
                "rejected with status code {}",
                response.code.unwrap_or(0)
            )))
        }
        _ => return Err(failed("the serve's answer is not HTTP".to_string())),
    }
    let leftover = head.split_off(end);
    let socket = shim_socket::blocking(stream).map_err(|e| failed(e.to_string()))?;
    Ok(Opened {
        socket,
        leftover,
        pass_stdio,
    })
}

fn bearer(info: &ServeInfo) -> String {
    format!("Bearer {}", info.token)
}

/// The serve's socket if it has a usable one, else its TCP port; with the
/// host the handshake names (the serve does not read it).
async fn open_stream(info: &ServeInfo) -> Result<(Stream, String), String> {
    if let Some(path) = usable_socket(info) {
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::UnixStream::connect(&path)).await {
            Ok(Ok(socket)) => return Ok((Stream::Unix(socket), "localhost".into())),
            Ok(Err(e)) => tracing::warn!(
                "cannot connect to {} ({e}); trying the TCP port",
                path.display()
            ),
            Err(_) => tracing::warn!(
                "connecting to {} timed out; trying the TCP port",
                path.display()
            ),
        }
    }
    let socket = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect(("127.0.0.1", info.port)),
    )
    .await
    .map_err(|_| format!("connecting to 127.0.0.1:{} timed out", info.port))?
    .map_err(|e| format!("cannot connect to tandem serve on port {}: {e}", info.port))?;
    let _ = socket.set_nodelay(true);
    Ok((Stream::Tcp(socket), format!("127.0.0.1:{}", info.port)))
}

/// serve.json's socket, if it exists, is a socket, and belongs to the owner
/// of the directory it is in with no access for anyone else; `None` (the
/// TCP port) otherwise, or when [`FORCE_TCP_ENV`] says so.
fn usable_socket(info: &ServeInfo) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if std::env::var_os(FORCE_TCP_ENV).is_some_and(|v| v == "1") {
        return None;
    }
    let path = info.socket.as_ref()?;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let dir_owner = path
        .parent()
        .and_then(|dir| std::fs::metadata(dir).ok())
        .map(|m| m.uid());
    if !meta.file_type().is_socket() || Some(meta.uid()) != dir_owner || meta.mode() & 0o077 != 0 {
        tracing::warn!(
            "{} is not a private socket of this user (mode {:o}); using the TCP port",
            path.display(),
            meta.mode() & 0o7777
        );
        return None;
    }
    Some(path.clone())
}

/// Opens an editor tunnel (see `tunnel`) to the running serve, starting
/// one (this binary's `serve`) if none answers, and waiting up to 10 s
/// for it to come up.
pub async fn tunnel_or_start(home: &Path, protocol: Protocol) -> Result<Opened, String> {
    or_start(home, move |info| {
        Box::pin(async move { open_tunnel(&info, protocol).await })
    })
    .await
}

type Opening = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Opened, String>> + Send>>;

async fn or_start(home: &Path, open: impl Fn(ServeInfo) -> Opening) -> Result<Opened, String> {
    if let Some(info) = read_info(home).map_err(|e| e.to_string())? {
        if super::state::is_running(home) {
            return open(info).await;
        }
    }
    start_detached(home)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(info) = read_info(home).map_err(|e| e.to_string())? {
            if super::state::is_running(home) {
                if let Ok(opened) = open(info).await {
                    return Ok(opened);
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "started `tandem serve` but it did not come up within 10 s; see {}",
                home.join("logs/serve.log").display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts `tandem serve` in its own process group, detached from our
/// stdio (its log goes to `$TANDEM_HOME/logs/serve.log`), so the editor
/// closing us does not take it along.
fn start_detached(home: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the tandem binary: {e}"))?;
    let logs = home.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("serve.log"))
        .map_err(|e| format!("{}: {e}", logs.join("serve.log").display()))?;
    std::process::Command::new(exe)
        .arg("serve")
        .env("TANDEM_HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start tandem serve: {e}"))?;
    Ok(())
}

/// One request over a fresh connection, for `serve --status` and `--stop`.
pub async fn call(info: &ServeInfo, method: &str) -> Result<Value, String> {
    let (mut tx, mut rx) = connect(info, 1 << 20).await?;
    tx.send(json!({"jsonrpc": "2.0", "id": 1, "method": method}).to_string())
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let text = match rx.receive().await.map_err(|e| e.to_string())? {
            ReceivedMessage::Text(text) => text,
            ReceivedMessage::Bytes(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            ReceivedMessage::Pong => continue,
        };
        let answer: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        if answer["id"] == 1 {
            let _ = tx.close().await;
            return match answer.get("error") {
                Some(error) => Err(error["message"].as_str().unwrap_or("error").to_string()),
                None => Ok(answer["result"].clone()),
            };
        }
    }
}
