//! `tandem/forkSession` (issue 29), over `tandem lsp` and through the
//! serve: a fork's history is the original's before the turn a user
//! message opened (all of it without one), its replay is the original's
//! up to there, the model hears only that history, and the original is
//! untouched.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

/// An update as a replay must repeat it: its turn and body.
fn shown(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .map(|u| json!({"turnId": u["turnId"], "update": u["update"]}))
        .collect()
}

/// Waits until `session` has an update `pred` accepts (through the serve
/// the last updates may follow an answer).
async fn settle(editor: &mut Editor, session: &str, pred: impl Fn(&Value) -> bool) {
    if !editor
        .updates_of(session)
        .iter()
        .any(|u| pred(&u["update"]))
    {
        editor.wait_update(session, pred).await;
    }
}

async fn fork_and_load(editor: &mut Editor, session: &str, message: Option<&str>) -> Vec<Value> {
    let mut params = json!({"sessionId": session});
    if let Some(message) = message {
        params["messageId"] = json!(message);
    }
    let forked = editor.request("tandem/forkSession", params).await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no fork: {forked}"))
        .to_string();
    assert_ne!(fork, session);
    assert_eq!(forked["result"]["mode"], "review", "{forked}");
    assert!(
        editor.updates_of(&fork).is_empty(),
        "a fork is not replayed until loaded"
    );
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": fork}))
        .await;
    let replayed = loaded["result"]["replayed"].as_u64().unwrap() as usize;
    settle(editor, &fork, |_| true).await;
    while editor.updates_of(&fork).len() < replayed {
        editor.wait_update(&fork, |_| true).await;
    }
    assert_eq!(editor.updates_of(&fork).len(), replayed, "{loaded}");
    vec![json!(fork), json!(shown(&editor.updates_of(&fork)))]
}

async fn forks(options: EditorOptions) {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    for (prompt, answer) in [("first", "one"), ("second", "two"), ("third", "three")] {
        server.push(openai::text([answer]));
        let (receipt, _) = editor.prompt(&session, prompt).await;
        assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    }
    settle(&mut editor, &session, |u| {
        u["sessionUpdate"] == "turn_end" && u["usage"].is_object()
    })
    .await;
    while editor
        .updates_of(&session)
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "turn_end")
        .count()
        < 3
    {
        editor
            .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
            .await;
    }
    let live = shown(&editor.updates_of(&session));
    let log_path = editor.sessions_dir().join(format!("{session}.jsonl"));
    let original_log = std::fs::read(&log_path).unwrap();

    // At m2: the original's updates before m2 was queued.
    let fork = fork_and_load(&mut editor, &session, Some("m2")).await;
    let (fork_id, replay) = (fork[0].as_str().unwrap().to_string(), fork[1].clone());
    let replay = replay.as_array().unwrap();
    let m2_queued = live
        .iter()
        .position(|u| u["update"]["messageIds"] == json!(["m2"]))
        .unwrap();
    assert_eq!(
        replay[..],
        live[..m2_queued],
        "the fork replays the original up to m2"
    );
    assert!(replay
        .iter()
        .any(|u| u["update"]["sessionUpdate"] == "agent_message_chunk"));

    // Whole: every update of the original.
    let whole = fork_and_load(&mut editor, &session, None).await;
    assert_eq!(
        whole[1].as_array().unwrap()[..],
        live[..],
        "a whole fork replays it all"
    );

    assert_eq!(
        std::fs::read(&log_path).unwrap(),
        original_log,
        "the original's log"
    );

    // The fork goes on from its history: the model hears turn 1 only.
    server.push(openai::text(["two, again"]));
    let (receipt, updates) = editor.prompt(&fork_id, "second, differently").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    let sent = requests.last().unwrap().body.to_string();
    assert!(sent.contains("first") && sent.contains("one"), "{sent}");
    assert!(
        !sent.contains("third") && !sent.contains("\"two\""),
        "{sent}"
    );
    assert!(sent.contains("second, differently"), "{sent}");
    let user = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "user_message")
        .unwrap();
    assert_eq!(user["turnId"], "t2", "{user}");
    assert_eq!(user["update"]["messageId"], "m2", "{user}");

    // The original goes on from its own.
    server.push(openai::text(["four"]));
    let (receipt, _) = editor.prompt(&session, "fourth").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let sent = server.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains("three") && !sent.contains("differently"),
        "{sent}"
    );

    // Specific errors; the daemon keeps serving.
    for (message, code, says) in [
        ("m3x", -32602, "its prompts are m1, m2, m3, m4"),
        ("", -32602, "no message ``"),
    ] {
        let answer = editor
            .request(
                "tandem/forkSession",
                json!({"sessionId": session, "messageId": message}),
            )
            .await;
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(says) && text.contains("messageId"), "{text}");
    }
    let unknown = editor
        .request("tandem/forkSession", json!({"sessionId": "nosuch"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
    let bad = editor
        .request("tandem/forkSession", json!({"sessionId": session, "at": 1}))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn lsp_forks_a_session_at_a_message_and_whole() {
    forks(EditorOptions::default()).await;
}

#[tokio::test]
async fn lsp_attach_forks_a_session_in_the_serve() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    forks(attach_options(&home)).await;
}
