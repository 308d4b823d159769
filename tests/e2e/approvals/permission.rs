//! Review mode: the `tandem/requestPermission` prompt, each answer an editor
//! can give (once, always, reject, a reason, no capability, an error, a
//! cancelled outcome), and a cancel while the prompt is pending.

use serde_json::{json, Value};

use super::{
    allow_always_only, answer_permission, decisions_with_scopes, exec_call, logged, next_request,
    position, requests_of, review_session, start_prompt_params, tool_result, Caps, PERMISSION,
};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn permission_request_has_the_acp_shape_and_follows_a_waiting_for_permission_update() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "allow_once");

    editor.prompt(&session, "run").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(asked.len(), 1);
    let request = &asked[0];
    assert!(
        request["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tandem-")),
        "{request}"
    );
    let params = &request["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCall"]["toolCallId"], "call_1");
    assert_eq!(params["toolCall"]["kind"], "execute");
    assert_eq!(params["toolCall"]["rawInput"]["cmd"], "touch ran");
    assert!(
        params["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("touch ran"),
        "{params}"
    );
    let options: Vec<(&str, &str)> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        vec![
            ("allow_once", "allow_once"),
            ("allow_always", "allow_always"),
            ("reject_once", "reject_once"),
            ("reject_always", "reject_always"),
        ]
    );
    // The request carries the command itself, for clients that keep no
    // earlier update of the call.
    assert_eq!(
        params["toolCall"]["content"][0]["content"]["text"], "$ touch ran",
        "{params}"
    );
    assert!(params["options"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["name"].as_str().is_some_and(|n| !n.is_empty())));

    let waiting = position(&editor, |m| {
        m["method"] == "tandem/update"
            && m["params"]["update"]["toolCallId"] == "call_1"
            && m["params"]["update"]["waitingFor"] == "permission"
    })
    .expect("a waitingFor: permission update");
    let asked_at = position(&editor, |m| m["method"] == "tandem/requestPermission").unwrap();
    assert!(
        waiting < asked_at,
        "waiting at {waiting}, request at {asked_at}"
    );
    assert_eq!(
        editor.received[waiting]["params"]["update"]["sessionUpdate"],
        "tool_call_update"
    );
}

#[tokio::test]
async fn review_mode_allow_once_runs_the_command() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "allow_once");

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(root.path().join("ran").exists(), "the command did not run");
    let requests = server.wait_for_requests(2).await;
    assert_eq!(tool_result(&requests[1], "call_1"), "exit code 0");
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["decision"], "allow_once");
    assert!(decisions[0].get("scope").is_none(), "{decisions:?}");
}

#[tokio::test]
async fn a_rejection_reason_reaches_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|_, _| {
        Some(json!({"outcome": {"outcome": "selected", "optionId": "reject_once", "reason": "use the Makefile"}}))
    });
    editor.prompt(&session, "run").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(result.contains("they said: use the Makefile"), "{result}");
    assert!(!root.path().join("ran").exists());
}

#[tokio::test]
async fn review_mode_reject_once_does_not_run_the_command_and_tells_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "reject_once");

    let (response, updates) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!root.path().join("ran").exists(), "a rejected command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(result.contains("touch ran"), "{result}");
    let last = updates
        .iter()
        .rfind(|u| u["update"]["toolCallId"] == "call_1")
        .unwrap();
    assert_eq!(last["update"]["status"], "failed");
    assert!(
        !updates.iter().any(
            |u| u["update"]["toolCallId"] == "call_1" && u["update"]["status"] == "in_progress"
        ),
        "a rejected call never starts"
    );
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions[0]["decision"], "reject_once");
}

#[tokio::test]
async fn review_mode_allow_always_remembers_the_command_prefix_in_later_turns() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "ls -a"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "ls -l"})));
    server.push(openai::text(["second"]));
    server.push(exec_call("call_3", json!({"cmd": "touch other"})));
    server.push(openai::text(["third"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    allow_always_only(&mut editor, "ls -a");

    let (first, _) = editor.prompt(&session, "list").await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let (second, _) = editor.prompt(&session, "list again").await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        requests_of(&editor, "tandem/requestPermission").len(),
        1,
        "`ls -l` is covered by the `ls` allowed always"
    );
    let requests = server.wait_for_requests(4).await;
    assert!(tool_result(&requests[1], "call_1").starts_with("exit code 0"));
    assert!(tool_result(&requests[3], "call_2").starts_with("exit code 0"));

    // Another program is not covered: it asks again.
    editor.prompt(&session, "touch").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(asked.len(), 2);
    assert_eq!(
        asked[1]["params"]["toolCall"]["rawInput"]["cmd"],
        "touch other"
    );
    assert!(!root.path().join("other").exists());

    let decisions = decisions_with_scopes(&editor, &session);
    assert_eq!(
        decisions,
        vec![
            ("allow_always".to_string(), json!("ls")),
            ("allowed_by_rule".to_string(), json!("ls")),
            ("reject_once".to_string(), Value::Null),
        ]
    );
    // Persisting the rule across a reload is tandem/loadSession's (issue
    // 5); the decision it will rebuild from is in the log above.
}

#[tokio::test]
async fn allow_always_for_a_shell_command_does_not_allow_other_shell_commands() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "sh -c 'echo hi'"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "sh -c 'touch pwned'"})));
    server.push(openai::text(["second"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    allow_always_only(&mut editor, "sh -c 'echo hi'");

    editor.prompt(&session, "hi").await;
    editor.prompt(&session, "something else").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(
        asked.len(),
        2,
        "a shell runs anything: each new script asks"
    );
    assert!(
        !root.path().join("pwned").exists(),
        "the second script ran unasked"
    );
    let label = asked[0]["params"]["options"][1]["name"].as_str().unwrap();
    assert!(label.contains("sh -c 'echo hi'"), "{label}");
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions[0]["scope"], "sh -c 'echo hi'");
}

#[tokio::test]
async fn review_mode_reject_always_blocks_the_command_prefix_without_asking_again() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "rm -f one"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "rm -f two"})));
    server.push(openai::text(["second"]));
    let root = tempfile::tempdir().unwrap();
    for name in ["one", "two"] {
        std::fs::write(root.path().join(name), "keep me").unwrap();
    }
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "reject_always");

    editor.prompt(&session, "one").await;
    let (second, _) = editor.prompt(&session, "two").await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        requests_of(&editor, "tandem/requestPermission").len(),
        1,
        "`rm -f two` is covered by the `rm` rejected always"
    );
    assert!(root.path().join("one").exists() && root.path().join("two").exists());
    let requests = server.wait_for_requests(4).await;
    assert!(tool_result(&requests[1], "call_1").starts_with("rejected:"));
    let blocked = tool_result(&requests[3], "call_2");
    assert!(blocked.starts_with("rejected:"), "{blocked}");
    let decisions = decisions_with_scopes(&editor, &session);
    assert_eq!(
        decisions,
        vec![
            ("reject_always".to_string(), json!("rm")),
            ("rejected_by_rule".to_string(), json!("rm")),
        ]
    );
}

#[tokio::test]
async fn review_mode_without_the_permission_capability_counts_as_rejection_and_asks_nothing() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;
    answer_permission(&mut editor, "allow_once");

    let (response, updates) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(requests_of(&editor, "tandem/requestPermission").is_empty());
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(
        !updates
            .iter()
            .any(|u| u["update"]["waitingFor"].is_string()),
        "nobody is asked, so nothing waits for the user: {updates:?}"
    );
}

#[tokio::test]
async fn review_mode_method_not_found_answer_counts_as_rejection() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    // Declares the capability, then answers -32601 (no handler).
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&editor, "tandem/requestPermission").len(), 1);
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
}

#[tokio::test]
async fn review_mode_cancelled_permission_outcome_counts_as_rejection() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|method, _| {
        (method == "tandem/requestPermission").then(|| json!({"outcome": {"outcome": "cancelled"}}))
    });

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert_eq!(
        logged(&editor, &session, "approval_decided")[0]["decision"],
        "dismissed"
    );
}

#[tokio::test]
async fn cancel_while_permission_is_pending_withdraws_the_request_and_runs_nothing() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.hold_requests("tandem/requestPermission");

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "run"))
        .await;
    let asked = next_request(&mut editor, "tandem/requestPermission").await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let withdrawn = editor
        .wait_notification("$/cancelRequest", |p| p["id"] == asked["id"])
        .await;
    let (response, at) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let withdrawn_at = editor
        .received
        .iter()
        .position(|m| *m == withdrawn)
        .unwrap();
    assert!(withdrawn_at < at, "withdrawn before the prompt is answered");
    assert!(!root.path().join("ran").exists(), "the command ran");
    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results[0]["status"], "not_run", "{results:?}");
}

#[tokio::test]
async fn always_is_offered_only_with_what_it_would_remember() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "apply_patch",
        &json!({"input": "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** End Patch"}).to_string(),
    )]));
    server.push(openai::text(["patched"]));
    server.push(exec_call("call_2", json!({"cmd": "ls && ls"})));
    server.push(openai::text(["chained"]));
    server.push(exec_call("call_3", json!({"cmd": "make build"})));
    server.push(openai::text(["made"]));
    let root = tempfile::tempdir().unwrap();
    // No `workspace.applyEdit`: the patch is asked as a permission.
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "reject_once");

    for text in ["patch", "chain", "make"] {
        let (response, _) = editor.prompt(&session, text).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(asked.len(), 3);
    let options = |request: &Value| -> Vec<(String, String)> {
        request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["optionId"].as_str().unwrap().to_string(),
                    o["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let once_only = vec![
        ("allow_once".to_string(), "Allow once".to_string()),
        ("reject_once".to_string(), "Reject".to_string()),
    ];
    // A patch through the permission fallback and a chained command leave
    // nothing to remember, so "always" is not offered; no request offers
    // two options of one kind (an unsandboxed run is a request of its own).
    assert_eq!(options(&asked[0]), once_only, "{}", asked[0]);
    assert_eq!(options(&asked[1]), once_only, "{}", asked[1]);
    for request in &asked {
        let kinds: Vec<&str> = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        let distinct: std::collections::HashSet<_> = kinds.iter().collect();
        assert_eq!(distinct.len(), kinds.len(), "{kinds:?}");
    }
    // The patch's request carries its diff.
    let content = &asked[0]["params"]["toolCall"]["content"];
    assert_eq!(content[0]["type"], "diff", "{content}");
    assert!(content[0]["path"].as_str().unwrap().ends_with("new.txt"));
    assert_eq!(content[0]["newText"], "hi\n");
    // A task runner is remembered as its exact command, and says so.
    let make = options(&asked[2]);
    assert_eq!(make.len(), 4, "{make:?}");
    assert_eq!(make[1].1, "Always allow `make build` in this session");
    assert_eq!(make[3].1, "Always reject `make build` in this session");
    assert!(!root.path().join("new.txt").exists());
}
