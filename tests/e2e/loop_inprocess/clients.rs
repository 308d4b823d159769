//! Clients in-process: two editor connections of one daemon, each with its
//! own unsaved buffer of the same file; a turn's `read_file` reads the
//! buffer of the client whose input opened it — a prompt, or the waking
//! steer of a turn that no prompt opened.

use std::sync::Arc;

use serde_json::json;

use tandem::core::client::OneBridge;
use tandem::vocab::bridge::NoClient;
use tandem::vocab::event::StopReason;

use super::{text_content, Harness, Receipt};
use crate::support::model_server::{openai, ModelServer};

/// The `read_file` result the model got in its `n`th request (0-based).
async fn read_in_request(server: &ModelServer, n: usize) -> String {
    let requests = server.wait_for_requests(n + 1).await;
    let results = requests[n].tool_messages();
    let (_, read) = results
        .last()
        .unwrap_or_else(|| panic!("request {n} has no tool result: {}", requests[n].body));
    read.clone()
}

#[tokio::test]
async fn a_turn_reads_the_buffers_of_the_client_whose_input_opened_it() {
    let h = Harness::start().await;
    let root = std::fs::canonicalize(h.root.path()).unwrap();
    let path = root.join("a.txt");
    std::fs::write(&path, "on disk\n").unwrap();
    let a = h.client.clone();
    let b = h.daemon.connect(Arc::new(OneBridge(Arc::new(NoClient))));
    a.buffers().open(path.clone(), 1, "unsaved in A\n");
    b.buffers().open(path.clone(), 1, "unsaved in B\n");
    for turn in 1..=3 {
        h.server.push(openai::tool_calls(&[(
            &format!("call_{turn}"),
            "read_file",
            r#"{"path":"a.txt"}"#,
        )]));
        h.server.push(openai::text(["read"]));
    }
    let session = h.session(json!({}));

    // A prompts: A's buffer.
    let (_, receipt) = h.prompt(&session, "read a.txt");
    assert_eq!(receipt.get().await.stop_reason, StopReason::EndTurn);
    let read = read_in_request(&h.server, 1).await;
    assert!(read.contains("unsaved in A"), "{read}");

    // B prompts the same session: B's buffer.
    let (_, rx) = h
        .daemon
        .prompt(&b, &session.id, text_content("read it again"))
        .expect("prompt");
    assert_eq!(Receipt(rx).get().await.stop_reason, StopReason::EndTurn);
    let read = read_in_request(&h.server, 3).await;
    assert!(read.contains("unsaved in B"), "{read}");

    // A's context rides along without waking; B's steer wakes the idle
    // session: the turn is B's.
    h.daemon
        .steer(&a, &session.id, text_content("context from A"), false)
        .expect("steer");
    h.daemon
        .steer(&b, &session.id, text_content("and once more"), true)
        .expect("steer");
    let read = read_in_request(&h.server, 5).await;
    assert!(read.contains("unsaved in B"), "{read}");
    assert!(!read.contains("unsaved in A"), "{read}");
}
