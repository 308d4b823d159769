//! `tandem/attachSession` through `tandem serve`: a second window follows
//! a session another window made, without its history (`replay: false`)
//! and with it; either way it hears the turns from then on, and the
//! history only when it asked for it.

use std::sync::Arc;

use serde_json::json;

use super::{attach_options, StopOnDrop};
use crate::support::client::{agent_text, Editor};
use crate::support::model_server::openai::text;
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn a_window_attached_without_replay_hears_only_what_happens_next() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let root = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    model.push(text(["before"]));
    model.push(text(["after"]));

    let mut a = Editor::spawn_with(attach_options(&home)).await;
    a.initialize(root.path()).await;
    let session = a.new_session(model.session_config()).await;
    let (first, _) = a.prompt(&session, "one").await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");

    let mut quiet = Editor::spawn_with(attach_options(&home)).await;
    quiet.initialize(root.path()).await;
    let attached = quiet
        .request(
            "tandem/attachSession",
            json!({"sessionId": session, "replay": false}),
        )
        .await;
    assert_eq!(attached["result"]["sessionId"], session, "{attached}");
    assert_eq!(attached["result"]["replayed"], 0, "{attached}");
    let mut full = Editor::spawn_with(attach_options(&home)).await;
    full.initialize(root.path()).await;
    let replayed = full
        .request("tandem/attachSession", json!({"sessionId": session}))
        .await;
    assert!(
        replayed["result"]["replayed"].as_u64().unwrap_or(0) > 0,
        "{replayed}"
    );
    assert_eq!(agent_text(&full.updates_of(&session)), "before");

    let (second, _) = a.prompt(&session, "two").await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    for window in [&mut quiet, &mut full] {
        window
            .wait_update(&session, |u| {
                u["sessionUpdate"] == "agent_message_chunk" && u["content"]["text"] == "after"
            })
            .await;
    }
    assert_eq!(
        agent_text(&quiet.updates_of(&session)),
        "after",
        "no history, then the next turn"
    );
    assert_eq!(agent_text(&full.updates_of(&session)), "beforeafter");
}
