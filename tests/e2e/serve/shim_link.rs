//! The shim's own WebSocket link (`src/frontend/serve/ws_link.rs`): what
//! it must read whole, and how it ends when the serve goes away.

use std::time::{Duration, Instant};

use super::{attach_options, StopOnDrop};
use crate::support::client::{agent_text, tandem_bin, Editor};
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn an_update_larger_than_a_socket_read_reaches_the_editor_whole() {
    // 300 KB in one delta: one `tandem/update` in a WebSocket frame with a
    // 64-bit length, which the shim reads over many `read`s.
    let big: String = (0..300_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::text([
        "before ", &big, " after",
    ]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    let session = editor.new_session(model.session_config()).await;
    let (receipt, updates) = editor.prompt(&session, "a long one").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(agent_text(&updates), format!("before {big} after"));
    // The link still carries the editor's requests after it.
    let (receipt, _) = editor.prompt(&session, "again").await;
    assert!(receipt.get("result").is_some(), "{receipt}");
}

#[tokio::test]
async fn the_shim_exits_when_the_serve_stops() {
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    assert!(editor.is_running());
    let stopped = std::process::Command::new(tandem_bin())
        .args(["serve", "--stop"])
        .env("TANDEM_HOME", home.path())
        .status()
        .unwrap();
    assert!(stopped.success());
    // The shim's link thread sees the socket close and the shim ends,
    // rather than leaving the editor talking to nothing.
    let deadline = Instant::now() + Duration::from_secs(10);
    while editor.is_running() {
        assert!(
            Instant::now() < deadline,
            "the shim still runs 10 s after the serve stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        editor.stderr().contains("closed the connection"),
        "{}",
        editor.stderr()
    );
}
