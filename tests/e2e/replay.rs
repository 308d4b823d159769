//! `tandem replay` through the real binary: sessions driven over the wire,
//! killed with SIGKILL mid-stream and mid-tool, cancelled before and after
//! the first chunk, with permission prompts — and the replay's counts
//! checked against what the model server and the editor saw.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::support::client::{tandem_bin, Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

fn config_for(server: &ModelServer, mode: &str) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config
}

async fn editor_in(home: Option<std::sync::Arc<tempfile::TempDir>>, root: &Path) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home,
        ..EditorOptions::default()
    })
    .await;
    editor
        .initialize_with(
            root,
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    editor
}

/// Runs `tandem replay <session> <args>` on `home`.
fn run_replay(home: &Path, session: &str, args: &[&str]) -> Output {
    std::process::Command::new(tandem_bin())
        .arg("replay")
        .arg(session)
        .args(args)
        .env("TANDEM_HOME", home)
        .output()
        .unwrap()
}

/// The human replay; fails the test if the command fails.
fn replay_text(home: &Path, session: &str, args: &[&str]) -> String {
    let output = run_replay(home, session, args);
    assert!(
        output.status.success(),
        "replay failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `--json`: every line parsed.
fn replay_json(home: &Path, session: &str, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    replay_text(home, session, &all)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The line of `text` containing `needle`.
fn line_with<'t>(text: &'t str, needle: &str) -> &'t str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

fn text_then_stall(text: &str) -> Reply {
    Reply::Sse(vec![
        openai::delta(json!({"content": text})),
        SseStep::Stall,
    ])
}

#[tokio::test]
async fn a_killed_session_replays_as_open_with_its_request_cut_short_and_recovery_is_marked() {
    let server = ModelServer::start().await;
    server.push(text_then_stall("partial answer"));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server, "auto")).await;
    editor.start_prompt(&session, "the first prompt").await;
    editor
        .wait_update(&session, |u| u["sessionUpdate"] == "agent_message_chunk")
        .await;
    let home = editor.home.clone();
    let sessions = home.path().join("sessions");

    // While the daemon runs the turn, the replay says so.
    let text = replay_text(home.path(), &session, &[]);
    let pid = editor.pid();
    assert!(
        text.contains(&format!("== t1 is open (running in daemon pid {pid})")),
        "{text}"
    );
    assert!(
        text.contains(
            "model request (step 1, attempt 1) in flight, 1 chunk streamed (14 chars of answer)"
        ),
        "{text}"
    );

    let home = editor.kill_9().await;
    let log_path = sessions.join(format!("{session}.jsonl"));
    let before = std::fs::read(&log_path).unwrap();
    let text = replay_text(home.path(), &session, &[]);
    assert!(
        text.contains("model request (step 1, attempt 1) sent to openai"),
        "{text}"
    );
    assert!(
        text.contains("model request (step 1, attempt 1) cut short (the daemon stopped), 1 chunk streamed (14 chars of answer); no answer, usage unknown"),
        "{text}"
    );
    assert!(
        text.contains("== t1 is open (daemon not running)"),
        "{text}"
    );
    let lines = replay_json(home.path(), &session, &[]);
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "replay_summary", "{summary}");
    assert_eq!(summary["open_turn"]["turn_id"], "t1", "{summary}");
    assert_eq!(summary["open_turn"]["daemon"], "not_running", "{summary}");
    assert_eq!(
        summary["model_requests"]["sent"],
        server.requests().len(),
        "{summary}"
    );
    assert_eq!(summary["model_requests"]["cut_short"], 1, "{summary}");
    // Replay only reads: the log is as the dead daemon left it, and so is
    // its (stale) lock.
    assert_eq!(std::fs::read(&log_path).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(sessions.join(format!("{session}.lock"))).unwrap(),
        pid.to_string()
    );

    // A daemon loads it: recovery closes the turn; the replay tells the
    // crash from the load.
    let last_before: Value = serde_json::from_slice(
        before
            .split(|&b| b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap(),
    )
    .unwrap();
    let mut editor = editor_in(Some(home), root.path()).await;
    let response = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(
        response["result"]["sessionId"],
        session.as_str(),
        "{response}"
    );
    let log = editor.log_lines(&session);
    let end = log.iter().find(|e| e["type"] == "turn_end").unwrap();
    assert_eq!(end["stop_reason"], "interrupted");
    assert_eq!(end["recovered"]["after_seq"], last_before["seq"], "{end}");
    assert_eq!(end["recovered"]["after_ts"], last_before["ts"], "{end}");
    assert!(log
        .iter()
        .filter(|e| e["seq"].as_u64() <= last_before["seq"].as_u64())
        .all(|e| e.get("recovered").is_none()));

    let home = editor.home.clone();
    let text = replay_text(home.path(), &session, &[]);
    let end_line = line_with(&text, "== end of t1: interrupted");
    let crash_ts = last_before["ts"].as_str().unwrap();
    let written = end["ts"].as_str().unwrap();
    assert!(end_line.starts_with(crash_ts), "{end_line}");
    assert!(
        end_line.ends_with(&format!("[recovery, written {written}]")),
        "{end_line}"
    );
    assert!(
        text.contains(&format!(
            "{crash_ts} -- the daemon stopped after this point; crash recovery wrote what follows at {written}"
        )),
        "{text}"
    );
    assert!(
        text.contains("cut short (the daemon stopped), 1 chunk streamed"),
        "{text}"
    );
    assert!(!text.contains("is open"), "{text}");
    let cut = text.find("cut short (the daemon stopped)").unwrap();
    assert!(cut < text.find("end of step 1").unwrap(), "{text}");
    editor.shutdown_and_exit().await;
}

#[tokio::test]
async fn a_session_killed_mid_tool_replays_the_running_call_then_its_recovered_result() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let cmd = "echo started; sleep 30";
    server.push(openai::tool_calls(&[(
        "call_exec",
        "exec_command",
        &json!({"cmd": cmd, "timeout_ms": 60000}).to_string(),
    )]));
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server, "auto")).await;
    editor.start_prompt(&session, "run it").await;
    editor
        .wait_update(&session, |u| {
            u["outputDelta"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
        })
        .await;
    let text = replay_text(editor.home.path(), &session, &[]);
    assert!(
        text.contains("tool exec_command [call_exec] is running"),
        "{text}"
    );
    let home = editor.kill_9().await;

    let text = replay_text(home.path(), &session, &[]);
    assert!(
        text.contains(&format!(
            "tool call requested: exec_command {} [call_exec]",
            json!({"cmd": cmd, "timeout_ms": 60000})
        )),
        "{text}"
    );
    assert!(
        text.contains("tool exec_command [call_exec] started"),
        "{text}"
    );
    assert!(
        text.contains("tool exec_command [call_exec] has no result: it was running when the daemon stopped; output so far: started"),
        "{text}"
    );
    assert!(
        text.contains("== t1 is open (daemon not running)"),
        "{text}"
    );
    assert!(
        text.contains("1 tool call requested, 0 tool results"),
        "{text}"
    );

    let mut editor = editor_in(Some(home), root.path()).await;
    editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    let home = editor.home.clone();
    let text = replay_text(home.path(), &session, &[]);
    let result = line_with(
        &text,
        "tool exec_command [call_exec] -> aborted: INTERRUPTED",
    );
    assert!(result.contains("[recovery, written "), "{result}");
    assert!(!text.contains("has no result"), "{text}");
    assert!(
        text.contains("1 tool call requested, 1 tool result"),
        "{text}"
    );
    editor.shutdown_and_exit().await;
}

#[tokio::test]
async fn cancels_before_the_first_chunk_and_mid_stream_show_the_requests_cut_short() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server, "auto")).await;

    // t1: the model never answers; cancelled before any chunk.
    server.push(Reply::Hang);
    let id = editor.start_prompt(&session, "first").await;
    server.wait_for_requests(1).await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");

    // t2: cancelled after some text streamed.
    server.push(text_then_stall("half an ans"));
    let id = editor.start_prompt(&session, "second").await;
    editor
        .wait_update(&session, |u| u["sessionUpdate"] == "agent_message_chunk")
        .await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    let text = replay_text(home.path(), &session, &["--turn", "1"]);
    assert!(
        text.contains("model request (step 1, attempt 1) cut short (cancelled), nothing streamed; no answer, usage unknown"),
        "{text}"
    );
    assert!(text.contains("user (m1): first"), "{text}");
    let cut = text.find("cut short (cancelled)").unwrap();
    assert!(cut < text.find("end of step 1").unwrap(), "{text}");
    assert!(
        !text.contains("== turn t2") && !text.contains("second"),
        "{text}"
    );

    let text = replay_text(home.path(), &session, &["--turn", "t2"]);
    assert!(!text.contains("== turn t1"), "{text}");
    assert!(
        text.contains("model request (step 1, attempt 1) cut short (cancelled), 1 chunk streamed (11 chars of answer); no answer, usage unknown"),
        "{text}"
    );
    assert!(!text.contains("| half an ans"), "{text}");
    let full = replay_text(home.path(), &session, &["--turn", "2", "--full"]);
    let cut = line_with(&full, "cut short (cancelled), 1 chunk");
    let after: Vec<&str> = full.lines().skip_while(|l| *l != cut).skip(1).collect();
    assert!(after[0].trim_start() == "| half an ans", "{full}");

    let lines = replay_json(home.path(), &session, &["--turn", "2"]);
    let summary = lines.last().unwrap();
    assert_eq!(summary["turn_id"], "t2", "{summary}");
    assert_eq!(summary["turns"], 1, "{summary}");
    assert_eq!(summary["model_requests"]["sent"], 1, "{summary}");
    assert_eq!(summary["model_requests"]["cut_short"], 1, "{summary}");
    assert!(lines[1..lines.len() - 1]
        .iter()
        .all(|e| e["turn_id"] == "t2" || e["message_id"] == "m2"));

    let output = run_replay(home.path(), &session, &["--turn", "9"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no turn t9 in this session; its turns are t1, t2"),
        "{stderr}"
    );
    let output = run_replay(home.path(), "no-such-session", &[]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no session no-such-session"),
        "{output:?}"
    );
}

#[tokio::test]
async fn permission_waits_decisions_and_full_tool_output_are_replayed() {
    let server = ModelServer::start().await;
    let cmd = "printf 'one\\ntwo\\nthree\\n'";
    server.push(openai::tool_calls(&[(
        "call_1",
        "exec_command",
        &json!({"cmd": cmd}).to_string(),
    )]));
    server.push(openai::text(["first line of the answer\nsecond line"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    editor.on_request(|method, _| {
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}))
    });
    let session = editor.new_session(config_for(&server, "review")).await;
    let (response, _) = editor.prompt(&session, "count to three").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let log = editor.log_lines(&session);
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    let text = replay_text(home.path(), &session, &[]);
    assert!(
        text.contains("queued m1 (next_turn): count to three"),
        "{text}"
    );
    assert!(text.contains("claimed m1"), "{text}");
    assert!(
        text.contains("tool exec_command [call_1] waiting for permission"),
        "{text}"
    );
    assert!(
        text.contains("tool exec_command [call_1] decision: allow_once"),
        "{text}"
    );
    assert!(text.contains("end of step 1"), "{text}");
    let output = log.iter().find(|e| e["type"] == "tool_result").unwrap()["output"]
        .as_str()
        .unwrap()
        .to_string();
    let more = output.lines().count() - 1;
    assert!(more >= 3, "{output}");
    let result = line_with(&text, "tool exec_command [call_1] -> completed: ");
    assert!(
        result.ends_with(&format!("(+{more} more lines; --full for all)")),
        "{result}"
    );
    assert!(
        text.contains("answer: first line of the answer (+1 more lines; --full for all)"),
        "{text}"
    );

    let full = replay_text(home.path(), &session, &["--full"]);
    let block: Vec<&str> = full
        .lines()
        .skip_while(|l| !l.contains("tool exec_command [call_1] -> completed: "))
        .skip(1)
        .take(output.lines().count())
        .map(|l| {
            l.trim_start()
                .strip_prefix("| ")
                .unwrap_or("<not a block line>")
        })
        .collect();
    assert_eq!(block, output.lines().collect::<Vec<_>>(), "{full}");
    assert!(full.contains("| second line"), "{full}");
}

#[tokio::test]
async fn replay_counts_equal_what_the_model_server_and_the_wire_saw() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    server.push(openai::tool_calls(&[
        ("call_a", "read_file", r#"{"path":"a.txt"}"#),
        ("call_b", "read_file", r#"{"path":"missing.txt"}"#),
    ]));
    server.push(openai::error(500, "the model fell over"));
    server.push(openai::text(["read both"]));
    server.push(openai::text(["second turn"]));
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server, "auto")).await;
    let (one, _) = editor.prompt(&session, "read them").await;
    assert_eq!(one["result"]["stopReason"], "end_turn", "{one}");
    let (two, _) = editor.prompt(&session, "again").await;
    assert_eq!(two["result"]["stopReason"], "end_turn", "{two}");
    let wire = editor.updates_of(&session);
    let log = editor.log_lines(&session);
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    let of = |kind: &str| {
        wire.iter()
            .filter(|u| u["update"]["sessionUpdate"] == kind)
            .count()
    };
    let results = wire
        .iter()
        .filter(|u| {
            u["update"]["sessionUpdate"] == "tool_call_update"
                && ["completed", "failed"].contains(&u["update"]["status"].as_str().unwrap_or(""))
        })
        .count();
    let lines = replay_json(home.path(), &session, &[]);
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "replay_summary");
    assert_eq!(summary["session_id"], session.as_str());
    assert_eq!(summary["turns"], of("turn_end"), "{summary}");
    assert_eq!(summary["turns"], 2);
    let requests = &summary["model_requests"];
    assert_eq!(requests["sent"], server.requests().len(), "{summary}");
    assert_eq!(requests["sent"], 4);
    assert_eq!(requests["completed"], 3, "{summary}");
    assert_eq!(requests["failed"], 1, "{summary}");
    assert_eq!(requests["cut_short"], 0, "{summary}");
    assert_eq!(
        summary["tool_calls"]["requested"],
        of("tool_call"),
        "{summary}"
    );
    assert_eq!(summary["tool_calls"]["requested"], 2);
    assert_eq!(summary["tool_calls"]["results"], results, "{summary}");
    assert_eq!(summary["tool_calls"]["results"], 2);
    assert!(summary.get("open_turn").is_none(), "{summary}");
    // Everything else is the log itself, line for line.
    assert_eq!(&lines[..lines.len() - 1], &log[..]);

    let text = replay_text(home.path(), &session, &[]);
    assert!(
        text.contains("-- 2 turns, 4 model requests (3 completed, 1 failed, 0 cut short), 2 tool calls requested, 2 tool results"),
        "{text}"
    );
    assert!(
        text.contains("model request (step 2, attempt 2) sent to openai"),
        "{text}"
    );
}

#[tokio::test]
async fn a_crash_before_the_first_chunk_still_shows_the_request() {
    let server = ModelServer::start().await;
    server.push(Reply::Hang);
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server, "auto")).await;
    editor.start_prompt(&session, "are you there").await;
    server.wait_for_requests(1).await;
    let home = editor.kill_9().await;

    let text = replay_text(home.path(), &session, &[]);
    assert!(
        text.contains("model request (step 1, attempt 1) cut short (the daemon stopped), nothing streamed; no answer, usage unknown"),
        "{text}"
    );
    assert!(
        text.contains("== t1 is open (daemon not running)"),
        "{text}"
    );
    let summary = replay_json(home.path(), &session, &[]).pop().unwrap();
    assert_eq!(summary["model_requests"]["sent"], 1, "{summary}");
    assert_eq!(summary["model_requests"]["cut_short"], 1, "{summary}");
}

#[tokio::test]
async fn a_compaction_summary_call_is_a_model_request_in_the_replay() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("big.txt"),
        "the big file line\n".repeat(180),
    )
    .unwrap();
    server.push(openai::tool_calls(&[(
        "call_big",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(openai::text(["read it"]));
    server.push(openai::text(["SUMMARY: read big.txt"]));
    server.push(openai::text(["continuing"]));
    let mut editor = editor_in(None, root.path()).await;
    let mut config = config_for(&server, "auto");
    config["model"]["context_window"] = json!(1000);
    let session = editor.new_session(config).await;
    for prompt in ["start here", "second prompt"] {
        let (response, _) = editor.prompt(&session, prompt).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].body.get("tools").is_none(), "the summary call");

    let text = replay_text(home.path(), &session, &["--turn", "2"]);
    assert!(
        text.contains("model request (step 1, compaction summary) sent to openai scripted-model: 2 messages, 0 tools"),
        "{text}"
    );
    assert!(
        text.contains("into a summary (kept the last") && text.contains("SUMMARY: read big.txt"),
        "{text}"
    );
    let summary = replay_json(home.path(), &session, &[]).pop().unwrap();
    assert_eq!(
        summary["model_requests"]["sent"],
        requests.len(),
        "{summary}"
    );
    assert_eq!(summary["model_requests"]["completed"], 4, "{summary}");
}
