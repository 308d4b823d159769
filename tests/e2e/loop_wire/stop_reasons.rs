//! Stop reasons and tool errors the model can correct: a sticky
//! `max_tokens`, malformed arguments and unknown tools.

use serde_json::json;

use super::{assert_every_call_has_one_result, log_events, of_type, session_with, tool_results};
use crate::support::model_server::{openai, ModelServer, Reply};

#[tokio::test]
async fn max_tokens_is_sticky_for_the_turn_once_a_step_hits_it() {
    let server = ModelServer::start().await;
    // A step cut off at the output limit that still carries a whole call.
    server.push(Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": null})),
        openai::delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}]}),
        ),
        openai::finish("length"),
        openai::usage(10, 5, 4),
        openai::done(),
    ]));
    server.push(openai::text(["complete answer"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, _) = editor.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "max_tokens", "{response}");
    assert_eq!(server.requests().len(), 2, "the call still ran");
    let log = log_events(&editor, &session);
    let finishes: Vec<&str> = of_type(&log, "assistant_message")
        .iter()
        .map(|e| e["finish_reason"].as_str().unwrap())
        .collect();
    assert_eq!(finishes, ["length", "stop"]);
    assert_eq!(
        tool_results(&log),
        [("call_1".to_string(), "completed".to_string())]
    );
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_become_errors_the_model_can_read() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_bad", "read_file", r#"{"path": "a.txt""#),
        ("call_unknown", "write_poem", r#"{"topic":"rust"}"#),
        ("call_ok", "read_file", r#"{"path":"a.txt"}"#),
    ]));
    server.push(openai::text(["fixed it"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, _) = editor.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    let results = requests[1].tool_messages();
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_bad", "call_unknown", "call_ok"]);
    assert!(
        results[0]
            .1
            .starts_with("error: the arguments are not valid JSON"),
        "{results:?}"
    );
    assert!(
        results[1].1.starts_with("error: unknown tool `write_poem`")
            && results[1].1.contains("read_file"),
        "{results:?}"
    );
    assert!(results[2].1.contains("alpha"), "{results:?}");
    let log = log_events(&editor, &session);
    assert_every_call_has_one_result(&log);
}
