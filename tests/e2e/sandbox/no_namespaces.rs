//! The sandbox where unprivileged user namespaces are blocked (Ubuntu
//! 24.04 and later), forced with the daemon's test-only switch
//! `TANDEM_SANDBOX_SIMULATE_NO_NAMESPACES=1`: Landlock's TCP rules and a
//! seccomp socket filter take the network away instead of a namespace.
//! Commands still run in `auto` mode without asking, write the workspace
//! and nothing else, and reach no port of the host.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use serde_json::json;

use super::{
    after_failure, config, editor_on, permission_requests, run_one, var_tmp_dir,
    SIMULATE_NO_NAMESPACES,
};
use crate::support::model_server::ModelServer;

const NO_NAMESPACES: [(&str, &str); 1] = [(SIMULATE_NO_NAMESPACES, "1")];

#[tokio::test]
async fn without_namespaces_auto_mode_runs_unasked_and_the_host_loopback_is_out_of_reach() {
    if !super::kernel_has_landlock_network() {
        return;
    }
    let server = ModelServer::start().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = var_tmp_dir();
    let (mut editor, init) = editor_on(root.path(), &NO_NAMESPACES).await;
    let sandbox = &init["result"]["capabilities"]["experimental"]["tandem"]["sandbox"];
    assert_eq!(sandbox["available"], true, "{init}");
    assert_eq!(sandbox["networkIsolation"], true, "{init}");
    assert_eq!(sandbox["networkMechanism"], "landlock+seccomp", "{init}");
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let cmd = format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'");
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;
    let py = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
    );
    let result_py = run_one(&server, &mut editor, &session, json!({"cmd": py})).await;

    // Both commands have ended: a connection either made would be waiting.
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the sandboxed command reached the host: {accepted:?}\n{result}\n{result_py}"
    );
    assert!(
        after_failure(&result).starts_with("[sandbox] network access is off in the sandbox"),
        "{result}"
    );
    assert!(
        after_failure(&result_py).contains("PermissionError"),
        "{result_py}"
    );
    assert!(
        permission_requests(&editor).is_empty(),
        "auto mode asked although the sandbox holds"
    );
    let stderr = editor.stderr();
    assert!(
        stderr.contains("exec sandbox available: Landlock ABI")
            && stderr.contains("TCP rules and a seccomp socket filter")
            && stderr.contains("user namespaces are unavailable (simulated"),
        "the log names the mechanism in force: {stderr}"
    );
}

#[tokio::test]
async fn without_namespaces_udp_and_netlink_sockets_are_refused_and_unix_sockets_work() {
    if !super::kernel_has_landlock_network() {
        return;
    }
    let server = ModelServer::start().await;
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = udp.local_addr().unwrap().port();
    let root = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &NO_NAMESPACES).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    // Each attempt prints what happened, so one command shows them all.
    let script = format!(
        "import socket\n\
         def attempt(name, make):\n\
         \x20   try:\n\
         \x20       make()\n\
         \x20       print(name, 'allowed')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'refused', e.errno)\n\
         attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port})))\n\
         attempt('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n\
         attempt('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\n\
         attempt('sctp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))\n\
         pair = socket.socketpair(socket.AF_UNIX)\n\
         attempt('unix', lambda: pair[0].send(b'x') and pair[1].recv(1))\n\
         attempt('bind', lambda: socket.socket().bind(('127.0.0.1', 0)))\n\
         attempt('fastopen', lambda: socket.socket().sendto(b'x', 0x20000000, ('127.0.0.1', {port})))\n"
    );
    std::fs::write(root.path().join("sockets.py"), script).unwrap();
    let result = run_one(
        &server,
        &mut editor,
        &session,
        json!({"cmd": "python3 sockets.py"}),
    )
    .await;

    let eacces = libc::EACCES;
    assert_eq!(
        result,
        format!(
            "exit code 0\nudp refused {eacces}\nudp6 refused {eacces}\nnetlink refused {eacces}\n\
             sctp refused {eacces}\nunix allowed\nbind refused {eacces}\nfastopen refused {eacces}\n"
        )
    );
    let mut buffer = [0u8; 8];
    assert!(
        udp.recv_from(&mut buffer).is_err(),
        "a datagram left the sandbox"
    );
}

#[tokio::test]
async fn without_namespaces_writes_inside_the_workspace_pass_and_outside_are_denied() {
    if !super::kernel_has_landlock_network() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let target = outside.path().join("x");
    let (mut editor, _) = editor_on(root.path(), &NO_NAMESPACES).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let cmd = format!(
        "echo in > inside.txt; echo out > {}; cat inside.txt",
        target.display()
    );
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    assert_eq!(
        std::fs::read_to_string(root.path().join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!target.exists(), "the write outside went through: {result}");
    let note = format!(
        "[sandbox] write outside the workspace denied by the sandbox: {}; ask the user",
        target.display()
    );
    assert!(result.contains(&note), "{result}");
    // stdout and stderr are two pipes: their order may vary.
    assert!(result.contains("Permission denied\n"), "{result}");
    assert!(result.lines().any(|l| l == "in"), "{result}");
    assert!(permission_requests(&editor).is_empty());
}

#[tokio::test]
async fn without_namespaces_the_network_setting_still_lets_commands_reach_the_host() {
    if !super::kernel_has_landlock_network() {
        return;
    }
    let server = ModelServer::start().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    });
    let root = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &NO_NAMESPACES).await;
    let session = editor
        .new_session(config(&server, "auto", json!({"network": true})))
        .await;

    let cmd = format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'");
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    assert_eq!(result, "exit code 0");
    assert_eq!(received.join().unwrap(), "hello\n");
}
