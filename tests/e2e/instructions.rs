//! Project instructions (`AGENTS.md`) through the real binary: the files
//! of the user, the workspace root and every directory down to the turn's
//! file reach the model in that order, within the 32 KiB cap; a change is
//! seen by the next turn; compaction keeps them; the log, `tandem replay`,
//! `tandem/newSession` and ACP's `_meta` name them.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::acp::AcpClient;
use crate::support::client::{file_uri, tandem_bin, Editor};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

/// The system prompt of a request the model server received.
fn system_of(request: &RecordedRequest) -> String {
    let first = &request.body["messages"][0];
    assert_eq!(first["role"], "system", "{}", request.body);
    first["content"].as_str().unwrap().to_string()
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The session's `instructions` events.
fn instruction_events(editor: &Editor, session: &str) -> Vec<Value> {
    editor
        .log_lines(session)
        .into_iter()
        .filter(|e| e["type"] == "instructions")
        .collect()
}

fn paths(files: &Value) -> Vec<PathBuf> {
    files
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {files}"))
        .iter()
        .map(|f| PathBuf::from(f["path"].as_str().unwrap()))
        .collect()
}

fn home_of(editor: &Editor) -> PathBuf {
    editor.sessions_dir().parent().unwrap().to_path_buf()
}

/// A prompt with the file it is about attached.
async fn prompt_about(editor: &mut Editor, session: &str, text: &str, file: &Path) -> Value {
    let id = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": text},
                {"type": "resource_link", "uri": file_uri(file), "name": "x.rs"},
            ]}),
        )
        .await;
    editor.response(id).await.0
}

/// A workspace with instruction files at the root, in `src` and in
/// `src/deep`, and the user's own in `$TANDEM_HOME`.
fn nested_workspace(home: &Path) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("src/deep")).unwrap();
    std::fs::write(home.join("AGENTS.md"), "USER RULE: answer in English.\n").unwrap();
    std::fs::write(
        root.path().join("AGENTS.md"),
        "ROOT RULE: run cargo test.\n",
    )
    .unwrap();
    std::fs::write(root.path().join("src/AGENTS.md"), "SRC RULE: no unwrap.\n").unwrap();
    std::fs::write(
        root.path().join("src/deep/AGENTS.md"),
        "DEEP RULE: unwrap is fine here.\n",
    )
    .unwrap();
    std::fs::write(root.path().join("src/deep/x.rs"), "fn main() {}\n").unwrap();
    root
}

#[tokio::test]
async fn nested_agents_files_reach_the_model_in_order_nearest_last_and_are_logged_and_replayed() {
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    let mut editor = Editor::spawn().await;
    let home = home_of(&editor);
    let root = nested_workspace(&home);
    editor.initialize(root.path()).await;
    let new = editor
        .request(
            "tandem/newSession",
            json!({"config": server.session_config()}),
        )
        .await;
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    // Before any turn: the user's own and the root's.
    let root_file = root.path().join("AGENTS.md");
    assert_eq!(
        paths(&new["result"]["instructions"]),
        [home.join("AGENTS.md"), root_file.clone()],
        "{new}"
    );
    assert_eq!(new["result"]["instructions"][1]["bytes"], 27, "{new}");
    assert_eq!(
        new["result"]["instructions"][1]["sha256"],
        sha256("ROOT RULE: run cargo test.\n")
    );

    let file = root.path().join("src/deep/x.rs");
    let reply = prompt_about(&mut editor, &session, "look at this", &file).await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");

    let system = system_of(&server.requests()[0]);
    assert!(system.starts_with("You are tandem"), "{system}");
    let at = |needle: &str| {
        system
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` not in the system prompt: {system}"))
    };
    assert!(at("USER RULE") < at("ROOT RULE"));
    assert!(at("ROOT RULE") < at("SRC RULE"));
    assert!(at("SRC RULE") < at("DEEP RULE"), "nearest last");
    assert!(at("the later one wins") < at("USER RULE"), "{system}");
    assert!(at("## src/deep/AGENTS.md") < at("DEEP RULE"));

    // Logged at the start (roots only) and when the turn's file added two.
    let events = instruction_events(&editor, &session);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].get("turn_id").is_none());
    assert_eq!(events[1]["turn_id"], "t1");
    assert_eq!(
        paths(&events[1]["files"]),
        [
            home.join("AGENTS.md"),
            root_file,
            root.path().join("src/AGENTS.md"),
            root.path().join("src/deep/AGENTS.md")
        ]
    );
    let deep = &events[1]["files"][3];
    assert_eq!(deep["bytes"], 32);
    assert_eq!(deep["sha256"], sha256("DEEP RULE: unwrap is fine here.\n"));
    assert!(events[1]["text"].as_str().unwrap().contains("DEEP RULE"));
    assert!(events[1].get("cut").is_none());

    let replay = run_replay(&home, &session, &[]);
    let for_file = format!("instructions for {}: 4 files", file.display());
    assert!(replay.contains(&for_file), "{replay}");
    assert_eq!(events[1]["about"], file.display().to_string());
    let deep_path = root.path().join("src/deep/AGENTS.md");
    let line = replay
        .lines()
        .find(|l| l.contains(&deep_path.display().to_string()))
        .unwrap_or_else(|| panic!("no line for the deep file: {replay}"));
    assert!(line.contains("32 bytes"), "{line}");
    assert!(
        line.contains(&sha256("DEEP RULE: unwrap is fine here.\n")[..12]),
        "{line}"
    );
    let full = run_replay(&home, &session, &["--full"]);
    assert!(full.contains("DEEP RULE: unwrap is fine here."), "{full}");
}

fn run_replay(home: &Path, session: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(tandem_bin())
        .arg("replay")
        .arg(session)
        .args(args)
        .env("TANDEM_HOME", home)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn the_32_kib_cap_cuts_the_text_and_says_so_to_the_model_and_in_the_logs() {
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    let mut editor = Editor::spawn().await;
    let home = home_of(&editor);
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    // 40 KiB of lines, then a marker past the cap.
    let big = format!(
        "{}MARKER PAST THE CAP\n",
        "keep the build green at all times.\n".repeat(1200)
    );
    std::fs::write(root.path().join("AGENTS.md"), &big).unwrap();
    std::fs::write(root.path().join("src/AGENTS.md"), "SRC RULE\n").unwrap();
    std::fs::write(root.path().join("src/a.rs"), "\n").unwrap();
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    let reply = prompt_about(&mut editor, &session, "go", &root.path().join("src/a.rs")).await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");

    let system = system_of(&server.requests()[0]);
    assert!(system.contains("keep the build green"), "the head is given");
    assert!(!system.contains("MARKER PAST THE CAP"));
    assert!(
        !system.contains("SRC RULE"),
        "the file after the cut is left out"
    );
    let notice = "[Instructions were cut: they are capped at 32 KiB in all";
    assert!(system.contains(notice), "{}", &system[system.len() - 400..]);
    assert!(system.contains("src/AGENTS.md (9 bytes) was left out"));
    let given = system.matches("keep the build green").count() * 35;
    assert!(
        given <= 32 * 1024 && given > 31 * 1024,
        "{given} bytes given"
    );

    let events = instruction_events(&editor, &session);
    let last = events.last().unwrap();
    assert!(last["cut"].as_str().unwrap().starts_with(notice), "{last}");
    assert_eq!(last["files"][0]["bytes"], big.len());
    assert_eq!(
        last["files"][0]["included_bytes"],
        32 * 1024 - (32 * 1024 % 35)
    );
    assert_eq!(last["files"][1]["included_bytes"], 0);
    let daemon_log = std::fs::read_to_string(home.join("stderr.log")).unwrap();
    assert!(
        daemon_log.contains("instruction files over the cap"),
        "the daemon's log says so too"
    );
}

#[tokio::test]
async fn a_changed_instruction_file_reaches_the_next_turn_and_is_logged_only_when_changed() {
    let server = ModelServer::start().await;
    for _ in 0..3 {
        server.push(openai::text(["ok"]));
    }
    let mut editor = Editor::spawn().await;
    let root = tempfile::tempdir().unwrap();
    let agents = root.path().join("AGENTS.md");
    std::fs::write(&agents, "FIRST VERSION\n").unwrap();
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    editor.prompt(&session, "one").await;
    editor.prompt(&session, "two").await;
    std::fs::write(&agents, "SECOND VERSION, longer\n").unwrap();
    let (reply, _) = editor.prompt(&session, "three").await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");

    let systems: Vec<String> = server.requests().iter().map(system_of).collect();
    assert!(systems[0].contains("FIRST VERSION") && systems[1].contains("FIRST VERSION"));
    assert!(systems[2].contains("SECOND VERSION"), "{}", systems[2]);
    assert!(!systems[2].contains("FIRST VERSION"));
    let events = instruction_events(&editor, &session);
    assert_eq!(events.len(), 2, "at the start, then the change: {events:?}");
    assert_eq!(events[1]["turn_id"], "t3");
    assert_eq!(
        events[1]["files"][0]["sha256"],
        sha256("SECOND VERSION, longer\n")
    );
}

#[tokio::test]
async fn instructions_survive_compaction() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "STANDING RULE: be terse.\n").unwrap();
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
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut config = server.session_config();
    config["model"]["context_window"] = json!(1000);
    let session = editor.new_session(config).await;
    editor.prompt(&session, "start here").await;
    server.push(openai::text(["SUMMARY: read big.txt"]));
    server.push(openai::text(["continuing"]));
    let (reply, _) = editor.prompt(&session, "second prompt").await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");

    let requests = server.requests();
    assert_eq!(requests.len(), 4, "two turns and a summary call");
    let summarizer = serde_json::to_string(&requests[2].body).unwrap();
    assert!(
        summarizer.contains("compacting the history"),
        "{summarizer}"
    );
    assert!(
        !summarizer.contains("STANDING RULE"),
        "the instructions are not summarized"
    );
    let after = &requests[3];
    let text = serde_json::to_string(&after.body["messages"]).unwrap();
    assert!(text.contains("SUMMARY: read big.txt"), "compacted: {text}");
    assert!(!text.contains("the big file line"), "compacted: {text}");
    assert!(
        system_of(after).contains("STANDING RULE: be terse."),
        "the instructions are still in the system prompt"
    );
    assert!(editor
        .log_lines(&session)
        .iter()
        .any(|e| e["type"] == "compacted"));
}

#[tokio::test]
async fn configured_names_are_read_and_a_task_gets_its_files_directories() {
    let server = ModelServer::start().await;
    server.push(openai::text(["explained"]));
    let mut editor = Editor::spawn().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("lib")).unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "AGENTS RULE\n").unwrap();
    std::fs::write(root.path().join("CLAUDE.md"), "CLAUDE RULE\n").unwrap();
    std::fs::write(root.path().join("lib/CLAUDE.md"), "LIB CLAUDE RULE\n").unwrap();
    let file = root.path().join("lib/a.rs");
    std::fs::write(&file, "fn a() {}\n").unwrap();
    let mut config = server.session_config();
    config["instructions"] = json!({"files": ["AGENTS.md", "CLAUDE.md"]});
    editor
        .initialize_with(root.path(), json!({"initializationOptions": config}))
        .await;
    editor.open(&file, "fn a() {}\n").await;
    let reply = editor
        .request(
            "tandem/runTask",
            json!({"task": "explain", "textDocument": {"uri": file_uri(&file)},
                   "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 9}}}),
        )
        .await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    let system = system_of(&server.requests()[0]);
    let at = |needle: &str| {
        system
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` not in: {system}"))
    };
    assert!(at("AGENTS RULE") < at("CLAUDE RULE"));
    assert!(
        at("CLAUDE RULE") < at("LIB CLAUDE RULE"),
        "the task's directory last"
    );

    // A name that is a path is refused, naming the key.
    let bad = editor
        .request(
            "tandem/newSession",
            json!({"config": {"instructions": {"files": ["../secrets.md"]}}}),
        )
        .await;
    let message = bad["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not a plain file name"), "{bad}");
}

#[tokio::test]
async fn acp_session_new_and_load_name_the_instruction_files_in_meta() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "ACP RULE\n").unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    let (new, session) = client.new_session(root.path()).await;
    let files = &new["result"]["_meta"]["tandem"]["instructions"];
    assert_eq!(paths(files), [root.path().join("AGENTS.md")], "{new}");
    assert_eq!(files[0]["bytes"], 9);
    assert_eq!(files[0]["sha256"], sha256("ACP RULE\n"));
    assert!(new["result"]["modes"].is_object(), "the rest stays: {new}");

    let (loaded, _) = client
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    assert_eq!(
        paths(&loaded["result"]["_meta"]["tandem"]["instructions"]),
        [root.path().join("AGENTS.md")],
        "{loaded}"
    );
}

#[tokio::test]
async fn a_reloaded_session_keeps_its_instructions_and_logs_them_again_only_when_changed() {
    let server = ModelServer::start().await;
    server.push(openai::text(["one"]));
    server.push(openai::text(["two"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "KEPT RULE\n").unwrap();
    let mut first = Editor::spawn().await;
    first.initialize(root.path()).await;
    let session = first.new_session(server.session_config()).await;
    first.prompt(&session, "before the restart").await;
    let home = first.kill_9().await;

    let mut second = Editor::spawn_with(crate::support::client::EditorOptions {
        home: Some(home),
        ..Default::default()
    })
    .await;
    second.initialize(root.path()).await;
    let loaded = second
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(
        paths(&loaded["result"]["instructions"]),
        [root.path().join("AGENTS.md")],
        "{loaded}"
    );
    let (reply, _) = second.prompt(&session, "after the restart").await;
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    let requests = server.requests();
    assert!(system_of(&requests[1]).contains("KEPT RULE"));
    assert_eq!(system_of(&requests[0]), system_of(&requests[1]));
    assert_eq!(
        instruction_events(&second, &session).len(),
        1,
        "nothing changed: logged once, at the start"
    );
}

#[tokio::test]
async fn tandem_exec_gives_the_files_of_its_file_and_names_them_on_stderr() {
    let server = ModelServer::start().await;
    server.push(openai::text(["done"]));
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "EXEC ROOT RULE\n").unwrap();
    std::fs::write(root.path().join("src/AGENTS.md"), "EXEC SRC RULE\n").unwrap();
    std::fs::write(root.path().join("src/a.rs"), "fn a() {}\n").unwrap();
    let output = tokio::process::Command::new(tandem_bin())
        .args(["exec", "explain", "--file", "src/a.rs"])
        .current_dir(root.path())
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_BASE_URL", server.base_url())
        .env("TANDEM_MODEL", "scripted-model")
        .env("TANDEM_LOG", "warn")
        .env_remove("TANDEM_PROVIDER")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), "done");
    let system = system_of(&server.requests()[0]);
    assert!(
        system.find("EXEC ROOT RULE").unwrap() < system.find("EXEC SRC RULE").unwrap(),
        "{system}"
    );
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("[instructions: "))
        .unwrap_or_else(|| panic!("no instructions line: {stderr}"));
    assert!(line.contains("src/AGENTS.md"), "{line}");
}
