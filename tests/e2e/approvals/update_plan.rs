//! `update_plan`: the plan update the editor gets, and the tool error the
//! model reads for an invalid plan.

use serde_json::json;

use super::{logged, review_session, tool_result, Caps};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn update_plan_sends_a_plan_update_with_acp_entries() {
    let server = ModelServer::start().await;
    let plan = json!({"explanation": "small steps", "plan": [
        {"step": "read the code", "status": "completed"},
        {"step": "write the test", "status": "in_progress"},
        {"step": "fix the bug", "status": "pending"},
    ]});
    server.push(openai::tool_calls(&[(
        "call_1",
        "update_plan",
        &plan.to_string(),
    )]));
    server.push(openai::text(["planned"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;

    let (response, updates) = editor.prompt(&session, "plan").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let plan_update = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(plan_update["turnId"], "t1");
    assert_eq!(
        plan_update["update"]["entries"],
        json!([
            {"content": "read the code", "priority": "medium", "status": "completed"},
            {"content": "write the test", "priority": "medium", "status": "in_progress"},
            {"content": "fix the bug", "priority": "medium", "status": "pending"},
        ])
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(!result.starts_with("error:"), "{result}");
    let plans = logged(&editor, &session, "plan");
    assert_eq!(plans.len(), 1, "the plan is logged");
}

#[tokio::test]
async fn a_plan_with_two_steps_in_progress_is_a_tool_error_the_model_reads() {
    let server = ModelServer::start().await;
    let plan = json!({"plan": [
        {"step": "one", "status": "in_progress"},
        {"step": "two", "status": "in_progress"},
    ]});
    server.push(openai::tool_calls(&[(
        "call_1",
        "update_plan",
        &plan.to_string(),
    )]));
    server.push(openai::text(["oops"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;

    let (response, updates) = editor.prompt(&session, "plan").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !updates
            .iter()
            .any(|u| u["update"]["sessionUpdate"] == "plan"),
        "a bad plan is not shown"
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(
        result.contains("at most one step may be in_progress"),
        "{result}"
    );
}
