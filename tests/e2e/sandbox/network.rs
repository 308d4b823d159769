//! The network of a sandboxed command: off by default (a loopback server of
//! the host is out of reach), on with `[sandbox] network = true`.

use std::io::Read;
use std::net::TcpListener;

use serde_json::json;

use super::{after_failure, config, editor_on, run_one, var_tmp_dir};
use crate::support::model_server::ModelServer;

/// A command that sends `hello` to a TCP port on the host's loopback.
fn send_hello(port: u16) -> String {
    format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'")
}

#[tokio::test]
async fn a_loopback_server_of_the_host_is_unreachable_by_default() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let result = run_one(
        &server,
        &mut editor,
        &session,
        json!({"cmd": send_hello(port)}),
    )
    .await;

    // The command has ended: a connection it made would be waiting.
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the sandboxed command reached the host: {accepted:?}\n{result}"
    );
    assert!(
        after_failure(&result).starts_with("[sandbox] network access is off in the sandbox"),
        "{result}"
    );
}

#[tokio::test]
async fn the_network_setting_lets_commands_reach_it() {
    if !super::kernel_can_sandbox() {
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
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor
        .new_session(config(&server, "auto", json!({"network": true})))
        .await;

    let result = run_one(
        &server,
        &mut editor,
        &session,
        json!({"cmd": send_hello(port)}),
    )
    .await;

    assert_eq!(result, "exit code 0");
    assert_eq!(received.join().unwrap(), "hello\n");
}

#[tokio::test]
async fn a_sandboxed_command_keeps_a_loopback_of_its_own() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    // A test suite that serves itself on 127.0.0.1 still works.
    let cmd =
        "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); \
               c=socket.create_connection(s.getsockname()); print('self-served')\"";
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    assert_eq!(result, "exit code 0\nself-served\n");
}
