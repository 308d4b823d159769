//! Message repair: a repair of the model's history that fires is logged as
//! `history_repaired`.

use serde_json::{json, Value};

use super::{config, log_events, of_type, roles_and_contents};
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn a_repair_that_fires_is_logged_as_history_repaired() {
    let server = ModelServer::start().await;
    server.push(openai::text(["first answer"]));
    server.push(openai::text(["second answer"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    // No proactive compaction: this is about the trimming repair.
    let mut config = config(&server, json!({"compact_threshold": 1e12}));
    // A window so small that only the system prompt and the prompts fit.
    config["model"]["context_window"] = json!(1);
    let session = editor.new_session(config).await;

    let (response, _) = editor.prompt(&session, "first question").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        of_type(&log_events(&editor, &session), "history_repaired").is_empty(),
        "nothing to trim while the newest prompt is the only message"
    );
    let (response, _) = editor.prompt(&session, "second question").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let log = log_events(&editor, &session);
    let repairs = of_type(&log, "history_repaired");
    assert_eq!(repairs.len(), 1, "{log:#?}");
    assert_eq!(repairs[0]["repair"], "trim_to_context");
    assert_eq!(repairs[0]["turn_id"], "t2");
    let reason = repairs[0]["reason"].as_str().unwrap();
    assert!(reason.contains("context window of 1 tokens"), "{reason}");
    // Logged at the step it repaired, before that step's model call.
    let at = |pred: &dyn Fn(&Value) -> bool| log.iter().position(pred).unwrap();
    let repaired = at(&|e| e["type"] == "history_repaired");
    let step = at(&|e| e["type"] == "step_start" && e["turn_id"] == "t2");
    let anchor = at(&|e| e["type"] == "assistant_message" && e["turn_id"] == "t2");
    assert!(step < repaired && repaired < anchor);

    let requests = server.requests();
    let second = roles_and_contents(&requests[1]);
    let roles: Vec<&str> = second.iter().map(|(r, _)| r.as_str()).collect();
    // The first request and the newest prompt stay; the old answer goes.
    assert_eq!(roles, ["system", "user", "user"]);
    assert_eq!(second[1].1, "first question");
    assert_eq!(second[2].1, "second question");
}
