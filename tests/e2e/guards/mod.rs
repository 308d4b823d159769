//! The turn guards of issue 13 through the real binary: one retry budget
//! per turn, the hard cost caps (turn, session, day across daemon runs) and
//! the compaction-spiral stop — asserted on the wire, in the session log,
//! in `tandem replay` and in the requests the scripted model server got.

use std::path::Path;

use serde_json::Value;

use crate::support::client::{tandem_bin, Editor};
use crate::support::model_server::ModelServer;

mod budget;
pub(crate) mod output_cap;
mod retry_budget;
mod siblings;
pub(crate) mod slow_reader;
mod spiral;
mod stdout_file;
mod stdout_shared;

/// An editor on `root` with a session whose config is the scripted
/// server's with `limits`, and `extra` merged in at the top level.
async fn session_with(
    server: &ModelServer,
    root: &Path,
    limits: Value,
    extra: Value,
) -> (Editor, String) {
    let mut editor = Editor::spawn().await;
    editor.initialize(root).await;
    let session = editor.new_session(config(server, limits, extra)).await;
    (editor, session)
}

fn config(server: &ModelServer, limits: Value, extra: Value) -> Value {
    let mut config = server.session_config_with(limits);
    if let (Some(all), Value::Object(extra)) = (config.as_object_mut(), extra) {
        all.extend(extra);
    }
    config
}

/// The session's log events (the header left out).
fn log_events(editor: &Editor, session: &str) -> Vec<Value> {
    editor.log_lines(session).into_iter().skip(1).collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// `tandem replay <session>` on `home`: its stdout.
fn replay(home: &Path, session: &str) -> String {
    let output = std::process::Command::new(tandem_bin())
        .args(["replay", session])
        .env("TANDEM_HOME", home)
        .output()
        .expect("run tandem replay");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("utf-8 replay")
}
