//! `tandem acp --attach`: an ACP client's turn runs in the serve.

use serde_json::json;

use std::time::Duration;

use serde_json::Value;

use super::{log_lines, poll_until, read_serve_json, StopOnDrop};
use crate::acp::{
    a_turn_with_a_permission_prompt, agent_text_of, permission_turn, update_kinds, AcpClient,
};
use crate::support::model_server::openai::{delta, ending};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

#[tokio::test]
async fn acp_attach_runs_a_turn_with_a_permission_prompt_in_the_serve() {
    let server = ModelServer::start().await;
    permission_turn(&server);
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp", "--attach"], &server).await;
    let _stop = StopOnDrop(client.home().to_path_buf());

    let (init, _) = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let (new, session) = client.new_session(root.path()).await;
    assert_eq!(new["result"]["modes"]["currentModeId"], "review", "{new}");
    // As from `tandem acp`: the slash commands follow the answer.
    let commands = client
        .read_until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    assert_eq!(commands.len(), 1, "{commands:?}");
    assert!(
        read_serve_json(client.home()).is_some(),
        "the shim started a serve"
    );

    a_turn_with_a_permission_prompt(&mut client, root.path(), &session).await;

    // A failed turn is an error, as in `tandem acp`.
    server.push(openai::error(401, "bad key"));
    let (reply, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
            "",
        )
        .await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
}

fn is_chunk(message: &Value) -> bool {
    message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
}

#[tokio::test]
async fn a_turn_outlives_a_killed_acp_shim_and_a_new_one_loads_its_replay_then_the_live_rest() {
    let server = ModelServer::start().await;
    // 40 pieces 25 ms apart: a turn of a second, still running when the
    // second shim loads the session.
    let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
    let mut text = String::new();
    for i in 0..40 {
        let piece = format!("p{i} ");
        text.push_str(&piece);
        steps.push(SseStep::Delay(Duration::from_millis(25)));
        steps.push(delta(json!({ "content": piece })));
    }
    steps.extend(ending("stop"));
    server.push(Reply::Sse(steps));
    let root = tempfile::tempdir().unwrap();
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});

    let mut first = AcpClient::spawn(&["acp", "--attach"], &server).await;
    let home = first.shared_home();
    let _stop = StopOnDrop(home.path().to_path_buf());
    first.request("initialize", init.clone(), "").await;
    let (_, session) = first.new_session(root.path()).await;
    first
        .start_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "count"}]}),
        )
        .await;
    first
        .read_until(|m| is_chunk(m) && m["params"]["update"]["content"]["text"] == "p2 ")
        .await;
    // The window reloads: only the shim dies.
    first.kill().await;

    let mut second = AcpClient::spawn_in(&["acp", "--attach"], &server, home.clone()).await;
    second.request("initialize", init, "").await;
    let (loaded, replay) = second
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "review",
        "{loaded}"
    );
    let kinds = update_kinds(&replay);
    // The title the first prompt gave the session, then the prompt.
    assert_eq!(
        kinds[..2],
        ["session_info_update", "user_message_chunk"],
        "the replay first: {kinds:?}"
    );
    let replayed = agent_text_of(&replay);
    assert!(replayed.starts_with("p0 p1 p2 "), "{replayed}");
    assert!(
        replayed.len() < text.len(),
        "the turn had ended: {replayed}"
    );

    // Then the rest, live, with nothing missing or doubled.
    let mut seen = replayed.clone();
    let live = second
        .read_until(|m| {
            if is_chunk(m) {
                seen.push_str(m["params"]["update"]["content"]["text"].as_str().unwrap());
            }
            seen.len() >= text.len()
        })
        .await;
    assert_eq!(format!("{replayed}{}", agent_text_of(&live)), text);
    let logged_end = || {
        log_lines(home.path(), &session)
            .into_iter()
            .find(|e| e["type"] == "turn_end")
    };
    poll_until("the turn_end in the log", || logged_end().is_some()).await;
    let turn_end = logged_end().unwrap();
    assert_eq!(
        turn_end["stop_reason"], "end_turn",
        "the turn was not cut short"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_read_waiting_on_a_killed_acp_shim_fails_and_the_turn_goes_on() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "c1",
        "read_file",
        r#"{"path":"notes.txt"}"#,
    )]));
    server.push(openai::text(["Could not read it."]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "saved\n").unwrap();
    let mut client = AcpClient::spawn(&["acp", "--attach"], &server).await;
    let home = client.shared_home();
    let _stop = StopOnDrop(home.path().to_path_buf());
    client
        .request(
            "initialize",
            json!({"protocolVersion": 1,
                   "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
            "",
        )
        .await;
    let (_, session) = client.new_session(root.path()).await;
    client
        .start_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "read it"}]}),
        )
        .await;
    // The read goes to this client, the turn's owner; it never answers.
    let seen = client
        .read_until(|m| m["method"] == "fs/read_text_file")
        .await;
    let read = seen.last().unwrap();
    assert_eq!(read["params"]["sessionId"], session.as_str());
    assert_eq!(
        read["params"]["path"],
        root.path().join("notes.txt").to_str().unwrap()
    );
    client.kill().await;

    // The serve fails the read (the tool says so) and the turn ends.
    let requests = server.wait_for_requests(2).await;
    let transcript = requests[1].body.to_string();
    assert!(
        transcript.contains("the editor could not read `notes.txt`"),
        "{transcript}"
    );
    let logged_end = || {
        log_lines(home.path(), &session)
            .into_iter()
            .find(|e| e["type"] == "turn_end")
    };
    poll_until("the turn_end in the log", || logged_end().is_some()).await;
    assert_eq!(logged_end().unwrap()["stop_reason"], "end_turn");
}
