//! Bodies that are JSON but not a JSON-RPC message a typed decoder takes —
//! a repeated top-level key above all (issue 28: one such frame made
//! `tandem lsp` deaf) — are answered `-32600`, with the id when it can be
//! read, and the daemon answers the next request: `tandem lsp`,
//! `tandem lsp --attach`, `tandem acp` and `tandem acp --attach`, through
//! the real binary.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};

use crate::support::client::{frame, tandem_bin, Editor, WAIT};

/// Repeated-key and other type-invalid bodies, each with the id its
/// `-32600` answer must carry.
fn bodies() -> Vec<(&'static str, Value)> {
    vec![
        (
            r#"{"jsonrpc":"2.0","id":41,"method":"tandem/listSessions","method":"tandem/newSession","params":{}}"#,
            json!(41),
        ),
        // Two ids: neither is trusted.
        (
            r#"{"jsonrpc":"2.0","id":42,"id":43,"method":"tandem/listSessions","params":{}}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":"x","method":"tandem/listSessions"}"#,
            json!("x"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":44,"method":"tandem/listSessions","params":{},"params":[]}"#,
            json!(44),
        ),
        // A response with two results, to one of our ids.
        (
            r#"{"jsonrpc":"2.0","id":"tandem-1","result":1,"result":2}"#,
            json!("tandem-1"),
        ),
        // Type-invalid: the id an object, `jsonrpc` a number, `error` not
        // an error object, `params` a string.
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tandem/listSessions"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":2.0,"id":45,"method":"tandem/listSessions"}"#,
            json!(45),
        ),
        (r#"{"jsonrpc":"2.0","id":46,"error":"no"}"#, json!(46)),
        (
            r#"{"jsonrpc":"2.0","id":47,"method":"tandem/listSessions","params":"x"}"#,
            json!(47),
        ),
    ]
}

async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> Value {
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("an answer from tandem acp")
        .unwrap()
        .expect("stdout open");
    serde_json::from_str(&line).unwrap()
}

fn assert_refused(answer: &Value, id: &Value, body: &str) {
    assert_eq!(answer["error"]["code"], -32600, "{body} -> {answer}");
    assert_eq!(&answer["id"], id, "{body} -> {answer}");
}

async fn lsp_keeps_serving(mut editor: Editor) {
    let root = tempfile::tempdir().unwrap();
    editor.initialize(root.path()).await;
    for (body, id) in bodies() {
        editor.send_raw(&frame(body.as_bytes())).await;
        let answer = editor.next_message().await;
        assert_refused(&answer, &id, body);
        if body.contains("\"method\":\"tandem/listSessions\",\"method\"") {
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("`method` appears more than once"),
                "{answer}"
            );
        }
        let response = editor.request("tandem/listSessions", json!({})).await;
        assert!(
            response["result"]["sessions"].is_array(),
            "after {body}: {response}"
        );
    }
    assert!(editor.shutdown_and_exit().await.success());
}

#[tokio::test]
async fn lsp_answers_a_repeated_key_with_invalid_request_and_keeps_serving() {
    lsp_keeps_serving(Editor::spawn().await).await;
}

#[tokio::test]
async fn lsp_attach_answers_a_repeated_key_with_invalid_request_and_keeps_serving() {
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = crate::serve::StopOnDrop(home.path().to_path_buf());
    lsp_keeps_serving(Editor::spawn_with(crate::serve::attach_options(&home)).await).await;
}

#[tokio::test]
async fn acp_answers_a_repeated_key_with_invalid_request_and_keeps_serving() {
    let home = tempfile::tempdir().unwrap();
    acp_keeps_serving(&["acp"], home.path()).await;
}

#[tokio::test]
async fn acp_attach_answers_a_repeated_key_with_invalid_request_and_keeps_serving() {
    let home = tempfile::tempdir().unwrap();
    let _stop = crate::serve::StopOnDrop(home.path().to_path_buf());
    acp_keeps_serving(&["acp", "--attach"], home.path()).await;
}

async fn acp_keeps_serving(args: &[&str], home: &std::path::Path) {
    let mut child = tokio::process::Command::new(tandem_bin())
        .args(args)
        .env("TANDEM_HOME", home)
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let cwd = home.display().to_string();
    let list = |id: i64| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "session/list", "params": {"cwd": cwd}})
        )
    };
    let acp_bodies = [
        (
            r#"{"jsonrpc":"2.0","id":51,"method":"session/list","method":"initialize","params":{}}"#,
            json!(51),
        ),
        (
            r#"{"jsonrpc":"2.0","id":52,"id":53,"method":"session/list","params":{}}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":54,"method":"session/list","params":{},"params":{}}"#,
            json!(54),
        ),
    ];
    for (n, (body, id)) in acp_bodies.iter().enumerate() {
        stdin
            .write_all(format!("{body}\n").as_bytes())
            .await
            .unwrap();
        let answer = next_line(&mut lines).await;
        assert_refused(&answer, id, body);
        let probe = 100 + n as i64;
        stdin.write_all(list(probe).as_bytes()).await.unwrap();
        let response = next_line(&mut lines).await;
        assert_eq!(response["id"], probe, "after {body}: {response}");
        assert!(
            response["result"]["sessions"].is_array(),
            "after {body}: {response}"
        );
    }
}
