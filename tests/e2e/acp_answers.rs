//! The client's answers to tandem's requests over ACP are read as ACP's
//! schema types: a malformed one (a missing field, a wrong type) is a
//! specific error in the result of the tool that asked, the turn goes on,
//! and the next prompt still works.

use serde_json::{json, Value};

use crate::acp::{agent_text_of, AcpClient};
use crate::support::model_server::{openai, ModelServer};

/// A scripted client with every facility: `fs/*`, a terminal, questions.
const CAPABILITIES: &str = r#"{"fs": {"readTextFile": true, "writeTextFile": true},
    "terminal": true, "elicitation": {"form": {}}}"#;

/// One malformed answer: the model calls `tool` with `args`; the client
/// answers `method` with `result` and every other request of tandem's
/// well; the model reads `expected` in the tool's result.
struct Case {
    tool: &'static str,
    args: Value,
    method: &'static str,
    result: Value,
    expected: &'static str,
}

/// A well-formed answer to each of tandem's requests, except that a
/// command's `terminal/wait_for_exit` never comes when `hang` (so the
/// command times out and is killed).
fn good_answer(message: &Value, hang: bool) -> Option<Value> {
    Some(match message["method"].as_str()? {
        "session/request_permission" => {
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
        }
        "fs/read_text_file" => json!({"content": "unsaved line\n"}),
        "fs/write_text_file" | "terminal/kill" | "terminal/release" => json!({}),
        "terminal/create" => json!({"terminalId": "term-1"}),
        "terminal/wait_for_exit" if hang => return None,
        "terminal/wait_for_exit" => json!({"exitCode": 0, "signal": null}),
        "terminal/output" => json!({"output": "hi\n", "truncated": false}),
        "elicitation/create" => json!({"action": "accept", "content": {"db": "sqlite"}}),
        _ => return None,
    })
}

/// Runs `case` over the real `tandem acp`; returns the tool's result as
/// the model read it. The turn ends normally and a second prompt works.
async fn malformed_answer(case: Case) -> String {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "c1",
        case.tool,
        &case.args.to_string(),
    )]));
    server.push(openai::text(["Noted."]));
    server.push(openai::text(["Still here."]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "saved line\n").unwrap();
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    // A client's terminal runs only unconfined commands.
    std::fs::write(
        home.path().join("config.toml"),
        "[sandbox]\nmode = \"off\"\n",
    )
    .unwrap();
    let mut client = AcpClient::spawn_in(&["acp"], &server, home).await;
    let capabilities: Value = serde_json::from_str(CAPABILITIES).unwrap();
    client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            "",
        )
        .await;
    let (_, session) = client.new_session(root.path()).await;

    let hang = case.method == "terminal/kill";
    let mut asked = false;
    let (response, before) = client
        .request_answering(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
            |message| {
                if message["method"] == case.method {
                    asked = true;
                    return Some(case.result.clone());
                }
                good_answer(message, hang)
            },
        )
        .await;
    assert!(asked, "no {} in {before:?}", case.method);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text_of(&before), "Noted.");
    let requests = server.wait_for_requests(2).await;
    let result = requests[1]
        .tool_messages()
        .into_iter()
        .find(|(id, _)| id == "c1")
        .map(|(_, content)| content)
        .unwrap_or_else(|| panic!("no tool result in {}", requests[1].body));
    assert!(
        result.contains(case.expected),
        "{:?} not in the tool's result: {result}",
        case.expected
    );

    // The agent keeps serving: the next prompt is a turn like any other.
    let (response, before) = client
        .request_answering(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
            |message| good_answer(message, false),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text_of(&before), "Still here.");
    result
}

fn read_file() -> (&'static str, Value) {
    ("read_file", json!({"path": "notes.txt"}))
}

fn exec(cmd: &str) -> (&'static str, Value) {
    ("exec_command", json!({"cmd": cmd}))
}

fn case(
    (tool, args): (&'static str, Value),
    method: &'static str,
    result: Value,
    expected: &'static str,
) -> Case {
    Case {
        tool,
        args,
        method,
        result,
        expected,
    }
}

#[tokio::test]
async fn a_read_answer_without_content_is_the_read_files_error() {
    malformed_answer(case(
        read_file(),
        "fs/read_text_file",
        json!({"text": "unsaved line\n"}),
        "the editor could not read `notes.txt`: the editor's answer to fs/read_text_file \
         was malformed: missing field `content`",
    ))
    .await;
}

#[tokio::test]
async fn a_read_answer_with_content_of_the_wrong_type_is_the_read_files_error() {
    malformed_answer(case(
        read_file(),
        "fs/read_text_file",
        json!({"content": ["unsaved line"]}),
        "the editor's answer to fs/read_text_file was malformed: invalid type: sequence, \
         expected a string",
    ))
    .await;
}

#[tokio::test]
async fn a_write_answer_that_is_no_object_is_the_patchs_error() {
    malformed_answer(case(
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch"}),
        ),
        "fs/write_text_file",
        json!("written"),
        "the editor could not write `new.txt`: the editor's answer to fs/write_text_file \
         was malformed: invalid type: string \"written\", expected an object",
    ))
    .await;
}

#[tokio::test]
async fn a_terminal_id_of_the_wrong_type_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "terminal/create",
        json!({"terminalId": 7}),
        "the command could not run in the editor's terminal: the editor's answer to \
         terminal/create was malformed: invalid type: integer `7`, expected a string",
    ))
    .await;
}

#[tokio::test]
async fn an_exit_answer_that_is_no_object_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "terminal/wait_for_exit",
        json!(0),
        "the command could not run in the editor's terminal: the editor's answer to \
         terminal/wait_for_exit was malformed: invalid type: integer `0`, expected an object",
    ))
    .await;
}

#[tokio::test]
async fn an_output_answer_without_truncated_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "terminal/output",
        json!({"output": "hi\n"}),
        "the command could not run in the editor's terminal: the editor's answer to \
         terminal/output was malformed: missing field `truncated`",
    ))
    .await;
}

#[tokio::test]
async fn a_malformed_kill_answer_is_noted_with_the_timed_out_output() {
    let result = malformed_answer(case(
        ("exec_command", json!({"cmd": "sleep 30", "timeout_ms": 300})),
        "terminal/kill",
        json!("killed"),
        "[the editor's answer to terminal/kill was malformed: invalid type: string \"killed\", expected an object]",
    ))
    .await;
    assert!(result.contains("killed after timeout"), "{result}");
}

#[tokio::test]
async fn a_malformed_release_answer_is_noted_with_the_output() {
    let result = malformed_answer(case(
        exec("echo hi"),
        "terminal/release",
        json!(true),
        "[the editor's answer to terminal/release was malformed: invalid type: boolean `true`, expected an object]",
    ))
    .await;
    assert!(
        result.contains("exit code 0") && result.contains("hi\n"),
        "{result}"
    );
}

#[tokio::test]
async fn a_permission_answer_without_an_option_is_the_commands_error() {
    // In review mode, with the sandbox off, every command is asked about.
    malformed_answer(case(
        exec("echo hi"),
        "session/request_permission",
        json!({"outcome": {"outcome": "selected"}}),
        "permission to run `echo hi` could not be asked (the editor's answer to \
         session/request_permission was malformed: missing field `optionId`)",
    ))
    .await;
}

#[tokio::test]
async fn a_question_answered_with_an_object_is_the_questions_error() {
    malformed_answer(case(
        (
            "request_user_input",
            json!({"questions": [{"id": "db", "question": "Which database?",
                                  "options": [{"label": "sqlite"}, {"label": "postgres"}]}]}),
        ),
        "elicitation/create",
        json!({"action": "accept", "content": {"db": {"label": "postgres"}}}),
        "the question could not be asked: the editor's answer to elicitation/create was \
         malformed: `content.db` is {\"label\":\"postgres\"}: not a string, number, boolean \
         or array of strings",
    ))
    .await;
}

#[tokio::test]
async fn a_question_answered_without_an_action_is_the_questions_error() {
    malformed_answer(case(
        (
            "request_user_input",
            json!({"questions": [{"id": "db", "question": "Which database?"}]}),
        ),
        "elicitation/create",
        json!({"content": {"db": "postgres"}}),
        "the editor's answer to elicitation/create was malformed: missing field `action`",
    ))
    .await;
}

#[tokio::test]
async fn a_create_answer_without_a_terminal_id_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "terminal/create",
        json!({"id": "term-1"}),
        "the editor's answer to terminal/create was malformed: missing field `terminalId`",
    ))
    .await;
}

#[tokio::test]
async fn an_output_answer_with_truncated_of_the_wrong_type_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "terminal/output",
        json!({"output": "hi\n", "truncated": "no"}),
        "the editor's answer to terminal/output was malformed: invalid type: string \"no\", \
         expected a boolean",
    ))
    .await;
}

#[tokio::test]
async fn a_permission_answer_with_an_option_of_the_wrong_type_is_the_commands_error() {
    malformed_answer(case(
        exec("echo hi"),
        "session/request_permission",
        json!({"outcome": {"outcome": "selected", "optionId": 1}}),
        "the editor's answer to session/request_permission was malformed: invalid type: \
         integer `1`, expected a string",
    ))
    .await;
}
