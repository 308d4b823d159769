//! `request_user_input`: offered only to an editor that declares it, its
//! answers becoming the tool result, and a cancel while a question is pending.

use serde_json::{json, Value};

use super::{
    logged, next_request, offered_tools, position, requests_of, review_session,
    start_prompt_params, tool_result, Caps, USER_INPUT,
};
use crate::support::model_server::{openai, ModelServer};

const QUESTIONS: &str = r#"{"questions":[{"id":"db","question":"Which database?","options":[{"label":"sqlite"},{"label":"postgres","description":"the server"}]}]}"#;

#[tokio::test]
async fn request_user_input_is_offered_only_to_a_client_that_declares_it() {
    let server = ModelServer::start().await;
    server.push(openai::text(["hi"]));
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    server.push(openai::text(["cannot ask"]));
    let root = tempfile::tempdir().unwrap();

    let (mut declaring, session) = review_session(&server, root.path(), USER_INPUT).await;
    declaring.prompt(&session, "hi").await;
    let requests = server.wait_for_requests(1).await;
    assert!(offered_tools(&requests[0]).contains(&"request_user_input".to_string()));

    let (mut silent, session) = review_session(&server, root.path(), Caps::default()).await;
    silent.prompt(&session, "ask").await;
    let requests = server.wait_for_requests(3).await;
    assert!(!offered_tools(&requests[1]).contains(&"request_user_input".to_string()));
    // Called anyway: refused, and nothing is sent to the editor.
    let result = tool_result(&requests[2], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(requests_of(&silent, "tandem/requestUserInput").is_empty());
}

#[tokio::test]
async fn request_user_input_answers_become_the_tool_result() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    server.push(openai::text(["thanks"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), USER_INPUT).await;
    editor.on_request(|method, _| {
        (method == "tandem/requestUserInput")
            .then(|| json!({"answers": {"db": {"answers": ["postgres"]}}}))
    });

    let (response, _) = editor.prompt(&session, "ask me").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let asked = requests_of(&editor, "tandem/requestUserInput");
    assert_eq!(asked.len(), 1);
    let params = &asked[0]["params"];
    assert!(asked[0]["id"].as_str().unwrap().starts_with("tandem-"));
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCallId"], "call_1");
    assert_eq!(
        params["questions"],
        serde_json::from_str::<Value>(QUESTIONS).unwrap()["questions"]
    );
    let waiting = position(&editor, |m| {
        m["params"]["update"]["toolCallId"] == "call_1"
            && m["params"]["update"]["waitingFor"] == "input"
    })
    .expect("a waitingFor: input update");
    let asked_at = position(&editor, |m| m["method"] == "tandem/requestUserInput").unwrap();
    assert!(waiting < asked_at);

    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(!result.starts_with("error:"), "{result}");
    assert!(
        result.contains(r#"{"db":{"answers":["postgres"]}}"#),
        "{result}"
    );
}

#[tokio::test]
async fn cancel_while_a_question_is_pending_withdraws_it_and_ends_the_turn_cancelled() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), USER_INPUT).await;
    editor.hold_requests("tandem/requestUserInput");

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "ask"))
        .await;
    let asked = next_request(&mut editor, "tandem/requestUserInput").await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, at) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let withdrawn = position(&editor, |m| {
        m["method"] == "$/cancelRequest" && m["params"]["id"] == asked["id"]
    })
    .unwrap_or_else(|| panic!("no $/cancelRequest for {}", asked["id"]));
    assert!(withdrawn < at, "withdrawn before the prompt is answered");
    assert_eq!(server.requests().len(), 1, "no model call after the cancel");
    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results[0]["status"], "aborted", "{results:?}");

    // The session is usable afterwards, and the withdrawn question does not
    // linger: a late answer to it is ignored.
    editor
        .send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"answers": {"db": "late"}}}))
        .await;
    server.push(openai::text(["fresh"]));
    let (next, _) = editor.prompt(&session, "again").await;
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
}
