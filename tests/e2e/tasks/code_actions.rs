//! `textDocument/codeAction`: which tasks a range offers, and the
//! `tandem.runTask` command each carries.

use serde_json::{json, Value};

use super::{diagnostic, range, Fixture};
use crate::support::client::file_uri;
use crate::support::model_server::{openai, Reply, SseStep};

const FILE: &str = "fn main() {\n    let x: u8 = \"a\";\n\n    println!(\"{x}\");\n}\n";

fn titles(actions: &Value) -> Vec<String> {
    actions
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| a["title"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn initialize_announces_code_actions_and_the_run_task_command() {
    let fixture = Fixture::start(json!({})).await;
    let init = fixture
        .editor
        .received
        .iter()
        .find(|m| m["id"] == 1)
        .expect("initialize response")
        .clone();
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["codeActionProvider"],
        json!({"codeActionKinds": ["quickfix", "refactor.rewrite", "source"], "resolveProvider": false})
    );
    assert_eq!(
        caps["executeCommandProvider"],
        json!({"commands": ["tandem.runTask"]})
    );
    let methods = caps["experimental"]["tandem"]["methods"]
        .as_array()
        .expect("methods");
    assert!(methods.contains(&json!("tandem/runTask")), "{methods:?}");
}

#[tokio::test]
async fn a_selection_without_diagnostics_offers_every_task_but_fix() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    let actions = fixture
        .code_actions(&path, range((1, 4), (1, 20)), json!([]))
        .await;
    assert_eq!(
        titles(&actions),
        [
            "tandem: Explain",
            "tandem: Edit selection…",
            "tandem: Document",
            "tandem: Write tests"
        ]
    );
    let explain = &actions[0];
    assert_eq!(explain["kind"], "refactor.rewrite");
    assert!(explain.get("isPreferred").is_none(), "{explain}");
    assert_eq!(
        explain["command"],
        json!({
            "title": "tandem: Explain",
            "command": "tandem.runTask",
            "arguments": [{
                "task": "explain",
                "uri": file_uri(&path),
                "range": range((1, 4), (1, 20)),
                "version": 1,
                "diagnostics": [],
            }],
        })
    );
    assert_eq!(actions[3]["kind"], "source");
}

#[tokio::test]
async fn diagnostics_in_the_range_bring_a_preferred_fix_that_carries_only_them() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    let inside = diagnostic((1, 16), (1, 19), "mismatched types");
    let outside = diagnostic((3, 4), (3, 12), "unused");
    let actions = fixture
        .code_actions(&path, range((1, 0), (2, 0)), json!([inside, outside]))
        .await;
    assert_eq!(titles(&actions)[0], "tandem: Fix");
    let fix = &actions[0];
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["isPreferred"], true);
    assert_eq!(fix["diagnostics"], json!([inside]));
    assert_eq!(
        fix["command"]["arguments"][0]["diagnostics"],
        json!([inside])
    );
    assert_eq!(fix["command"]["arguments"][0]["task"], "fix");
    // The other tasks carry the diagnostics too, and are not preferred.
    assert!(actions.as_array().unwrap()[1..]
        .iter()
        .all(|a| a.get("isPreferred").is_none()
            && a["command"]["arguments"][0]["diagnostics"] == json!([inside])));
}

#[tokio::test]
async fn a_cursor_offers_the_tasks_of_its_line_and_a_blank_line_offers_none() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    let on_code = fixture
        .code_actions(&path, range((1, 6), (1, 6)), json!([]))
        .await;
    assert_eq!(titles(&on_code).len(), 4, "{on_code}");
    assert_eq!(
        on_code[0]["command"]["arguments"][0]["range"],
        range((1, 0), (1, 20)),
        "the range is the cursor's whole line"
    );
    let blank = fixture
        .code_actions(&path, range((2, 0), (2, 0)), json!([]))
        .await;
    assert_eq!(blank, json!([]));
    // `only` filters by kind.
    let response = fixture
        .editor
        .request(
            "textDocument/codeAction",
            json!({
                "textDocument": {"uri": file_uri(&path)},
                "range": range((1, 0), (1, 5)),
                "context": {"diagnostics": [], "only": ["source"]},
            }),
        )
        .await;
    assert_eq!(titles(&response["result"]), ["tandem: Write tests"]);
}

#[tokio::test]
async fn code_actions_are_answered_while_a_turn_is_stuck_streaming() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    let session = fixture
        .editor
        .new_session(fixture.server.session_config())
        .await;
    fixture.server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "thinking about it"})),
        SseStep::Stall,
    ]));
    let prompt = fixture.editor.start_prompt(&session, "go").await;
    fixture
        .editor
        .wait_update(&session, |u| u["sessionUpdate"] == "agent_message_chunk")
        .await;
    let actions = fixture
        .code_actions(&path, range((1, 4), (1, 20)), json!([]))
        .await;
    assert_eq!(titles(&actions).len(), 4);
    fixture
        .editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = fixture.editor.response(prompt).await;
    assert_eq!(response["result"]["stopReason"], "cancelled");
}
