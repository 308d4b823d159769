//! An editor whose answer to `tandem/requestPermission` or
//! `tandem/requestUserInput` is malformed: the model is told exactly what
//! was wrong with it, nothing runs on the strength of it, and the daemon
//! keeps serving (the next prompt is answered).

use super::*;

const QUESTIONS: &str = r#"{"questions":[{"id":"db","question":"Which database?"}]}"#;

/// Runs one prompt whose only call is `call`, with the editor answering
/// `method` with `answer`; returns what the model was told about the call,
/// after checking that a second prompt still gets its answer.
async fn told_after_answering(
    caps: Caps,
    call: Reply,
    method: &'static str,
    answer: Value,
) -> String {
    let server = ModelServer::start().await;
    server.push(call);
    server.push(openai::text(["noted"]));
    server.push(openai::text(["still here"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), caps).await;
    editor.on_request(move |m, _| (m == method).then(|| answer.clone()));

    let (response, _) = editor.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&editor, method).len(), 1);
    let (again, _) = editor.prompt(&session, "again").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(3).await;
    tool_result(&requests[1], "call_1")
}

#[tokio::test]
async fn a_permission_answer_without_an_option_is_named_and_runs_nothing() {
    let told = told_after_answering(
        PERMISSION,
        exec_call("call_1", json!({"cmd": "touch ran"})),
        "tandem/requestPermission",
        json!({"outcome": {"outcome": "selected"}}),
    )
    .await;
    assert!(
        told.contains(
            "the editor's answer to tandem/requestPermission was malformed: missing field `optionId`"
        ),
        "{told}"
    );
}

#[tokio::test]
async fn a_permission_answer_of_the_wrong_type_is_named_and_runs_nothing() {
    let told = told_after_answering(
        PERMISSION,
        exec_call("call_1", json!({"cmd": "touch ran"})),
        "tandem/requestPermission",
        json!({"outcome": "allow_once"}),
    )
    .await;
    assert!(
        told.contains("the editor's answer to tandem/requestPermission was malformed: invalid type: string \"allow_once\""),
        "{told}"
    );
}

#[tokio::test]
async fn a_question_answered_without_answers_is_named_to_the_model() {
    let told = told_after_answering(
        USER_INPUT,
        openai::tool_calls(&[("call_1", "request_user_input", QUESTIONS)]),
        "tandem/requestUserInput",
        json!({"answer": "sqlite"}),
    )
    .await;
    assert!(
        told.contains(
            "the editor's answer to tandem/requestUserInput was malformed: missing field `answers`"
        ),
        "{told}"
    );
}
