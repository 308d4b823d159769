//! `[tasks.<id>]`: configured tasks with templates, overrides of the
//! built-ins, and definitions that are refused without taking the others
//! down.

use serde_json::{json, Value};

use super::{last_user_message, range, Fixture};
use crate::support::client::file_uri;
use crate::support::model_server::openai;

const FILE: &str = "def area(r):\n    return 3.14 * r * r\n\n";

fn titles(actions: &Value) -> Vec<String> {
    actions
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| a["title"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_configured_task_is_offered_and_its_template_is_what_the_model_reads() {
    let mut fixture = Fixture::start(json!({})).await;
    std::fs::create_dir_all(fixture.root.join(".tandem")).expect("mkdir");
    std::fs::write(
        fixture.root.join(".tandem/config.toml"),
        r#"
[tasks.review]
title = "Review"
kind = "quickfix"
when = "always"
prompt = "Review this {language} from {file} ({{strictly}}):\n{selection}\nKnown problems:\n{diagnostics}"

[tasks.explain]
title = "Explain briefly"

[tasks.tests]
enabled = false
"#,
    )
    .expect("write config");
    let path = fixture.open("geo.py", FILE).await;

    let actions = fixture
        .code_actions(&path, range((0, 0), (2, 0)), json!([]))
        .await;
    assert_eq!(
        titles(&actions),
        [
            "tandem: Explain briefly",
            "tandem: Edit selection…",
            "tandem: Document",
            "tandem: Review"
        ]
    );
    assert_eq!(actions[3]["kind"], "quickfix");
    // `when = "always"`: even a cursor on a blank line offers it.
    let blank = fixture
        .code_actions(&path, range((2, 0), (2, 0)), json!([]))
        .await;
    assert_eq!(titles(&blank), ["tandem: Review"]);

    fixture.server.push(openai::text(["looks fine"]));
    let result = fixture
        .run_task(json!({
            "task": "review",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((0, 0), (2, 0)),
        }))
        .await;
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let requests = fixture.server.wait_for_requests(1).await;
    let asked = last_user_message(&requests[0].body);
    assert!(
        asked.starts_with(
            "Review this python from geo.py ({strictly}):\n```python\ndef area(r):\n    return 3.14 * r * r\n```\nKnown problems:\n(none)\n\n"
        ),
        "{asked}"
    );

    // The configuration is read again when the file changes.
    std::fs::write(
        fixture.root.join(".tandem/config.toml"),
        "[tasks.review]\ntitle = \"Review again\"\nprompt = \"x\"\nwhen = \"always\"\n",
    )
    .expect("rewrite config");
    let filetime = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(fixture.root.join(".tandem/config.toml"))
        .and_then(|f| f.set_modified(filetime))
        .expect("touch");
    let again = fixture
        .code_actions(&path, range((2, 0), (2, 0)), json!([]))
        .await;
    assert_eq!(titles(&again), ["tandem: Review again"]);
}

#[tokio::test]
async fn a_bad_task_is_refused_by_name_and_key_and_the_others_keep_working() {
    let mut fixture = Fixture::start(json!({"tasks": {
        "broken": {"title": "Broken", "prompt": "x", "edit": "everything"},
        "typo": {"titel": "Typo", "prompt": "x"},
        "review": {"title": "Review", "prompt": "Review {selction}"},
        "ok": {"title": "Fine", "prompt": "Look at {selection}", "when": "always"},
    }}))
    .await;
    let path = fixture.open("geo.py", FILE).await;
    let actions = fixture
        .code_actions(&path, range((0, 0), (1, 0)), json!([]))
        .await;
    assert_eq!(
        titles(&actions),
        [
            "tandem: Explain",
            "tandem: Edit selection…",
            "tandem: Document",
            "tandem: Write tests",
            "tandem: Fine"
        ]
    );

    let uri = file_uri(&path);
    for (task, message) in [
        ("broken", "task `broken` is not available: its definition was refused: [tasks.broken] `edit`: `everything` is not one of `selection`, `workspace`, `none`"),
        ("typo", "task `typo` is not available: its definition was refused: [tasks.typo] `titel`: unknown key, expected one of `title`, `prompt`, `kind`, `edit`, `when`, `enabled`"),
        ("review", "task `review` is not available: its definition was refused: [tasks.review] `prompt`: unknown placeholder `{selction}`, expected one of `{selection}`, `{file}`, `{language}`, `{diagnostics}`, `{instruction}`"),
    ] {
        let response = fixture
            .run_task(json!({"task": task, "textDocument": {"uri": uri}, "range": range((0, 0), (1, 0))}))
            .await;
        assert_eq!(response["error"]["code"], -32602, "{response}");
        assert_eq!(response["error"]["message"], message);
    }
    assert!(fixture.server.requests().is_empty());

    fixture.server.push(openai::text(["ok"]));
    let fine = fixture
        .run_task(
            json!({"task": "ok", "textDocument": {"uri": uri}, "range": range((0, 0), (1, 0))}),
        )
        .await;
    assert_eq!(fine["result"]["stopReason"], "end_turn", "{fine}");
    // A chat session made the usual way still works too.
    let session = fixture
        .editor
        .new_session(fixture.server.session_config())
        .await;
    fixture.server.push(openai::text(["hi"]));
    let (response, _) = fixture.editor.prompt(&session, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_tasks_layer_of_the_wrong_shape_is_an_initialize_error() {
    let mut editor = crate::support::client::Editor::spawn().await;
    let response = editor
        .request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {}, "initializationOptions": {"tasks": 3}}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("initializationOptions: "),
        "{response}"
    );
}
